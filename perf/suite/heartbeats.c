/*
 * heartbeats.c - `tw-perf heartbeats`: N periodic timers, periods drawn in
 * whole ms from 100-500 ms, first dues spread over the first period, on
 * tickwheel and then on each peer loop, with the same draws.
 *
 * A run's lateness is its start minus its ideal due, first due + k x period,
 * where k counts the timer's runs and skips so far: a loop that re-arms from
 * "now" shows its drift as growing lateness instead of hiding it in the
 * intervals. Dues fall on whole ms of CLOCK_MONOTONIC, which every API here
 * can express, so no loop pays for rounding another's cannot avoid.
 *
 * Each timer records into its own slots (its runs never overlap), so the
 * callback neither locks nor allocates, and writes nothing shared: a shared
 * histogram would charge tickwheel's executors for cache lines bouncing
 * between them, which a peer's single thread never pays. The interval
 * histogram is built from the records afterwards.
 */
#include "loop_measure.h"
#include "loops.h"
#include "measure.h"
#include "plot.h"
#include "suite.h"
#include "suite_util.h"
#include "wake_floor.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	DEV_BIN_US = 10,
	DEV_BINS = 1000, /* interval - period from -5 ms to +5 ms, then the two beyond */
	CDF_POINTS = 200,
	INTERVAL_SD_TARGET_US = 50,
};

static const char FLOOR[] = "wake-up floor";

struct beat {
	uint64_t first_due_ns, period_ns;
	uint64_t k; /* runs and skips so far: the next run stands for due number k */
	uint64_t skipped;
	int64_t *late;       /* lateness of each run, ns */
	uint8_t *after_skip; /* the run followed skipped firings: no interval */
	size_t cap, n;
};

struct beats {
	struct beat *beat;
	struct intervals *iv; /* apart from beat[]: intervals_pool() wants an array */
	int64_t *late;        /* every beat's slots */
	uint8_t *after_skip;
	size_t count;
	atomic_bool recording;
	_Atomic uint64_t overflow;
};

struct params {
	const struct suite_options *opt;
	size_t tasks;
	double seconds;
	uint64_t lo_ms, hi_ms;
};

/* What the pictures and the comparison need once the loop is gone. */
struct outcome {
	const char *impl;
	double p99_us, cpu_per_run_us;
	double cdf_x[CDF_POINTS], cdf_y[CDF_POINTS];
	size_t cdf_n;
	double dev_y[DEV_BINS + 2]; /* [0]: below the range, [DEV_BINS + 1]: above */
};

static void on_fire(void *ctx, size_t timer, uint64_t start_ns, uint64_t skipped)
{
	struct beats *b = ctx;
	if (!atomic_load_explicit(&b->recording, memory_order_relaxed))
		return;
	struct beat *t = &b->beat[timer];
	struct intervals *iv = &b->iv[timer];
	t->k += skipped;
	t->skipped += skipped;
	int64_t late = (int64_t)(start_ns - (t->first_due_ns + t->k++ * t->period_ns));
	if (t->n < t->cap) {
		t->after_skip[t->n] = skipped > 0;
		t->late[t->n++] = late;
	} else {
		atomic_fetch_add_explicit(&b->overflow, 1, memory_order_relaxed);
	}
	intervals_note(iv, start_ns, skipped);
}

static void beats_free(struct beats *b)
{
	if (!b)
		return;
	free(b->beat);
	free(b->iv);
	free(b->late);
	free(b->after_skip);
	free(b);
}

/* Periods and first dues (offsets from the start, whole ms) drawn from the
 * seed, so that every loop gets the same; room for every run. */
