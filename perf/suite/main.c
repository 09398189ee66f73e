/*
 * main.c - `tw-perf SCENARIO [options]`: parses the options every scenario
 * shares, checks the outputs, runs the scenario, prints its table, writes
 * --json.
 *
 *   tw-perf replay FILE [--speed X] [--json FILE] [--hgrm FILE] [--plot DIR]
 *   tw-perf SCENARIO [--tasks N] [--seconds S] [--period 100-500ms] [--sessions N] [--rate R]
 *                    [--timeout 30s] [--quiet F] [--threads N] [--executors N] [--block 2s]
 *                    [--sizes 1000,100000] [--op OP] [--impl NAME] [--peers libev,libuv | none] [--seed S] [--quick]
 *                    [--coarse-clock] [--reset-many] [--reserve] [--json FILE] [--hgrm FILE]
 *                    [--plot DIR]
 *   tw-perf -h | --help | --version
 *
 * The command line is checked before the scenario starts (measure/cli.h): a bad
 * value, an unknown option or scenario, a --json file or --plot directory that
 * cannot be written is one line on stderr and exit status 2.
 *
 * Exit status: 0 when every target was met (or the scenario has none), 1 when
 * some target was missed, 2 on a usage or set-up error.
 */
#include "cli.h"
#include "peer.h"
#include "suite.h"
#include "tickwheel.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "tw-perf"

struct scenario {
	const char *name;
	scenario_fn run;
	const char *what;
};

static const struct scenario scenarios[] = {
	{ "heartbeats", scenario_heartbeats,
	  "N periodic tasks, periods 100-500 ms: lateness, intervals, drift, CPU (with peers)" },
	{ "sessions", scenario_sessions,
	  "N session timeouts reset at R/s by application threads; some expire" },
	{ "churn", scenario_churn,
	  "20 000 tasks, 100 ms to hours, a third rescheduled while running: wake-ups" },
	{ "burst", scenario_burst,
	  "N one-shots due within one second: how late the last one starts (with peers)" },
	{ "oneshots-busy", scenario_oneshots_busy,
	  "10 000 one-shots due while the one executor is busy 50 ms: how many never run" },
	{ "blocker", scenario_blocker,
	  "20 000 heartbeats while one callback blocks B s: lateness, skips, in the block" },
	{ "queued-behind", scenario_queued_behind,
	  "100 serial tasks added while a callback sleeps 1.5 s: how many ran in 300 ms" },
	{ "idle", scenario_idle, "one 200 ms task: wake-ups per second, CPU (with peers)" },
	{ "stall", scenario_stall,
	  "the process stopped 2 s under periodic tasks: skips, no catch-up burst, phase kept" },
	{ "ops", scenario_ops,
	  "ns per operation of the wheel (with peers) and of the engine API, N = 1k .. 10M" },
	{ "dispatch", scenario_dispatch,
	  "runs of an empty callback per second: manual clock (N tasks), real clock" },
	{ "list", scenario_list,
	  "tw_list per task visited at N tasks, under resets; tw_stats, tw_metrics_format" },
	{ "lumps", scenario_lumps,
	  "N timers due within a second, the wheel advanced tick by tick: the longest tick" },
	{ "reap", scenario_reap,
	  "heartbeats while N tasks are added, cancelled, reaped: each phase's lateness" },
	{ "callgrind-op", scenario_callgrind_op,
	  "one operation over N timers of the wheel or a peer, for perf/callgrind.sh" },
	{ "icount", scenario_icount,
	  "instructions per operation, for perf/gate.py under valgrind --tool=callgrind" },
	{ "cron", scenario_cron,
	  "tw_cron_parse per expression, tw_cron_next per fire time, in UTC and in zones" },
	{ "snapshot", scenario_snapshot,
	  "tw_snapshot and tw_restore of N named tasks: seconds, bytes per task" },
	{ "replay", scenario_replay,
	  "tw-perf replay FILE: a recording's operations re-issued with their timing" },
};
enum { SCENARIOS = sizeof scenarios / sizeof scenarios[0] };

/* Bounds of the values: the scenarios' tables hold up to 2^32 - 1 tasks or
 * sessions; threads a machine can have; runs of up to a million seconds
 * (11.6 days); the engine's longest delay. */
#define MAX_COUNT   UINT64_C(4294967295)
#define MAX_THREADS 1024
#define MAX_SECONDS 1e6
#define MAX_RATE    1e9

