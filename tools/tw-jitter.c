/*
 * tw-jitter - how precisely tickwheel fires on this machine.
 *
 *   tw-jitter [--tasks N] [--period 200ms | 100-500ms] [--seconds S | --duration 1.5m]
 *             [--executors N] [--on-wheel-thread] [--floor 5s] [--json FILE]
 *             [--plot FILE.png]
 *   tw-jitter -h | --help | --version
 *
 * Runs N periodic tasks (periods drawn in whole ms from the range) on the
 * real clock, prints a progress line every second, then a table (report.h):
 * the interval between runs of each task against its period (mean, standard
 * deviation, smallest and largest deviation), lateness percentiles (run start
 * minus due), runs, skips and CPU. --json writes the same with the machine's
 * facts, the lateness CDF and the interval histogram; --plot draws those two
 * side by side (gnuplot). --floor first measures, for that long, how precisely
 * the machine itself wakes a thread that does nothing else (wake_floor.h) and
 * shows it as a column of its own: no engine can do better. With one task of
 * one period, a thread that sleeps as long as the task is measured beside the
 * run too (column "floor beside").
 *
 * The command line is checked before the run (cli.h): a bad value, an unknown
 * option, a --json or --plot file that cannot be written or a --plot without
 * gnuplot is one line on stderr and exit status 2. Otherwise it exits 1 if any
 * run started before its due, none ran, or a file could not be written after
 * all; 0 else.
 */
#include "cli.h"
#include "measure.h"
#include "plot.h"
#include "report.h"
#include "tickwheel.h"
#include "wake_floor.h"

#include <errno.h>

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct options {
	uint64_t tasks, period_lo_ns, period_hi_ns, duration_ns, executors, floor_ns;
	const char *json, *plot;
	bool on_wheel_thread;
};

static struct lateness late;
static struct deviations deviations;

static int run(const tw_fire *fire, void *arg)
{
	uint64_t start = monotonic_now_ns();
	lateness_note(&late, start, fire->due_ns);
	intervals_note(arg, start, fire->skipped);
	return 0;
}

#define PROG "tw-jitter"

/* Bounds of the values: counts a table of tasks can hold, threads a machine
 * can have, runs of up to a million seconds (11.6 days), the engine's periods. */
#define MAX_TASKS     UINT64_C(4294967295)
#define MAX_EXECUTORS 1024
#define MAX_SECONDS   UINT64_C(1000000)

static void usage(FILE *out)
{
	fprintf(out,
		"usage: tw-jitter [--tasks N] [--period 200ms | 100-500ms]\n"
		"                 [--seconds S | --duration D] [--executors N]\n"
		"                 [--on-wheel-thread] [--floor D] [--json FILE] [--plot FILE.png]\n"
		"       tw-jitter -h | --help | --version\n"
		"\n"
		"How precisely tickwheel fires on this machine: N periodic tasks on the real\n"
		"clock, a progress line every second, then the intervals between runs against\n"
		"the period, the lateness of each run against its due, runs, skips and CPU.\n"
		"\n"
		"  --tasks N        periodic tasks, 1 .. %" PRIu64 " (default 1)\n"
		"  --period P       the period, or a range each task's is drawn from in whole\n"
		"                   ms; at least 1ms (default 200ms; a bare number is ms)\n"
		"  --seconds S      how long to run, 1 .. %" PRIu64 " (default 10)\n"
		"  --duration D     the same as a duration: 90s, 1.5m\n"
		"  --executors N    executor threads, 0 .. %d (default 0: one per CPU)\n"
		"  --on-wheel-thread  the tasks run on the wheel thread (TW_ON_WHEEL_THREAD)\n"
		"  --floor D        first measure for D how precisely the machine itself wakes\n"
		"                   a thread (at least twice the longest period); with one task\n"
		"                   of one period, also a thread sleeping as long, beside the run\n"
		"  --json FILE      the figures, the machine's facts and the series as JSON\n"
		"  --plot FILE.png  the lateness CDF and the interval histogram (gnuplot)\n"
		"  -h, --help       this text\n"
		"  --version        the version\n"
		"\n"
		"Exit status: 0; 1 if a run started before its due, none ran or a file could\n"
		"not be written; 2 on a bad command line or an output that cannot be written\n"
		"(both checked before the run).\n",
		MAX_TASKS, MAX_SECONDS, MAX_EXECUTORS);
}

