/*
 * bench_engine.c - the engine benchmark: `bench-engine [SUBCOMMAND] [options]`
 * with the subcommands ops, dispatch, idle, heartbeats, list and all (the default),
 * each printing a table of figures next to the targets of issue 3; and the
 * helpers they share (clock, statistics, table, engine set-up).
 *
 * The exit status is 0 when every target was met, 1 when some were missed
 * and 2 on a usage or engine error.
 */
#include "bench_engine.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ---- clock and CPU ---- */

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	uint64_t us = (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec +
		      (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec;
	return us * 1000u;
}

void sleep_until_ns(uint64_t when)
{
	struct timespec ts = { .tv_sec = (time_t)(when / 1000000000u),
			       .tv_nsec = (long)(when % 1000000000u) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

void sleep_ms(uint64_t ms)
{
	sleep_until_ns(now_ns() + ms * 1000000u);
}

/* ---- random numbers ---- */

uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

uint32_t rng_below(uint64_t *state, uint32_t bound)
{
	return (uint32_t)(((rng_next(state) >> 32) * bound) >> 32);
}

uint32_t *random_permutation(size_t n, uint64_t *state)
{
	uint32_t *a = xmalloc(n * sizeof *a);
	for (size_t i = 0; i < n; i++)
		a[i] = (uint32_t)i;
	for (size_t i = n; i > 1; i--) {
		size_t j = rng_below(state, (uint32_t)i);
		uint32_t t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
	return a;
}

/* ---- samples ---- */

void *xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);
	if (!p) {
		fprintf(stderr, "bench-engine: out of memory (%zu bytes)\n", size);
		exit(2);
	}
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p) {
		fprintf(stderr, "bench-engine: out of memory (%zu x %zu bytes)\n", n, size);
		exit(2);
	}
	return p;
}

void samples_init(struct samples *s, size_t cap)
{
	s->cap = cap ? cap : 16;
	s->n = 0;
	s->v = xmalloc(s->cap * sizeof *s->v);
}

void samples_add(struct samples *s, double x)
{
	if (s->n == s->cap) {
		s->cap *= 2;
		s->v = realloc(s->v, s->cap * sizeof *s->v);
		if (!s->v) {
			fprintf(stderr, "bench-engine: out of memory\n");
			exit(2);
		}
	}
	s->v[s->n++] = x;
}

void samples_free(struct samples *s)
{
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void sort_doubles(double *v, size_t n)
{
	qsort(v, n, sizeof *v, compare_doubles);
}

double quantile_sorted(const double *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

void latency_init(struct latency *l, size_t batches)
{
	samples_init(&l->all, batches);
	samples_init(&l->round_medians, 16);
	l->round_start = 0;
}

void latency_batch(struct latency *l, double ns_per_op)
{
	samples_add(&l->all, ns_per_op);
}

void latency_end_round(struct latency *l)
{
	size_t n = l->all.n - l->round_start;
	if (!n)
		return;
	double *copy = xmalloc(n * sizeof *copy);
	memcpy(copy, l->all.v + l->round_start, n * sizeof *copy);
	sort_doubles(copy, n);
	samples_add(&l->round_medians, quantile_sorted(copy, n, 0.5));
	free(copy);
	l->round_start = l->all.n;
}

void latency_free(struct latency *l)
{
	samples_free(&l->all);
	samples_free(&l->round_medians);
}

void latency_summary(struct latency *l, double *med, double *p99, double *round_min,
		     double *round_max)
{
	latency_end_round(l);
	sort_doubles(l->all.v, l->all.n);
	sort_doubles(l->round_medians.v, l->round_medians.n);
	*med = quantile_sorted(l->all.v, l->all.n, 0.5);
	*p99 = quantile_sorted(l->all.v, l->all.n, 0.99);
	*round_min = l->round_medians.v[0];
	*round_max = l->round_medians.v[l->round_medians.n - 1];
}

/* ---- output ---- */

static int missed_total;

void table_header(const char *title)
{
	printf("\n== %s\n", title);
	printf("%-44s %-42s %-18s %s\n", "figure", "measured", "target", "verdict");
}

void table_row(const char *figure, const char *value, const char *target, int verdict)
{
	const char *word = verdict == INFO ? "" : verdict == MET ? "met" : "MISSED";
	printf("%-44s %-42s %-18s %s\n", figure, value, target ? target : "-", word);
	if (verdict == MISSED)
		missed_total++;
}

int verdict_le(double value, double limit)
{
	return value <= limit ? MET : MISSED;
}

int verdict_ge(double value, double limit)
{
	return value >= limit ? MET : MISSED;
}

void table_note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("  ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
}

/* ---- the engine ---- */

void check(int rc, const char *what)
{
	if (rc != TW_OK) {
		fprintf(stderr, "bench-engine: %s: %s\n", what, tw_strerror(rc));
		exit(2);
	}
}

tw_engine *engine_new(unsigned executors, bool manual_clock, unsigned queue_capacity)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = executors;
	cfg.manual_clock = manual_clock;
	if (queue_capacity)
		cfg.queue_capacity = queue_capacity;
	tw_engine *e;
	check(tw_engine_create(&cfg, &e), "tw_engine_create");
	return e;
}

void engine_end(tw_engine *e)
{
	int rc = tw_engine_stop(e, 5000);
	if (rc != TW_OK)
		fprintf(stderr, "bench-engine: tw_engine_stop: %s\n", tw_strerror(rc));
	tw_engine_destroy(e);
}

const char *executors_label(unsigned executors)
{
	static char label[48];
	if (executors)
		snprintf(label, sizeof label, "%u executor%s", executors,
			 executors == 1 ? "" : "s");
	else
		snprintf(label, sizeof label, "%ld executors (one per CPU)",
			 sysconf(_SC_NPROCESSORS_ONLN));
	return label;
}

int empty_callback(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 0;
}

int touching_callback(const tw_fire *fire, void *arg)
{
	(void)fire;
	((struct user_state *)arg)->runs++;
	return 0;
}

/* ---- main ---- */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: bench-engine [ops|dispatch|idle|heartbeats|list|all] [options]\n"
		"  --tasks N       ops, list: live tasks (1000000); dispatch: tasks per tick on the\n"
		"                  manual clock (100000); heartbeats: tasks (100000)\n"
		"  --real-tasks N  dispatch on the real clock: tasks at a 1 ms period (4000)\n"
		"  --seconds S     dispatch (3 per case), idle (10), heartbeats (10)\n"
		"  --executors N   executor threads (default 0: one per online CPU)\n"
		"  --rounds R      ops, list: measured passes per figure (5)\n"
		"  --seed X        random seed (1)\n"
		"With `all` (the default: idle, ops, dispatch, heartbeats, list) each option applies\n"
		"to every subcommand that uses it.\n");
}

