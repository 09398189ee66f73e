/*
 * threads.h - the calls of the engine's threads, declared for every module
 * after it (core/check_layers.py has the map): the executors, how a task ends,
 * the wheel thread and its watch. Uses handover.h.
 */
#ifndef TICKWHEEL_CORE_THREADS_H
#define TICKWHEEL_CORE_THREADS_H

#include "handover.h"

/* executor_pool.c. Allocates every executor's rings, spares' included; starts the
 * configured ones. */
int tw__executors_start(struct tw_engine *e);
/* Wheel thread: starts the next spare executor; false when there is none left to start. */
bool tw__executor_start_spare(struct tw_engine *e);
/* Lets every started executor but self and the abandoned finish what it holds, joins it. */
void tw__executors_join(struct tw_engine *e, struct executor *self);
void tw__executors_free(struct tw_engine *e);
/* Stop: takes every queued firing out of the rings and drops it (tw__drop_taken). */
void tw__executors_drop_queued(struct tw_engine *e);
/* ends.c: a firing taken out of a ring by a stop: counted missed, the task's count of
 * firings in flight lowered, the task released if that was its last. */
void tw__drop_taken(struct tw_engine *e, const struct firing *f);
/* Whether at most except runs were in progress, at one instant during the call. */
bool tw__runs_idle(struct tw_engine *e, uint64_t except);

/* executor.c */
bool tw__engine_on_executor(const struct tw_engine *e);
/* The executor of e that the calling thread is, or NULL (the wheel runner during a
 * TW_ON_WHEEL_THREAD run). */
struct executor *tw__current_executor(const struct tw_engine *e);
/* Whether the calling thread is e's wheel thread running a TW_ON_WHEEL_THREAD callback. */
bool tw__engine_on_wheel_run(const struct tw_engine *e);
/* Wheel thread, no task lock held: runs the firing dispatch gave the wheel runner. */
void tw__run_on_wheel_thread(struct tw_engine *e, struct firing *f);
/* An executor thread's body (executor_pool.c starts it); its name, set by its starter and by
 * itself. */
void *tw__executor_main(void *arg);
void tw__executor_name(const struct executor *x, pthread_t thread);

/* Wheel thread: wheel_thread.c. */
int tw__wheel_thread_start(struct tw_engine *e);
/* Wheel thread, after each round: watch.c. */
void tw__watch_executors(struct tw_engine *e);
void tw__wheel_thread_join(struct tw_engine *e);

/* ends.c */
/* What a thread owes once it drops a task's lock: the user's release call,
 * and a wake-up of the wheel thread (tw__task_mail). */
struct after_unlock {
	void (*release)(void *arg);
	void *arg;
	struct tw_engine *wake;
};
/* Under lock: an ended task with no run going is released now: mails it for
 * reaping (through executor x's ring if not NULL) and adds the release call
 * and any wake-up to *after. */
void tw__task_end_if_idle(struct tw_engine *e, struct tw_task *task, struct executor *x,
			  struct after_unlock *after);
/* The tasks in each live state now: every writer's tallies summed (tw_stats). */
void tw__states_total(struct tw_engine *e, uint64_t in_state[TW_PAUSED + 1]);
/* Tasks ended so far: every thread's counts summed. */
void tw__ends_total(struct tw_engine *e, uint64_t *completed, uint64_t *stopped);

/* Lock held: the wheel thread is woken once it is dropped, if tw__task_mail says so. */
static inline void mail_after_unlock(struct tw_engine *e, struct tw_task *task,
				     struct after_unlock *after)
{
	TASK_LOCKED(task);
	if (tw__task_mail(e, task))
		after->wake = e;
}

static inline void after_unlock_run(struct after_unlock after)
{
	if (after.wake)
		tw__engine_wake(after.wake);
	if (after.release)
		after.release(after.arg);
}

#endif
