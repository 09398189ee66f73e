/*
 * queued_behind.c - `tw-perf queued-behind`: a one-shot whose callback
 * sleeps 1.5 s; once it runs, N serial tasks are added (default 100, first
 * delays drawn from 1-10 ms, period 10 ms), and 300 ms later: how many of
 * them ran, the engine's tasks_running and its skips by reason. Each added
 * task was due about 30 times by then: a task that did not run had its
 * first firing handed to the executor the sleeping callback holds, and every
 * due since was skipped as overlap behind it.
 *
 *   defaults: --tasks 100, executors one per online CPU (--executors N)
 */
#include "suite.h"
#include "suite_util.h"

#include "measure.h"
#include "tickwheel.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define MS UINT64_C(1000000)

enum { SLEEP_MS = 1500, WAIT_MS = 300, PERIOD_MS = 10, DELAY_LO_MS = 1, DELAY_HI_MS = 10 };

static int sleep_long(const tw_fire *fire, void *arg)
{
	(void)fire;
	atomic_store((_Atomic uint64_t *)arg, monotonic_now_ns());
	monotonic_sleep_until(monotonic_now_ns() + SLEEP_MS * MS);
	return 0;
}

static int count_run(const tw_fire *fire, void *arg)
{
	(void)fire;
	atomic_fetch_add_explicit((_Atomic uint64_t *)arg, 1, memory_order_relaxed);
	return 0;
}

static void report_outcome(struct report *r, const _Atomic uint64_t *runs, size_t n, uint64_t due,
			   const tw_engine_stats *s)
{
	const char *tw = "tickwheel";
	uint64_t ran = 0, total = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t k = atomic_load(&runs[i]);
		ran += k > 0;
		total += k;
	}
	report_add(r, tw, "tasks_ran", (double)ran, "tasks", BETTER_HIGHER);
	report_add(r, tw, "tasks_never_ran", (double)(n - ran), "tasks", BETTER_LOWER);
	report_add(r, tw, "runs", (double)total, "runs", BETTER_HIGHER);
	report_add(r, tw, "due_firings", (double)due, "firings", BETTER_NEITHER);
	report_add(r, tw, "tasks_running", (double)s->tasks_running, "tasks", BETTER_NEITHER);
	report_add(r, tw, "tasks_waiting", (double)s->tasks_waiting, "tasks", BETTER_NEITHER);
	report_add(r, tw, "skipped_overlap", (double)s->skipped_overlap, "firings", BETTER_LOWER);
	report_add(r, tw, "skipped_overload", (double)s->skipped_overload, "firings", BETTER_LOWER);
	report_add(r, tw, "skipped_missed", (double)s->skipped_missed, "firings", BETTER_LOWER);
	report_target(r, "tasks_ran", ">=", (double)n);
	report_note(r,
		    "a one-shot sleeps %d ms in its callback; once it runs, %zu serial tasks "
		    "(first delay %d-%d ms, period %d ms) are added; read %d ms later. "
		    "tasks_running counts the sleeper too; due_firings: what the added tasks' "
		    "delays and period imply by then",
		    SLEEP_MS, n, DELAY_LO_MS, DELAY_HI_MS, PERIOD_MS, WAIT_MS);
}

int scenario_queued_behind(const struct suite_options *opt, struct report *r)
{
	size_t n = opt->tasks ? opt->tasks : 100;
	report_param(r, "tasks", (double)n);
	report_param(r, "sleep_ms", SLEEP_MS);
	report_param(r, "wait_ms", WAIT_MS);
	report_param(r, "period_ms", PERIOD_MS);
	report_param(r, "executors", opt->executors);
	_Atomic uint64_t *runs = calloc(n, sizeof *runs); /* each added task's runs */
	_Atomic uint64_t slept = 0;                       /* when the sleeper began */
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = opt->executors;
	tw_engine *e = NULL;
	int rc = runs ? tw_engine_create(&cfg, &e) : -TW_ENOMEM;
	tw_task_spec sleeper = { .delay_ms = 1, .callback = sleep_long, .arg = &slept };
	tw_id id;
	if (!rc)
		rc = tw_add(e, &sleeper, &id);
	uint64_t give_up = monotonic_now_ns() + 1000 * MS;
	while (!rc && !atomic_load(&slept) && monotonic_now_ns() < give_up)
		monotonic_sleep_until(monotonic_now_ns() + MS);
	if (!rc && !atomic_load(&slept)) {
		fprintf(stderr, "tw-perf queued-behind: the sleeper did not start within 1 s\n");
		rc = -TW_ETIMEDOUT;
	}
	uint64_t rng = opt->seed, due = 0, added = monotonic_now_ns();
	for (size_t i = 0; !rc && i < n; i++) {
		uint64_t delay = DELAY_LO_MS + bench_rng_below(&rng, DELAY_HI_MS - DELAY_LO_MS + 1);
		tw_task_spec spec = { .delay_ms = delay,
				      .period_ms = PERIOD_MS,
				      .callback = count_run,
				      .arg = &runs[i] };
		rc = tw_add(e, &spec, &id);
		due += su_dues_in(delay, PERIOD_MS, 0, WAIT_MS);
	}
	if (!rc) {
		monotonic_sleep_until(added + WAIT_MS * MS);
		tw_engine_stats s;
		tw_stats(e, &s);
		report_outcome(r, runs, n, due, &s);
	} else if (rc != -TW_ETIMEDOUT) {
		fprintf(stderr, "tw-perf queued-behind: set-up: %s\n", tw_strerror(rc));
	}
	if (e) {
		tw_engine_stop(e, 2 * SLEEP_MS); /* waits for the sleeper */
		tw_engine_destroy(e);
	}
	free(runs);
	return rc ? 2 : 0;
}
