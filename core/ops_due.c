/*
 * ops_due.c - when a task fires next: tw_set_delay (and tw_set_delay_many, a
 * batch of them), tw_set_due and tw_set_period. Postponing, the hot path of
 * session timeouts, just records the later due under the task's lock; an
 * earlier one mails the wheel thread.
 */
#include "ops.h"

/*
 * Lock held: a new due replaces the firing that came due and waits for the task's own run to
 * return. That firing was due, so it counts, as overlap, as one replaced by a later due that
 * comes while it waits (wheel_fire.c, overlapping): due firings stay runs plus skips, and
 * the next run's tw_fire.skipped reports it.
 */
static __attribute__((noinline)) void replace_rerun(struct tw_engine *e, struct tw_task *task)
{
	task->rerun = false;
	task_skip(task, &task_cold(task)->skipped_overlap, 1);
	atomic_fetch_add_explicit(&e->api_skipped_overlap, 1, memory_order_relaxed);
	tw__engine_note_skip(e, task, REC_SKIP_OVERLAP, 0, 1);
}

/* Inline, the test alone: a firing rarely waits for the run. */
static ALWAYS_INLINE void drop_rerun(struct tw_engine *e, struct tw_task *task)
{
	if (__builtin_expect(task->rerun, 0))
		replace_rerun(e, task);
}

/* Inlined: tw_set_delay_many runs it once per id of a batch, where a call would cost more
 * than what it does. */
static ALWAYS_INLINE int op_set_delay(struct tw_engine *e, struct tw_task *task, uint64_t delay_ms,
				      uint64_t now_ns, struct after_unlock *after)
{
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if (!allowed(state, true))
		return -TW_ESTATE;
	task_set_delay_ms(task, delay_ms);
	if (state == TW_PAUSED) {
		task->delay_pending = true;
		return TW_OK;
	}
	drop_rerun(e, task); /* the new due replaces a firing that waits for the run to return */
	set_due(e, task, tw__engine_due_at_ns(e, now_ns, delay_ms), after);
	return TW_OK;
}

/* tw_set_delay(TW_NEVER), kept off the common path. */
static int op_set_never(struct tw_engine *e, struct tw_task *task, uint64_t unused,
			uint64_t unused_now, struct after_unlock *after)
{
	(void)unused, (void)unused_now;
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if (!allowed(state, true))
		return -TW_ESTATE;
	task_set_delay_ms(task, TW_NEVER);
	if (state == TW_PAUSED) {
		task->delay_pending = true;
		return TW_OK;
	}
	drop_rerun(e, task); /* no due: a firing that waits for the run to end goes too */
	set_due(e, task, DUE_NEVER, after);
	return TW_OK;
}

/*
 * tw_set_due: as op_set_delay, with a time. On a paused task the time itself waits in due_ns
 * (which nothing reads while the task is paused) for tw_resume, which places it then.
 */
static int op_set_time(struct tw_engine *e, struct tw_task *task, uint64_t at_ns, uint64_t now_ns,
		       struct after_unlock *after)
{
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if (!allowed(state, true))
		return -TW_ESTATE;
	uint64_t due = due_of_time(e, now_ns, at_ns);
	if (state == TW_PAUSED) {
		/* A one-shot resumes later with the delay the time stands for now, not at resume. */
		task_set_delay_at_due(task, delay_of_due(e, now_ns, due));
		atomic_store_explicit(&task->due_ns, at_ns, memory_order_relaxed);
		task->delay_pending = true;
		return TW_OK;
	}
	task_set_delay_ms(task, delay_of_due(e, now_ns, due));
	drop_rerun(e, task); /* as tw_set_delay: the new due replaces a firing that waits */
	set_due(e, task, due, after);
	return TW_OK;
}

