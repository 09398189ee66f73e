/*
 * burst.c - `tw-perf burst`: N one-shot timers (default 1 000 000) due
 * uniformly within one second, on whole ms, the second starting 1 s (and
 * 2 us per timer, room to arm them all) after the loop was created; all
 * armed first, then the loop runs. How long after the latest due the last
 * run starts, and each run's lateness (start - due), on tickwheel and then on
 * each peer loop, with the same dues.
 *
 * The loop runs until every timer has run or was skipped (a skipped one-shot
 * never runs), or a minute past the latest due: a loop that falls behind is
 * measured however far behind it falls. Each run stores only its own start: a
 * shared counter would make tickwheel's executors fight over one cache line,
 * a cost the peers' single thread never pays; the waiting thread scans for
 * the ones still to run instead. Added one-shots that never ran are counted
 * as such (oneshots_never_run), with the skips by reason.
 *
 * `tw-perf oneshots-busy` is the same with a timer due just before the
 * one-shots whose callback sleeps first: 10 000 one-shots due within 40 ms,
 * from 5 ms after a callback that sleeps 50 ms starts, on one executor
 * (unless --executors says otherwise), so that all come due while it is busy.
 */
#include "loop_measure.h"
#include "measure.h"
#include "peer.h"
#include "plot.h"
#include "suite.h"
#include "suite_util.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

enum { CDF_POINTS = 200, SPREAD_MS = 1000 };
enum { BUSY_TASKS = 10000, BUSY_MS = 50, BUSY_LEAD_MS = 5, BUSY_SPREAD_MS = 40 };

/* n one-shots due uniformly within spread_ms, the first lead_ms after the
 * loop was created; busy_ms: one more timer, due busy_lead_ms before the
 * first, whose callback sleeps that long. */
struct shape {
	size_t n;
	uint64_t lead_ms, spread_ms, busy_ms, busy_lead_ms;
};

struct burst {
	uint64_t *due_ns;
	_Atomic uint64_t *start_ns; /* 0: not run yet; [count]: the busy timer's */
	int64_t *late;
	uint64_t busy_ns;
	size_t count, timers, first_unrun; /* timers: count, and the busy one if any */
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
	if (timer == b->count) /* the busy one */
		monotonic_sleep_until(start_ns + b->busy_ns);
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

static struct burst *burst_new(const struct shape *s)
{
	size_t timers = s->n + (s->busy_ms > 0);
	struct burst *b = calloc(1, sizeof *b);
	if (!b || !(b->due_ns = malloc(timers * sizeof *b->due_ns)) ||
	    !(b->start_ns = malloc(timers * sizeof *b->start_ns)) ||
	    !(b->late = malloc(timers * sizeof *b->late))) {
		burst_free(b);
		return NULL;
	}
	/* written now, so that no callback takes a page fault on its record */
	for (size_t i = 0; i < timers; i++)
		atomic_init(&b->start_ns[i], 0);
	b->count = s->n;
	b->timers = timers;
	b->busy_ns = s->busy_ms * NS_PER_MS;
	return b;
}

/* 0, or 2 when the --hgrm file (hgrm, NULL for none) cannot be written. */
static int report_burst(struct report *r, struct outcome *o, struct burst *b,
			const struct loop_skips *skips, double cpu, double arm_s, const char *hgrm)
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
	int rc = hgrm ? lateness_hgrm_of(hgrm, o->impl, b->late, runs) : 0;
	report_add(r, o->impl, "adds", (double)b->count, "one-shots", BETTER_NEITHER);
	report_add(r, o->impl, "runs", (double)runs, "runs", BETTER_HIGHER);
	report_add(r, o->impl, "oneshots_never_run", (double)(b->count - runs), "one-shots",
		   BETTER_LOWER);
	report_add(r, o->impl, "skipped", (double)loop_skips_total(skips), "firings", BETTER_LOWER);
	report_add(r, o->impl, "skipped_overload", (double)skips->overload, "firings",
		   BETTER_LOWER);
	report_add(r, o->impl, "skipped_missed", (double)skips->missed, "firings", BETTER_LOWER);
	report_add(r, o->impl, "runs_before_due", (double)early, "runs", BETTER_LOWER);
	report_add(r, o->impl, "cpu", cpu, "s", BETTER_LOWER);
	report_add(r, o->impl, "arm_time", arm_s * 1e3, "ms", BETTER_LOWER);
	o->cdf_n = lateness_cdf_of(b->late, runs, o->cdf_x, o->cdf_y, CDF_POINTS);
	report_series(r, o->impl, "lateness_cdf", o->cdf_x, o->cdf_y, o->cdf_n);
	if (runs < b->count)
		report_note(r, "%s: %zu of %zu one-shots never ran (%llu firings skipped)", o->impl,
			    b->count - runs, b->count, (unsigned long long)loop_skips_total(skips));
	if (b->timers > b->count && !b->start_ns[b->count])
		report_note(r, "%s: the busy timer never ran", o->impl);
	return rc;
}

