/*
 * engine_heartbeats.c - `bench-engine heartbeats`: N periodic tasks (default
 * 100 000) with periods drawn uniformly from 100 .. 500 ms (whole ms) and a
 * random first delay in 1 .. period, on the real clock, for S seconds
 * (default 10) from the first add.
 *
 * The callback reads CLOCK_MONOTONIC first, then records into its task's own
 * preallocated slot (serial tasks: one run of a task at a time, and the
 * engine orders consecutive runs), so it neither allocates nor locks:
 *  - lateness = start - tw_fire.due_ns, as a signed 32-bit ns value; a
 *    negative one is a run that started before its due. A firing waits for
 *    the first tick of the engine's 1 ms grid at or after its due, so a due
 *    off the grid adds up to 1 ms of rounding; "past the grid tick" takes it
 *    out (assuming the grid is whole ms of CLOCK_MONOTONIC), and equals the
 *    lateness when the engine puts dues on the grid itself;
 *  - the interval between consecutive run starts, folded into the task's
 *    running mean and sum of squares (Welford); an interval that spans a
 *    skipped firing (tw_fire.skipped > 0) is left out and counted.
 * Afterwards: lateness percentiles over all runs, the interval standard
 * deviation pooled over tasks (sqrt(sum of squares / sum of (n - 1))), skips
 * from tw_stats, and CPU time per run from getrusage (all threads) over the
 * window after the adds.
 */
#include "bench_engine.h"
#include "wake_floor.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
	DEFAULT_HEARTBEATS = 100000,
	DEFAULT_HEARTBEAT_SECONDS = 10,
	PERIOD_MIN_MS = 100,
	PERIOD_SPAN_MS = 400,
};

struct beat {
	int32_t *late;   /* lateness of each recorded run, ns */
	uint32_t cap, n; /* room in late[], runs recorded */
	uint32_t period_ms;
	uint32_t intervals, excluded;
	int32_t grid_offset; /* first 1 ms grid point at or after a due, minus the due */
	uint64_t last_start;
	double mean, m2; /* of the intervals, ns */
};

static atomic_bool recording;
static atomic_uint_fast64_t overflow; /* runs beyond a task's room (a bug here) */

static int beat_callback(const tw_fire *fire, void *arg)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t start = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (!atomic_load_explicit(&recording, memory_order_relaxed))
		return 0;
	struct beat *b = arg;
	int64_t late = (int64_t)(start - fire->due_ns);
	if (late > INT32_MAX)
		late = INT32_MAX;
	if (!b->n)
		b->grid_offset =
			(int32_t)((fire->due_ns + 999999) / 1000000 * 1000000 - fire->due_ns);
	if (b->n < b->cap)
		b->late[b->n++] = (int32_t)late;
	else
		atomic_fetch_add_explicit(&overflow, 1, memory_order_relaxed);
	if (b->last_start && !fire->skipped) {
		double x = (double)(start - b->last_start);
		b->intervals++;
		double d = x - b->mean;
		b->mean += d / b->intervals;
		b->m2 += d * (x - b->mean);
	} else if (b->last_start) {
		b->excluded++;
	}
	b->last_start = start;
	return 0;
}

static int compare_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

static int compare_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static double pct_ms(const int32_t *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1] / 1e6;
}

/*
 * Percentiles of |interval - period| over every interval of the tasks that
 * skipped nothing. The dues of such a task are exactly one period apart, so
 * interval - period = lateness of the run - lateness of the one before: the
 * recorded lateness gives each interval's deviation. Shows whether the
 * standard deviation comes from typical jitter or from a few long stalls.
 */
