/*
 * task_tally.h - tasks counted by state without walking the table: each
 * writer's counts of tasks moved into and out of each live state and of tasks
 * ended (tw_stats sums them), and a task's state changed with its count.
 * Part of task.h, which includes it.
 */
#ifndef TICKWHEEL_CORE_TASK_TALLY_H
#define TICKWHEEL_CORE_TASK_TALLY_H

#include "task.h"

/* Tasks ended, counted by the thread that ended them. */
struct end_counts {
	_Atomic uint64_t completed, stopped;
	/* Tasks moved into each live state (TW_WAITING, TW_RUNNING, TW_PAUSED) minus those moved
	 * out, modulo 2^64, by this counter's writers: summed over all of them, the tasks in each
	 * state (tw_stats), without walking the table. */
	_Atomic uint64_t in_state[TW_PAUSED + 1];
};

/* Lock held: a task's state changes from `from` to `to`; counted in c, by its one writer
 * (shared: by any thread, with an atomic add). A state past TW_PAUSED, or NO_STATE, is none
 * of the live ones. */
#define NO_STATE UINT8_MAX
static inline void tally_move(struct end_counts *c, uint8_t from, uint8_t to, bool shared)
{
	if (from == to)
		return;
	if (from <= TW_PAUSED) {
		if (shared)
			atomic_fetch_sub_explicit(&c->in_state[from], 1, memory_order_relaxed);
		else
			atomic_store_explicit(
				&c->in_state[from],
				atomic_load_explicit(&c->in_state[from], memory_order_relaxed) - 1,
				memory_order_relaxed);
	}
	if (to <= TW_PAUSED) {
		if (shared)
			atomic_fetch_add_explicit(&c->in_state[to], 1, memory_order_relaxed);
		else
			atomic_store_explicit(
				&c->in_state[to],
				atomic_load_explicit(&c->in_state[to], memory_order_relaxed) + 1,
				memory_order_relaxed);
	}
}

/* One writer's tally: a task moved from one live state to another (no test, no reload). */
static inline void tally_step(struct end_counts *c, uint8_t from, uint8_t to)
{
	bump_by(&c->in_state[from], UINT64_MAX); /* - 1, modulo 2^64 */
	bump(&c->in_state[to]);
}

/* Lock held: sets the task's state and counts the move. */
static inline void task_move(struct tw_task *task, struct end_counts *c, uint8_t to, bool shared)
{
	TASK_LOCKED(task);
	uint8_t from = atomic_load_explicit(&task->state, memory_order_relaxed);
	atomic_store_explicit(&task->state, to, memory_order_relaxed);
	tally_move(c, from, to, shared);
}

/* Under lock (task.c): the task ends (TW_COMPLETED or TW_STOPPED) from its live state `from`;
 * counted in the ending thread's counts (shared: any thread's, atomically). */
void tw__task_end(struct end_counts *counts, struct tw_task *task, uint8_t from, tw_state end,
		  bool shared);

#endif