static void usage(FILE *out)
{
	fprintf(out, "usage: tw-perf SCENARIO [options]\n"
		     "       tw-perf replay FILE [--speed X] [--json FILE] [--hgrm FILE]\n"
		     "       tw-perf -h | --help | --version\n\nscenarios:\n");
	for (size_t i = 0; i < SCENARIOS; i++)
		fprintf(out, "  %-13s %s\n", scenarios[i].name, scenarios[i].what);
	fprintf(out,
		"\noptions (each scenario uses those that apply; one left out takes the\n"
		"scenario's default, in perf/README.md):\n"
		"  --tasks N           timers or tasks, 1 .. %" PRIu64 "\n"
		"  --seconds S         how long to run, above 0, at most %.0f\n"
		"  --period P          a period or a range, whole ms from 1ms: 100-500ms\n"
		"  --sessions N        session timeouts, 1 .. %" PRIu64 "\n"
		"  --rate R            resets (sessions), reschedules (churn) a second, above 0\n"
		"  --timeout T         the session timeout, whole ms from 1ms: 30s\n"
		"  --quiet F           the fraction of sessions that go quiet, in (0, 1)\n"
		"  --threads N         application threads, 1 .. %d\n"
		"  --executors N       executor threads, 0 .. %d; 0 = one per online CPU\n"
		"  --block B           blocker: how long the callback blocks, whole ms from 1ms: 2s\n"
		"  --sizes N,N,...     ops: the numbers of timers, 1000,100000\n"
		"  --op OP             callgrind-op: add, cancel, reschedule, reset, expiry,\n"
		"                      expiry-short\n"
		"  --impl NAME         callgrind-op: wheel (the default) or a peer built in\n"
		"  --peers P,P | none  the peers to run beside tickwheel (default: all built)\n"
		"  --seed S            the random draws, a whole number\n"
		"  --quick             the smallest run that still says something\n"
		"  --coarse-clock      sessions: the engine's coarse_clock option\n"
		"  --reset-many        sessions: a batch of 64 resets is one tw_set_delay_many\n"
		"  --reserve           ops: the engine reserves its N tasks at create\n"
		"                      (tw_config.reserve_tasks)\n"
		"  --speed X           replay: X times as fast (every time / X), above 0; 1\n"
		"  --hgrm FILE         replay, heartbeats, burst, oneshots-busy, blocker:\n"
		"                      lateness in HdrHistogram's percentile text (a peer's\n"
		"                      beside it: FILE-libev.hgrm)\n"
		"  --json FILE         every figure, target, note and series, and the machine\n"
		"  --plot DIR          the pictures, PNGs through gnuplot (made if missing)\n"
		"  -h, --help          this text\n"
		"  --version           the version\n"
		"\npeers built in:",
		MAX_COUNT, MAX_SECONDS, MAX_COUNT, MAX_THREADS, MAX_THREADS);
	for (size_t i = 1; suite_loops[i] != NULL; i++)
		fprintf(out, " %s", suite_loops[i]->name);
	fprintf(out, "%s\n\n", suite_loops[1] ? "" : " none");
	fprintf(out,
		"Exit status: 0 when every target was met, 1 when one was missed, 2 on a\n"
		"bad command line, an output that cannot be written (both checked before\n"
		"the run) or a set-up error (replay: a file that is not a whole recording).\n");
}

/* The peers' names, for --help and the checks of --peers. */
static bool peer_built(const char *name, size_t len)
{
	for (size_t i = 1; suite_loops[i] != NULL; i++)
		if (strlen(suite_loops[i]->name) == len &&
		    !strncmp(suite_loops[i]->name, name, len))
			return true;
	return false;
}

/* "none", or names of peers built in, comma-separated. */
static void check_peers(const char *text)
{
	if (!strcmp(text, "none"))
		return;
	for (const char *p = text;; p++) {
		size_t len = strcspn(p, ",");
		if (!len)
			cli_bad_value(PROG, "--peers", text,
				      "needs peer names, comma-separated, or none");
		if (!peer_built(p, len)) {
			bool known = (len == 5 && !strncmp(p, "libuv", len)) ||
				     (len == 8 && !strncmp(p, "libevent", len)) ||
				     (len == 5 && !strncmp(p, "libev", len));
			cli_bad_value(PROG, "--peers", text, "%s '%.*s'",
				      known ? "this build has no peer" : "no such peer", (int)len,
				      p);
		}
		p += len;
		if (!*p)
			return;
	}
}