static void interval_spread(const struct beat *beats, size_t n, size_t total)
{
	uint32_t *dev = xmalloc((total ? total : 1) * sizeof *dev);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct beat *b = &beats[i];
		if (b->excluded)
			continue;
		for (uint32_t j = 1; j < b->n; j++) {
			int64_t d = (int64_t)b->late[j] - b->late[j - 1];
			dev[k++] = (uint32_t)(d < 0 ? -d : d);
		}
	}
	if (k) {
		qsort(dev, k, sizeof *dev, compare_u32);
		char value[128];
		snprintf(value, sizeof value, "p50 %.1f p99 %.1f p99.9 %.1f max %.1f us",
			 dev[(size_t)(0.5 * (double)(k - 1) + 0.5)] / 1e3,
			 dev[(size_t)(0.99 * (double)(k - 1) + 0.5)] / 1e3,
			 dev[(size_t)(0.999 * (double)(k - 1) + 0.5)] / 1e3, dev[k - 1] / 1e3);
		table_row("  |interval - period|", value, NULL, INFO);
	}
	free(dev);
}

/* The machine's own wake-up precision at these periods (wake_floor.h), so
 * that the interval figures can be read against it. */
static void floor_row(const struct wake_floor *f)
{
	char value[128];
	snprintf(value, sizeof value, "sd %.1f us; |dev| p50 %.1f p99 %.1f us; %.2f %% > 1 ms",
		 f->interval_sd_us, f->interval_off_p50_us, f->interval_off_p99_us,
		 f->intervals ? 100.0 * (double)f->intervals_over_1ms / (double)f->intervals : 0);
	table_row("  the machine's wake-up floor", value, NULL, INFO);
}

static void report(struct beat *beats, size_t n, const tw_engine_stats *s0,
		   const tw_engine_stats *s1, double wall_ns, double cpu_used,
		   const struct wake_floor *floor)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += beats[i].n;
	int32_t *all = xmalloc(total * sizeof *all), *past_grid = xmalloc(total * sizeof *all);
	size_t k = 0, early = 0, intervals = 0, excluded = 0;
	double m2 = 0, dof = 0, drift = 0;
	for (size_t i = 0; i < n; i++) {
		struct beat *b = &beats[i];
		for (uint32_t j = 0; j < b->n; j++) {
			past_grid[k] = b->late[j] - b->grid_offset;
			all[k++] = b->late[j];
			early += b->late[j] < 0;
		}
		intervals += b->intervals;
		excluded += b->excluded;
		if (b->intervals > 1) {
			m2 += b->m2;
			dof += b->intervals - 1;
		}
		if (b->intervals)
			drift += fabs(b->mean - b->period_ms * 1e6);
	}
	qsort(all, total, sizeof *all, compare_i32);
	qsort(past_grid, total, sizeof *past_grid, compare_i32);
	char value[128];
	snprintf(value, sizeof value, "%zu of %zu", early, total);
	table_row("runs started before their due", value, "0", early ? MISSED : MET);
	if (!total) {
		free(all);
		free(past_grid);
		return;
	}
	snprintf(value, sizeof value, "p50 %.3f p90 %.3f ms", pct_ms(all, total, 0.5),
		 pct_ms(all, total, 0.9));
	table_row("lateness (callback start - due_ns)", value, NULL, INFO);
	double p99 = pct_ms(all, total, 0.99);
	snprintf(value, sizeof value, "p99 %.3f p99.9 %.3f max %.3f ms", p99,
		 pct_ms(all, total, 0.999), all[total - 1] / 1e6);
	table_row("", value, "p99 <= 1.2 ms", verdict_le(p99, 1.2));
	snprintf(value, sizeof value, "p50 %.3f p99 %.3f max %.3f ms",
		 pct_ms(past_grid, total, 0.5), pct_ms(past_grid, total, 0.99),
		 past_grid[total - 1] / 1e6);
	table_row("  of which past the 1 ms grid tick", value, NULL, INFO);
	double sd = dof > 0 ? sqrt(m2 / dof) : 0;
	snprintf(value, sizeof value, "%.1f us (%zu intervals)", sd / 1e3, intervals);
	table_row("interval std. deviation, pooled", value, "<= 50 us", verdict_le(sd / 1e3, 50));
	interval_spread(beats, n, total);
	if (floor)
		floor_row(floor);
	snprintf(value, sizeof value, "%.2f us", n ? drift / (double)n / 1e3 : 0.0);
	table_row("  mean |mean interval - period| per task", value, NULL, INFO);
	snprintf(value, sizeof value, "overlap %llu overload %llu missed %llu",
		 (unsigned long long)(s1->skipped_overlap - s0->skipped_overlap),
		 (unsigned long long)(s1->skipped_overload - s0->skipped_overload),
		 (unsigned long long)(s1->skipped_missed - s0->skipped_missed));
	table_row("skips (tw_stats)", value, NULL, INFO);
	uint64_t runs = s1->runs - s0->runs;
	snprintf(value, sizeof value, "%.0f ns (%.1f %% of one core)",
		 runs ? cpu_used / (double)runs : 0.0, cpu_used / wall_ns * 100);
	table_row("CPU time per run (getrusage)", value, NULL, INFO);
	table_note("runs in the window: %llu (tw_stats), %zu recorded; intervals left out "
		   "after a skip: %zu; engine's own lateness max %.3f ms",
		   (unsigned long long)runs, total, excluded, s1->lateness_max_ns / 1e6);
	free(all);
	free(past_grid);
}

