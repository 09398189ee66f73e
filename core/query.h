/*
 * query.h - a task's tw_task_info, read without a lock: shared by tw_get
 * (query.c) and tw_list (list.c).
 */
#ifndef TICKWHEEL_CORE_QUERY_H
#define TICKWHEEL_CORE_QUERY_H

#include "calendar_tasks.h"

#include <string.h>

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
 *
 * Longer than a function should be, for tw_task_info's 22 fields: each is read once before
 * the id check and written once after it, and the two halves share a dozen locals; cut in
 * two, they would pass all of them across.
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
		calendar = !period; /* a wide period of 0: a calendar task (calendar_tasks.h) */
		if (calendar && !task->released)
			wall_due = tw__calendar_wall_due(task);
		tw__task_unlock(task);
	}
	uint64_t due = atomic_load_explicit(&task->due_ns, memory_order_relaxed);
	/* The name too, before the id is checked: the wheel thread clears a reaped task's id
	 * before it forgets the name, so a name missed here fails the check below. */
	char name[TW_NAME_MAX + 1];
	unsigned misfire = 0;
	bool named = tw__names_used(&e->names);
	if (named) {
		memset(name, 0, sizeof name);
		misfire = tw__name_show_slow(&e->names, id, name);
		/* its reads before the id's (liburcu's barrier: GCC's TSan refuses C11 fences) */
		cmm_smp_rmb();
	}
	/* Read into a local, written out field by field once the id is checked (out is left
	 * untouched otherwise). Not a zeroed local copied whole: gcc zeroes a struct this size
	 * with `rep stos`, slow to start, and the copy then waits for those stores
	 * (perf/results/HISTORY.md, "tw_get of a cached task"). */
	tw_task_info v;
	v.state = state;
	v.period_ms = period;
	v.next_due_ns = (state == TW_WAITING || state == TW_RUNNING) && due != DUE_NEVER ? due : 0;
	v.runs = atomic_load_explicit(&cold->runs, memory_order_relaxed);
	v.failures = atomic_load_explicit(&cold->failures, memory_order_relaxed);
	v.consecutive_failures =
		atomic_load_explicit(&cold->consecutive_failures, memory_order_relaxed);
	v.slow_runs = atomic_load_explicit(&cold->slow_runs, memory_order_relaxed);
	v.skipped_overlap = atomic_load_explicit(&cold->skipped_overlap, memory_order_relaxed);
	v.skipped_overload = atomic_load_explicit(&cold->skipped_overload, memory_order_relaxed);
	v.skipped_missed = atomic_load_explicit(&cold->skipped_missed, memory_order_relaxed);
	v.last_run_ns = ns_of_us(&cold->last_run_us);
	v.longest_run_ns = ns_of_us(&cold->longest_run_us);
	v.running = atomic_load_explicit(&task->running, memory_order_relaxed);
	v.last_lateness_ns = ns_of_us(&cold->last_lateness_us);
	v.max_lateness_ns = ns_of_us(&cold->max_lateness_us);
	/* An id that changed meanwhile means the task was reaped while we read. */
	if (atomic_load_explicit(&task->id, memory_order_acquire) != id)
		return false;
#if UINTPTR_MAX == UINT64_MAX /* the size below is the 64-bit layout's */
	/* Every field of tw_task_info is set below: one added there must be set here too. */
	_Static_assert(sizeof(tw_task_info) == 216, "a new tw_task_info field: set it here");
#endif
	out->state = v.state;
	out->period_ms = v.period_ms;
	out->next_due_ns = v.next_due_ns;
	out->runs = v.runs;
	out->failures = v.failures;
	out->consecutive_failures = v.consecutive_failures;
	out->slow_runs = v.slow_runs;
	out->skipped_overlap = v.skipped_overlap;
	out->skipped_overload = v.skipped_overload;
	out->skipped_missed = v.skipped_missed;
	out->last_run_ns = v.last_run_ns;
	out->longest_run_ns = v.longest_run_ns;
	out->paused_by_failures = traits & TRAIT_PAUSED_BY_FAILURES;
	out->concurrent = traits & TRAIT_CONCURRENT;
	out->running = v.running;
	out->stuck = traits & TRAIT_STUCK;
	out->last_lateness_ns = v.last_lateness_ns;
	out->max_lateness_ns = v.max_lateness_ns;
	out->on_wheel_thread = traits & TRAIT_ON_WHEEL;
	out->calendar = calendar;
	out->next_due_wall_ns = wall_due;
	if (named)
		memcpy(out->name, name, sizeof out->name);
	else
		memset(out->name, 0, sizeof out->name);
	out->misfire = misfire;
	return true;
}

#endif
