/*
 * query.h - a task's tw_task_info, read without a lock: shared by tw_get
 * (query.c) and tw_list (list.c).
 */
#ifndef TICKWHEEL_CORE_QUERY_H
#define TICKWHEEL_CORE_QUERY_H

#include "calendar.h"

static inline uint64_t ns_of_us(_Atomic uint32_t *us)
{
	return (uint64_t)atomic_load_explicit(us, memory_order_relaxed) * 1000;
}

/*
 * Inside a read-side section: fills *out from the slot task if it holds the
 * task id at the end of the read, and says whether it did. A slot is reused
 * only a grace period after its task was reaped, and an id never comes back,
 * so what is read from a slot whose id still matches at the end belongs to
 * that one task (each field as it was at some instant of the read).
 */
static inline __attribute__((always_inline)) bool
task_read_info(struct tw_engine *e, struct tw_task *task, tw_id id, tw_task_info *out)
{
	struct task_cold *cold = task_cold(task);
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	uint8_t traits = atomic_load_explicit(&task->traits, memory_order_relaxed);
	uint64_t period = atomic_load_explicit(&task->period_ms, memory_order_relaxed);
	bool calendar = false;
	int64_t wall_due = 0;
	if (period & WIDE_BIT) { /* its halves are only consistent under the lock */
		tw__task_lock(task);
		period = task_period_ms(task);
		calendar = !period; /* a wide period of 0 marks a calendar task (calendar.h) */
		if (calendar && !task->released)
			wall_due = tw__calendar_wall_due(task);
		tw__task_unlock(task);
	}
	uint64_t due = atomic_load_explicit(&task->due_ns, memory_order_relaxed);
	tw_task_info info = {
		.state = state,
		.period_ms = period,
		.next_due_ns =
			(state == TW_WAITING || state == TW_RUNNING) && due != DUE_NEVER ? due : 0,
		.runs = atomic_load_explicit(&cold->runs, memory_order_relaxed),
		.failures = atomic_load_explicit(&cold->failures, memory_order_relaxed),
		.consecutive_failures =
			atomic_load_explicit(&cold->consecutive_failures, memory_order_relaxed),
		.slow_runs = atomic_load_explicit(&cold->slow_runs, memory_order_relaxed),
		.skipped_overlap =
			atomic_load_explicit(&cold->skipped_overlap, memory_order_relaxed),
		.skipped_overload =
			atomic_load_explicit(&cold->skipped_overload, memory_order_relaxed),
		.skipped_missed = atomic_load_explicit(&cold->skipped_missed, memory_order_relaxed),
		.last_run_ns = ns_of_us(&cold->last_run_us),
		.longest_run_ns = ns_of_us(&cold->longest_run_us),
		.paused_by_failures = traits & TRAIT_PAUSED_BY_FAILURES,
		.concurrent = traits & TRAIT_CONCURRENT,
		.running = atomic_load_explicit(&task->running, memory_order_relaxed),
		.stuck = traits & TRAIT_STUCK,
		.last_lateness_ns = ns_of_us(&cold->last_lateness_us),
		.max_lateness_ns = ns_of_us(&cold->max_lateness_us),
		.on_wheel_thread = traits & TRAIT_ON_WHEEL,
		.calendar = calendar,
		.next_due_wall_ns = wall_due,
	};
	info.misfire = tw__name_show(&e->names, id, info.name);
	/* An id that changed meanwhile means the task was reaped while we read. */
	if (atomic_load_explicit(&task->id, memory_order_acquire) != id)
		return false;
	*out = info;
	return true;
}

#endif
