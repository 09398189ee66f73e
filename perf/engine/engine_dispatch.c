/*
 * engine_dispatch.c - `bench-engine dispatch` (how many runs of an empty
 * callback the engine dispatches per second) and `bench-engine idle` (what
 * one 200 ms task costs when nothing else happens).
 *
 * dispatch, four ways; runs and skips come from tw_stats():
 *  A. manual clock, N periodic tasks at 1 ms (default 100 000, each executor's
 *     queue large enough for one tick): rounds of tw_advance(1) then
 *     tw_quiesce(), so each round dispatches and runs N firings;
 *     runs / wall time over S seconds of rounds. The tasks fire in the order
 *     they were added, which is their order in memory: a best case;
 *  B. the same with the tasks filed in random order, so that consecutive
 *     firings touch tasks far apart in memory (cache and TLB misses), as the
 *     firings of real timers do; B' the same with a callback that touches
 *     its own 64-byte state (arg), as most callbacks do first;
 *  C. manual clock, N one-shots all due in the same tick: per round add N
 *     (untimed, then tw_advance(0) so the wheel has filed them), then time
 *     tw_advance(1) + tw_quiesce(). On the real clock one-shots cannot be
 *     made due in one tick through the public API (due = now + delay at each
 *     add, and adding N takes many ticks), hence the manual clock;
 *  D. real clock, M periodic tasks at 1 ms (default 4000, that is 4 000 000
 *     firings due per second, more than the target): runs per second actually
 *     delivered over S seconds after 0.5 s of warm-up; whatever could not be
 *     run shows up as skips.
 */
#include "bench_engine.h"

#include <stdio.h>
#include <stdlib.h>

enum {
	DEFAULT_DISPATCH_TASKS = 100000,
	DEFAULT_REAL_TASKS = 4000,
	DEFAULT_DISPATCH_SECONDS = 3,
	ONESHOT_ROUNDS = 5,
	DEFAULT_IDLE_SECONDS = 10,
	TARGET_RUNS_PER_S = 2000000,
};

static uint64_t skips(const tw_engine_stats *s)
{
	return s->skipped_overlap + s->skipped_overload + s->skipped_missed;
}

static void get_stats(tw_engine *e, tw_engine_stats *s)
{
	check(tw_stats(e, s), "tw_stats");
}

static void add_tasks(tw_engine *e, size_t n, uint64_t delay_ms, uint64_t period_ms)
{
	tw_task_spec spec = { .delay_ms = delay_ms,
			      .period_ms = period_ms,
			      .callback = empty_callback };
	for (size_t i = 0; i < n; i++) {
		tw_id id;
		check(tw_add(e, &spec, &id), "tw_add");
	}
}

static void throughput_row(const char *figure, double runs, double wall_ns, double cpu_ns_used,
			   uint64_t skipped)
{
	char value[96];
	double per_s = runs / wall_ns * 1e9;
	snprintf(value, sizeof value, "%.2f M runs/s (%.0f ns CPU/run)", per_s / 1e6,
		 runs > 0 ? cpu_ns_used / runs : 0.0);
	table_row(figure, value, ">= 2.00 M runs/s", verdict_ge(per_s, TARGET_RUNS_PER_S));
	if (skipped)
		table_note("  %llu firings skipped in the window", (unsigned long long)skipped);
}

static unsigned queue_for(size_t tasks, unsigned executors)
{
	size_t per = tasks / (executors ? executors : 1) + 1;
	return per > 4096 ? (unsigned)per : 4096;
}

