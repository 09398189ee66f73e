/*
 * burst.c - `tw-perf burst`: N one-shot timers (default 1 000 000) due
 * uniformly within one second, on whole ms, the second starting 1 s (and
 * 2 us per timer, room to arm them all) after the loop was created; all
 * armed first, then the loop runs. How long after the latest due the last
 * run starts, and each run's lateness (start - due), on tickwheel and then on
 * each peer loop, with the same dues.
 *
 * The loop runs until every timer has run or a minute past the latest due:
 * a loop that falls behind is measured however far behind it falls. Each run
 * stores only its own start: a shared counter would make tickwheel's
 * executors fight over one cache line, a cost the peers' single thread never
 * pays; the waiting thread scans for the ones still to run instead.
 */
#include "loop_measure.h"
#include "loops.h"
#include "measure.h"
#include "plot.h"
#include "suite.h"
#include "suite_util.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

enum { CDF_POINTS = 200, SPREAD_MS = 1000 };

struct burst {
	uint64_t *due_ns;
	_Atomic uint64_t *start_ns; /* 0: not run yet */
	int64_t *late;
	size_t count, first_unrun;
};

struct outcome {
	const char *impl;
	double cdf_x[CDF_POINTS], cdf_y[CDF_POINTS];
	size_t cdf_n;
};

static void on_fire(void *ctx, size_t timer, uint64_t start_ns, uint64_t skipped)
{
	struct burst *b = ctx;
	(void)skipped;
	atomic_store_explicit(&b->start_ns[timer], start_ns, memory_order_relaxed);
}

static void burst_free(struct burst *b)
{
	if (!b)
		return;
	free(b->due_ns);
	free(b->start_ns);
	free(b->late);
	free(b);
}

static struct burst *burst_new(size_t n)
{
	struct burst *b = calloc(1, sizeof *b);
	if (!b || !(b->due_ns = malloc(n * sizeof *b->due_ns)) ||
	    !(b->start_ns = malloc(n * sizeof *b->start_ns)) ||
	    !(b->late = malloc(n * sizeof *b->late))) {
		burst_free(b);
		return NULL;
	}
	/* written now, so that no callback takes a page fault on its record */
	for (size_t i = 0; i < n; i++)
		atomic_init(&b->start_ns[i], 0);
	b->count = n;
	return b;
}

static void report_burst(struct report *r, struct outcome *o, struct burst *b, uint64_t skipped,
			 double cpu, double arm_s)
{
	size_t runs = 0;
	uint64_t latest_due = 0, last_start = 0;
	for (size_t i = 0; i < b->count; i++) {
		latest_due = b->due_ns[i] > latest_due ? b->due_ns[i] : latest_due;
		if (!b->start_ns[i])
			continue;
		last_start = b->start_ns[i] > last_start ? b->start_ns[i] : last_start;
		b->late[runs++] = (int64_t)(b->start_ns[i] - b->due_ns[i]);
	}
	lateness_sort(b->late, runs);
	size_t early = 0;
	while (early < runs && b->late[early] < 0)
		early++;
	double after = runs ? ((double)last_start - (double)latest_due) / 1e6 : 0;
	report_add(r, o->impl, "last_run_after_last_due", after, "ms", BETTER_LOWER);
	lateness_report(r, o->impl, b->late, runs);
	report_add(r, o->impl, "runs", (double)runs, "runs", BETTER_HIGHER);
	report_add(r, o->impl, "skipped", (double)skipped, "firings", BETTER_LOWER);
	report_add(r, o->impl, "runs_before_due", (double)early, "runs", BETTER_LOWER);
	report_add(r, o->impl, "cpu", cpu, "s", BETTER_LOWER);
	report_add(r, o->impl, "arm_time", arm_s * 1e3, "ms", BETTER_LOWER);
	o->cdf_n = lateness_cdf_of(b->late, runs, o->cdf_x, o->cdf_y, CDF_POINTS);
	report_series(r, o->impl, "lateness_cdf", o->cdf_x, o->cdf_y, o->cdf_n);
	if (runs < b->count)
		report_note(r, "%s: only %zu of %zu timers ran by a minute past the latest due",
			    o->impl, runs, b->count);
}

