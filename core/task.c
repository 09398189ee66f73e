/*
 * task.c - the small lock that orders a task's changes, the debug builds'
 * check of who holds which lock (and of what only the wheel thread may do),
 * and a task's end counted. The record itself is task.h; where tasks live,
 * task_table.c.
 */
#include "task.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

/* Critical sections are a few dozen instructions: spin, then yield. */
#ifndef NDEBUG
/* The task locks this thread holds (the engine never holds more than one at a time). */
enum { HELD_MAX = 4 };
static _Thread_local const struct tw_task *held[HELD_MAX];
static _Thread_local unsigned held_count;

static _Noreturn void ownership_broken(const char *what, const void *task, const char *where)
{
	(void)fprintf(stderr, "tickwheel: %s: task %p, in %s\n", what, task, where);
	abort();
}

static void note_locked(const struct tw_task *task)
{
	if (held_count == HELD_MAX)
		ownership_broken("more task locks held at once than expected", task, __func__);
	held[held_count++] = task;
}

static void note_unlocked(const struct tw_task *task)
{
	for (unsigned i = held_count; i-- > 0;)
		if (held[i] == task) {
			held[i] = held[--held_count];
			return;
		}
	ownership_broken("unlocking a task lock this thread does not hold", task, __func__);
}

void tw__task_assert_locked(const struct tw_task *task, const char *where)
{
	for (unsigned i = 0; i < held_count; i++)
		if (held[i] == task)
			return;
	ownership_broken("the task's lock is not held by this thread", task, where);
}

static _Thread_local bool on_wheel_thread;

void tw__note_wheel_thread(void)
{
	on_wheel_thread = true;
}

void tw__assert_wheel_thread(const char *where)
{
	if (on_wheel_thread)
		return;
	(void)fprintf(stderr, "tickwheel: %s runs outside the wheel thread\n", where);
	abort();
}
#endif

void tw__task_lock_contended(struct tw_task *task)
{
	for (unsigned spins = 1;
	     atomic_flag_test_and_set_explicit(&task->lock, memory_order_acquire);)
		if (++spins % 64 == 0)
			sched_yield();
}

#ifndef NDEBUG
void tw__task_lock(struct tw_task *task)
{
	if (atomic_flag_test_and_set_explicit(&task->lock, memory_order_acquire))
		tw__task_lock_contended(task);
	note_locked(task);
}

void tw__task_unlock(struct tw_task *task)
{
	note_unlocked(task);
	atomic_flag_clear_explicit(&task->lock, memory_order_release);
}
#endif

void tw__task_end(struct end_counts *counts, struct tw_task *task, uint8_t from, tw_state end,
		  bool shared)
{
	TASK_LOCKED(task);
	atomic_store_explicit(&task->state, end, memory_order_relaxed);
	task->delay_pending = false; /* its delay may now keep its end (task_note_end_tick) */
	if (shared)
		atomic_fetch_sub_explicit(&counts->in_state[from], 1, memory_order_relaxed);
	else
		bump_by(&counts->in_state[from], UINT64_MAX); /* - 1, modulo 2^64 */
	atomic_fetch_add_explicit(end == TW_COMPLETED ? &counts->completed : &counts->stopped, 1,
				  memory_order_relaxed);
}