enum {
	OPT_TASKS = 1,
	OPT_PERIOD,
	OPT_SECONDS,
	OPT_DURATION,
	OPT_EXECUTORS,
	OPT_FLOOR,
	OPT_ON_WHEEL_THREAD,
	OPT_JSON,
	OPT_PLOT
};

static const struct cli_option option_table[] = {
	{ "--tasks", OPT_TASKS, true },
	{ "--period", OPT_PERIOD, true },
	{ "--seconds", OPT_SECONDS, true },
	{ "--duration", OPT_DURATION, true },
	{ "--executors", OPT_EXECUTORS, true },
	{ "--floor", OPT_FLOOR, true },
	{ "--on-wheel-thread", OPT_ON_WHEEL_THREAD, false },
	{ "--json", OPT_JSON, true },
	{ "--plot", OPT_PLOT, true },
	{ NULL, 0, false },
};

static struct options parse(int argc, char **argv)
{
	struct options o = { .tasks = 1,
			     .period_lo_ns = 200 * NS_PER_MS,
			     .period_hi_ns = 200 * NS_PER_MS,
			     .duration_ns = 10000 * NS_PER_MS };
	const char *floor_text = NULL;
	uint64_t lo_ms, hi_ms;
	struct cli c;
	cli_init(&c, PROG, usage, option_table, argc, argv, 1);
	for (int id; (id = cli_next(&c)) != CLI_END;) {
		const char *opt = c.option, *value = c.value;
		switch (id) {
		case OPT_TASKS:
			o.tasks = cli_count(PROG, opt, value, 1, MAX_TASKS);
			break;
		case OPT_PERIOD:
			cli_ms_range(PROG, opt, value, 1, TW_MAX_DELAY_MS, &lo_ms, &hi_ms);
			o.period_lo_ns = lo_ms * NS_PER_MS;
			o.period_hi_ns = hi_ms * NS_PER_MS;
			break;
		case OPT_SECONDS:
			o.duration_ns =
				cli_count(PROG, opt, value, 1, MAX_SECONDS) * 1000 * NS_PER_MS;
			break;
		case OPT_DURATION:
			o.duration_ns = cli_ms(PROG, opt, value, 1, MAX_SECONDS * 1000) * NS_PER_MS;
			break;
		case OPT_EXECUTORS:
			o.executors = cli_count(PROG, opt, value, 0, MAX_EXECUTORS);
			break;
		case OPT_FLOOR:
			o.floor_ns = cli_ms(PROG, opt, value, 1, MAX_SECONDS * 1000) * NS_PER_MS;
			floor_text = value;
			break;
		case OPT_ON_WHEEL_THREAD:
			o.on_wheel_thread = true;
			break;
		case OPT_JSON:
			o.json = value;
			break;
		case OPT_PLOT:
			o.plot = value;
			break;
		default:
			cli_fail(PROG, "unexpected argument '%s'", value);
		}
	}
	/* --period may come after --floor: the two together once both are known */
	if (o.floor_ns && o.floor_ns < 2 * o.period_hi_ns)
		cli_bad_value(PROG, "--floor", floor_text,
			      "must last at least twice the longest period (%" PRIu64 " ms)",
			      o.period_hi_ns / NS_PER_MS);
	/* the outputs, before a run that would end in "cannot write" */
	if (o.json)
		cli_check_file(PROG, "--json", o.json);
	if (o.plot) {
		cli_check_file(PROG, "--plot", o.plot);
		if (!plot_gnuplot_found()) {
			fprintf(stderr,
				PROG ": cannot draw --plot %s: gnuplot not found "
				     "(Debian: apt-get install gnuplot-nox)\n",
				o.plot);
			exit(CLI_USAGE);
		}
	}
	return o;
}

enum { CDF_POINTS = 400 };

