/*
 * prewake.c - after a long sleep the wheel thread tells the executor that will likely get the
 * next tick's firing to wake for it (executor.wake_at_ns), and that executor wakes on its own
 * timer and polls its ring. What must hold: an executor told of a tick that brings it nothing
 * goes back to sleep and stays asleep; the wheel thread tells the tick of an executor task's
 * next due, takes it back when the task is cancelled, moves it with the due, and tells nothing
 * for a task that runs on the wheel thread; no run starts before its due, and a cancelled
 * task does not run. White-box: it reads the engine's records (core/), so it is built with
 * their include directories. A plain program, so that the TSan build runs it.
 */
#include "threads.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int failures;

static void expect(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "FAIL: %s\n", what);
		failures++;
	}
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts))
		;
}

/* Polls *word every millisecond until it equals want, for limit_ms at most. */
static bool wait_u64(_Atomic uint64_t *word, uint64_t want, unsigned limit_ms)
{
	for (unsigned ms = 0; ms < limit_ms; ms++) {
		if (atomic_load(word) == want)
			return true;
		sleep_ms(1);
	}
	return atomic_load(word) == want;
}

static struct tw_engine *engine_with_one_executor(tw_engine **handle)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	cfg.spare_executors = 0;
	if (tw_engine_create(&cfg, handle)) {
		fprintf(stderr, "FAIL: tw_engine_create\n");
		exit(1);
	}
	return (struct tw_engine *)*handle;
}

static _Atomic uint64_t runs, early_runs, runs_with_due_before;
static _Atomic uint64_t min_due_ns; /* runs with a due before it count in runs_with_due_before */

static int beat(const tw_fire *fire, void *arg)
{
	(void)arg;
	if (monotonic_ns() < fire->due_ns)
		atomic_fetch_add(&early_runs, 1);
	if (fire->due_ns < atomic_load(&min_due_ns))
		atomic_fetch_add(&runs_with_due_before, 1);
	atomic_fetch_add(&runs, 1);
	return 0;
}

/* Told of a tick by hand (no task: the wheel thread tells nothing), the executor wakes for it,
 * gets nothing, and sleeps again without a limit: it counts one wake-up, and stays asleep. */
static void idle_executor_sleeps_again(void)
{
	tw_engine *handle;
	struct tw_engine *e = engine_with_one_executor(&handle);
	struct executor *x = &e->executors[0];
	atomic_store(&e->wheel_cpu, -1); /* no CPU: the executor spins wherever it is */
	sleep_ms(20);                    /* it sleeps: nothing was ever queued */
	uint64_t at = monotonic_ns() + 30 * NS_PER_MS;
	atomic_store(&x->wake_at_ns, at);
	tw__executor_wake(x);
	expect(wait_u64(&x->prewakes, 1, 5000), "the executor woke for the tick it was told");
	/* It spins until the tick and a little past it: however long it is held up on its
	 * way back, it must get there, and then stay. */
	for (int waited = 0; !atomic_load(&x->sleeping) && waited < 5000; waited++)
		sleep_ms(1);
	bool asleep = true;
	for (int i = 0; i < 50; i++) {
		asleep = asleep && atomic_load(&x->sleeping);
		sleep_ms(2);
	}
	expect(asleep, "an executor that got nothing sleeps again");
	expect(atomic_load(&x->prewakes) == 1, "and wakes for that tick once");
	tw_engine_destroy(handle);
}

static uint64_t next_due(tw_engine *handle, tw_id id)
{
	tw_task_info info;
	return tw_get(handle, id, &info) == TW_OK ? info.next_due_ns : 0;
}

/* A 100 ms heartbeat on the executors: after each run the executor is told of its next due;
 * a cancel takes that back and the task runs no more. */
static void told_the_next_due_then_not_once_cancelled(void)
{
	tw_engine *handle;
	struct tw_engine *e = engine_with_one_executor(&handle);
	struct executor *x = &e->executors[0];
	atomic_store(&runs, 0);
	tw_task_spec spec = { .delay_ms = 100, .period_ms = 100, .callback = beat };
	tw_id id;
	expect(tw_add(handle, &spec, &id) == TW_OK, "tw_add");
	expect(wait_u64(&runs, 2, 5000), "two runs");
	uint64_t due = next_due(handle, id);
	expect(due && wait_u64(&x->wake_at_ns, due, 1000), "the executor is told the next due");
	expect(tw_cancel(handle, id) == TW_OK, "tw_cancel");
	uint64_t after = atomic_load(&runs);
	expect(wait_u64(&x->wake_at_ns, 0, 1000), "a cancel takes the tick back");
	sleep_ms(250);
	expect(atomic_load(&runs) == after, "no run after the cancel returned");
	expect(atomic_load(&early_runs) == 0, "no run before its due");
	tw_engine_destroy(handle);
}

