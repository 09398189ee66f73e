/*
 * heartbeats_report.c - the figures and pictures of `tw-perf heartbeats`,
 * made from each timer's records once its loop is gone (heartbeats.h).
 */
#include "heartbeats.h"
#include "loop_measure.h"
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char FLOOR[] = "wake-up floor";
/* A CPU average over 2 000 hand-overs is steady enough, and the run stays short. */
enum { HANDOVER_FLOOR_SECONDS = 2 };

/* Percentiles of how far intervals were off their period, and how many by more than 1 ms. */
static void report_deviations(struct report *r, const char *impl, int64_t *off_ns, size_t n)
{
	lateness_sort(off_ns, n);
	size_t over = 0;
	while (over < n && off_ns[n - 1 - over] > 1000000)
		over++;
	report_add(r, impl, "interval_off_p50", lateness_quantile_us(off_ns, n, 0.5), "us",
		   BETTER_LOWER);
	report_add(r, impl, "interval_off_p99", lateness_quantile_us(off_ns, n, 0.99), "us",
		   BETTER_LOWER);
	report_add(r, impl, "intervals_off_1ms", n ? 100.0 * (double)over / (double)n : 0, "%",
		   BETTER_LOWER);
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
	size_t room = 0, total = 0;
	for (size_t i = 0; i < b->count; i++)
		room += b->beat[i].n;
	int64_t *off = malloc((room ? room : 1) * sizeof *off); /* |interval - period|, ns */
	for (size_t i = 0; i < b->count; i++) {
		const struct beat *t = &b->beat[i];
		for (size_t j = 1; j < t->n; j++) {
			if (t->skips_before[j])
				continue;
			int64_t deviation = t->late[j] - t->late[j - 1];
			double bin = floor((double)deviation / 1e3 / DEV_BIN_US) + DEV_BINS / 2 + 1;
			o->dev_y[bin < 0 ? 0 : bin > DEV_BINS + 1 ? DEV_BINS + 1 : (size_t)bin]++;
			if (off)
				off[total] = deviation < 0 ? -deviation : deviation;
			total++;
		}
	}
	if (off) {
		report_deviations(r, o->impl, off, total);
		free(off);
	}
	double beyond = o->dev_y[0] + o->dev_y[DEV_BINS + 1];
	for (size_t i = 0; total > 0 && i < DEV_BINS + 2; i++)
		o->dev_y[i] /= total;
	if (beyond > 0)
		report_note(r, "%s: %.0f intervals more than 5 ms off their period", o->impl,
			    beyond);
}

/* Sorts the samples into scratch: the beats' slots, no longer needed. */
static int report_runs(struct report *r, struct outcome *o, struct beats *b, double cpu,
		       const char *hgrm)
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
	int rc = hgrm ? lateness_hgrm_of(hgrm, o->impl, b->late, runs) : 0;
	o->p99_us = lateness_quantile_us(b->late, runs, 0.99);
	o->cdf_n = lateness_cdf_of(b->late, runs, o->cdf_x, o->cdf_y, CDF_POINTS);
	o->cpu_per_run_us = runs ? cpu * 1e6 / (double)runs : 0;
	o->runs = runs;
	report_series(r, o->impl, "lateness_cdf", o->cdf_x, o->cdf_y, o->cdf_n);
	report_add(r, o->impl, "runs", (double)runs, "runs", BETTER_NEITHER);
	report_add(r, o->impl, "runs_before_due", (double)early, "runs", BETTER_LOWER);
	report_add(r, o->impl, "skipped", (double)skipped, "firings", BETTER_LOWER);
	report_add(r, o->impl, "cpu_per_run", o->cpu_per_run_us, "us", BETTER_LOWER);
	return rc;
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

int heartbeats_report_run(struct report *r, struct outcome *o, struct beats *b, double cpu,
			  const char *hgrm)
{
	report_drift(r, o->impl, b);
	report_intervals(r, o, b);
	return report_runs(r, o, b, cpu, hgrm);
}

/* The interval histogram as series (bin centres in us, trimmed to the bins
 * some loop used, and one either side); then both pictures. */
void heartbeats_pictures(const struct suite_options *opt, struct report *r, struct outcome *o,
			 size_t n)
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
	struct plot_series cdf[SUITE_LOOPS_MAX], hist[SUITE_LOOPS_MAX];
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
bool heartbeats_measure_floor(const struct params *p, struct report *r, struct wake_floor *f)
{
	double seconds = fmax(fmin(p->seconds, 5), 2.0 * (double)p->hi_ms / 1e3);
	if (wake_floor_measure(seconds, p->lo_ms, p->hi_ms, f)) {
		report_note(r, "wake-up floor: not measured (%s)", strerror(errno));
		return false;
	}
	if (wake_floor_handover(HANDOVER_FLOOR_SECONDS, f))
		report_note(r, "wake-up floor: the hand-over not measured (%s)", strerror(errno));
	return true;
}

void heartbeats_report_floor(struct report *r, const struct wake_floor *f)
{
	wake_floor_report(r, FLOOR, f);
	if (f->interval_sd_us > INTERVAL_SD_TARGET_US)
		report_note(r,
			    "interval_sd: the target (%d us) is below this machine's wake-up "
			    "floor (%.0f us) in this run",
			    INTERVAL_SD_TARGET_US, f->interval_sd_us);
}

/*
 * A wake-up's price is the machine's, not the loop's: on this kind of VM it costs a thread
 * tens of times a run's CPU, and a loop that wakes more often than another (every tick, to
 * be on time; a second thread, to keep runs off the timer thread) pays it more often. Each
 * loop's CPU per run less its wake-ups at the floor's prices: the loop's own wake-ups at
 * cpu_per_wakeup, every other thread's at cpu_per_handover (the waker's share included).
 */
void heartbeats_report_net(struct report *r, struct outcome *o, size_t n,
			   const struct wake_floor *f)
{
	for (size_t k = 0; k < n; k++) {
		if (o[k].loop_wakeups_per_run < 0 || o[k].other_wakeups_per_run < 0) {
			o[k].net_cpu_per_run_us = -1;
			continue;
		}
		double wakeups_us = o[k].loop_wakeups_per_run * f->cpu_per_wakeup_us +
				    o[k].other_wakeups_per_run * f->handover_cpu_us;
		o[k].net_cpu_per_run_us = o[k].cpu_per_run_us - wakeups_us;
		report_add(r, o[k].impl, "cpu_per_run_net_of_wakeups", o[k].net_cpu_per_run_us,
			   "us", BETTER_LOWER);
	}
	report_note(r, "cpu_per_run_net_of_wakeups: cpu_per_run less the loop's wake-ups at the "
		       "floor's cpu_per_wakeup and its other threads' at cpu_per_handover");
}