/* Every timer ran, or some were skipped and the rest ran: a one-shot whose
 * firing was skipped never runs. The runs are counted again only when
 * skips are seen. */
static bool all_done(struct burst *b, const struct loop_impl *impl, void *loop)
{
	while (b->first_unrun < b->timers &&
	       atomic_load_explicit(&b->start_ns[b->first_unrun], memory_order_relaxed))
		b->first_unrun++;
	if (b->first_unrun == b->timers)
		return true;
	struct loop_skips s = { 0 };
	if (impl->skips)
		impl->skips(loop, &s);
	uint64_t done = loop_skips_total(&s);
	for (size_t i = b->first_unrun; done && i < b->timers; i++)
		done += atomic_load_explicit(&b->start_ns[i], memory_order_relaxed) != 0;
	return done && b->first_unrun + done >= b->timers;
}

/* One loop from set-up to teardown; 0, or 2 after saying why. */
static int run_one(const struct loop_impl *impl, const struct suite_options *opt,
		   const struct shape *shape, struct report *r, struct outcome *o)
{
	size_t n = shape->n;
	struct burst *b = burst_new(shape);
	if (!b) {
		fprintf(stderr, "tw-perf: burst: out of memory for %zu timers\n", n);
		return 2;
	}
	void *loop = impl->create(b->timers, on_fire, b, opt->executors);
	if (!loop) {
		burst_free(b);
		return 2;
	}
	uint64_t first = ceil_ms_ns(monotonic_now_ns()) + shape->lead_ms * NS_PER_MS;
	uint64_t rng = opt->seed;
	for (size_t i = 0; i < n; i++)
		b->due_ns[i] = first + bench_rng_below(&rng, shape->spread_ms) * NS_PER_MS;
	if (b->timers > n)
		b->due_ns[n] = first - shape->busy_lead_ms * NS_PER_MS;
	uint64_t t0 = monotonic_now_ns();
	for (size_t i = 0; i < b->timers; i++)
		if (impl->arm(loop, i, b->due_ns[i], 0)) {
			impl->destroy(loop);
			burst_free(b);
			return 2;
		}
	uint64_t armed = monotonic_now_ns();
	/* from the loop's start: a peer's set-up of its timers is not its run */
	double cpu0 = process_cpu_seconds();
	uint64_t give_up = first + (shape->spread_ms + 60000) * NS_PER_MS;
	for (uint64_t step = armed; !all_done(b, impl, loop) && step < give_up;) {
		step = monotonic_now_ns() + 50 * NS_PER_MS;
		impl->run_until(loop, step < give_up ? step : give_up);
	}
	double cpu = process_cpu_seconds() - cpu0;
	struct loop_skips skips = { 0 };
	if (impl->skips)
		impl->skips(loop, &skips);
	impl->destroy(loop); /* no run after this: the records are final */
	o->impl = impl->name;
	if (armed > first)
		report_note(r, "%s: arming ended %.1f ms after the first due", impl->name,
			    (double)(armed - first) / 1e6);
	int rc = report_burst(r, o, b, &skips, cpu, (double)(armed - t0) / 1e9, opt->hgrm);
	burst_free(b);
	return rc;
}

