/*
 * tw-showcase - the engine at work: heartbeats that must not drift, and
 * session timeouts reset all the time, for a few seconds on the real clock.
 *
 *   tw-showcase [--heartbeats N] [--sessions N] [--resets-per-second R] [--seconds S]
 *   tw-showcase -h | --help | --version
 *
 * Heartbeats: N periodic tasks, periods drawn from 100-500 ms (whole ms).
 * Sessions: one-shot timeouts of 5 s that an application thread keeps
 * pushing back (tw_set_delay), except for a tenth of them that go quiet and
 * expire. Prints a progress line every second, then a report.
 *
 * A bad command line (cli.h) is one line on stderr and exit status 2; an
 * engine call that fails, or no memory, exits 1.
 */
#include "cli.h"
#include "measure.h"
#include "tickwheel.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SESSION_TIMEOUT_MS = 5000 };

static struct lateness late;
static _Atomic uint64_t heartbeat_runs, expiries;

static int beat(const tw_fire *fire, void *arg)
{
	uint64_t start = monotonic_now_ns();
	lateness_note(&late, start, fire->due_ns);
	atomic_fetch_add(&heartbeat_runs, 1);
	intervals_note(arg, start, fire->skipped);
	return 0;
}

static int expire(const tw_fire *fire, void *arg)
{
	(void)arg;
	lateness_note(&late, monotonic_now_ns(), fire->due_ns);
	atomic_fetch_add(&expiries, 1);
	return 0;
}

#define PROG "tw-showcase"

/* Bounds of the values: counts a table of tasks can hold, resets an
 * application thread could ask for, runs of up to a million seconds. */
#define MAX_TASKS   UINT64_C(4294967295)
#define MAX_RESETS  UINT64_C(1000000000)
#define MAX_SECONDS UINT64_C(1000000)

static void usage(FILE *out)
{
	fprintf(out,
		"usage: tw-showcase [--heartbeats N] [--sessions N] [--resets-per-second R]\n"
		"                   [--seconds S]\n"
		"       tw-showcase -h | --help | --version\n"
		"\n"
		"The engine at work on the real clock: heartbeats at periods of 100-500 ms\n"
		"that must not drift, and session timeouts of 5 s that an application thread\n"
		"keeps pushing back, but for a tenth of them that go quiet and expire. A\n"
		"progress line every second, then runs, skips, lateness, interval jitter,\n"
		"resets, wake-ups and CPU.\n"
		"\n"
		"  --heartbeats N           periodic tasks, 0 .. %" PRIu64 " (default 100000)\n"
		"  --sessions N             session timeouts, 0 .. %" PRIu64 " (default 100000)\n"
		"  --resets-per-second R    0 .. %" PRIu64 " (default 200000)\n"
		"  --seconds S              how long to run, 1 .. %" PRIu64 " (default 10)\n"
		"  -h, --help               this text\n"
		"  --version                the version\n"
		"\n"
		"Exit status: 0; 1 if the engine failed or memory ran out; 2 on a bad command\n"
		"line.\n",
		MAX_TASKS, MAX_TASKS, MAX_RESETS, MAX_SECONDS);
}

struct options {
	uint64_t heartbeats, sessions, resets_per_second, seconds;
};

enum { OPT_HEARTBEATS = 1, OPT_SESSIONS, OPT_RESETS, OPT_SECONDS };

static const struct cli_option option_table[] = {
	{ "--heartbeats", OPT_HEARTBEATS, true },
	{ "--sessions", OPT_SESSIONS, true },
	{ "--resets-per-second", OPT_RESETS, true },
	{ "--seconds", OPT_SECONDS, true },
	{ NULL, 0, false },
};

static struct options parse(int argc, char **argv)
{
	struct options o = { 100000, 100000, 200000, 10 };
	struct cli c;
	cli_init(&c, PROG, usage, option_table, argc, argv, 1);
	for (int id; (id = cli_next(&c)) != CLI_END;) {
		switch (id) {
		case OPT_HEARTBEATS:
			o.heartbeats = cli_count(PROG, c.option, c.value, 0, MAX_TASKS);
			break;
		case OPT_SESSIONS:
			o.sessions = cli_count(PROG, c.option, c.value, 0, MAX_TASKS);
			break;
		case OPT_RESETS:
			o.resets_per_second = cli_count(PROG, c.option, c.value, 0, MAX_RESETS);
			break;
		case OPT_SECONDS:
			o.seconds = cli_count(PROG, c.option, c.value, 1, MAX_SECONDS);
			break;
		default:
			cli_fail(PROG, "unexpected argument '%s'", c.value);
		}
	}
	if (!o.heartbeats && !o.sessions)
		cli_fail(PROG, "--heartbeats and --sessions are both 0: nothing to show");
	return o;
}

static void check(int rc, const char *what)
{
	if (rc) {
		fprintf(stderr, "tw-showcase: %s: %s\n", what, tw_strerror(rc));
		exit(1);
	}
}

static struct deviations deviations; /* of every heartbeat's intervals */