/* The figures of the run; the lateness CDF and interval histogram as series. */
static void fill_report(struct report *r, const struct options *o, tw_engine_stats *st,
			const struct interval_summary *iv, double seconds, double cpu_seconds)
{
	const char *tw = "tickwheel";
	uint64_t runs = lateness_runs(&late);
	report_param(r, "tasks", (double)o->tasks);
	report_param(r, "on_wheel_thread", o->on_wheel_thread);
	report_param(r, "period_ms", (double)(o->period_lo_ns / NS_PER_MS));
	report_param(r, "period_max_ms", (double)(o->period_hi_ns / NS_PER_MS));
	report_param(r, "seconds", (double)o->duration_ns / 1e9);
	report_add(r, tw, "interval_mean", iv->mean_ns / 1e3, "us", BETTER_NEITHER);
	report_add(r, tw, "interval_sd", iv->sd_ns / 1e3, "us", BETTER_LOWER);
	report_add(r, tw, "interval_smallest", iv->smallest_ns / 1e3, "us", BETTER_NEITHER);
	report_add(r, tw, "interval_largest", iv->largest_ns / 1e3, "us", BETTER_LOWER);
	report_add(r, tw, "interval_worst", fmax(-iv->smallest_ns, iv->largest_ns) / 1e3, "us",
		   BETTER_LOWER);
	report_add(r, tw, "interval_off_p50", deviations_off_quantile_us(&deviations, 0.5), "us",
		   BETTER_LOWER);
	report_add(r, tw, "interval_off_p99", deviations_off_quantile_us(&deviations, 0.99), "us",
		   BETTER_LOWER);
	report_add(r, tw, "intervals_off_1ms", 100 * deviations_off_fraction(&deviations, 1000),
		   "%", BETTER_LOWER);
	static const struct {
		const char *name;
		double p;
	} percentiles[] = { { "lateness_p50", 0.5 },
			    { "lateness_p90", 0.9 },
			    { "lateness_p99", 0.99 },
			    { "lateness_p99_9", 0.999 } };
	for (size_t i = 0; i < sizeof percentiles / sizeof percentiles[0]; i++)
		report_add(r, tw, percentiles[i].name,
			   (double)lateness_percentile_us(&late, percentiles[i].p), "us",
			   BETTER_LOWER);
	report_add(r, tw, "lateness_max", (double)atomic_load(&late.max_ns) / 1e3, "us",
		   BETTER_LOWER);
	report_add(r, tw, "runs", (double)runs, "runs", BETTER_HIGHER);
	report_add(r, tw, "runs_before_due", (double)atomic_load(&late.early), "runs",
		   BETTER_LOWER);
	report_add(r, tw, "skipped_overlap", (double)st->skipped_overlap, "firings", BETTER_LOWER);
	report_add(r, tw, "skipped_overload", (double)st->skipped_overload, "firings",
		   BETTER_LOWER);
	report_add(r, tw, "skipped_missed", (double)st->skipped_missed, "firings", BETTER_LOWER);
	report_add(r, tw, "cpu_percent", 100.0 * cpu_seconds / seconds, "% of a core",
		   BETTER_LOWER);
	report_add(r, tw, "cpu_per_run_us", runs ? cpu_seconds * 1e6 / (double)runs : 0, "us",
		   BETTER_LOWER);
	report_add(r, tw, "wheel_wakeups", (double)st->wheel_wakeups / seconds, "1/s",
		   BETTER_LOWER);
	/* The exit status: never early, and something ran. */
	report_target(r, "runs_before_due", "<=", 0);
	report_target(r, "runs", ">=", 1);
	report_note(r, "%.1f s on the real clock, %" PRIu64 " intervals measured", seconds,
		    iv->count);
	report_note(r, "interval_off_*: |interval - period|, to the 10 us bin of the histogram");
	if (o->on_wheel_thread)
		report_note(r,
			    "on the wheel thread: %" PRIu64 " of %" PRIu64 " runs, %" PRIu64
			    " over wheel_run_budget_us, %" PRIu64 " tasks moved to the executors",
			    st->wheel_thread_runs, st->runs, st->over_budget_runs,
			    st->tasks_moved_off_wheel_thread);
	uint64_t below = atomic_load(&deviations.below), above = atomic_load(&deviations.above);
	if (below || above)
		report_note(r,
			    "%" PRIu64 " intervals off by more than 5 ms (%" PRIu64
			    " short, %" PRIu64 " long) are not in the histogram",
			    below + above, below, above);
}

