/*
 * run_firing.h - one firing on an executor, inline: whether it may start, the callback, and
 * what its end means for the task (it waits again, completes, runs once more
 * for a firing that came due during the run, or is released). Included by
 * executor.c alone, so that the run is compiled into the executor's loop: a
 * call per firing, with its register saves, costs the hand-over's share.
 */
#ifndef TICKWHEEL_CORE_RUN_FIRING_H
#define TICKWHEEL_CORE_RUN_FIRING_H

#include "calendar_tasks.h"

static void note_lateness(struct executor *x, uint64_t late_ns, uint64_t us)
{
	/* us's bit length (0 for 0), without a branch: 2us + 1 is never 0 */
	unsigned bucket = 63 - (unsigned)__builtin_clzll(us << 1 | 1);
	if (bucket >= TW_LATENESS_BUCKETS)
		bucket = TW_LATENESS_BUCKETS - 1;
	bump(&x->lateness[bucket]);
	bump_by(&x->lateness_sum_ns, late_ns);
	if (late_ns > atomic_load_explicit(&x->lateness_max_ns, memory_order_relaxed))
		atomic_store_explicit(&x->lateness_max_ns, late_ns, memory_order_relaxed);
}

/* Lock held: a task's last and largest of a measure. */
static void keep_max(_Atomic uint32_t *last, _Atomic uint32_t *max, uint32_t value)
{
	atomic_store_explicit(last, value, memory_order_relaxed);
	if (value > atomic_load_explicit(max, memory_order_relaxed))
		atomic_store_explicit(max, value, memory_order_relaxed);
}

/*
 * Lock held, wheel thread: a run of a TW_ON_WHEEL_THREAD task ended after took_ns. True when
 * it was the task's last strike: it is moved to the executors for good. Strikes count runs
 * over budget in a row: a run's time is wall time, and on a busy machine a callback of a
 * microsecond is now and then preempted past any budget, while one that blocks or loops is
 * over it every time.
 */
static bool judge_wheel_run(struct tw_engine *e, struct tw_task *task, uint64_t took_ns)
{
	TASK_LOCKED(task);
	WHEEL_THREAD_ONLY();
	if (took_ns <= e->wheel_budget_ns) {
		if (__builtin_expect(task_strikes(task) != 0, 0))
			task_set_strikes(task, 0);
		return false;
	}
	bump(&e->over_budget_runs);
	unsigned strikes = task_strikes(task) + 1;
	task_set_strikes(task, strikes);
	if (strikes < TW_WHEEL_RUN_STRIKES)
		return false;
	task_put_traits(task, 0, TRAIT_ON_WHEEL);
	bump(&e->moved_off_wheel);
	return true;
}

/* Lock held: accounts for a run that returned rc after took_ns. Returns the
 * failures in a row if this one paused the task (to be logged once the lock
 * is let go: the log hook is user code), else 0; *moved says whether the
 * budget guard moved the task off the wheel thread (logged the same way). */
static inline __attribute__((always_inline)) uint32_t account(struct executor *x,
							      struct tw_task *task,
							      struct task_cold *cold, int rc,
							      uint64_t took_ns, bool *moved)
{
	TASK_LOCKED(task);
	struct tw_engine *e = x->engine;
	keep_max(&cold->last_run_us, &cold->longest_run_us, us_of_ns(took_ns));
	if (took_ns > e->slow_run_ns) {
		bump32(&cold->slow_runs);
		bump(&x->slow_runs);
	}
	*moved = x->on_wheel_thread && judge_wheel_run(e, task, took_ns);
	if (!rc) {
		if (atomic_load_explicit(&cold->consecutive_failures, memory_order_relaxed))
			atomic_store_explicit(&cold->consecutive_failures, 0, memory_order_relaxed);
		return 0;
	}
	bump32(&cold->failures);
	bump(&x->failures);
	uint32_t row = bump32(&cold->consecutive_failures);
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if (e->cfg.max_failures && row >= e->cfg.max_failures &&
	    (state == TW_WAITING || state == TW_RUNNING)) {
		task_move(task, &x->ends, TW_PAUSED, false);
		task_set_paused_by_failures(task, true);
		return row;
	}
	return 0;
}

/*
 * Lock held: a firing came due during the run that just returned (task->rerun,
 * set by the wheel thread's dispatch). It becomes *f and runs now, on this
 * executor, unless the task was paused or ended meanwhile: then it is dropped
 * and counted as missed. A one-shot keeps that firing's due in due_ns; a
 * periodic task's due_ns is already its next period's.
 */
