/*
 * ops.c - the task operations of the public API.
 *
 * Each operation finds its task through the slot table inside an RCU
 * read-side section (no lock), then changes it under the task's own lock, so
 * its result is final when it returns; the wheel thread is only mailed when
 * the wheel must move the task earlier or take it in. Postponing, the hot
 * path of session timeouts, just records the later due.
 */
#include "calendar.h"

#include <string.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

static bool allowed(uint8_t state, bool paused_ok)
{
	return state == TW_WAITING || state == TW_RUNNING || (paused_ok && state == TW_PAUSED);
}

/* Lock held: records a new due and mails the wheel if it must act on it. */
static void set_due(struct tw_engine *e, struct tw_task *task, uint64_t due_ns,
		    struct after_unlock *after)
{
	TASK_LOCKED(task);
	atomic_store_explicit(&task->due_ns, due_ns, memory_order_relaxed);
	if (task->filing != FILED_DUE ||
	    tw__engine_tick_of(e, due_ns) < wheel_entry_due(&task->entry))
		mail_after_unlock(e, task, after);
}

static int check_delay(uint64_t ms)
{
	return ms > TW_MAX_DELAY_MS ? -TW_ERANGE : TW_OK;
}

/* A due asked as a time must be no further ahead than the longest delay, so that the wheel
 * and the resume of a one-shot (which keeps the delay it stands for) can hold it. */
static int check_time(const struct tw_engine *e, uint64_t at_ns)
{
	uint64_t now_ns = tw__engine_call_now_ns(e);
	return at_ns > now_ns && at_ns - now_ns > TW_MAX_DELAY_MS * NS_PER_MS ? -TW_ERANGE : TW_OK;
}

/* A due asked as a time (first_due_ns, tw_set_due): on the grid, rounded up as a delay is,
 * and never before the next tick, so that a time already past fires as a delay of 0 would. */
static uint64_t due_of_time(const struct tw_engine *e, uint64_t now_ns, uint64_t at_ns)
{
	uint64_t soonest = tw__engine_due_at_ns(e, now_ns, 0);
	uint64_t due = e->epoch_ns + tw__engine_tick_of(e, at_ns) * NS_PER_MS;
	return due > soonest ? due : soonest;
}

/* The delay a due on the grid stands for, which a one-shot resumes with. */
static uint64_t delay_of_due(const struct tw_engine *e, uint64_t now_ns, uint64_t due_ns)
{
	return (due_ns - tw__engine_due_at_ns(e, now_ns, 0)) / NS_PER_MS;
}

/* tw_add's own checks of first_due_ns, off the path of tasks added with a delay. */
static __attribute__((noinline)) int check_first_due(const struct tw_engine *e,
						     const tw_task_spec *spec)
{
	if (spec->delay_ms)
		return -TW_EINVAL;
	return check_time(e, spec->first_due_ns);
}

static inline int op_cancel(struct tw_engine *e, struct tw_task *task, uint64_t unused,
			    uint64_t now_ns, struct after_unlock *after);

/* Ends a task added while the engine began to stop (no-op if stop did). A task another
 * thread found, cancelled and saw reaped meanwhile is gone, and its slot may hold another:
 * only the task of this id is touched. */
static void cancel_while_stopping(struct tw_engine *e, struct tw_task *task, tw_id id)
{
	struct after_unlock after = { 0 };
	tw__task_lock(task);
	if (atomic_load_explicit(&task->id, memory_order_relaxed) == id) {
		op_cancel(e, task, 0, 0, &after);
		/* A no-op if the cancel or the stop ended it. */
		tw__task_end_if_idle(e, task, NULL, &after);
	}
	tw__task_unlock(task);
	after_unlock_run(after);
}

/*
 * Counts one more task against max_tasks, or says there is no room. Live tasks
 * are those added and not yet ended; the ends are counted per thread (no
 * shared line written per end), so they are summed here, where a cap is set.
 */
static bool reserve_live(struct tw_engine *e)
{
	uint64_t added = atomic_fetch_add_explicit(&e->tasks_added, 1, memory_order_seq_cst);
	uint64_t completed, stopped;
	tw__ends_total(e, &completed, &stopped);
	uint64_t gone = completed + stopped;
	if (added < gone || added - gone < e->cfg.max_tasks)
		return true;
	atomic_fetch_sub_explicit(&e->tasks_added, 1, memory_order_relaxed);
	return false;
}

