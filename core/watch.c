/*
 * watch.c - the wheel thread's watch over the executors, after each round.
 *
 * No task holds up another: a firing queued behind a run that has lasted
 * HOLD_NS is taken by another executor that is free (executor.c, take_held),
 * and new firings go around that run (wheel_fire.c, executor_for). Free
 * executors may sleep, so the watch wakes them when it sees such a firing;
 * it looks again when the next run could cross HOLD_NS or run_limit_ms, and
 * only while something is queued or running, so an idle engine sleeps.
 *
 * With run_limit_ms a run that lasts longer is stuck: reported once (the
 * log hook, stats.stuck_runs, TRAIT_STUCK for tw_get). When every executor
 * is held by a stuck run and firings wait, a spare executor is started, up
 * to cfg.spare_executors: a stuck callback costs its own task, and threads,
 * never the other tasks' runs.
 */
#include "threads.h"

static void earliest(uint64_t *at, uint64_t when)
{
	if (!*at || when < *at)
		*at = when;
}

/* The run that started at start on x has gone past run_limit_ms: said once per run. */
static void report_stuck(struct tw_engine *e, struct executor *x, uint64_t start, uint64_t age)
{
	if (x->stuck_start_ns == start)
		return;
	x->stuck_start_ns = start;
	struct tw_task *task = atomic_load_explicit(&x->run_task, memory_order_acquire);
	/* A slot outlives its tasks: locking it is safe, and under its lock the run is
	 * still this one only if x still shows the same start. */
	tw__task_lock(task);
	bool same = atomic_load_explicit(&x->run_start_ns, memory_order_acquire) == start;
	if (same)
		task_set_trait(task, TRAIT_STUCK, true);
	tw_id id = atomic_load_explicit(&task->id, memory_order_relaxed);
	tw__task_unlock(task);
	if (!same)
		return;
	bump(&e->stuck_runs);
	tw__engine_log(e, TW_LOG_ERROR,
		       "task %llu: its run on executor %u has gone on for %llu ms, past "
		       "run_limit_ms; firings go around it",
		       (unsigned long long)id, x->index, (unsigned long long)(age / NS_PER_MS));
}

/* Whether any executor holds something the watch must look at: firings queued behind
 * another, a firing queued behind a run, or with run_limit_ms any run or firing at all. */
static bool anything_to_watch(struct tw_engine *e, unsigned running)
{
	for (unsigned i = 0; i < running; i++) {
		struct executor *x = &e->executors[i];
		uint64_t queued = tw__executor_queued(x);
		bool in_run = atomic_load_explicit(&x->run_start_ns, memory_order_relaxed);
		if (queued >= 2 || (queued && in_run) ||
		    (e->cfg.run_limit_ms && (queued || in_run)))
			return true;
	}
	return false;
}

void tw__watch_executors(struct tw_engine *e)
{
	unsigned running = executors_running(e);
	/* Most rounds end with nothing held up: no clock read for them. */
	if (!anything_to_watch(e, running)) {
		e->watch_ns = 0;
		return;
	}
	uint64_t now = monotonic_ns(), next = 0;
	uint64_t limit = e->cfg.run_limit_ms < TW_MAX_DELAY_MS ? e->cfg.run_limit_ms * NS_PER_MS :
								 TW_MAX_DELAY_MS * NS_PER_MS;
	bool held_up = false, all_stuck = limit != 0;
	for (unsigned i = 0; i < running; i++) {
		struct executor *x = &e->executors[i];
		uint64_t start = atomic_load_explicit(&x->run_start_ns, memory_order_acquire);
		uint64_t queued = tw__executor_queued(x);
		if (!start) {
			all_stuck = false;
			/* Its first firing may become a long run: what is behind it would be held
			 * up, and the run itself may need to be reported. A lone firing on an idle
			 * executor costs no second wake-up. */
			if (queued >= 2)
				earliest(&next, now + HOLD_NS);
			if (queued && limit)
				earliest(&next, now + limit);
			continue;
		}
		uint64_t age = now > start ? now - start : 0;
		if (queued) {
			if (age >= HOLD_NS)
				held_up = true;
			else
				earliest(&next, start + HOLD_NS);
		}
		if (!limit)
			continue;
		if (age >= limit) {
			report_stuck(e, x, start, age);
		} else {
			all_stuck = false;
			earliest(&next, start + limit);
		}
	}
	if (held_up) {
		for (unsigned i = 0; i < running; i++) {
			struct executor *x = &e->executors[i];
			if (executor_held(x, now))
				continue;
			atomic_store_explicit(&x->help, true, memory_order_release);
			tw__executor_wake(x);
		}
		earliest(&next, now + HOLD_NS);
	}
	if (all_stuck && (held_up || e->ready_head) && tw__executor_start_spare(e)) {
		tw__engine_log(e, TW_LOG_WARNING,
			       "every executor is held by a stuck run: spare executor %u started",
			       executors_running(e) - 1);
		earliest(&next, now + HOLD_NS);
	}
	e->watch_ns = next;
}