static void report_intervals(const struct intervals *h, uint64_t n)
{
	struct interval_summary sum = intervals_pool(h, n);
	printf("interval jitter   sd %.1f us, deviation %.1f .. %.1f us over %" PRIu64
	       " intervals\n",
	       sum.sd_ns / 1e3, sum.smallest_ns / 1e3, sum.largest_ns / 1e3, sum.count);
	printf("                  |interval - period|: p50 %.0f us, p99 %.0f us (10 us bins), "
	       "%.2f %% off by more than 1 ms\n",
	       deviations_off_quantile_us(&deviations, 0.5),
	       deviations_off_quantile_us(&deviations, 0.99),
	       100 * deviations_off_fraction(&deviations, 1000));
}

int main(int argc, char **argv)
{
	struct options o = parse(argc, argv);
	tw_engine *e;
	check(tw_engine_create(NULL, &e), "create");
	struct intervals *beats = calloc(o.heartbeats ? o.heartbeats : 1, sizeof *beats);
	tw_id *sessions = calloc(o.sessions ? o.sessions : 1, sizeof *sessions);
	if (!beats || !sessions) {
		fprintf(stderr,
			PROG ": out of memory for %" PRIu64 " heartbeats and %" PRIu64
			     " sessions\n",
			o.heartbeats, o.sessions);
		return 1;
	}
	srand(42);
	for (uint64_t i = 0; i < o.heartbeats; i++) {
		uint64_t period = 100 + (uint64_t)rand() % 401;
		beats[i].period_ns = period * 1000000u;
		beats[i].histogram = &deviations;
		tw_task_spec spec = { .delay_ms = 1 + (uint64_t)rand() % period,
				      .period_ms = period,
				      .callback = beat,
				      .arg = &beats[i] };
		tw_id id;
		check(tw_add(e, &spec, &id), "add heartbeat");
	}
	for (uint64_t i = 0; i < o.sessions; i++) {
		tw_task_spec spec = { .delay_ms = SESSION_TIMEOUT_MS, .callback = expire };
		check(tw_add(e, &spec, &sessions[i]), "add session");
	}
	printf("tw-showcase: %" PRIu64 " heartbeats at 100-500 ms, %" PRIu64
	       " sessions (timeout 5 s, %" PRIu64 " resets/s), %" PRIu64 " s\n",
	       o.heartbeats, o.sessions, o.resets_per_second, o.seconds);
	tw_engine_stats before; /* the adds woke the wheel thread too: not the run's */
	check(tw_stats(e, &before), "stats");
	double cpu0 = process_cpu_seconds();
	uint64_t start = monotonic_now_ns(), resets = 0, quiet = o.sessions / 10;
	for (uint64_t second = 1; second <= o.seconds; second++) {
		/* Reset sessions in small batches spread over the second; they add up to
		 * R a second even when R is not a multiple of 100. */
		for (uint64_t slice = 0; slice < 100; slice++) {
			uint64_t batch = o.resets_per_second * (slice + 1) / 100 -
					 o.resets_per_second * slice / 100;
			for (uint64_t k = 0; k < batch && o.sessions > quiet; k++) {
				uint64_t i = quiet + (uint64_t)rand() % (o.sessions - quiet);
				resets += tw_set_delay(e, sessions[i], SESSION_TIMEOUT_MS) == TW_OK;
			}
			monotonic_sleep_until(start + (second - 1) * 1000000000u +
					      (slice + 1) * 10000000u);
		}
		tw_engine_stats st;
		tw_stats(e, &st);
		printf("\r[%2" PRIu64 "/%" PRIu64 " s] runs %" PRIu64 ", skips %" PRIu64
		       ", resets %" PRIu64 ", expired %" PRIu64 ", p99 late %" PRIu64 " us   ",
		       second, o.seconds, st.runs,
		       st.skipped_overlap + st.skipped_overload + st.skipped_missed, resets,
		       atomic_load(&expiries), lateness_percentile_us(&late, 0.99));
		fflush(stdout);
	}
	double cpu = process_cpu_seconds() - cpu0;
	tw_engine_stats st;
	tw_stats(e, &st);
	check(tw_engine_stop(e, 1000), "stop");
	printf("\n\nruns              %" PRIu64 " (heartbeats %" PRIu64
	       ", session expiries %" PRIu64 ")\n",
	       st.runs, atomic_load(&heartbeat_runs), atomic_load(&expiries));
	printf("skips             overlap %" PRIu64 ", overload %" PRIu64 ", missed %" PRIu64 "\n",
	       st.skipped_overlap, st.skipped_overload, st.skipped_missed);
	printf("runs before due   %" PRIu64 "\n", atomic_load(&late.early));
	printf("lateness          p50 %" PRIu64 " us, p90 %" PRIu64 " us, p99 %" PRIu64
	       " us, p99.9 %" PRIu64 " us, max %.3f ms\n",
	       lateness_percentile_us(&late, 0.5), lateness_percentile_us(&late, 0.9),
	       lateness_percentile_us(&late, 0.99), lateness_percentile_us(&late, 0.999),
	       (double)atomic_load(&late.max_ns) / 1e6);
	report_intervals(beats, o.heartbeats);
	printf("session resets    %" PRIu64 " (%.0f per second)\n", resets,
	       (double)resets * 1e9 / (double)(monotonic_now_ns() - start));
	printf("wheel wake-ups    %.0f per second, CPU %.1f%% of one core\n",
	       (double)(st.wheel_wakeups - before.wheel_wakeups) / (double)o.seconds,
	       100.0 * cpu / (double)o.seconds);
	tw_engine_destroy(e);
	free(beats);
	free(sessions);
	return 0;
}