static int op_set_period(struct tw_engine *e, struct tw_task *task, uint64_t period_ms,
			 uint64_t unused, struct after_unlock *after)
{
	(void)unused, (void)after;
	if (!allowed(atomic_load_explicit(&task->state, memory_order_relaxed), true) ||
	    task_is_calendar(task))
		return -TW_ESTATE;
	/* A periodic firing that waits for the task's run (TW_RUN_LATE) is of the old period:
	 * its due is known only as the next due minus that period, so it is skipped. */
	if (task->rerun && !task_has_trait(task, TRAIT_ONESHOT_RERUN) &&
	    period_ms != task_period_ms(task)) {
		task->rerun = false;
		task_skip(task, &task_cold(task)->skipped_overlap, 1);
		atomic_fetch_add_explicit(&e->api_skipped_overlap, 1, memory_order_relaxed);
		tw__engine_note_skip(e, task, REC_SKIP_OVERLAP, 0, 1);
	}
	task_set_period_ms(task, period_ms);
	return TW_OK;
}

static int set_delay_slow(tw_engine *e, tw_id id, uint64_t delay_ms)
{
	if (e && check_delay(delay_ms))
		return delay_ms == TW_NEVER ? with_task(e, id, op_set_never, 0, false, 0) :
					      -TW_ERANGE;
	return with_task(e, id, op_set_delay, delay_ms, true, 0);
}

static __attribute__((noinline)) int set_delay_any(tw_engine *e, tw_id id, uint64_t delay_ms)
{
	if (RECORDING(e)) /* recorder's hook: record.h */
		return tw__record_op(e->recorder, REC_SET_DELAY, id,
				     set_delay_slow(e, id, delay_ms), delay_ms);
	return set_delay_slow(e, id, delay_ms);
}

/* tw_set_delay's answer when the wheel thread is to be woken once the lock is dropped. */
enum { WAKE_THEN_OK = 1 };

/* Lock held: op_set_delay for the cases postponed() leaves (an earlier due, a task the wheel
 * does not hold, a paused one); TW_OK, -TW_ESTATE or WAKE_THEN_OK. */
static __attribute__((noinline)) int set_delay_locked(struct tw_engine *e, struct tw_task *task,
						      uint64_t delay_ms, uint64_t now_ns)
{
	struct after_unlock after = { 0 };
	int rc = op_set_delay(e, task, delay_ms, now_ns, &after);
	return rc == TW_OK && after.wake ? WAKE_THEN_OK : rc;
}

/* Lock held: op_set_delay when the new due is no earlier than where the wheel filed the task
 * (a postpone), which needs no mail; false, having changed nothing, for any other case. */
static ALWAYS_INLINE bool postponed(struct tw_engine *e, struct tw_task *task, uint64_t delay_ms,
				    uint64_t now_ns)
{
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	uint64_t tick = tw__engine_tick_of(e, now_ns) + delay_ms;
	if ((state != TW_WAITING && state != TW_RUNNING) || task->filing != FILED_DUE ||
	    tick < wheel_entry_due(&task->entry))
		return false;
	task->delay_ms = (uint32_t)delay_ms;
	drop_rerun(e, task); /* as op_set_delay */
	atomic_store_explicit(&task->due_ns, e->epoch_ns + tick * NS_PER_MS, memory_order_relaxed);
	return true;
}

/*
 * A session reset, the hot path of the gateways, is short: at a million tasks each call
 * costs a cache miss on the task's line, and the misses of consecutive calls overlap only if
 * the calls are short enough (perf/results/HISTORY.md, "A postpone short enough to
 * overlap"). So this inlines what a postpone does and leaves the rest out of line: set_delay_locked under the
 * lock, set_delay_any for a thread new to the library, a delay of 2^31 ms or more, TW_NEVER,
 * an out-of-range delay and a halted engine.
 */
