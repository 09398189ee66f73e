/*
 * ends.c - how a task ends: released once no run of it is going, handed back
 * to the wheel thread to be reaped, and counted by state and end.
 */
#include "threads.h"

#include <string.h>

/* Lock held: releases the task now (after_unlock calls the release) and mails it to the
 * wheel thread, which keeps it queryable, then reaps it. */
static inline __attribute__((always_inline)) void release_task(struct tw_engine *e,
							       struct tw_task *task,
							       struct executor *x,
							       struct after_unlock *after)
{
	task->released = true;
	struct task_cold *cold = task_cold(task);
	after->release = cold->release;
	after->arg = cold->arg;
	if (x ? tw__executor_mail_ended(x, task) : tw__task_mail(e, task))
		after->wake = e;
}

/*
 * Lock held: tw__task_end_if_idle for a task released already, or with firings in flight. A
 * firing queued and not started is no run: an ended task's never starts, its executor only
 * takes it out, and the caller was promised the release once no run goes. The task is not
 * reaped before that firing is taken out (it points to the task): reconcile waits for it,
 * and its taking out mails the task again.
 */
static __attribute__((noinline)) void end_in_flight(struct tw_engine *e, struct tw_task *task,
						    struct executor *x, struct after_unlock *after)
{
	uint32_t running = atomic_load(&task->running);
	if (!task->released) {
		if (running == 1 && task_has_trait(task, TRAIT_QUEUED))
			release_task(e, task, x, after);
		return;
	}
	/* A mail not yet taken in finds it taken out. */
	if (!running && task->filing != FILED_REAP && !task->mailed &&
	    (x ? tw__executor_mail_ended(x, task) : tw__task_mail(e, task)))
		after->wake = e;
}

void tw__task_end_if_idle(struct tw_engine *e, struct tw_task *task, struct executor *x,
			  struct after_unlock *after)
{
	TASK_LOCKED(task);
	if (__builtin_expect(task->released || atomic_load(&task->running), 0)) {
		end_in_flight(e, task, x, after);
		return;
	}
	release_task(e, task, x, after);
}

/* A firing a stop took out of a ring: counted missed, the task's count of firings in flight
 * lowered, the task released if that was its last. */
void tw__drop_taken(struct tw_engine *e, const struct firing *f)
{
	struct tw_task *task = f->task;
	tw__task_lock(task);
	if (!task_has_trait(task, TRAIT_DROP)) { /* else counted by tw_pause or tw_cancel */
		task_skip(task, &task_cold(task)->skipped_missed, 1);
		tw__engine_note_skip(e, task, REC_SKIP_MISSED, f->due_ns, 1);
	}
	add_skipped(task, f->skipped);
	bump(&e->skipped_missed); /* the stopper's alone: the wheel thread is gone */
	/* the firing that waited for this one goes with it */
	if (task->rerun) {
		task->rerun = false;
		task_skip(task, &task_cold(task)->skipped_missed, 1);
		bump(&e->skipped_missed);
		tw__engine_note_skip(e, task, REC_SKIP_MISSED, 0, 1);
	}
	task_put_traits(task, 0, TRAIT_QUEUED | TRAIT_DROP);
	uint32_t left = atomic_load_explicit(&task->running, memory_order_relaxed) - 1;
	atomic_store_explicit(&task->running, left, memory_order_relaxed);
	struct after_unlock after = { 0 };
	tw__task_end_if_idle(e, task, NULL, &after);
	tw__task_unlock(task);
	after_unlock_run(after);
	atomic_fetch_add_explicit(&e->stop_done, 1, memory_order_seq_cst);
}

static void add_states(uint64_t *sum, const struct end_counts *c)
{
	for (int s = 0; s <= TW_PAUSED; s++)
		sum[s] += atomic_load_explicit(&c->in_state[s], memory_order_relaxed);
}

static void read_states(struct tw_engine *e, uint64_t sum[TW_PAUSED + 1])
{
	for (int s = 0; s <= TW_PAUSED; s++)
		sum[s] = 0;
	add_states(sum, &e->api_ends);
	add_states(sum, &e->wheel_ends);
	unsigned running = executors_running(e);
	for (unsigned i = 0; i <= running; i++)
		add_states(sum, &run_counter(e, i, running)->ends);
}

void tw__states_total(struct tw_engine *e, uint64_t in_state[TW_PAUSED + 1])
{
	/* A move is counted out by one writer and into another's: read while none moves (two
	 * passes alike), so that a task is never counted out of a state before it is in. */
	uint64_t sum[TW_PAUSED + 1], again[TW_PAUSED + 1];
	read_states(e, sum);
	for (int tries = 0; tries < 64; tries++) {
		read_states(e, again);
		if (!memcmp(sum, again, sizeof sum))
			break;
		memcpy(sum, again, sizeof sum);
	}
	/* Each tally was read at its own instant: a move counted out of one writer's and not
	 * yet into another's reads as a dip below zero, shown as none. */
	for (int s = 0; s <= TW_PAUSED; s++)
		in_state[s] = (int64_t)sum[s] < 0 ? 0 : sum[s];
}

void tw__ends_total(struct tw_engine *e, uint64_t *completed, uint64_t *stopped)
{
	*completed = atomic_load(&e->api_ends.completed) + atomic_load(&e->wheel_ends.completed);
	*stopped = atomic_load(&e->api_ends.stopped) + atomic_load(&e->wheel_ends.stopped);
	unsigned running = executors_running(e);
	for (unsigned i = 0; i <= running; i++) {
		*completed += atomic_load(&run_counter(e, i, running)->ends.completed);
		*stopped += atomic_load(&run_counter(e, i, running)->ends.stopped);
	}
}