/* plain: the spec has no first_due_ns, name or cron, and the code for them is left out.
 * cal: a calendar task's record (tw__calendar_new), its first due planned; NULL for any
 * other task. Both are constants in tw_add's own path, so that neither costs it anything. */
static ALWAYS_INLINE int add_task(tw_engine *e, const tw_task_spec *spec, tw_id *out, bool plain,
				  struct calendar *cal)
{
	unsigned flags = spec->flags;
	if (!e || !out || !spec->callback || (flags & ~(unsigned)TRAIT_TASK_FLAGS) ||
	    (flags & (TW_CONCURRENT | TW_ON_WHEEL_THREAD)) == (TW_CONCURRENT | TW_ON_WHEEL_THREAD))
		return -TW_EINVAL;
	size_t name_len = 0;
	if (!plain && spec->name && spec->name[0] &&
	    (!tw__name_valid(spec->name, &name_len) || spec->misfire > TW_MISFIRE_SKIP))
		return -TW_EINVAL;
	if (!plain && spec->first_due_ns) {
		int rc = check_first_due(e, spec);
		if (rc)
			return rc;
	}
	if ((check_delay(spec->delay_ms) && spec->delay_ms != TW_NEVER) ||
	    check_delay(spec->period_ms))
		return -TW_ERANGE;
	if (atomic_load(&e->stopping))
		return halted_code(e);
	/* The name before the count: -TW_EEXIST wins over -TW_ELIMIT (the header's "When
	 * several codes apply"), an answer that does not change as other tasks come and go. */
	struct name_node *name = NULL;
	if (!plain && name_len) {
		int rc = tw__name_claim(&e->names, &e->table, spec->name, name_len, spec->misfire,
					&name);
		if (rc)
			return rc;
	}
	if (e->cfg.max_tasks && !reserve_live(e)) {
		if (name)
			tw__name_abandon(&e->names, name);
		return -TW_ELIMIT;
	}
	int error = -TW_ENOMEM;
	tw_id id;
	struct tw_task *task = tw__table_take(&e->table, &id, &error);
	if (!task) {
		if (e->cfg.max_tasks)
			atomic_fetch_sub_explicit(&e->tasks_added, 1, memory_order_relaxed);
		if (name)
			tw__name_abandon(&e->names, name);
		return error;
	}
	/* A time given: the due it makes, and the delay that stands for (tw_resume's). */
	uint64_t now_ns = tw__engine_call_now_ns(e), due_ns, delay_ms = spec->delay_ms;
	if (!plain && spec->first_due_ns) {
		due_ns = due_of_time(e, now_ns, spec->first_due_ns);
		delay_ms = delay_of_due(e, now_ns, due_ns);
	} else if (cal && !spec->delay_ms) { /* its first fire time, planned by add_calendar */
		due_ns = cal->planned_due;
	} else {
		due_ns = spec->delay_ms == TW_NEVER ?
				 DUE_NEVER :
				 tw__engine_due_at_ns(e, now_ns, spec->delay_ms);
	}
	task_init(task, spec, delay_ms, due_ns);
	if (cal) /* a schedule, not a period: task_init set the spec's 0 */
		atomic_store_explicit(&task->period_ms, PERIOD_CALENDAR, memory_order_relaxed);
	tally_move(&e->api_ends, NO_STATE, TW_WAITING, true);
	/* Linked before it is published: from then on another thread may find it (tw_find,
	 * tw_list) and cancel it, and its release unlinks the record and frees it. */
	if (cal)
		tw__calendar_link(e, cal, task);
	if (name) /* shown by whoever sees the task published */
		tw__name_show_as(&e->names, name, id);
	/* Published. seq_cst, as the load of stopping below and stop's exchange of it and
	 * first load of each id (stop_task): one of the two sides sees the other. */
	atomic_store_explicit(&task->id, id, memory_order_seq_cst);
	if (name) /* now that claims see the task live (until then, its name is being added) */
		tw__name_bind(name, id);