static struct beats *beats_new(const struct params *p)
{
	struct beats *b = calloc(1, sizeof *b);
	if (!b || !(b->beat = calloc(p->tasks, sizeof *b->beat)) ||
	    !(b->iv = calloc(p->tasks, sizeof *b->iv))) {
		beats_free(b);
		return NULL;
	}
	b->count = p->tasks;
	uint64_t rng = p->opt->seed;
	size_t room = 0;
	for (size_t i = 0; i < b->count; i++) {
		struct beat *t = &b->beat[i];
		uint64_t period = p->lo_ms + su_below(&rng, p->hi_ms - p->lo_ms + 1);
		t->period_ns = b->iv[i].period_ns = period * NS_PER_MS;
		t->first_due_ns = su_below(&rng, period) * NS_PER_MS;
		t->cap = (size_t)(p->seconds * 1000 / (double)period) + 3;
		room += t->cap;
	}
	b->late = malloc(room * sizeof *b->late);
	b->after_skip = malloc(room);
	if (!b->late || !b->after_skip) {
		beats_free(b);
		return NULL;
	}
	/* written now, so that no callback takes a page fault on its first record */
	memset(b->late, 0, room * sizeof *b->late);
	memset(b->after_skip, 0, room);
	for (size_t i = 0, at = 0; i < b->count; at += b->beat[i].cap, i++) {
		b->beat[i].late = b->late + at;
		b->beat[i].after_skip = b->after_skip + at;
	}
	return b;
}

static void report_intervals(struct report *r, struct outcome *o, struct beats *b)
{
	struct interval_summary s = intervals_pool(b->iv, b->count);
	double worst = fmax(fabs(s.smallest_ns), fabs(s.largest_ns));
	report_add(r, o->impl, "interval_mean", s.mean_ns / 1e3, "us", BETTER_NEITHER);
	report_add(r, o->impl, "interval_sd", s.sd_ns / 1e3, "us", BETTER_LOWER);
	report_add(r, o->impl, "interval_worst", worst / 1e3, "us", BETTER_LOWER);
	/* consecutive dues of a timer are one period apart, so an interval's
	 * deviation from the period is the difference of the two lateness */
	double total = 0;
	for (size_t i = 0; i < b->count; i++) {
		const struct beat *t = &b->beat[i];
		for (size_t j = 1; j < t->n; j++) {
			if (t->after_skip[j])
				continue;
			double bin =
				floor((double)(t->late[j] - t->late[j - 1]) / 1e3 / DEV_BIN_US);
			bin += DEV_BINS / 2 + 1;
			o->dev_y[bin < 0 ? 0 : bin > DEV_BINS + 1 ? DEV_BINS + 1 : (size_t)bin]++;
			total++;
		}
	}
	double beyond = o->dev_y[0] + o->dev_y[DEV_BINS + 1];
	for (size_t i = 0; total > 0 && i < DEV_BINS + 2; i++)
		o->dev_y[i] /= total;
	if (beyond > 0)
		report_note(r, "%s: %.0f intervals more than 5 ms off their period", o->impl,
			    beyond);
}

/* Sorts the samples into scratch: the beats' slots, no longer needed. */
static void report_runs(struct report *r, struct outcome *o, struct beats *b, double cpu)
{
	size_t runs = 0, early = 0;
	uint64_t skipped = 0;
	for (size_t i = 0; i < b->count; i++) {
		memmove(b->late + runs, b->beat[i].late, b->beat[i].n * sizeof *b->late);
		runs += b->beat[i].n;
		skipped += b->beat[i].skipped;
	}
	lateness_sort(b->late, runs);
	while (early < runs && b->late[early] < 0)
		early++;
	lateness_report(r, o->impl, b->late, runs);
	o->p99_us = lateness_quantile_us(b->late, runs, 0.99);
	o->cdf_n = lateness_cdf_of(b->late, runs, o->cdf_x, o->cdf_y, CDF_POINTS);
	o->cpu_per_run_us = runs ? cpu * 1e6 / (double)runs : 0;
	report_series(r, o->impl, "lateness_cdf", o->cdf_x, o->cdf_y, o->cdf_n);
	report_add(r, o->impl, "runs", (double)runs, "runs", BETTER_NEITHER);
	report_add(r, o->impl, "runs_before_due", (double)early, "runs", BETTER_LOWER);
	report_add(r, o->impl, "skipped", (double)skipped, "firings", BETTER_LOWER);
	report_add(r, o->impl, "cpu_per_run", o->cpu_per_run_us, "us", BETTER_LOWER);
}

