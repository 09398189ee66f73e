/*
 * dispatch.c - `tw-perf dispatch`: how many runs of an empty callback the
 * engine dispatches per second, five ways; runs and skips come from
 * tw_stats(), CPU from getrusage (all threads).
 *
 *  ordered: manual clock, N periodic tasks at 1 ms (default 100 000, each
 *     executor's queue large enough for one tick): rounds of tw_advance(1)
 *     then tw_quiesce(), so each round dispatches and runs N firings; runs /
 *     wall time over S seconds of rounds. The tasks fire in the order they
 *     were added, which is their order in memory: a best case;
 *  shuffled: the same with the tasks filed in random order, so consecutive
 *     firings touch tasks far apart in memory (cache and TLB misses), as the
 *     firings of real timers do;
 *  touching: shuffled, with a callback that touches its own 64-byte state
 *     (arg), as most callbacks do first;
 *  oneshots: manual clock, N one-shots all due in the same tick: per round
 *     add N (untimed, then tw_advance(0) so the wheel has filed them), then
 *     time tw_advance(1) + tw_quiesce(). On the real clock one-shots cannot
 *     be made due in one tick through the public API (due = now + delay at
 *     each add, and adding N takes many ticks), hence the manual clock;
 *  real_clock: 4000 periodic tasks at 1 ms on the real clock, twice the
 *     target's firings due per second: runs per second actually delivered
 *     over S seconds after 0.5 s of warm-up; what could not run shows as skips.
 *
 *   defaults: --tasks 100000, --seconds 3 per case, executors one per online
 *   CPU (--executors N), --seed; --quick: 10 000 tasks, 1 s per case
 */
#include "suite.h"
#include "suite_util.h"

#include "measure.h"
#include "tickwheel.h"

#include <stdio.h>
#include <stdlib.h>

#define MS UINT64_C(1000000)

enum {
	REAL_TASKS = 4000,
	ONESHOT_ROUNDS = 5,
	WARMUP_ROUNDS = 3,
	TARGET_RUNS_PER_S = 2000000,
	MIN_QUEUE = 4096,
};

struct user_state { /* a line of the callback's own */
	uint64_t runs;
	char rest[56];
};

struct dispatch {
	const struct suite_options *opt;
	struct report *r;
	size_t n;
	double seconds;
	size_t failed; /* engine calls that did not return TW_OK */
};

static int empty_callback(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 0;
}

static int touching_callback(const tw_fire *fire, void *arg)
{
	(void)fire;
	((struct user_state *)arg)->runs++;
	return 0;
}

static uint64_t skips(const tw_engine_stats *s)
{
	return s->skipped_overlap + s->skipped_overload + s->skipped_missed;
}

static tw_engine *engine_new(struct dispatch *d, bool manual_clock, size_t queue)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = d->opt->executors;
	cfg.manual_clock = manual_clock;
	/* with executors = 0 there is one per CPU: each queue holds a whole tick */
	if (queue)
		cfg.queue_capacity = (unsigned)(queue > MIN_QUEUE ? queue : MIN_QUEUE);
	tw_engine *e;
	int rc = tw_engine_create(&cfg, &e);
	if (rc == TW_OK)
		return e;
	fprintf(stderr, "tw-perf dispatch: tw_engine_create: %s\n", tw_strerror(rc));
	return NULL;
}

static void engine_end(struct dispatch *d, tw_engine *e)
{
	d->failed += tw_engine_stop(e, 5000) != TW_OK;
	tw_engine_destroy(e);
}

static void stats(struct dispatch *d, tw_engine *e, tw_engine_stats *s)
{
	d->failed += tw_stats(e, s) != TW_OK;
}

static void tick(struct dispatch *d, tw_engine *e)
{
	d->failed += tw_advance(e, 1) != TW_OK;
	d->failed += tw_quiesce(e) != TW_OK;
}

/* name_mruns_per_s (the target) and name_cpu_per_run. */
static void throughput(struct dispatch *d, const char *name, double runs, double wall_ns,
		       double cpu_ns, uint64_t skipped)
{
	char fig[64];
	snprintf(fig, sizeof fig, "%s_mruns_per_s", name);
	report_add(d->r, "tickwheel", fig, runs / wall_ns * 1e3, "M/s", BETTER_HIGHER);
	report_target(d->r, fig, ">=", TARGET_RUNS_PER_S / 1e6);
	snprintf(fig, sizeof fig, "%s_cpu_per_run", name);
	report_add(d->r, "tickwheel", fig, runs > 0 ? cpu_ns / runs : 0, "ns", BETTER_LOWER);
	snprintf(fig, sizeof fig, "%s_skipped", name);
	report_add(d->r, "tickwheel", fig, (double)skipped, "firings", BETTER_LOWER);
}

