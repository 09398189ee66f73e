/*
 * tw-jitter - how precisely tickwheel fires on this machine.
 *
 *   tw-jitter [--tasks N] [--period 200ms | 100-500ms] [--seconds S | --duration 1.5m]
 *             [--executors N] [--json FILE]
 *
 * Runs N periodic tasks (periods drawn in whole ms from the range) on the
 * real clock, prints a progress line every second, then the interval between
 * runs of each task against its period (mean, standard deviation, smallest
 * and largest deviation), lateness percentiles (run start minus due), runs,
 * skips and CPU. Exits 1 if any run started before its due.
 */
#include "measure.h"
#include "tickwheel.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NS_PER_MS UINT64_C(1000000)

struct options {
	uint64_t tasks, period_lo_ns, period_hi_ns, duration_ns, executors;
	const char *json;
};

static struct lateness late;

static int run(const tw_fire *fire, void *arg)
{
	uint64_t start = monotonic_now_ns();
	lateness_note(&late, start, fire->due_ns);
	intervals_note(arg, start, fire->skipped);
	return 0;
}

static void usage(const char *problem, const char *value)
{
	if (problem)
		fprintf(stderr, "tw-jitter: %s%s%s\n", problem, value ? ": " : "",
			value ? value : "");
	fprintf(stderr, "usage: tw-jitter [--tasks N] [--period 200ms | 100-500ms] "
			"[--seconds S | --duration D] [--executors N] [--json FILE]\n");
	exit(2);
}

static uint64_t count_of(const char *text, const char *option)
{
	char *end;
	unsigned long long n = strtoull(text, &end, 10);
	if (!*text || *end || *text == '-')
		usage(option, "needs a whole number");
	return n;
}

static uint64_t duration_of(const char *text, const char *option)
{
	uint64_t ns;
	int rc = tw_parse_duration(text, &ns);
	if (rc) {
		fprintf(stderr, "tw-jitter: %s '%s': %s\n", option, text, tw_strerror(rc));
		usage(NULL, NULL);
	}
	return ns;
}

static struct options parse(int argc, char **argv)
{
	struct options o = { 1, 200 * NS_PER_MS, 200 * NS_PER_MS, 10000 * NS_PER_MS, 0, NULL };
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
		if (!value)
			usage("missing value after", opt);
		i++;
		if (!strcmp(opt, "--tasks")) {
			o.tasks = count_of(value, opt);
		} else if (!strcmp(opt, "--period")) {
			int rc = tw_parse_duration_range(value, &o.period_lo_ns, &o.period_hi_ns);
			if (rc) {
				fprintf(stderr, "tw-jitter: --period '%s': %s\n", value,
					tw_strerror(rc));
				usage(NULL, NULL);
			}
		} else if (!strcmp(opt, "--seconds")) {
			o.duration_ns = count_of(value, opt) * 1000 * NS_PER_MS;
		} else if (!strcmp(opt, "--duration")) {
			o.duration_ns = duration_of(value, opt);
		} else if (!strcmp(opt, "--executors")) {
			o.executors = count_of(value, opt);
		} else if (!strcmp(opt, "--json")) {
			o.json = value;
		} else {
			usage("unknown option", opt);
		}
	}
	if (!o.tasks || o.period_lo_ns < NS_PER_MS || !o.duration_ns)
		usage("tasks and duration must be above 0, periods at least 1ms", NULL);
	return o;
}

struct report {
	tw_engine_stats stats;
	struct interval_summary intervals;
	uint64_t runs, early, p50, p90, p99, p999, max_ns;
	double seconds, cpu_percent;
};

static void print_report(const struct report *r)
{
	const struct interval_summary *iv = &r->intervals;
	printf("\n\nruns              %" PRIu64 " in %.1f s, %" PRIu64 " before their due\n",
	       r->runs, r->seconds, r->early);
	printf("skips             overlap %" PRIu64 ", overload %" PRIu64 ", missed %" PRIu64 "\n",
	       r->stats.skipped_overlap, r->stats.skipped_overload, r->stats.skipped_missed);
	printf("interval - period mean %.1f us, sd %.1f us, smallest %.1f us, largest %.1f us "
	       "(%" PRIu64 " intervals)\n",
	       iv->mean_ns / 1e3, iv->sd_ns / 1e3, iv->smallest_ns / 1e3, iv->largest_ns / 1e3,
	       iv->count);
	printf("lateness          p50 %" PRIu64 " us, p90 %" PRIu64 " us, p99 %" PRIu64
	       " us, p99.9 %" PRIu64 " us, max %.3f ms\n",
	       r->p50, r->p90, r->p99, r->p999, (double)r->max_ns / 1e6);
	printf("CPU               %.2f %% of one core, %" PRIu64 " wheel wake-ups\n",
	       r->cpu_percent, r->stats.wheel_wakeups);
}