/* The drift of each timer's last run, read before report_runs reuses the slots. */
static void report_drift(struct report *r, const char *impl, struct beats *b)
{
	int64_t *last = malloc((b->count ? b->count : 1) * sizeof *last);
	size_t n = 0;
	for (size_t i = 0; last && i < b->count; i++)
		if (b->beat[i].n)
			last[n++] = b->beat[i].late[b->beat[i].n - 1];
	lateness_sort(last, n);
	report_add(r, impl, "drift_last_median", n ? (double)last[(n - 1) / 2] / 1e3 : 0, "us",
		   BETTER_LOWER);
	report_add(r, impl, "drift_last_max", n ? (double)last[n - 1] / 1e3 : 0, "us",
		   BETTER_LOWER);
	free(last);
}

/* One loop from set-up to teardown; 0, or 2 after saying why. */
static int run_one(const struct loop_impl *impl, const struct params *p, struct report *r,
		   struct outcome *o)
{
	struct beats *b = beats_new(p);
	if (!b) {
		fprintf(stderr, "tw-perf: heartbeats: out of memory for %zu tasks\n", p->tasks);
		return 2;
	}
	void *loop = impl->create(p->tasks, on_fire, b, p->opt);
	if (!loop) {
		beats_free(b);
		return 2;
	}
	/* room to arm every timer before the first due */
	uint64_t start = ceil_ms_ns(monotonic_now_ns()) + (50 + p->tasks / 200) * NS_PER_MS;
	atomic_store(&b->recording, true);
	for (size_t i = 0; i < p->tasks; i++) {
		struct beat *t = &b->beat[i];
		t->first_due_ns += start;
		if (impl->arm(loop, i, t->first_due_ns, t->period_ns / NS_PER_MS)) {
			impl->destroy(loop);
			beats_free(b);
			return 2;
		}
	}
	uint64_t armed = monotonic_now_ns(), w0 = impl->wakeups(loop);
	double cpu0 = process_cpu_seconds();
	impl->run_until(loop, start + (uint64_t)(p->seconds * 1e9));
	atomic_store(&b->recording, false);
	double cpu = process_cpu_seconds() - cpu0;
	double wall = (double)(monotonic_now_ns() - armed) / 1e9;
	uint64_t wakeups = impl->wakeups(loop) - w0;
	impl->destroy(loop); /* no run after this: the records are final */

	o->impl = impl->name;
	if (armed > start)
		report_note(r, "%s: arming ended %.1f ms after the first due", impl->name,
			    (double)(armed - start) / 1e6);
	report_drift(r, impl->name, b);
	report_intervals(r, o, b);
	report_runs(r, o, b, cpu);
	report_add(r, impl->name, "wakeups_per_second", wall > 0 ? (double)wakeups / wall : 0,
		   "1/s", BETTER_LOWER);
	if (atomic_load(&b->overflow))
		report_note(r, "%s: %llu runs beyond the room planned (a bug here)", impl->name,
			    (unsigned long long)atomic_load(&b->overflow));
	beats_free(b);
	return 0;
}

/* The interval histogram as series (bin centres in us, trimmed to the bins
 * some loop used, and one either side); then both pictures. */
static void series_and_pictures(const struct suite_options *opt, struct report *r,
				struct outcome *o, size_t n)
{
	double x[DEV_BINS];
	size_t lo = DEV_BINS - 1, hi = 0;
	for (size_t j = 0; j < DEV_BINS; j++) {
		x[j] = ((double)j - DEV_BINS / 2 + 0.5) * DEV_BIN_US;
		for (size_t k = 0; k < n; k++)
			if (o[k].dev_y[j + 1] > 0) {
				lo = j < lo ? j : lo;
				hi = j > hi ? j : hi;
			}
	}
	lo = lo > 0 ? lo - 1 : 0;
	hi = hi + 1 < DEV_BINS ? hi + 1 : DEV_BINS - 1;
	size_t count = lo <= hi ? hi - lo + 1 : 0;
	struct plot_series cdf[4], hist[4];
	for (size_t k = 0; k < n; k++) {
		hist[k] = (struct plot_series){ o[k].impl, x + lo, o[k].dev_y + 1 + lo, count };
		report_series(r, o[k].impl, "interval_deviation_histogram", hist[k].x, hist[k].y,
			      count);
		cdf[k] = cdf_plot_series(o[k].impl, o[k].cdf_x, o[k].cdf_y, o[k].cdf_n);
	}
	if (!opt->plot_dir)
		return;
	struct plot pc = { .title = "heartbeats: lateness of each run against its ideal due",
			   .xlabel = "lateness (us)",
			   .ylabel = "fraction of runs at or below",
			   .logx = true,
			   .style = PLOT_STEPS };
	struct plot ph = { .title = "heartbeats: interval between runs minus the period",
			   .xlabel = "interval - period (us, 10 us bins)",
			   .ylabel = "fraction of intervals",
			   .style = PLOT_STEPS };
	plot_png(suite_plot_path(opt, "heartbeats-lateness-cdf.png"), &pc, cdf, n);
	plot_png(suite_plot_path(opt, "heartbeats-interval-jitter.png"), &ph, hist, n);
}