/* Series for the JSON and the picture: index 0 the CDF, 1 the histogram. */
struct pictures {
	double cdf_x[CDF_POINTS], cdf_y[CDF_POINTS];
	double bin_x[DEVIATION_BINS], bin_y[DEVIATION_BINS];
	struct plot_series series[2];
};

static void add_series(struct report *r, struct pictures *p)
{
	size_t n = lateness_cdf(&late, p->cdf_x, p->cdf_y, CDF_POINTS);
	p->series[0] = (struct plot_series){ "lateness", p->cdf_x, p->cdf_y, n };
	report_series(r, "tickwheel", "lateness_cdf", p->cdf_x, p->cdf_y, n);
	n = deviations_points(&deviations, p->bin_x, p->bin_y, DEVIATION_BINS);
	p->series[1] = (struct plot_series){ "intervals", p->bin_x, p->bin_y, n };
	report_series(r, "tickwheel", "interval_histogram", p->bin_x, p->bin_y, n);
}

static int draw(const char *path, const struct pictures *p)
{
	struct plot_panel panels[] = {
		{ { "interval - period (10 us bins)", "deviation of interval from period (us)",
		    "intervals", false, true, PLOT_BOXES },
		  &p->series[1],
		  1 },
		{ { "lateness CDF (run start - due)", "lateness (us)", "fraction of runs", true,
		    false, PLOT_STEPS },
		  &p->series[0],
		  1 },
	};
	return plot_png_panels(path, panels, 2);
}

static bool measure_floor(const struct options *o, struct wake_floor *f)
{
	printf("measuring the machine's wake-up floor for %.1f s ...\n", (double)o->floor_ns / 1e9);
	fflush(stdout);
	if (wake_floor_measure((double)o->floor_ns / 1e9, o->period_lo_ns / NS_PER_MS,
			       o->period_hi_ns / NS_PER_MS, f) == 0)
		return true;
	fprintf(stderr, "tw-jitter: wake-up floor not measured: %s\n", strerror(errno));
	return false;
}

/* A lone task's floor (wake_floor_every), measured in a thread of its own beside the run. */
struct beside {
	uint64_t first_ns, period_ms;
	size_t wakes;
	struct wake_floor floor;
	int rc, error;
	pthread_t thread;
	bool started;
};

static void *measure_beside(void *arg)
{
	struct beside *b = arg;
	b->rc = wake_floor_every(b->first_ns, b->period_ms, b->wakes, &b->floor);
	b->error = errno;
	return NULL;
}

/* A lone task of one period, with --floor: its wake-ups come after a long idle, which a
 * thread woken every millisecond never sees, so a thread that sleeps as long is measured too,
 * half a period from the task's dues (first_due_ns on). */
static void start_beside(const struct options *o, uint64_t first_due_ns, struct beside *b)
{
	uint64_t period_ms = o->period_lo_ns / NS_PER_MS;
	*b = (struct beside){ .first_ns = first_due_ns + o->period_lo_ns / 2,
			      .period_ms = period_ms,
			      .wakes = (size_t)(o->duration_ns / o->period_lo_ns) };
	if (!o->floor_ns || o->tasks != 1 || o->period_lo_ns != o->period_hi_ns || b->wakes < 2)
		return;
	int err = pthread_create(&b->thread, NULL, measure_beside, b);
	b->started = err == 0;
	if (err)
		fprintf(stderr, "tw-jitter: the floor beside the run not measured: %s\n",
			strerror(err));
}

static bool finish_beside(struct beside *b)
{
	if (!b->started)
		return false;
	int err = pthread_join(b->thread, NULL);
	if (err || b->rc) {
		fprintf(stderr, "tw-jitter: the floor beside the run not measured: %s\n",
			strerror(err ? err : b->error));
		return false;
	}
	return true;
}