static bool take_rerun(struct executor *x, struct tw_task *task, struct firing *f)
{
	TASK_LOCKED(task);
	struct tw_engine *e = x->engine;
	task->rerun = false;
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if ((state != TW_WAITING && state != TW_RUNNING) ||
	    atomic_load_explicit(&e->stopping, memory_order_relaxed)) {
		task_skip(task, &task_cold(task)->skipped_missed, 1);
		bump(&x->dropped);
		tw__engine_note_skip(e, task, REC_SKIP_MISSED, 0, 1);
		return false;
	}
	uint64_t due = atomic_load_explicit(&task->due_ns, memory_order_relaxed);
	uint64_t period_ns = task_period_ms(task) * NS_PER_MS, now = tw__engine_now_ns(e);
	/* The firing that came due: a one-shot's own due (also if it was given a period since:
	 * that firing is still a one-shot's, and completes it unless re-armed); a periodic
	 * task's is a period before its next (unless that is past). */
	bool oneshot = task_has_trait(task, TRAIT_ONESHOT_RERUN);
	/* a calendar task's firing has no period to count back: the wheel thread kept its due */
	bool calendar = !oneshot && !period_ns && task_is_calendar(task);
	uint64_t late = oneshot || !period_ns || due <= now ? due : due - period_ns;
	if (calendar && due > now)
		late = task_calendar(task)->rerun_due;
	if (late > now || due == DUE_NEVER)
		return false; /* a later due was set since (tw_set_delay): it replaced the firing */
	if (oneshot || (!period_ns && !calendar))
		atomic_store_explicit(&task->due_ns, 0, memory_order_relaxed);
	f->due_ns = late;
	f->skipped = take_skipped(task);
	return true;
}

/* Lock held: a run ended; the task waits again, completes, or stays put. True when a
 * firing that came due during the run is to run now: it is in *f. */
static inline __attribute__((always_inline)) bool
run_ended(struct executor *x, struct tw_task *task, struct firing *f, struct after_unlock *after)
{
	TASK_LOCKED(task);
	struct tw_engine *e = x->engine;
	/* A firing of the task still queued goes first (one dropped by tw_pause too: it keeps
	 * the task's place until taken out): the one that waits runs after it. */
	if (task->rerun && !task_has_trait(task, TRAIT_QUEUED) && take_rerun(x, task, f))
		return true; /* still running: the count stays */
	uint32_t left = atomic_load_explicit(&task->running, memory_order_relaxed) - 1;
	atomic_store_explicit(&task->running, left, memory_order_relaxed);
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if (state == TW_RUNNING && !left) {
		uint64_t due = atomic_load_explicit(&task->due_ns, memory_order_relaxed);
		if (due) {
			atomic_store_explicit(&task->state, TW_WAITING, memory_order_relaxed);
			tally_step(&x->ends, TW_RUNNING, TW_WAITING);
			/* Due but filed nowhere (a one-shot given a period during a run that came
			 * due meanwhile): the wheel thread files it. */
			if (task->filing == FILED_NONE && due != DUE_NEVER)
				mail_after_unlock(e, task, after);
		} else {
			tw__task_end(&x->ends, task, TW_RUNNING, TW_COMPLETED, false);
			state = TW_COMPLETED;
		}
	}
	/* The wheel thread takes what it mails itself in through the mailbox: no wake-up. */
	if (state == TW_COMPLETED || state == TW_STOPPED)
		tw__task_end_if_idle(e, task, x->on_wheel_thread ? NULL : x, after);
	return false;
}

/*
 * Lock held: may this queued firing start? Not once the task was paused or
 * ended, nor once the engine stops: whoever paused or cancelled it was told
 * that no new run starts. A firing that does not start counts as skipped.
 */
static inline __attribute__((always_inline)) bool
may_start(struct tw_engine *e, struct tw_task *task, const struct firing *f)
{
	TASK_LOCKED(task);
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if (task_has_trait(task, TRAIT_DROP)) { /* dropped by tw_pause, counted there */
		task_put_traits(task, 0, TRAIT_DROP);
		add_skipped(task, f->skipped);
		return false;
	}
	if (!atomic_load_explicit(&e->stopping, memory_order_relaxed) &&
	    (state == TW_WAITING || state == TW_RUNNING))
		return true;
	bump_skips(&task_cold(task)->skipped_missed, 1);
	add_skipped(task, f->skipped + 1);
	tw__engine_note_skip(e, task, REC_SKIP_MISSED, f->due_ns, 1);
	return false;
}