static bool add_tasks(tw_engine *e, size_t n, uint64_t delay_ms, uint64_t period_ms)
{
	tw_task_spec spec = { .delay_ms = delay_ms,
			      .period_ms = period_ms,
			      .callback = empty_callback };
	for (size_t i = 0; i < n; i++) {
		tw_id id;
		int rc = tw_add(e, &spec, &id);
		if (rc != TW_OK) {
			fprintf(stderr, "tw-perf dispatch: tw_add: %s\n", tw_strerror(rc));
			return false;
		}
	}
	return true;
}

/* Filed at 2 ms, then moved to 1 ms in random order: the wheel re-files them
 * in that order, so each firing touches a task far from the previous one. */
static bool add_shuffled(struct dispatch *d, tw_engine *e, struct user_state *state)
{
	tw_id *ids = malloc(d->n * sizeof *ids);
	uint64_t rng = d->opt->seed;
	uint32_t *order = ids ? bench_permutation(d->n, &rng) : NULL;
	tw_task_spec spec = { .delay_ms = 2,
			      .period_ms = 1,
			      .callback = state ? touching_callback : empty_callback };
	int rc = order ? TW_OK : -TW_ENOMEM;
	for (size_t i = 0; rc == TW_OK && i < d->n; i++) {
		spec.arg = state ? &state[i] : NULL;
		rc = tw_add(e, &spec, &ids[i]);
	}
	if (rc == TW_OK)
		rc = tw_advance(e, 0);
	for (size_t i = 0; rc == TW_OK && i < d->n; i++)
		rc = tw_set_delay(e, ids[order[i]], 1);
	if (rc != TW_OK)
		fprintf(stderr, "tw-perf dispatch: set-up: %s\n", tw_strerror(rc));
	free(order);
	free(ids);
	return rc == TW_OK;
}

static int periodic_manual(struct dispatch *d, const char *name, bool shuffled, bool touching)
{
	struct user_state *state = touching ? calloc(d->n, sizeof *state) : NULL;
	tw_engine *e = touching && !state ? NULL : engine_new(d, true, d->n + 1);
	if (!e) {
		free(state);
		return 2;
	}
	bool ok = shuffled ? add_shuffled(d, e, state) : add_tasks(e, d->n, 1, 1);
	if (!ok) {
		engine_end(d, e);
		free(state);
		return 2;
	}
	for (int i = 0; i < WARMUP_ROUNDS; i++)
		tick(d, e);
	tw_engine_stats s0, s1;
	stats(d, e, &s0);
	double c0 = process_cpu_seconds();
	uint64_t t0 = monotonic_now_ns(), t1, rounds = 0;
	do {
		tick(d, e);
		rounds++;
		t1 = monotonic_now_ns();
	} while ((double)(t1 - t0) < d->seconds * 1e9);
	double cpu = (process_cpu_seconds() - c0) * 1e9;
	stats(d, e, &s1);
	throughput(d, name, (double)(s1.runs - s0.runs), (double)(t1 - t0), cpu,
		   skips(&s1) - skips(&s0));
	report_note(d->r, "%s: %llu rounds of tw_advance(1) + tw_quiesce(), %.0f us each", name,
		    (unsigned long long)rounds, (double)(t1 - t0) / (double)rounds / 1e3);
	engine_end(d, e);
	free(state);
	return 0;
}

static int oneshots_manual(struct dispatch *d)
{
	tw_engine *e = engine_new(d, true, d->n + 1);
	if (!e)
		return 2;
	double runs = 0, wall = 0, cpu = 0;
	uint64_t skipped = 0;
	for (int k = 0; k < ONESHOT_ROUNDS; k++) {
		if (!add_tasks(e, d->n, 1, 0)) {
			engine_end(d, e);
			return 2;
		}
		d->failed += tw_advance(e, 0) != TW_OK; /* the wheel files the adds */
		tw_engine_stats s0, s1;
		stats(d, e, &s0);
		double c0 = process_cpu_seconds();
		uint64_t t0 = monotonic_now_ns();
		tick(d, e);
		uint64_t t1 = monotonic_now_ns();
		cpu += (process_cpu_seconds() - c0) * 1e9;
		stats(d, e, &s1);
		runs += (double)(s1.runs - s0.runs);
		wall += (double)(t1 - t0);
		skipped += skips(&s1) - skips(&s0);
	}
	throughput(d, "oneshots", runs, wall, cpu, skipped);
	report_note(d->r, "oneshots: %d rounds of tw_advance(1) + tw_quiesce(), %.1f ms each",
		    ONESHOT_ROUNDS, wall / ONESHOT_ROUNDS / 1e6);
	engine_end(d, e);
	return 0;
}