	/* Found (tw_find, tw_list) and ended by another thread before this lock, it was mailed
	 * by its end, and may be reaped by now (a short retain_ms): mail only a live one. */
	tw__task_lock(task);
	bool wake = atomic_load_explicit(&task->id, memory_order_relaxed) == id &&
		    atomic_load_explicit(&task->state, memory_order_relaxed) <= TW_PAUSED &&
		    tw__task_mail(e, task);
	tw__task_unlock(task);
	if (wake)
		tw__engine_wake(e);
	*out = id;
	/* A stop that began meanwhile may have scanned the table before this
	 * task was published: end it here, exactly once either way. The task
	 * did exist, so this is a success: an error always means "never added,
	 * never released". */
	if (atomic_load_explicit(&e->stopping, memory_order_seq_cst))
		cancel_while_stopping(e, task, id);
	return TW_OK;
}

/*
 * A calendar task: its schedule parsed and its first fire time planned before the task is
 * taken, so that a bad expression adds nothing. "@every D" is a fixed period (D rounded up
 * to the engine's 1 ms grid), added as one: it needs no schedule at each firing.
 */
static __attribute__((noinline)) int add_calendar(tw_engine *e, const tw_task_spec *spec,
						  tw_id *out)
{
	if (!e || !out || !spec->callback)
		return -TW_EINVAL;
	if (spec->period_ms)
		return -TW_EINVAL;
	if (atomic_load(&e->stopping))
		return halted_code(e);
	struct calendar *cal;
	int rc = tw__calendar_new(e, spec, &cal);
	if (rc)
		return rc;
	tw_task_spec known = *spec;
	known.cron = NULL;
	uint64_t every_ns = tw__calendar_every_ns(cal);
	if (every_ns) {
		tw__calendar_discard(cal);
		known.period_ms = (every_ns + NS_PER_MS - 1) / NS_PER_MS;
		if (!known.delay_ms)
			known.delay_ms = known.period_ms;
		if (known.period_ms > TW_MAX_DELAY_MS)
			return -TW_ERANGE;
		return add_task(e, &known, out, false, NULL);
	}
	if (!spec->delay_ms && !spec->first_due_ns) {
		int64_t offset = tw__wall_offset_ns(e);
		int64_t now = (int64_t)tw__engine_now_ns(e) + offset;
		if (tw__calendar_plan(e, cal, now, offset) == DUE_NEVER) {
			tw__calendar_discard(cal);
			return -TW_ENOMATCH;
		}
	}
	known.callback = tw__calendar_callback;
	known.arg = cal;
	known.release = tw__calendar_release;
	rc = add_task(e, &known, out, false, cal);
	if (rc)
		tw__calendar_discard(cal);
	return rc;
}

/* Any other spec: an older or newer caller's size, a time, a name, a cron expression. */
static __attribute__((noinline)) int add_special(tw_engine *e, const tw_task_spec *spec,
						 size_t size, tw_id *out)
{
	tw_task_spec known = { 0 };
	if (tw__struct_in(&known, sizeof known, spec, size))
		return -TW_EINVAL;
	return known.cron ? add_calendar(e, &known, out) : add_task(e, &known, out, false, NULL);
}

int tw_add_sized(tw_engine *e, const tw_task_spec *spec, size_t size, tw_id *out)
{
	if (!spec)
		return -TW_EINVAL;
	/* One test for all three: an add with none pays a load and a branch more. */
	if (size == sizeof *spec &&
	    !(spec->first_due_ns | (uintptr_t)spec->name | (uintptr_t)spec->cron))
		return add_task(e, spec, out, true, NULL);
	return add_special(e, spec, size, out);
}

/*
 * An operation on a task, run under its lock: value is the caller's, now_ns
 * the time read for those that count from now (else 0); what it leaves to do
 * once the lock is dropped goes in *after.
 */
typedef int task_op(struct tw_engine *e, struct tw_task *task, uint64_t value, uint64_t now_ns,
		    struct after_unlock *after);

/* Inside a read-side section: runs op on task, the slot id names (NULL if
 * none), under the task's lock, if the slot still holds that task. */