static bool parse_number(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || v < 0)
		return false;
	*out = v;
	return true;
}

static int parse(int argc, char **argv, struct options *opt, const char **command)
{
	memset(opt, 0, sizeof *opt);
	opt->seed = 1;
	*command = "all";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-') {
			*command = a;
			continue;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		}
		double v;
		if (i + 1 >= argc || !parse_number(argv[i + 1], &v)) {
			fprintf(stderr, "bench-engine: %s needs a number\n", a);
			return -1;
		}
		i++;
		if (!strcmp(a, "--tasks") && v >= 1)
			opt->tasks = (size_t)v;
		else if (!strcmp(a, "--real-tasks") && v >= 1)
			opt->real_tasks = (size_t)v;
		else if (!strcmp(a, "--seconds") && v > 0)
			opt->seconds = v;
		else if (!strcmp(a, "--executors"))
			opt->executors = (unsigned)v;
		else if (!strcmp(a, "--rounds") && v >= 1)
			opt->rounds = (unsigned)v;
		else if (!strcmp(a, "--seed"))
			opt->seed = (uint64_t)v;
		else {
			fprintf(stderr, "bench-engine: unknown or invalid option %s\n", a);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct options opt;
	const char *command;
	if (parse(argc, argv, &opt, &command)) {
		usage(stderr);
		return 2;
	}
	/* `all` runs idle first: the memory the other subcommands' engines
	 * leave resident in jemalloc (120 MiB after ops and dispatch) made each
	 * idle wake-up several times dearer on this VM (0.2-0.4 % CPU against
	 * 0.05-0.1 % in a fresh process; purging the arenas restored it). */
	static const struct {
		const char *name;
		void (*run)(const struct options *);
	} subcommands[] = {
		{ "idle", run_idle },         { "ops", run_ops },
		{ "dispatch", run_dispatch }, { "heartbeats", run_heartbeats },
		{ "list", run_list },
	};
	enum { COUNT = sizeof subcommands / sizeof subcommands[0] };
	bool all = !strcmp(command, "all"), found = all;
	for (size_t i = 0; i < COUNT; i++) {
		if (all || !strcmp(command, subcommands[i].name)) {
			found = true;
			subcommands[i].run(&opt);
			fflush(stdout);
		}
	}
	if (!found) {
		fprintf(stderr, "bench-engine: unknown subcommand %s\n", command);
		usage(stderr);
		return 2;
	}
	printf("\n%d target%s missed\n", missed_total, missed_total == 1 ? "" : "s");
	return missed_total ? 1 : 0;
}