static void periodic_manual(const struct options *opt, size_t n, double seconds, bool shuffled,
			    bool touching)
{
	struct user_state *state = touching ? xcalloc(n, sizeof *state) : NULL;
	/* With executors = 0 the engine uses one per CPU; size each queue for N. */
	tw_engine *e = engine_new(opt->executors, true, queue_for(n, 1));
	if (shuffled) {
		/* Filed at 2 ms, then moved to 1 ms in random order: the wheel
		 * re-files them in that order, so each firing touches a task far
		 * from the previous one in memory, as with real traffic. */
		tw_id *ids = xmalloc(n * sizeof *ids);
		tw_task_spec spec = { .delay_ms = 2,
				      .period_ms = 1,
				      .callback = touching ? touching_callback : empty_callback };
		for (size_t i = 0; i < n; i++) {
			spec.arg = touching ? &state[i] : NULL;
			check(tw_add(e, &spec, &ids[i]), "tw_add");
		}
		check(tw_advance(e, 0), "tw_advance");
		uint64_t rng = opt->seed;
		uint32_t *order = random_permutation(n, &rng);
		for (size_t i = 0; i < n; i++)
			check(tw_set_delay(e, ids[order[i]], 1), "tw_set_delay");
		free(order);
		free(ids);
	} else {
		add_tasks(e, n, 1, 1);
	}
	for (int i = 0; i < 3; i++) { /* warm-up */
		check(tw_advance(e, 1), "tw_advance");
		check(tw_quiesce(e), "tw_quiesce");
	}
	tw_engine_stats s0, s1;
	get_stats(e, &s0);
	uint64_t c0 = cpu_ns(), t0 = now_ns(), t1, rounds = 0;
	do {
		check(tw_advance(e, 1), "tw_advance");
		check(tw_quiesce(e), "tw_quiesce");
		rounds++;
		t1 = now_ns();
	} while ((double)(t1 - t0) < seconds * 1e9);
	uint64_t c1 = cpu_ns();
	get_stats(e, &s1);
	char figure[96];
	if (touching)
		snprintf(figure, sizeof figure, "B'. %zu as B, callback touches arg", n);
	else
		snprintf(figure, sizeof figure, "%s %zu x 1 ms periodic, manual%s",
			 shuffled ? "B." : "A.", n, shuffled ? ", shuffled" : "");
	throughput_row(figure, (double)(s1.runs - s0.runs), (double)(t1 - t0), (double)(c1 - c0),
		       skips(&s1) - skips(&s0));
	table_note("  %llu rounds of tw_advance(1) + tw_quiesce(), %.0f us each",
		   (unsigned long long)rounds, (double)(t1 - t0) / (double)rounds / 1e3);
	engine_end(e);
	free(state);
}

static void oneshots_manual(const struct options *opt, size_t n)
{
	tw_engine *e = engine_new(opt->executors, true, queue_for(n, 1));
	double runs = 0, wall = 0, cpu = 0;
	uint64_t skipped = 0;
	for (int r = 0; r < ONESHOT_ROUNDS; r++) {
		add_tasks(e, n, 1, 0);
		check(tw_advance(e, 0), "tw_advance"); /* the wheel files the adds */
		tw_engine_stats s0, s1;
		get_stats(e, &s0);
		uint64_t c0 = cpu_ns(), t0 = now_ns();
		check(tw_advance(e, 1), "tw_advance");
		check(tw_quiesce(e), "tw_quiesce");
		uint64_t t1 = now_ns(), c1 = cpu_ns();
		get_stats(e, &s1);
		runs += (double)(s1.runs - s0.runs);
		wall += (double)(t1 - t0);
		cpu += (double)(c1 - c0);
		skipped += skips(&s1) - skips(&s0);
	}
	char figure[64];
	snprintf(figure, sizeof figure, "C. %zu one-shots in one tick, manual", n);
	throughput_row(figure, runs, wall, cpu, skipped);
	table_note("  %d rounds of tw_advance(1) + tw_quiesce(), %.1f ms each", ONESHOT_ROUNDS,
		   wall / ONESHOT_ROUNDS / 1e6);
	engine_end(e);
}