static inline int run_op(tw_engine *e, struct tw_task *task, tw_id id, task_op *op, uint64_t value,
			 uint64_t now_ns, struct after_unlock *after)
{
	if (!task || atomic_load_explicit(&task->id, memory_order_acquire) != id)
		return -TW_ENOTFOUND;
	int rc = -TW_ENOTFOUND;
	tw__task_lock(task);
	if (atomic_load_explicit(&task->id, memory_order_relaxed) == id)
		rc = op(e, task, value, now_ns, after);
	tw__task_unlock(task);
	return rc;
}

static inline struct tw_task *fetch_ahead(tw_engine *e, tw_id id)
{
	struct tw_task *task = tw__table_slot(&e->table, id);
	if (task)
		__builtin_prefetch(task, 1);
	return task;
}

/*
 * Looks id up and runs op on its task under the task's lock. The task's line
 * is most likely a cache miss; a timed op reads the clock while it is on its
 * way: the precise clock's read is ordered (lfence; rdtsc), so read after the
 * load it would wait for the miss instead of overlapping it (tw-perf ops
 * measures the postpone at 1M tasks).
 */
static int with_task(tw_engine *e, tw_id id, task_op *op, uint64_t value, bool timed)
{
	if (!e)
		return -TW_EINVAL;
	if (atomic_load(&e->stopping))
		return halted_code(e);
	read_section_begin();
	struct tw_task *task = fetch_ahead(e, id);
	uint64_t now_ns = timed ? tw__engine_call_now_ns(e) : 0;
	struct after_unlock after = { 0 };
	int rc = run_op(e, task, id, op, value, now_ns, &after);
	read_section_end();
	after_unlock_run(after);
	return rc;
}

/*
 * Lock held: a new due replaces the firing that came due and waits for the task's own run to
 * return. That firing was due, so it counts, as overlap, as one replaced by a later due that
 * comes while it waits (wheel_thread.c, overlapping): due firings stay runs plus skips, and
 * the next run's tw_fire.skipped reports it.
 */
static __attribute__((noinline)) void replace_rerun(struct tw_engine *e, struct tw_task *task)
{
	task->rerun = false;
	task_skip(task, &task_cold(task)->skipped_overlap, 1);
	atomic_fetch_add_explicit(&e->api_skipped_overlap, 1, memory_order_relaxed);
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
	}
	task_set_period_ms(task, period_ms);
	return TW_OK;
}

/*
 * Lock held (tw_pause, tw_cancel): no firing of the task starts after this; those that have
 * not started are dropped and counted as missed now. One that waits for the task's run to
 * return goes; one queued keeps the task's place until an executor takes it out, and is not
 * run even if the task is resumed before that.
 */
static __attribute__((noinline)) void drop_in_flight(struct tw_engine *e, struct tw_task *task)
{
	if (task->rerun) {
		task->rerun = false;
		task_skip(task, &task_cold(task)->skipped_missed, 1);
		atomic_fetch_add_explicit(&e->api_skipped_missed, 1, memory_order_relaxed);
	}
	uint8_t traits = atomic_load_explicit(&task->traits, memory_order_relaxed);
	if ((traits & (TRAIT_QUEUED | TRAIT_DROP)) == TRAIT_QUEUED) {
		task_put_traits(task, TRAIT_DROP, 0);
		task_skip(task, &task_cold(task)->skipped_missed, 1);
	}
}

/* Inline, the test alone: most tasks have no firing in flight. */
static ALWAYS_INLINE void drop_unstarted(struct tw_engine *e, struct tw_task *task)
{
	uint8_t traits = atomic_load_explicit(&task->traits, memory_order_relaxed);
	if (__builtin_expect(task->rerun || (traits & TRAIT_QUEUED), 0))
		drop_in_flight(e, task);
}

static int op_pause(struct tw_engine *e, struct tw_task *task, uint64_t unused, uint64_t unused_now,
		    struct after_unlock *after)
{
	(void)unused, (void)unused_now, (void)after;
	if (!allowed(atomic_load_explicit(&task->state, memory_order_relaxed), false))
		return -TW_ESTATE;
	/* The entry stays filed and is dropped when its tick comes. */
	drop_unstarted(e, task);
	task_move(task, &e->api_ends, TW_PAUSED, true);
	task_set_paused_by_failures(task, false);
	return TW_OK;
}