enum {
	OPT_TASKS = 1,
	OPT_SECONDS,
	OPT_PERIOD,
	OPT_SESSIONS,
	OPT_RATE,
	OPT_TIMEOUT,
	OPT_QUIET,
	OPT_THREADS,
	OPT_EXECUTORS,
	OPT_BLOCK,
	OPT_SIZES,
	OPT_OP,
	OPT_IMPL,
	OPT_PEERS,
	OPT_JSON,
	OPT_PLOT,
	OPT_SEED,
	OPT_QUICK,
	OPT_COARSE_CLOCK,
	OPT_RESET_MANY,
	OPT_RESERVE,
	OPT_SPEED,
	OPT_HGRM
};

static const struct cli_option option_table[] = {
	{ "--tasks", OPT_TASKS, true },
	{ "--seconds", OPT_SECONDS, true },
	{ "--period", OPT_PERIOD, true },
	{ "--sessions", OPT_SESSIONS, true },
	{ "--rate", OPT_RATE, true },
	{ "--timeout", OPT_TIMEOUT, true },
	{ "--quiet", OPT_QUIET, true },
	{ "--threads", OPT_THREADS, true },
	{ "--executors", OPT_EXECUTORS, true },
	{ "--block", OPT_BLOCK, true },
	{ "--sizes", OPT_SIZES, true },
	{ "--op", OPT_OP, true },
	{ "--impl", OPT_IMPL, true },
	{ "--peers", OPT_PEERS, true },
	{ "--json", OPT_JSON, true },
	{ "--plot", OPT_PLOT, true },
	{ "--seed", OPT_SEED, true },
	{ "--quick", OPT_QUICK, false },
	{ "--coarse-clock", OPT_COARSE_CLOCK, false },
	{ "--reset-many", OPT_RESET_MANY, false },
	{ "--reserve", OPT_RESERVE, false },
	{ "--speed", OPT_SPEED, true },
	{ "--hgrm", OPT_HGRM, true },
	{ NULL, 0, false },
};

/* The options from argv[first]; an argument that is not an option is one
 * more error (the scenario comes first). */
static struct suite_options parse(int argc, char **argv, int first, bool takes_file)
{
	struct suite_options o = { .seed = 20240601 };
	struct cli c;
	cli_init(&c, PROG, usage, option_table, argc, argv, first);
	for (int id; (id = cli_next(&c)) != CLI_END;) {
		const char *opt = c.option, *v = c.value;
		switch (id) {
		case OPT_TASKS:
			o.tasks = cli_count(PROG, opt, v, 1, MAX_COUNT);
			break;
		case OPT_SECONDS:
			o.seconds = cli_real(PROG, opt, v, 0, MAX_SECONDS,
					     "needs a number of seconds above 0, at most 1000000");
			break;
		case OPT_PERIOD:
			cli_ms_range(PROG, opt, v, 1, TW_MAX_DELAY_MS, &o.period_lo_ms,
				     &o.period_hi_ms);
			break;
		case OPT_SESSIONS:
			o.sessions = cli_count(PROG, opt, v, 1, MAX_COUNT);
			break;
		case OPT_RATE:
			o.rate = cli_real(PROG, opt, v, 0, MAX_RATE,
					  "needs a number a second above 0, at most 1000000000");
			break;
		case OPT_TIMEOUT:
			o.timeout_s = (double)cli_ms(PROG, opt, v, 1, TW_MAX_DELAY_MS) / 1e3;
			break;
		case OPT_QUIET:
			o.quiet = cli_real(PROG, opt, v, 0, 1,
					   "needs a fraction above 0 and below 1");
			if (o.quiet >= 1)
				cli_bad_value(PROG, opt, v, "needs a fraction above 0 and below 1");
			break;
		case OPT_THREADS:
			o.threads = (unsigned)cli_count(PROG, opt, v, 1, MAX_THREADS);
			break;
		case OPT_EXECUTORS:
			o.executors = (unsigned)cli_count(PROG, opt, v, 0, MAX_THREADS);
			break;
		case OPT_BLOCK:
			o.block_ms = cli_ms(PROG, opt, v, 1, TW_MAX_DELAY_MS);
			break;
		case OPT_SIZES:
			o.sizes = v; /* checked by ops, the one scenario that reads it */
			break;
		case OPT_OP: /* checked by callgrind-op, the one scenario that reads it */
			o.op = v;
			break;
		case OPT_IMPL:
			o.impl = v;
			break;
		case OPT_PEERS:
			check_peers(v);
			o.peers = v;
			break;
		case OPT_JSON:
			o.json = v;
			break;
		case OPT_PLOT:
			o.plot_dir = v;
			break;
		case OPT_SEED:
			o.seed = cli_count(PROG, opt, v, 0, UINT64_MAX);
			break;
		case OPT_QUICK:
			o.quick = true;
			break;
		case OPT_COARSE_CLOCK:
			o.coarse_clock = true;
			break;
		case OPT_RESET_MANY:
			o.reset_many = true;
			break;
		case OPT_RESERVE:
			o.reserve = true;
			break;
		case OPT_SPEED:
			o.speed = cli_real(PROG, opt, v, 0, 1e6, /* a second recorded: 1 us */
					   "needs a factor above 0, at most 1000000");
			break;
		case OPT_HGRM:
			o.hgrm = v;
			break;
		case CLI_ARGUMENT:
			if (takes_file && !o.file) {
				o.file = v;
				break;
			}
			/* fall through */
		default:
			for (size_t i = 0; i < SCENARIOS; i++)
				if (!strcmp(v, scenarios[i].name))
					cli_fail(PROG,
						 "the scenario comes first: tw-perf %s [options]",
						 v);
			cli_fail(PROG, "unexpected argument '%s'", v);
		}
	}
	return o;
}