static int write_json(const char *path, const struct options *o, const struct report *r)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	const struct interval_summary *iv = &r->intervals;
	fprintf(f,
		"{\"tasks\": %" PRIu64 ", \"period_ns\": [%" PRIu64 ", %" PRIu64 "], "
		"\"seconds\": %.3f, \"runs\": %" PRIu64 ", \"runs_before_due\": %" PRIu64 ",\n"
		" \"skipped\": {\"overlap\": %" PRIu64 ", \"overload\": %" PRIu64
		", \"missed\": %" PRIu64 "},\n"
		" \"interval_deviation_ns\": {\"count\": %" PRIu64
		", \"mean\": %.1f, \"sd\": %.1f, \"smallest\": %.1f, \"largest\": %.1f},\n"
		" \"lateness_us\": {\"p50\": %" PRIu64 ", \"p90\": %" PRIu64 ", \"p99\": %" PRIu64
		", \"p99.9\": %" PRIu64 ", \"max\": %.1f},\n"
		" \"cpu_percent\": %.3f, \"wheel_wakeups\": %" PRIu64 "}\n",
		o->tasks, o->period_lo_ns, o->period_hi_ns, r->seconds, r->runs, r->early,
		r->stats.skipped_overlap, r->stats.skipped_overload, r->stats.skipped_missed,
		iv->count, iv->mean_ns, iv->sd_ns, iv->smallest_ns, iv->largest_ns, r->p50, r->p90,
		r->p99, r->p999, (double)r->max_ns / 1e3, r->cpu_percent, r->stats.wheel_wakeups);
	return fclose(f) ? 1 : 0;
}

static void sleep_until(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
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
	srand(1);
	uint64_t lo_ms = o.period_lo_ns / NS_PER_MS, hi_ms = o.period_hi_ns / NS_PER_MS;
	for (uint64_t i = 0; i < o.tasks; i++) {
		uint64_t period = lo_ms + (uint64_t)rand() % (hi_ms - lo_ms + 1);
		tasks[i].period_ns = period * NS_PER_MS;
		tw_task_spec spec = { .delay_ms = 1 + (uint64_t)rand() % period,
				      .period_ms = period,
				      .callback = run,
				      .arg = &tasks[i] };
		tw_id id;
		if ((rc = tw_add(e, &spec, &id))) {
			fprintf(stderr, "tw-jitter: adding task %" PRIu64 ": %s\n", i,
				tw_strerror(rc));
			return 1;
		}
	}
	double cpu0 = process_cpu_seconds();
	uint64_t start = monotonic_now_ns(), end = start + o.duration_ns;
	for (uint64_t t = start + 1000 * NS_PER_MS; t < end + 1000 * NS_PER_MS;
	     t += 1000 * NS_PER_MS) {
		sleep_until(t < end ? t : end);
		printf("\r[%5.1f / %.1f s] runs %" PRIu64 ", p99 lateness %" PRIu64 " us   ",
		       (double)(monotonic_now_ns() - start) / 1e9, (double)o.duration_ns / 1e9,
		       lateness_runs(&late), lateness_percentile_us(&late, 0.99));
		fflush(stdout);
	}
	struct report r = { .seconds = (double)(monotonic_now_ns() - start) / 1e9 };
	tw_stats(e, &r.stats);
	tw_engine_stop(e, 1000);
	r.cpu_percent = 100.0 * (process_cpu_seconds() - cpu0) / r.seconds;
	r.intervals = intervals_pool(tasks, o.tasks);
	r.runs = lateness_runs(&late);
	r.early = atomic_load(&late.early);
	r.p50 = lateness_percentile_us(&late, 0.5);
	r.p90 = lateness_percentile_us(&late, 0.9);
	r.p99 = lateness_percentile_us(&late, 0.99);
	r.p999 = lateness_percentile_us(&late, 0.999);
	r.max_ns = atomic_load(&late.max_ns);
	print_report(&r);
	int failed = o.json ? write_json(o.json, &o, &r) : 0;
	tw_engine_destroy(e);
	free(tasks);
	return failed || r.early || !r.runs ? 1 : 0;
}