void run_heartbeats(const struct options *opt)
{
	size_t n = opt->tasks ? opt->tasks : DEFAULT_HEARTBEATS;
	double seconds = opt->seconds ? opt->seconds : DEFAULT_HEARTBEAT_SECONDS;
	uint64_t rng = opt->seed;
	char title[160];
	snprintf(title, sizeof title,
		 "heartbeats: %zu periodic tasks at 100-500 ms, real clock, %.0f s, %s", n, seconds,
		 executors_label(opt->executors));
	table_header(title);

	struct beat *beats = xcalloc(n, sizeof *beats);
	size_t room = 0;
	for (size_t i = 0; i < n; i++) {
		beats[i].period_ms = PERIOD_MIN_MS + rng_below(&rng, PERIOD_SPAN_MS + 1);
		beats[i].cap = (uint32_t)(seconds * 1000 / beats[i].period_ms) + 2;
		room += beats[i].cap;
	}
	int32_t *late = xmalloc(room * sizeof *late);
	memset(late, 0, room * sizeof *late); /* no page faults in the callbacks */
	for (size_t i = 0, at = 0; i < n; at += beats[i].cap, i++)
		beats[i].late = late + at;

	/* Before the engine exists: a bare thread, alone (see wake_floor.h). */
	struct wake_floor floor;
	bool floor_measured = wake_floor_measure(fmin(seconds, 5), PERIOD_MIN_MS,
						 PERIOD_MIN_MS + PERIOD_SPAN_MS, &floor) == 0;
	tw_engine *e = engine_new(opt->executors, false, 0);
	atomic_store(&overflow, 0);
	atomic_store(&recording, true);
	uint64_t t0 = now_ns();
	for (size_t i = 0; i < n; i++) {
		tw_task_spec spec = { .delay_ms = 1 + rng_below(&rng, beats[i].period_ms),
				      .period_ms = beats[i].period_ms,
				      .callback = beat_callback,
				      .arg = &beats[i] };
		tw_id id;
		check(tw_add(e, &spec, &id), "tw_add");
	}
	uint64_t added = now_ns(), c0 = cpu_ns();
	tw_engine_stats s0, s1;
	check(tw_stats(e, &s0), "tw_stats");
	sleep_until_ns(t0 + (uint64_t)(seconds * 1e9));
	atomic_store(&recording, false);
	uint64_t t1 = now_ns(), c1 = cpu_ns();
	check(tw_stats(e, &s1), "tw_stats");
	engine_end(e); /* no run after this: the per-task records are final */

	table_note("adding took %.1f ms; the window is %.1f s from the first add",
		   (double)(added - t0) / 1e6, (double)(t1 - t0) / 1e9);
	report(beats, n, &s0, &s1, (double)(t1 - added), (double)(c1 - c0),
	       floor_measured ? &floor : NULL);
	if (floor_measured)
		table_note("wake-up floor: one thread on an absolute 1 ms timerfd grid, doing "
			   "nothing else, %.0f s before the engine was created",
			   (double)floor.wakes / 1e3);
	if (atomic_load(&overflow))
		table_note("WARNING: %llu runs found no room to be recorded",
			   (unsigned long long)atomic_load(&overflow));
	free(late);
	free(beats);
}
