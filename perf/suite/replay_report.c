/*
 * replay_report.c - what `tw-perf replay` reports: each figure for the
 * replay ("tickwheel") beside the same figure read from the recording
 * ("recording") where it has one, the ratios of operations and runs replayed
 * to recorded, and notes on what was left out and why. The wake-up floor,
 * measured beside the replay, is added by replay.c.
 */
#include "replay.h"

#include "hgrm.h"
#include "plot.h"
#include "suite.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define IMPL "tickwheel"
#define REC  "recording"

static void lateness_figures(struct report *r, const char *impl, struct lateness *l)
{
	if (!lateness_runs(l))
		return;
	report_add(r, impl, "lateness_p50", (double)lateness_percentile_us(l, 0.50), "us",
		   BETTER_LOWER);
	report_add(r, impl, "lateness_p90", (double)lateness_percentile_us(l, 0.90), "us",
		   BETTER_LOWER);
	report_add(r, impl, "lateness_p99", (double)lateness_percentile_us(l, 0.99), "us",
		   BETTER_LOWER);
	report_add(r, impl, "lateness_p99_9", (double)lateness_percentile_us(l, 0.999), "us",
		   BETTER_LOWER);
	report_add(r, impl, "lateness_max", (double)atomic_load(&l->max_ns) / 1e3, "us",
		   BETTER_LOWER);
}

/* The intervals of every task pooled; `rec` picks the recording's. */
static struct interval_summary pool(const struct rp_plan *p, bool rec)
{
	struct interval_summary s = { 0 };
	double sum = 0, squares = 0;
	for (size_t i = 0; i < p->ntasks; i++) {
		const struct intervals *iv = rec ? &p->tasks[i].rec_iv : &p->tasks[i].iv;
		s.count += iv->count;
		sum += iv->sum;
		squares += iv->sum_squares;
	}
	if (s.count) {
		s.mean_ns = sum / (double)s.count;
		double var = squares / (double)s.count - s.mean_ns * s.mean_ns;
		s.sd_ns = sqrt(var > 0 ? var : 0);
	}
	return s;
}

static void interval_figures(struct report *r, const char *impl, struct deviations *d,
			     struct interval_summary s)
{
	report_add(r, impl, "intervals", (double)s.count, "intervals", BETTER_NEITHER);
	if (!s.count)
		return;
	report_add(r, impl, "interval_sd", s.sd_ns / 1e3, "us", BETTER_LOWER);
	report_add(r, impl, "interval_off_p50", deviations_off_quantile_us(d, 0.50), "us",
		   BETTER_LOWER);
	report_add(r, impl, "interval_off_p99", deviations_off_quantile_us(d, 0.99), "us",
		   BETTER_LOWER);
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : (a ? INFINITY : 1);
}

static void counts(struct report *r, struct rp_plan *p, const struct rp_outcome *o)
{
	uint64_t runs = atomic_load(&p->runs);
	report_add(r, REC, "ops", (double)p->rec.ops, "ops", BETTER_NEITHER);
	report_add(r, IMPL, "ops", (double)o->ops_issued, "ops", BETTER_NEITHER);
	report_add(r, IMPL, "ops_ratio", ratio(o->ops_issued, p->rec.ops), "x", BETTER_NEITHER);
	report_add(r, REC, "runs", (double)p->rec.runs, "runs", BETTER_NEITHER);
	report_add(r, IMPL, "runs", (double)runs, "runs", BETTER_NEITHER);
	report_add(r, IMPL, "runs_ratio", ratio(runs, p->rec.runs), "x", BETTER_NEITHER);
	uint64_t left_out = p->rec.adds_failed + p->rec.unknown_ids + p->rec.engine_ops +
			    o->on_failed_adds + o->waited_out;
	report_add(r, IMPL, "ops_left_out", (double)left_out, "ops", BETTER_LOWER);
	report_add(r, IMPL, "result_mismatches", (double)o->mismatches, "ops", BETTER_LOWER);
	report_add(r, REC, "skipped", (double)p->rec.skips, "firings", BETTER_LOWER);
	report_add(r, IMPL, "skipped", (double)o->skipped, "firings", BETTER_LOWER);
	report_add(r, IMPL, "failures", (double)o->failures, "runs", BETTER_NEITHER);
}

static void cpu(struct report *r, struct rp_plan *p, const struct rp_outcome *o)
{
	uint64_t runs = atomic_load(&p->runs);
	if (runs && o->engine_cpu_ns) {
		double spin = (double)atomic_load(&p->spin_ns);
		double cpu = (double)o->engine_cpu_ns;
		report_add(r, IMPL, "cpu_per_run", cpu / (double)runs / 1e3, "us", BETTER_LOWER);
		report_add(r, IMPL, "engine_cpu_per_run", fmax(cpu - spin, 0) / (double)runs / 1e3,
			   "us", BETTER_LOWER);
	}
	if (p->rec.runs)
		report_add(r, REC, "run_length_mean", p->rec_run_ns_sum / (double)p->rec.runs / 1e3,
			   "us", BETTER_NEITHER);
	if (o->ops_issued)
		report_add(r, IMPL, "cpu_per_op",
			   (double)o->threads_cpu_ns / (double)o->ops_issued / 1e3, "us",
			   BETTER_LOWER);
	if (lateness_runs(&p->lag))
		report_add(r, IMPL, "op_lag_p99", (double)lateness_percentile_us(&p->lag, 0.99),
			   "us", BETTER_LOWER);
}