static bool all_ran(struct burst *b)
{
	while (b->first_unrun < b->count &&
	       atomic_load_explicit(&b->start_ns[b->first_unrun], memory_order_relaxed))
		b->first_unrun++;
	return b->first_unrun == b->count;
}

/* One loop from set-up to teardown; 0, or 2 after saying why. */
static int run_one(const struct loop_impl *impl, const struct suite_options *opt, size_t n,
		   struct report *r, struct outcome *o)
{
	struct burst *b = burst_new(n);
	if (!b) {
		fprintf(stderr, "tw-perf: burst: out of memory for %zu timers\n", n);
		return 2;
	}
	void *loop = impl->create(n, on_fire, b, opt);
	if (!loop) {
		burst_free(b);
		return 2;
	}
	uint64_t first = ceil_ms_ns(monotonic_now_ns()) + (1000 + n / 500) * NS_PER_MS;
	uint64_t rng = opt->seed;
	for (size_t i = 0; i < n; i++)
		b->due_ns[i] = first + su_below(&rng, SPREAD_MS) * NS_PER_MS;
	uint64_t t0 = monotonic_now_ns();
	for (size_t i = 0; i < n; i++)
		if (impl->arm(loop, i, b->due_ns[i], 0)) {
			impl->destroy(loop);
			burst_free(b);
			return 2;
		}
	uint64_t armed = monotonic_now_ns();
	/* from the loop's start: a peer's set-up of its timers is not its run */
	double cpu0 = process_cpu_seconds();
	uint64_t give_up = first + (SPREAD_MS + 60000) * NS_PER_MS;
	for (uint64_t step = armed; !all_ran(b) && step < give_up;) {
		step = monotonic_now_ns() + 50 * NS_PER_MS;
		impl->run_until(loop, step < give_up ? step : give_up);
	}
	double cpu = process_cpu_seconds() - cpu0;
	uint64_t skipped = impl->skipped ? impl->skipped(loop) : 0;
	impl->destroy(loop); /* no run after this: the records are final */
	o->impl = impl->name;
	if (armed > first)
		report_note(r, "%s: arming ended %.1f ms after the first due", impl->name,
			    (double)(armed - first) / 1e6);
	report_burst(r, o, b, skipped, cpu, (double)(armed - t0) / 1e9);
	burst_free(b);
	return 0;
}

int scenario_burst(const struct suite_options *opt, struct report *r)
{
	size_t n = opt->tasks ? opt->tasks : opt->quick ? 100000 : 1000000;
	report_param(r, "tasks", (double)n);
	report_param(r, "spread_ms", SPREAD_MS);
	report_param(r, "seed", (double)opt->seed);
	report_param(r, "executors", opt->executors);
	const struct loop_impl *impls[4];
	size_t count = loops_wanted(opt, impls);
	struct outcome *o = calloc(count, sizeof *o);
	if (!o) {
		fprintf(stderr, "tw-perf: burst: out of memory\n");
		return 2;
	}
	for (size_t k = 0; k < count; k++) {
		int rc = run_one(impls[k], opt, n, r, &o[k]);
		if (rc) {
			free(o);
			return rc;
		}
	}
	report_target(r, "last_run_after_last_due", "<=", 2);
	report_target(r, "runs", ">=", (double)n);
	for (size_t k = 1; k < count; k++)
		report_note(r, "%s: %s", impls[k]->name, impls[k]->differs);
	report_note(r,
		    "dues on whole ms within %d ms, from 1 s + 2 us per timer after the loop was "
		    "created; tickwheel skips a firing it cannot run rather than queue it, so "
		    "such a timer never runs; CPU from getrusage, all threads, from the loop's "
		    "start until every timer ran",
		    SPREAD_MS);
	if (opt->plot_dir) {
		struct plot_series s[4];
		for (size_t k = 0; k < count; k++) {
			s[k] = cdf_plot_series(o[k].impl, o[k].cdf_x, o[k].cdf_y, o[k].cdf_n);
		}
		struct plot p = { .title = "burst: lateness of each one-shot (start - due)",
				  .xlabel = "lateness (us)",
				  .ylabel = "fraction of runs at or below",
				  .logx = true,
				  .style = PLOT_STEPS };
		plot_png(suite_plot_path(opt, "burst-lateness-cdf.png"), &p, s, count);
	}
	free(o);
	return 0;
}
