/*
 * ops.h - what the task operations share (ops_add.c, ops_due.c, ops_state.c):
 * the checks of delays and times, a time put on the engine's grid, a new due
 * recorded, and the path of every operation on one task: looked up through the
 * slot table inside an RCU read-side section (no lock), changed under the
 * task's own lock, so that its result is final when it returns. The wheel
 * thread is only mailed when the wheel must move the task earlier or take it
 * in.
 */
#ifndef TICKWHEEL_CORE_OPS_H
#define TICKWHEEL_CORE_OPS_H

#include "calendar_tasks.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))
/* The recorder's hook (record.h) where e may be NULL (tw_set_delay_many, set_delay_any):
 * the operation's own tail call stays. The others test e->recording where e is known, one
 * compare and a branch predicted not taken: add_task, with_task, tw_set_delay. */
#define RECORDING(e) __builtin_expect((e) && (e)->recording, 0)

/*
 * The helpers below are each file's own, static as when the operations were one file and not
 * marked inline, so that the compiler inlines them where it did then (the gate counts the
 * instructions of add, cancel and postpone); "unused": a file that needs one not drops it.
 */
static __attribute__((unused)) bool allowed(uint8_t state, bool paused_ok)
{
	return state == TW_WAITING || state == TW_RUNNING || (paused_ok && state == TW_PAUSED);
}

/* Lock held: records a new due and mails the wheel if it must act on it. */
static __attribute__((unused)) void set_due(struct tw_engine *e, struct tw_task *task,
					    uint64_t due_ns, struct after_unlock *after)
{
	TASK_LOCKED(task);
	atomic_store_explicit(&task->due_ns, due_ns, memory_order_relaxed);
	if (task->filing != FILED_DUE ||
	    tw__engine_tick_of(e, due_ns) < wheel_entry_due(&task->entry))
		mail_after_unlock(e, task, after);
}

static __attribute__((unused)) int check_delay(uint64_t ms)
{
	return ms > TW_MAX_DELAY_MS ? -TW_ERANGE : TW_OK;
}

/* A due asked as a time must be no further ahead than the longest delay, so that the wheel
 * and the resume of a one-shot (which keeps the delay it stands for) can hold it. */
static __attribute__((unused)) int check_time(const struct tw_engine *e, uint64_t at_ns)
{
	uint64_t now_ns = tw__engine_call_now_ns(e);
	return at_ns > now_ns && at_ns - now_ns > TW_MAX_DELAY_MS * NS_PER_MS ? -TW_ERANGE : TW_OK;
}

/* A due asked as a time (first_due_ns, tw_set_due): on the grid, rounded up as a delay is,
 * and never before the next tick, so that a time already past fires as a delay of 0 would. */
static __attribute__((unused)) uint64_t due_of_time(const struct tw_engine *e, uint64_t now_ns,
						    uint64_t at_ns)
{
	uint64_t soonest = tw__engine_due_at_ns(e, now_ns, 0);
	uint64_t due = e->epoch_ns + tw__engine_tick_of(e, at_ns) * NS_PER_MS;
	return due > soonest ? due : soonest;
}

/* The delay a due on the grid stands for, which a one-shot resumes with. */
static __attribute__((unused)) uint64_t delay_of_due(const struct tw_engine *e, uint64_t now_ns,
						     uint64_t due_ns)
{
	return (due_ns - tw__engine_due_at_ns(e, now_ns, 0)) / NS_PER_MS;
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
 * measures the postpone at 1M tasks). type: the recorder's event (REC_*), 0 for none.
 */
static __attribute__((unused)) int with_task(tw_engine *e, tw_id id, task_op *op, uint64_t value,
					     bool timed, unsigned type)
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
	if (__builtin_expect(e->recording, 0) && type) /* recorder's hook: record.h */
		return tw__record_op(e->recorder, type, id, rc, value);
	return rc;
}

/* ops_state.c: ends a task that tw_add published while the engine began to stop. */
void tw__cancel_while_stopping(struct tw_engine *e, struct tw_task *task, tw_id id);

#endif
