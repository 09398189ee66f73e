/*
 * ops_add.c - tw_add: a task's spec checked, its name claimed and its place
 * counted against max_tasks, its slot taken and its record made (task_init),
 * then published. A spec of the caller's own size with no time, name or cron
 * expression takes a path with none of their code; a calendar task has its
 * schedule parsed and its first fire time planned before anything is taken.
 */
#include "ops.h"

/* tw_add's own checks of first_due_ns, off the path of tasks added with a delay. */
static __attribute__((noinline)) int check_first_due(const struct tw_engine *e,
						     const tw_task_spec *spec)
{
	if (spec->delay_ms)
		return -TW_EINVAL;
	return check_time(e, spec->first_due_ns);
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

/* tw_add's checks of the spec and the engine; the length of a name given, in *name_len. */
static ALWAYS_INLINE int check_spec(tw_engine *e, const tw_task_spec *spec, tw_id *out, bool plain,
				    size_t *name_len)
{
	unsigned flags = spec->flags;
	if (!e || !out || !spec->callback || (flags & ~(unsigned)TRAIT_TASK_FLAGS) ||
	    (flags & (TW_CONCURRENT | TW_ON_WHEEL_THREAD)) == (TW_CONCURRENT | TW_ON_WHEEL_THREAD))
		return -TW_EINVAL;
	if (!plain && spec->name && spec->name[0] &&
	    (!tw__name_valid(spec->name, name_len) || spec->misfire > TW_MISFIRE_SKIP))
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
	return TW_OK;
}

/* The new task's first due; a time given also sets the delay it stands for (tw_resume's). */
static ALWAYS_INLINE uint64_t first_due(tw_engine *e, const tw_task_spec *spec, bool plain,
					struct calendar *cal, uint64_t *delay_ms)
{
	uint64_t now_ns = tw__engine_call_now_ns(e);
	*delay_ms = spec->delay_ms;
	if (!plain && spec->first_due_ns) {
		uint64_t due_ns = due_of_time(e, now_ns, spec->first_due_ns);
		*delay_ms = delay_of_due(e, now_ns, due_ns);
		return due_ns;
	}
	if (cal && !spec->delay_ms) /* its first fire time, planned by add_calendar */
		return cal->planned_due;
	return spec->delay_ms == TW_NEVER ? DUE_NEVER :
					    tw__engine_due_at_ns(e, now_ns, spec->delay_ms);
}

/* The task made, published under id: found by others from then on, mailed to the wheel. */
static ALWAYS_INLINE void publish(tw_engine *e, struct tw_task *task, tw_id id,
				  struct name_node *name, struct calendar *cal)
{
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
}

/* plain: the spec has no first_due_ns, name or cron, and the code for them is left out.
 * cal: a calendar task's record (tw__calendar_new), its first due planned; NULL for any
 * other task. Both are constants in tw_add's own path, so that neither costs it anything. */
static ALWAYS_INLINE int add_task(tw_engine *e, const tw_task_spec *spec, tw_id *out, bool plain,
				  struct calendar *cal)
{
	size_t name_len = 0;
	int rc = check_spec(e, spec, out, plain, &name_len);
	if (rc)
		return rc;
	/* The name before the count: -TW_EEXIST wins over -TW_ELIMIT (the header's "When
	 * several codes apply"), an answer that does not change as other tasks come and go. */
	struct name_node *name = NULL;
	if (!plain && name_len) {
		rc = tw__name_claim(&e->names, &e->table, spec->name, name_len, spec->misfire,
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
	uint64_t delay_ms;
	uint64_t due_ns = first_due(e, spec, plain, cal, &delay_ms);
	task_init(task, spec, delay_ms, due_ns);
	if (cal) /* a schedule, not a period: task_init set the spec's 0 */
		atomic_store_explicit(&task->period_ms, PERIOD_CALENDAR, memory_order_relaxed);
	tally_move(&e->api_ends, NO_STATE, TW_WAITING, true);
	publish(e, task, id, name, cal);
	*out = id;
	/* A stop that began meanwhile may have scanned the table before this
	 * task was published: end it here, exactly once either way. The task
	 * did exist, so this is a success: an error always means "never added,
	 * never released". */
	if (atomic_load_explicit(&e->stopping, memory_order_seq_cst))
		tw__cancel_while_stopping(e, task, id);
	if (__builtin_expect(e->recording, 0)) /* recorder's hook: record.h */
		return tw__record_add(e->recorder, spec, sizeof *spec, TW_OK, out);
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