/* tw_set_delay moves what the executor was told with the due, and the run comes at the new
 * due, not at the one told before. */
static void told_tick_follows_set_delay(void)
{
	tw_engine *handle;
	struct tw_engine *e = engine_with_one_executor(&handle);
	struct executor *x = &e->executors[0];
	atomic_store(&runs, 0);
	/* long enough that the one-shot has not run when tw_set_delay comes, even after this
	 * thread was held up a while */
	tw_task_spec spec = { .delay_ms = 500, .callback = beat };
	tw_id id;
	expect(tw_add(handle, &spec, &id) == TW_OK, "tw_add");
	uint64_t due = next_due(handle, id);
	expect(due && wait_u64(&x->wake_at_ns, due, 1000), "the executor is told the due");
	expect(tw_set_delay(handle, id, 1000) == TW_OK, "tw_set_delay");
	uint64_t moved = next_due(handle, id);
	atomic_store(&min_due_ns, moved);
	expect(moved > due && wait_u64(&x->wake_at_ns, moved, 1000),
	       "the executor is told the new due");
	expect(wait_u64(&runs, 1, 5000), "it runs once");
	expect(atomic_load(&runs_with_due_before) == 0, "not for the due it had before");
	expect(atomic_load(&early_runs) == 0, "nor before its due");
	atomic_store(&min_due_ns, 0);
	tw_engine_destroy(handle);
}

/* tw_cancel once the told executor has woken for the tick (it polls, or has backed off): no
 * run starts after the cancel returns, whichever side of the tick the cancel lands. */
static void cancel_while_the_executor_polls(void)
{
	tw_engine *handle;
	struct tw_engine *e = engine_with_one_executor(&handle);
	struct executor *x = &e->executors[0];
	atomic_store(&runs, 0);
	uint64_t started = 0;
	int before_the_run = 0;
	for (int round = 0; round < 5; round++) {
		uint64_t woke = atomic_load(&x->prewakes);
		tw_task_spec spec = { .delay_ms = 50, .callback = beat };
		tw_id id;
		expect(tw_add(handle, &spec, &id) == TW_OK, "tw_add");
		/* Polled without sleeping: the executor wakes a fraction of a millisecond before
		 * the tick. */
		uint64_t limit = monotonic_ns() + 5000 * NS_PER_MS;
		while (atomic_load(&x->prewakes) == woke && atomic_load(&runs) == started &&
		       monotonic_ns() < limit)
			;
		expect(atomic_load(&x->prewakes) > woke || atomic_load(&runs) > started,
		       "the executor wakes for the tick");
		int rc = tw_cancel(handle, id);
		expect(rc == TW_OK || rc == -TW_ESTATE, "tw_cancel: done, or the task had run");
		tw_task_info info;
		expect(tw_get(handle, id, &info) == TW_OK, "tw_get after the cancel");
		started += info.runs;
		before_the_run += info.runs == 0;
		sleep_ms(100);
		expect(atomic_load(&runs) == started, "no run starts after tw_cancel returned");
	}
	expect(atomic_load(&early_runs) == 0, "no run before its due");
	printf("prewake: %d of 5 cancels came before the run\n", before_the_run);
	tw_engine_destroy(handle);
}

/* A task on the wheel thread needs no executor: none is told. */
static void nothing_told_for_a_wheel_thread_task(void)
{
	tw_engine *handle;
	struct tw_engine *e = engine_with_one_executor(&handle);
	struct executor *x = &e->executors[0];
	atomic_store(&runs, 0);
	tw_task_spec spec = {
		.delay_ms = 50, .period_ms = 50, .callback = beat, .flags = TW_ON_WHEEL_THREAD
	};
	tw_id id;
	expect(tw_add(handle, &spec, &id) == TW_OK, "tw_add");
	expect(wait_u64(&runs, 4, 5000), "four runs");
	expect(atomic_load(&x->wake_at_ns) == 0 && atomic_load(&x->prewakes) == 0,
	       "no executor is told of a wheel-thread task's tick");
	tw_engine_destroy(handle);
}

int main(void)
{
	idle_executor_sleeps_again();
	told_the_next_due_then_not_once_cancelled();
	told_tick_follows_set_delay();
	cancel_while_the_executor_polls();
	nothing_told_for_a_wheel_thread_task();
	if (failures)
		fprintf(stderr, "prewake: %d failed\n", failures);
	else
		printf("prewake: all passed\n");
	return failures ? 1 : 0;
}
