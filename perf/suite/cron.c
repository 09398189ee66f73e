/*
 * cron.c - `tw-perf cron`: what a calendar schedule costs outside the engine:
 * tw_cron_parse per expression (with "UTC", which reads no file, and with an
 * IANA zone, which reads its TZif file each time), and tw_cron_next per fire
 * time, asked one at a time from the one before, as an engine re-plans a
 * task after each firing; and how long a schedule that never fires takes to
 * say so (the search bound, 3660 days).
 *
 * Each case runs R rounds of N calls, timed as a whole with CLOCK_MONOTONIC;
 * a figure is the median round's time per call, the lowest and highest
 * rounds in a note. Schedules are parsed with explicit zones, so the run does
 * not depend on the machine's local zone.
 *
 *   defaults: 7 rounds of 20 000 parses and 200 000 next times (--quick: 3 rounds, a tenth)
 */
#include "suite.h"
#include "suite_util.h"

#include "measure.h"
#include "tickwheel.h"

#include <stdio.h>
#include <stdlib.h>

#define NS INT64_C(1000000000)

struct expr_case {
	const char *label, *expr;
};

static const struct expr_case parse_cases[] = {
	{ "utc_every_5min", "CRON_TZ=UTC 0 */5 * * * *" },
	{ "utc_long", "CRON_TZ=UTC 0,30 0 9-17/2 1,15 JAN-MAR,JUL-SEP MON-FRI" },
	{ "utc_macro", "CRON_TZ=UTC @daily" },
	{ "utc_every", "CRON_TZ=UTC @every 150ms" },
	{ "berlin_nightly", "CRON_TZ=Europe/Berlin 0 30 2 * * *" },
	{ "new_york_weekdays", "CRON_TZ=America/New_York 0 0 9 * * MON-FRI" },
};

static const struct expr_case next_cases[] = {
	{ "utc_every_second", "CRON_TZ=UTC * * * * * *" },
	{ "utc_every_5min", "CRON_TZ=UTC 0 */5 * * * *" },
	{ "berlin_every_5min", "CRON_TZ=Europe/Berlin 0 */5 * * * *" },
	{ "berlin_nightly", "CRON_TZ=Europe/Berlin 0 30 2 * * *" },
	{ "new_york_weekdays", "CRON_TZ=America/New_York 0 0 9 * * MON-FRI" },
	{ "sydney_1st_15th_or_friday", "CRON_TZ=Australia/Sydney 0 15 10 1,15 * FRI" },
	{ "berlin_monthly", "CRON_TZ=Europe/Berlin @monthly" },
	{ "utc_29_february", "CRON_TZ=UTC 0 0 0 29 2 *" },
	{ "every_150ms", "CRON_TZ=UTC @every 150ms" },
};

/* 2026-01-01T00:00:00Z; searches start over from it 50 years on. */
static const int64_t START = INT64_C(1767225600) * NS;
static const int64_t SPAN = INT64_C(50) * 365 * 86400 * NS;

static int compare_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* One round of n parses (and frees); ns per call, or -1 when a parse fails. */
static double parse_round(const char *expr, size_t n)
{
	uint64_t t0 = monotonic_now_ns();
	for (size_t i = 0; i < n; i++) {
		tw_cron *c;
		if (tw_cron_parse(expr, &c, NULL))
			return -1;
		tw_cron_free(c);
	}
	return (double)(monotonic_now_ns() - t0) / (double)n;
}

/* One round of n next times, each from the one before; ns per call. */
static double next_round(const tw_cron *c, size_t n, int64_t *sink)
{
	int64_t after = START, t;
	uint64_t t0 = monotonic_now_ns();
	for (size_t i = 0; i < n; i++) {
		if (tw_cron_next(c, after, &t, 1))
			return -1;
		after = t - START > SPAN ? START : t;
	}
	*sink += after;
	return (double)(monotonic_now_ns() - t0) / (double)n;
}

/* The median of the rounds into the report, the range into a note. */
static void record(struct report *r, const char *what, const char *label, double *ns, int rounds)
{
	qsort(ns, (size_t)rounds, sizeof *ns, compare_double);
	char name[96];
	snprintf(name, sizeof name, "%s_ns@%s", what, label);
	report_add(r, "tickwheel", name, ns[rounds / 2], "ns", BETTER_LOWER);
	report_note(r, "%s: rounds %.1f .. %.1f ns", name, ns[0], ns[rounds - 1]);
}

int scenario_cron(const struct suite_options *opt, struct report *r)
{
	int rounds = opt->quick ? 3 : 7;
	size_t parses = opt->quick ? 2000 : 20000, nexts = opt->quick ? 20000 : 200000;
	report_param(r, "rounds", rounds);
	report_param(r, "parses_per_round", (double)parses);
	report_param(r, "nexts_per_round", (double)nexts);
	double ns[7];
	int64_t sink = 0;
	for (size_t k = 0; k < sizeof parse_cases / sizeof parse_cases[0]; k++) {
		for (int i = 0; i < rounds; i++)
			if ((ns[i] = parse_round(parse_cases[k].expr, parses)) < 0) {
				fprintf(stderr,
					"tw-perf cron: '%s' does not parse (is tzdata installed?)\n",
					parse_cases[k].expr);
				return 2;
			}
		record(r, "parse", parse_cases[k].label, ns, rounds);
	}
	for (size_t k = 0; k < sizeof next_cases / sizeof next_cases[0]; k++) {
		tw_cron *c;
		if (tw_cron_parse(next_cases[k].expr, &c, NULL)) {
			fprintf(stderr,
				"tw-perf cron: '%s' does not parse (is tzdata installed?)\n",
				next_cases[k].expr);
			return 2;
		}
		for (int i = 0; i < rounds; i++)
			ns[i] = next_round(c, nexts, &sink);
		tw_cron_free(c);
		if (ns[0] < 0) {
			fprintf(stderr, "tw-perf cron: '%s' ran out of fire times\n",
				next_cases[k].expr);
			return 2;
		}
		record(r, "next", next_cases[k].label, ns, rounds);
	}
	/* The search bound: a schedule that never fires, asked n / 100 times. */
	tw_cron *never;
	if (tw_cron_parse("CRON_TZ=Europe/Berlin 0 0 0 30 2 *", &never, NULL))
		return 2;
	for (int i = 0; i < rounds; i++) {
		size_t n = nexts / 100;
		int64_t t;
		uint64_t t0 = monotonic_now_ns();
		for (size_t j = 0; j < n; j++)
			sink += tw_cron_next(never, START + (int64_t)j, &t, 1);
		ns[i] = (double)(monotonic_now_ns() - t0) / (double)n;
	}
	tw_cron_free(never);
	record(r, "next", "berlin_never_30_february", ns, rounds);
	for (size_t k = 0; k < sizeof next_cases / sizeof next_cases[0]; k++)
		report_note(r, "%s: %s", next_cases[k].label, next_cases[k].expr);
	for (size_t k = 0; k < 4; k++)
		report_note(r, "%s: %s", parse_cases[k].label, parse_cases[k].expr);
	report_note(r,
		    "parse with a zone reads its TZif file each time (no cache); next_ns: "
		    "one fire time per call, from the one before (checksum %lld)",
		    (long long)(sink & 0xffff));
	return 0;
}
