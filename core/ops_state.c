/*
 * ops_state.c - a task's state changed by its caller: tw_pause, tw_resume and
 * tw_cancel, and the cancel of a task added while the engine began to stop.
 * The firings of a task not yet started when it is paused or cancelled are
 * dropped and counted as missed.
 */
#include "ops.h"

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
		tw__engine_note_skip(e, task, REC_SKIP_MISSED, 0, 1);
	}
	uint8_t traits = atomic_load_explicit(&task->traits, memory_order_relaxed);
	if ((traits & (TRAIT_QUEUED | TRAIT_DROP)) == TRAIT_QUEUED) {
		task_put_traits(task, TRAIT_DROP, 0);
		task_skip(task, &task_cold(task)->skipped_missed, 1);
		tw__engine_note_skip(e, task, REC_SKIP_MISSED, 0, 1);
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

/* Ends a task added while the engine began to stop (no-op if stop did). A task another
 * thread found, cancelled and saw reaped meanwhile is gone, and its slot may hold another:
 * only the task of this id is touched. */
void tw__cancel_while_stopping(struct tw_engine *e, struct tw_task *task, tw_id id)
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

int tw_pause(tw_engine *e, tw_id id)
{
	return with_task(e, id, op_pause, 0, false, REC_PAUSE);
}

int tw_resume(tw_engine *e, tw_id id)
{
	return with_task(e, id, op_resume, 0, true, REC_RESUME);
}

int tw_cancel(tw_engine *e, tw_id id)
{
	return with_task(e, id, op_cancel, 0, false, REC_CANCEL);
}