static int op_resume(struct tw_engine *e, struct tw_task *task, uint64_t unused, uint64_t now_ns,
		     struct after_unlock *after)
{
	(void)unused;
	if (atomic_load_explicit(&task->state, memory_order_relaxed) != TW_PAUSED)
		return -TW_ESTATE;
	uint64_t period = task_period_ms(task);
	uint64_t delay = task->delay_pending || !period ? task_delay_ms(task) : period;
	bool calendar = !period && !task->delay_pending && task_is_calendar(task);
	task->delay_pending = false;
	uint64_t due;
	if (calendar) { /* the first fire time after now */
		int64_t offset = tw__wall_offset_ns(e);
		due = tw__calendar_plan(e, task_calendar(task),
					(int64_t)tw__engine_now_ns(e) + offset, offset);
	} else if (delay == DELAY_AT_DUE) {
		due = due_of_time(e, now_ns,
				  atomic_load_explicit(&task->due_ns, memory_order_relaxed));
		task_set_delay_ms(task, task_delay_at_due_ms(task));
	} else {
		due = delay == TW_NEVER ? DUE_NEVER : tw__engine_due_at_ns(e, now_ns, delay);
	}
	bool running = atomic_load_explicit(&task->running, memory_order_relaxed);
	task_move(task, &e->api_ends, running ? TW_RUNNING : TW_WAITING, true);
	task_set_paused_by_failures(task, false);
	atomic_store_explicit(&task_cold(task)->consecutive_failures, 0, memory_order_relaxed);
	set_due(e, task, due, after);
	return TW_OK;
}

/* The task ends now; it is released once no run of it is going. Inlined into tw_cancel:
 * out of line the call costs more than the cancel's own test for firings in flight. */
static ALWAYS_INLINE int op_cancel(struct tw_engine *e, struct tw_task *task, uint64_t unused,
				   uint64_t unused_now, struct after_unlock *after)
{
	(void)unused, (void)unused_now;
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if (!allowed(state, true))
		return -TW_ESTATE;
	drop_unstarted(e, task);
	tw__task_end(&e->api_ends, task, state, TW_STOPPED, true);
	atomic_store_explicit(&task->due_ns, 0, memory_order_relaxed);
	tw__task_end_if_idle(e, task, NULL, after);
	return TW_OK;
}

static __attribute__((noinline)) int set_delay_any(tw_engine *e, tw_id id, uint64_t delay_ms)
{
	if (e && check_delay(delay_ms))
		return delay_ms == TW_NEVER ? with_task(e, id, op_set_never, 0, false) : -TW_ERANGE;
	return with_task(e, id, op_set_delay, delay_ms, true);
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
 * the calls are short enough (perf/README.md, "A postpone short enough to overlap"). So this
 * inlines what a postpone does and leaves the rest out of line: set_delay_locked under the
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
	return rc;
}

int tw_set_due(tw_engine *e, tw_id id, uint64_t due_ns)
{
	if (!e || !due_ns)
		return -TW_EINVAL;
	if (check_time(e, due_ns))
		return -TW_ERANGE;
	return with_task(e, id, op_set_time, due_ns, true);
}

int tw_set_period(tw_engine *e, tw_id id, uint64_t period_ms)
{
	if (e && check_delay(period_ms))
		return -TW_ERANGE;
	return with_task(e, id, op_set_period, period_ms, false);
}

int tw_pause(tw_engine *e, tw_id id)
{
	return with_task(e, id, op_pause, 0, false);
}

int tw_resume(tw_engine *e, tw_id id)
{
	return with_task(e, id, op_resume, 0, true);
}

int tw_cancel(tw_engine *e, tw_id id)
{
	return with_task(e, id, op_cancel, 0, false);
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
		int rc = with_task(e, ids[i], op_set_never, 0, false);
		if (results)
			results[i] = rc;
		if (rc && !first_failure)
			first_failure = rc;
	}
	return first_failure;
}

int tw_set_delay_many(tw_engine *e, const tw_id *ids, size_t n, uint64_t delay_ms, int *results)
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