/*
 * When a run starts: the end of the executor's last run if it came straight on to this one
 * from there (a batch of firings), which saves a clock read per run; else now. The firing
 * must have been due by then, or its lateness would be counted short. The executor's own
 * thread clears last_end_ns whenever it does anything else (sleeps, calls a release).
 */
static inline __attribute__((always_inline)) uint64_t started_at(struct executor *x,
								 const struct firing *f)
{
	uint64_t end = x->last_end_ns;
	return end && end >= f->due_ns ? end : monotonic_ns();
}

/* Lock held: a run starts; its start time, its lateness noted for the task and the executor. */
static inline __attribute__((always_inline)) uint64_t
note_start(struct executor *x, struct task_cold *cold, const struct firing *f)
{
	struct tw_engine *e = x->engine;
	uint64_t start = started_at(x, f);
	uint64_t now = e->cfg.manual_clock ? tw__engine_now_ns(e) : start;
	uint64_t late = now > f->due_ns ? now - f->due_ns : 0, late_us = late / 1000;
	keep_max(&cold->last_lateness_us, &cold->max_lateness_us,
		 late_us < UINT32_MAX ? (uint32_t)late_us : UINT32_MAX);
	note_lateness(x, late, late_us);
	return start;
}

/* A run's end paused its task (failures in a row) or moved it off the wheel thread. */
static __attribute__((noinline, cold)) void log_run_end(struct tw_engine *e, tw_id id,
							uint32_t paused_after, bool moved)
{
	if (paused_after)
		tw__engine_log(e, TW_LOG_WARNING, "task %llu paused after %u failures in a row",
			       (unsigned long long)id, paused_after);
	if (moved)
		tw__engine_log(e, TW_LOG_WARNING,
			       "task %llu moved to the executors: %d runs on the wheel thread over "
			       "its budget of %llu us",
			       (unsigned long long)id, TW_WHEEL_RUN_STRIKES,
			       (unsigned long long)(e->wheel_budget_ns / 1000));
}

static inline __attribute__((always_inline)) void run_firing(struct executor *x, struct firing *f)
{
	struct tw_engine *e = x->engine;
	struct tw_task *task = f->task;
	struct task_cold *cold = task_cold(task);
	bool again;
	do {
		tw__task_lock(task);
		bool starts = may_start(e, task, f);
		tw_fire fire = {
			.id = atomic_load_explicit(&task->id, memory_order_relaxed),
			.due_ns = f->due_ns,
			.run = starts ? bump(&cold->runs) : 0,
			.skipped = f->skipped,
		};
		/* read under the lock: the task's lateness is its last start's */
		uint64_t start = starts ? note_start(x, cold, f) : 0;
		task_put_traits(task, 0, TRAIT_QUEUED); /* taken: started, or dropped */
		tw__task_unlock(task);
		int rc = 0;
		uint64_t took = 0;
		if (starts) {
			atomic_store_explicit(&x->run_task, task, memory_order_relaxed);
			atomic_store_explicit(&x->run_start_ns, start, memory_order_release);
			rc = cold->callback(&fire, cold->arg);
			x->last_end_ns = monotonic_ns();
			took = x->last_end_ns - start;
			if (__builtin_expect(e->recording, 0)) /* recorder's hook: record.h */
				tw__record_run(e->recorder, &fire, start, x->last_end_ns, rc,
					       x->index);
			bump_by(&x->busy_ns, took);
			atomic_store_explicit(&x->run_start_ns, 0, memory_order_release);
			uint64_t average =
				atomic_load_explicit(&x->run_ns_average, memory_order_relaxed);
			atomic_store_explicit(&x->run_ns_average,
					      average - average / 16 + took / 16,
					      memory_order_relaxed);
		} else {
			bump(&x->dropped);
		}
		tw__task_lock(task);
		uint32_t paused_after = 0;
		bool moved = false;
		if (starts) {
			paused_after = account(x, task, cold, rc, took, &moved);
			task_put_traits(task, 0, TRAIT_STUCK);
		}
		struct after_unlock after = { 0 };
		again = run_ended(x, task, f, &after);
		tw__task_unlock(task);
		if (__builtin_expect(paused_after || moved, 0))
			log_run_end(e, fire.id, paused_after, moved);
		if (paused_after || moved || after.wake || after.release)
			x->last_end_ns =
				0; /* a log line, a system call, user code: not straight on */
		after_unlock_run(after);
	} while (again);
}

#endif