/* Measured before the loops (at their periods), shown after them; see wake_floor.h. */
static bool measure_floor(const struct params *p, struct report *r, struct wake_floor *f)
{
	double seconds = fmax(fmin(p->seconds, 5), 2.0 * (double)p->hi_ms / 1e3);
	if (wake_floor_measure(seconds, p->lo_ms, p->hi_ms, f) == 0)
		return true;
	report_note(r, "wake-up floor: not measured (%s)", strerror(errno));
	return false;
}

static void report_floor(struct report *r, const struct wake_floor *f)
{
	wake_floor_report(r, FLOOR, f);
	if (f->interval_sd_us > INTERVAL_SD_TARGET_US)
		report_note(r,
			    "interval_sd: the target (%d us) is below this machine's wake-up "
			    "floor (%.0f us) in this run",
			    INTERVAL_SD_TARGET_US, f->interval_sd_us);
}

int scenario_heartbeats(const struct suite_options *opt, struct report *r)
{
	struct params p = { .opt = opt,
			    .tasks = opt->tasks ? opt->tasks :
				     opt->quick ? 2000 :
						  20000,
			    .seconds = opt->seconds > 0 ? opt->seconds :
				       opt->quick       ? 3 :
							  10,
			    .lo_ms = opt->period_lo_ms ? opt->period_lo_ms : 100,
			    .hi_ms = opt->period_hi_ms ? opt->period_hi_ms : 500 };
	report_param(r, "tasks", (double)p.tasks);
	report_param(r, "seconds", p.seconds);
	report_param(r, "period_lo_ms", (double)p.lo_ms);
	report_param(r, "period_hi_ms", (double)p.hi_ms);
	report_param(r, "seed", (double)opt->seed);
	report_param(r, "executors", opt->executors);

	const struct loop_impl *impls[4];
	size_t n = loops_wanted(opt, impls);
	struct outcome *o = calloc(n, sizeof *o);
	if (!o) {
		fprintf(stderr, "tw-perf: heartbeats: out of memory\n");
		return 2;
	}
	struct wake_floor floor;
	bool floor_measured = measure_floor(&p, r, &floor);
	for (size_t k = 0; k < n; k++) {
		int rc = run_one(impls[k], &p, r, &o[k]);
		if (rc) {
			free(o);
			return rc;
		}
	}
	if (floor_measured)
		report_floor(r, &floor);
	report_target(r, "lateness_p99", "<=", 1200);
	report_target(r, "interval_sd", "<=", INTERVAL_SD_TARGET_US);
	report_target(r, "runs_before_due", "<=", 0);
	for (size_t k = 1; k < n; k++)
		report_note(r, "%s: %s", impls[k]->name, impls[k]->differs);
	for (size_t k = 1; k < n; k++)
		if (!strcmp(o[k].impl, "libev"))
			report_note(r,
				    "against libev: lateness p99 %.0f us vs %.0f us (%s), CPU per "
				    "run %.2f us vs %.2f us (%s)",
				    o[0].p99_us, o[k].p99_us,
				    o[0].p99_us < o[k].p99_us ? "below: met" : "not below: missed",
				    o[0].cpu_per_run_us, o[k].cpu_per_run_us,
				    o[0].cpu_per_run_us <= o[k].cpu_per_run_us ? "no higher: met" :
										 "higher: missed");
	report_note(r, "lateness = start - (first due + k x period), k = runs + skips so far; "
		       "CPU from getrusage, all threads, over the timed window");
	series_and_pictures(opt, r, o, n);
	free(o);
	return 0;
}