static void periodic_real(const struct options *opt, size_t n, double seconds)
{
	tw_engine *e = engine_new(opt->executors, false, 0);
	add_tasks(e, n, 1, 1);
	sleep_ms(500);
	tw_engine_stats s0, s1;
	get_stats(e, &s0);
	uint64_t c0 = cpu_ns(), t0 = now_ns();
	sleep_until_ns(t0 + (uint64_t)(seconds * 1e9));
	uint64_t t1 = now_ns(), c1 = cpu_ns();
	get_stats(e, &s1);
	char figure[64];
	snprintf(figure, sizeof figure, "D. %zu x 1 ms periodic, real clock", n);
	throughput_row(figure, (double)(s1.runs - s0.runs), (double)(t1 - t0), (double)(c1 - c0),
		       0);
	double wall_s = (double)(t1 - t0) / 1e9;
	table_note("  due %.2f M/s; skipped/s: overlap %.0f, overload %.0f, missed %.0f; "
		   "wheel wake-ups/s %.0f; CPU %.0f %% of one core",
		   (double)n * 1000 / 1e6,
		   (double)(s1.skipped_overlap - s0.skipped_overlap) / wall_s,
		   (double)(s1.skipped_overload - s0.skipped_overload) / wall_s,
		   (double)(s1.skipped_missed - s0.skipped_missed) / wall_s,
		   (double)(s1.wheel_wakeups - s0.wheel_wakeups) / wall_s,
		   (double)(c1 - c0) / (double)(t1 - t0) * 100);
	engine_end(e);
}

void run_dispatch(const struct options *opt)
{
	size_t n = opt->tasks ? opt->tasks : DEFAULT_DISPATCH_TASKS;
	size_t m = opt->real_tasks ? opt->real_tasks : DEFAULT_REAL_TASKS;
	double seconds = opt->seconds ? opt->seconds : DEFAULT_DISPATCH_SECONDS;
	char title[160];
	snprintf(title, sizeof title, "dispatch: runs of an empty callback per second, %s",
		 executors_label(opt->executors));
	table_header(title);
	table_note("measured: runs from tw_stats / wall time; CPU from getrusage (all threads)");
	periodic_manual(opt, n, seconds, false, false);
	periodic_manual(opt, n, seconds, true, false);
	periodic_manual(opt, n, seconds, true, true);
	oneshots_manual(opt, n);
	periodic_real(opt, m, seconds);
}

void run_idle(const struct options *opt)
{
	double seconds = opt->seconds ? opt->seconds : DEFAULT_IDLE_SECONDS;
	char title[128];
	snprintf(title, sizeof title, "idle: one 200 ms periodic task, real clock, %.0f s, %s",
		 seconds, executors_label(opt->executors));
	table_header(title);
	tw_engine *e = engine_new(opt->executors, false, 0);
	add_tasks(e, 1, 200, 200);
	sleep_ms(1000);
	tw_engine_stats s0, s1;
	get_stats(e, &s0);
	uint64_t c0 = cpu_ns(), t0 = now_ns();
	sleep_until_ns(t0 + (uint64_t)(seconds * 1e9));
	uint64_t t1 = now_ns(), c1 = cpu_ns();
	get_stats(e, &s1);
	double wall_s = (double)(t1 - t0) / 1e9;
	double wakeups = (double)(s1.wheel_wakeups - s0.wheel_wakeups) / wall_s;
	double cpu_pct = (double)(c1 - c0) / (double)(t1 - t0) * 100;
	char value[96];
	snprintf(value, sizeof value, "%.2f /s (runs %.2f /s)", wakeups,
		 (double)(s1.runs - s0.runs) / wall_s);
	table_row("wheel wake-ups (tw_stats)", value, "<= 6 /s", verdict_le(wakeups, 6));
	snprintf(value, sizeof value, "%.4f %% (%.0f us CPU/s)", cpu_pct,
		 (double)(c1 - c0) / wall_s / 1e3);
	table_row("CPU of the process (getrusage)", value, "< 0.1 %", cpu_pct < 0.1 ? MET : MISSED);
	engine_end(e);
}