static int periodic_real(struct dispatch *d)
{
	tw_engine *e = engine_new(d, false, 0);
	if (!e)
		return 2;
	if (!add_tasks(e, REAL_TASKS, 1, 1)) {
		engine_end(d, e);
		return 2;
	}
	monotonic_sleep_until(monotonic_now_ns() + 500 * MS);
	tw_engine_stats s0, s1;
	stats(d, e, &s0);
	double c0 = process_cpu_seconds();
	uint64_t t0 = monotonic_now_ns();
	monotonic_sleep_until(t0 + (uint64_t)(d->seconds * 1e9));
	uint64_t t1 = monotonic_now_ns();
	double cpu = (process_cpu_seconds() - c0) * 1e9;
	stats(d, e, &s1);
	double wall_s = (double)(t1 - t0) / 1e9;
	throughput(d, "real_clock", (double)(s1.runs - s0.runs), (double)(t1 - t0), cpu,
		   skips(&s1) - skips(&s0));
	const char *tw = "tickwheel";
	report_add(d->r, tw, "real_clock_skipped_overlap_per_s",
		   (double)(s1.skipped_overlap - s0.skipped_overlap) / wall_s, "1/s", BETTER_LOWER);
	report_add(d->r, tw, "real_clock_skipped_overload_per_s",
		   (double)(s1.skipped_overload - s0.skipped_overload) / wall_s, "1/s",
		   BETTER_LOWER);
	report_add(d->r, tw, "real_clock_skipped_missed_per_s",
		   (double)(s1.skipped_missed - s0.skipped_missed) / wall_s, "1/s", BETTER_LOWER);
	report_add(d->r, tw, "real_clock_wakeups_per_s",
		   (double)(s1.wheel_wakeups - s0.wheel_wakeups) / wall_s, "1/s", BETTER_NEITHER);
	report_add(d->r, tw, "real_clock_cpu_percent", cpu / (double)(t1 - t0) * 100, "%",
		   BETTER_NEITHER);
	report_note(d->r,
		    "real_clock: %d tasks at 1 ms, %.1f M firings due per second, after "
		    "0.5 s of warm-up",
		    REAL_TASKS, REAL_TASKS * 1e3 / 1e6);
	engine_end(d, e);
	return 0;
}

int scenario_dispatch(const struct suite_options *opt, struct report *r)
{
	struct dispatch d = { .opt = opt,
			      .r = r,
			      .n = opt->tasks ? opt->tasks :
				   opt->quick ? 10000 :
						100000,
			      .seconds = opt->seconds > 0 ? opt->seconds :
					 opt->quick       ? 1 :
							    3 };
	report_param(r, "tasks", (double)d.n);
	report_param(r, "real_clock_tasks", REAL_TASKS);
	report_param(r, "seconds", d.seconds);
	report_param(r, "executors", opt->executors);
	report_param(r, "seed", (double)opt->seed);
	int rc = periodic_manual(&d, "ordered", false, false);
	if (!rc)
		rc = periodic_manual(&d, "shuffled", true, false);
	if (!rc)
		rc = periodic_manual(&d, "touching", true, true);
	if (!rc)
		rc = oneshots_manual(&d);
	if (!rc)
		rc = periodic_real(&d);
	if (rc)
		return rc;
	report_note(r,
		    "ordered: %zu x 1 ms periodic, manual clock, fired in the order added; "
		    "shuffled: the same filed in random order; touching: shuffled, the "
		    "callback touches its own 64-byte state; oneshots: %zu one-shots due in "
		    "one tick",
		    d.n, d.n);
	report_note(r, "runs from tw_stats over wall time; CPU from getrusage, all threads");
	if (d.failed)
		report_note(r, "WARNING: %zu engine calls did not return TW_OK", d.failed);
	return 0;
}