int tw_set_delay(tw_engine *e, tw_id id, uint64_t delay_ms)
{
	if (__builtin_expect(!e || delay_ms >= WIDE_BIT || !tw__rcu_registered ||
				     atomic_load(&e->stopping),
			     0))
		return set_delay_any(e, id, delay_ms);
	urcu_memb_read_lock();
	struct tw_task *task = fetch_ahead(e, id);
	uint64_t now_ns = tw__engine_call_now_ns(e);
	int rc = -TW_ENOTFOUND;
	if (task && atomic_load_explicit(&task->id, memory_order_acquire) == id) {
		tw__task_lock(task);
		if (atomic_load_explicit(&task->id, memory_order_relaxed) == id)
			rc = postponed(e, task, delay_ms, now_ns) ?
				     TW_OK :
				     set_delay_locked(e, task, delay_ms, now_ns);
		tw__task_unlock(task);
	}
	read_section_end();
	if (__builtin_expect(rc == WAKE_THEN_OK, 0)) {
		tw__engine_wake(e);
		rc = TW_OK;
	}
	if (__builtin_expect(e->recording, 0)) /* recorder's hook: record.h */
		return tw__record_op(e->recorder, REC_SET_DELAY, id, rc, delay_ms);
	return rc;
}

int tw_set_due(tw_engine *e, tw_id id, uint64_t due_ns)
{
	if (!e || !due_ns)
		return -TW_EINVAL;
	if (check_time(e, due_ns))
		return -TW_ERANGE;
	return with_task(e, id, op_set_time, due_ns, true, REC_SET_DUE);
}

int tw_set_period(tw_engine *e, tw_id id, uint64_t period_ms)
{
	if (e && check_delay(period_ms))
		return -TW_ERANGE;
	return with_task(e, id, op_set_period, period_ms, false, REC_SET_PERIOD);
}

/*
 * Each task is fetched AHEAD ids before its turn, so that the cache misses of
 * random tasks overlap instead of adding up; a read-side section and a clock
 * read cover SECTION ids, so that a long batch does not hold back grace
 * periods. set_delay never ends a task: nothing is released here, and one
 * wake-up of the wheel thread, at the end, serves every mail.
 */
/* tw_set_delay_many(TW_NEVER): one task at a time, off the batch's path. */
static int set_never_many(tw_engine *e, const tw_id *ids, size_t n, int *results)
{
	int first_failure = TW_OK;
	for (size_t i = 0; i < n; i++) {
		int rc = with_task(e, ids[i], op_set_never, 0, false, 0);
		if (results)
			results[i] = rc;
		if (rc && !first_failure)
			first_failure = rc;
	}
	return first_failure;
}

static int set_delay_many(tw_engine *e, const tw_id *ids, size_t n, uint64_t delay_ms, int *results)
{
	enum { AHEAD = 8, SECTION = 256 };
	if (!e || (n && !ids))
		return -TW_EINVAL;
	if (check_delay(delay_ms) && delay_ms != TW_NEVER)
		return -TW_ERANGE;
	if (atomic_load(&e->stopping))
		return halted_code(e);
	if (delay_ms == TW_NEVER)
		return set_never_many(e, ids, n, results);

	struct after_unlock after = { 0 };
	int first_failure = TW_OK;
	for (size_t start = 0; start < n; start += SECTION) {
		size_t end = n - start > SECTION ? start + SECTION : n;
		read_section_begin();
		for (size_t i = start; i < end && i < start + AHEAD; i++)
			fetch_ahead(e, ids[i]);
		uint64_t now_ns = tw__engine_call_now_ns(e);
		for (size_t i = start; i < end; i++) {
			if (i + AHEAD < end)
				fetch_ahead(e, ids[i + AHEAD]);
			int rc = run_op(e, tw__table_slot(&e->table, ids[i]), ids[i], op_set_delay,
					delay_ms, now_ns, &after);
			if (results)
				results[i] = rc;
			if (rc && !first_failure)
				first_failure = rc;
		}
		read_section_end();
	}
	after_unlock_run(after);
	return first_failure;
}

int tw_set_delay_many(tw_engine *e, const tw_id *ids, size_t n, uint64_t delay_ms, int *results)
{
	if (RECORDING(e)) /* recorder's hook: record.h */
		return tw__record_many(e->recorder, ids, n, delay_ms, results,
				       set_delay_many(e, ids, n, delay_ms, results));
	return set_delay_many(e, ids, n, delay_ms, results);
}