int main(int argc, char **argv)
{
	struct options o = parse(argc, argv);
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = (unsigned)o.executors;
	tw_engine *e;
	int rc = tw_engine_create(&cfg, &e);
	struct intervals *tasks = calloc(o.tasks, sizeof *tasks);
	if (rc || !tasks) {
		fprintf(stderr, "tw-jitter: %s\n", rc ? tw_strerror(rc) : "out of memory");
		return 1;
	}
	struct wake_floor floor;
	bool floor_measured = o.floor_ns && measure_floor(&o, &floor);
	srand(1);
	uint64_t lo_ms = o.period_lo_ns / NS_PER_MS, hi_ms = o.period_hi_ns / NS_PER_MS;
	uint64_t first_due_ns = 0;
	for (uint64_t i = 0; i < o.tasks; i++) {
		uint64_t period = lo_ms + (uint64_t)rand() % (hi_ms - lo_ms + 1);
		tasks[i].period_ns = period * NS_PER_MS;
		tasks[i].histogram = &deviations;
		tw_task_spec spec = { .delay_ms = 1 + (uint64_t)rand() % period,
				      .period_ms = period,
				      .callback = run,
				      .arg = &tasks[i],
				      .flags = o.on_wheel_thread ? TW_ON_WHEEL_THREAD : 0 };
		tw_id id;
		first_due_ns = monotonic_now_ns() + spec.delay_ms * NS_PER_MS;
		if ((rc = tw_add(e, &spec, &id))) {
			fprintf(stderr, "tw-jitter: adding task %" PRIu64 ": %s\n", i,
				tw_strerror(rc));
			return 1;
		}
	}
	struct beside beside;
	start_beside(&o, first_due_ns, &beside);
	tw_engine_stats before; /* the adds woke the wheel thread too: not the run's */
	tw_stats(e, &before);
	double cpu0 = process_cpu_seconds();
	uint64_t start = monotonic_now_ns(), end = start + o.duration_ns;
	for (uint64_t t = start + 1000 * NS_PER_MS; t < end + 1000 * NS_PER_MS;
	     t += 1000 * NS_PER_MS) {
		monotonic_sleep_until(t < end ? t : end);
		printf("\r[%5.1f / %.1f s] runs %" PRIu64 ", p99 lateness %" PRIu64 " us   ",
		       (double)(monotonic_now_ns() - start) / 1e9, (double)o.duration_ns / 1e9,
		       lateness_runs(&late), lateness_percentile_us(&late, 0.99));
		fflush(stdout);
	}
	double seconds = (double)(monotonic_now_ns() - start) / 1e9;
	tw_engine_stats stats;
	tw_stats(e, &stats);
	stats.wheel_wakeups -= before.wheel_wakeups;
	tw_engine_stop(e, 1000);
	double cpu_seconds = process_cpu_seconds() - cpu0; /* the floor's thread sleeps: ~0 */
	bool beside_measured = finish_beside(&beside);
	struct interval_summary iv = intervals_pool(tasks, o.tasks);
	struct report *r = report_open("tw-jitter", "jitter", argc, argv);
	struct pictures *pictures = malloc(sizeof *pictures);
	int failed = !r || !pictures;
	if (failed) {
		fprintf(stderr, "tw-jitter: out of memory\n");
	} else {
		fill_report(r, &o, &stats, &iv, seconds, cpu_seconds);
		if (floor_measured)
			wake_floor_report(r, "wake-up floor", &floor);
		if (beside_measured)
			wake_floor_report(r, "floor beside", &beside.floor);
		add_series(r, pictures);
		printf("\n\n");
		report_print(r, stdout);
		failed = report_missed(r) > 0;
		if (o.json && report_write_json(r, o.json))
			failed = 1;
		if (o.plot && draw(o.plot, pictures))
			failed = 1;
	}
	report_free(r);
	free(pictures);
	tw_engine_destroy(e);
	free(tasks);
	return failed;
}