bool suite_peer_wanted(const struct suite_options *opt, const char *name)
{
	bool built = false;
	for (size_t i = 1; suite_loops[i] != NULL; i++)
		built |= !strcmp(suite_loops[i]->name, name);
	if (!built || (opt->peers && !strcmp(opt->peers, "none")))
		return false;
	if (!opt->peers)
		return true;
	size_t len = strlen(name);
	for (const char *p = opt->peers; (p = strstr(p, name)) != NULL; p += len)
		if ((p == opt->peers || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
			return true;
	return false;
}

const char *suite_plot_path(const struct suite_options *opt, const char *name)
{
	static char path[4096];
	snprintf(path, sizeof path, "%s/%s", opt->plot_dir ? opt->plot_dir : ".", name);
	return path;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return CLI_USAGE;
	}
	/* SCENARIO first; anything else there is an option (--help, --version) */
	const struct scenario *s = NULL;
	if (argv[1][0] != '-') {
		for (size_t i = 0; i < SCENARIOS; i++)
			if (!strcmp(argv[1], scenarios[i].name))
				s = &scenarios[i];
		if (!s)
			cli_fail(
				PROG,
				"unknown scenario '%s' (heartbeats, sessions, churn, burst, "
				"oneshots-busy, blocker, queued-behind, idle, stall, ops, dispatch, list, "
				"lumps, reap, callgrind-op, icount, cron, snapshot, replay)",
				argv[1]);
	}
	struct suite_options opt = parse(argc, argv, s ? 2 : 1, s && s->run == scenario_replay);
	if (!s)
		cli_fail(PROG, "no scenario: tw-perf SCENARIO [options]");
	if (s->run == scenario_replay && !opt.file)
		cli_fail(PROG, "replay needs a recording: tw-perf replay FILE [options]");
	/* the outputs, before a run that would end in "cannot write" */
	if (opt.json)
		cli_check_file(PROG, "--json", opt.json);
	if (opt.hgrm)
		cli_check_file(PROG, "--hgrm", opt.hgrm);
	bool made_plot_dir = opt.plot_dir && cli_check_dir(PROG, "--plot", opt.plot_dir);
	struct report *r = report_open("tw-perf", s->name, argc, argv);
	if (!r) {
		fprintf(stderr, "tw-perf: out of memory\n");
		return 2;
	}
	int rc = s->run(&opt, r);
	if (rc == 0) {
		report_print(r, stdout);
		if (opt.json && report_write_json(r, opt.json))
			rc = 2;
		else if (report_missed(r))
			rc = 1;
	}
	report_free(r);
	/* a run that failed leaves no empty directory of pictures behind */
	if (rc == 2 && made_plot_dir)
		rmdir(opt.plot_dir);
	return rc;
}