/* Where the recording came from: its process, its date, its threads' names. */
static void origin(struct report *r, const struct rp_plan *p)
{
	time_t secs = (time_t)(p->h.start_wall_ns / 1000000000u);
	struct tm tm;
	char date[64] = "?", names[512] = "";
	if (gmtime_r(&secs, &tm))
		strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
	for (size_t k = 0, used = 0; k < p->nthreads && used < sizeof names; k++) {
		int n = snprintf(names + used, sizeof names - used, "%s%u %s", k ? ", " : "",
				 p->threads[k].number,
				 p->threads[k].name[0] ? p->threads[k].name : "(unnamed)");
		used += n > 0 ? (size_t)n : 0;
	}
	report_note(r, "recorded by pid %u from %s, %.3f s, %u executors; threads: %s", p->h.pid,
		    date, (double)p->end_ns * p->speed / 1e9, p->h.executors, names);
}

static void notes(struct report *r, struct rp_plan *p, const struct rp_outcome *o)
{
	const struct rp_counts *c = &p->rec;
	origin(r, p);
	report_note(r, "replayed %zu recorded threads, %zu tasks, %.3f s at speed %g", p->nthreads,
		    p->ntasks, o->seconds, p->speed);
	report_note(r,
		    "runs take their recorded length: spun up to 1 ms, slept beyond "
		    "(%llu runs slept); cpu_per_run: the engine's threads, callbacks included; "
		    "engine_cpu_per_run: less the spinning",
		    (unsigned long long)atomic_load(&p->sleep_runs));
	if (c->adds_failed || c->unknown_ids || c->engine_ops || o->on_failed_adds || o->waited_out)
		report_note(r,
			    "ops_left_out: %llu ADDs that failed when recorded, %llu on ids never "
			    "added, %llu from engine threads, %llu on tasks whose add failed here, "
			    "%llu waited out for another thread's add",
			    (unsigned long long)c->adds_failed, (unsigned long long)c->unknown_ids,
			    (unsigned long long)c->engine_ops,
			    (unsigned long long)o->on_failed_adds,
			    (unsigned long long)o->waited_out);
	if (o->mismatches)
		report_note(r,
			    "result_mismatches: %llu calls answered otherwise than recorded, %llu "
			    "of them refused here after succeeding then: calls that race their "
			    "task's end (a reset as the task fires or ends) fall on its other side "
			    "when the replay's timing differs (op_lag)",
			    (unsigned long long)o->mismatches, (unsigned long long)o->refused_here);
	if (c->drop_gaps)
		report_note(r,
			    "warning: the recorder dropped %llu events in %llu places: what was "
			    "lost is not replayed",
			    (unsigned long long)c->dropped, (unsigned long long)c->drop_gaps);
	if (!c->has_end)
		report_note(r, "the recording has no END event: its engine was not destroyed "
			       "cleanly, or it was copied while recording");
	if (c->unknown_types || c->orphan_runs)
		report_note(
			r, "left out: %llu events of unknown types, %llu runs of tasks never added",
			(unsigned long long)c->unknown_types, (unsigned long long)c->orphan_runs);
	if (p->h.config & REC_CONFIG_MANUAL_CLOCK)
		report_note(r, "the recording's engine ran on a manual clock: its times are "
			       "replayed as real time");
}

enum { LEVELS = 200 }; /* percentile levels: about 60 reach 99.9999 % */

struct percentiles {
	double x[LEVELS], y[LEVELS];
	size_t n;
};

/* Lateness by percentile as HdrHistogram's plotter draws it, the replay's beside the
 * recording's: a JSON series each, and with --plot a log-percentile chart. */
static void percentiles(struct report *r, struct rp_plan *p, const struct suite_options *opt)
{
	struct percentiles rp, rec;
	rp.n = hgrm_points(&p->late, rp.x, rp.y, LEVELS);
	rec.n = hgrm_points(&p->rec_late, rec.x, rec.y, LEVELS);
	report_series(r, IMPL, "lateness_percentiles", rp.x, rp.y, rp.n);
	report_series(r, REC, "lateness_percentiles", rec.x, rec.y, rec.n);
	if (!opt->plot_dir)
		return;
	struct plot pl = { .title = "replay: lateness by percentile",
			   .xlabel = "percentile, as 1/(1-p): 10 = 90 %, 100 = 99 %, 1000 = 99.9 %",
			   .ylabel = "lateness, start - due (us)",
			   .logx = true,
			   .style = PLOT_LINES };
	struct plot_series s[] = { { "replay", rp.x, rp.y, rp.n },
				   { "recording", rec.x, rec.y, rec.n } };
	plot_png(suite_plot_path(opt, "replay-lateness-percentiles.png"), &pl, s, rec.n ? 2 : 1);
}

void rp_report(struct report *r, struct rp_plan *p, const struct rp_outcome *o,
	       const struct suite_options *opt)
{
	report_param(r, "threads", (double)p->nthreads);
	report_param(r, "tasks", (double)p->ntasks);
	report_param(r, "seconds", (double)p->end_ns / 1e9);
	counts(r, p, o);
	lateness_figures(r, IMPL, &p->late);
	lateness_figures(r, REC, &p->rec_late);
	interval_figures(r, IMPL, &p->dev, pool(p, false));
	interval_figures(r, REC, &p->rec_dev, pool(p, true));
	cpu(r, p, o);
	notes(r, p, o);
	percentiles(r, p, opt);
}