/* Every loop wanted, with the same dues; the lateness CDF into the picture. */
static int run_all(const struct suite_options *opt, const struct shape *shape, const char *name,
		   struct report *r)
{
	report_param(r, "tasks", (double)shape->n);
	report_param(r, "spread_ms", (double)shape->spread_ms);
	if (shape->busy_ms)
		report_param(r, "busy_ms", (double)shape->busy_ms);
	report_param(r, "seed", (double)opt->seed);
	report_param(r, "executors", opt->executors);
	const struct loop_impl *impls[SUITE_LOOPS_MAX];
	size_t count = loops_wanted(opt, impls);
	struct outcome *o = calloc(count, sizeof *o);
	if (!o) {
		fprintf(stderr, "tw-perf: %s: out of memory\n", name);
		return 2;
	}
	for (size_t k = 0; k < count; k++) {
		int rc = run_one(impls[k], opt, shape, r, &o[k]);
		if (rc) {
			free(o);
			return rc;
		}
	}
	for (size_t k = 1; k < count; k++)
		report_note(r, "%s: %s", impls[k]->name, impls[k]->differs);
	if (opt->plot_dir) {
		struct plot_series s[SUITE_LOOPS_MAX];
		for (size_t k = 0; k < count; k++) {
			s[k] = cdf_plot_series(o[k].impl, o[k].cdf_x, o[k].cdf_y, o[k].cdf_n);
		}
		char title[128], file[64];
		snprintf(title, sizeof title, "%s: lateness of each one-shot (start - due)", name);
		snprintf(file, sizeof file, "%s-lateness-cdf.png", name);
		struct plot p = { .title = title,
				  .xlabel = "lateness (us)",
				  .ylabel = "fraction of runs at or below",
				  .logx = true,
				  .style = PLOT_STEPS };
		plot_png(suite_plot_path(opt, file), &p, s, count);
	}
	free(o);
	return 0;
}

int scenario_burst(const struct suite_options *opt, struct report *r)
{
	size_t n = opt->tasks ? opt->tasks : opt->quick ? 100000 : 1000000;
	struct shape shape = { .n = n, .lead_ms = 1000 + n / 500, .spread_ms = SPREAD_MS };
	int rc = run_all(opt, &shape, "burst", r);
	report_target(r, "last_run_after_last_due", "<=", 2);
	report_target(r, "runs", ">=", (double)n);
	report_note(r,
		    "dues on whole ms within %d ms, from 1 s + 2 us per timer after the loop was "
		    "created; a one-shot that finds the executors' queues full waits and runs "
		    "late, so oneshots_never_run = adds - runs must be 0; CPU from "
		    "getrusage, all threads, from the loop's start until every timer ran or "
		    "was skipped",
		    SPREAD_MS);
	return rc;
}

int scenario_oneshots_busy(const struct suite_options *opt, struct report *r)
{
	size_t n = opt->tasks ? opt->tasks : BUSY_TASKS;
	struct shape shape = { .n = n,
			       .lead_ms = 1000 + n / 500,
			       .spread_ms = BUSY_SPREAD_MS,
			       .busy_ms = BUSY_MS,
			       .busy_lead_ms = BUSY_LEAD_MS };
	struct suite_options one = *opt;
	one.executors = opt->executors ? opt->executors : 1;
	int rc = run_all(&one, &shape, "oneshots-busy", r);
	report_target(r, "oneshots_never_run", "<=", 0);
	report_note(r,
		    "a timer due %d ms before the first one-shot sleeps %d ms in its callback; "
		    "the one-shots are due on whole ms within %d ms, all while it sleeps, on "
		    "%u executor(s) with the default queue (4096 firings)",
		    BUSY_LEAD_MS, BUSY_MS, BUSY_SPREAD_MS, one.executors);
	return rc;
}
