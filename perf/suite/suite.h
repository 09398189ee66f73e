/*
 * suite.h - tw-perf, the perf suite for latency regression testing: one runner
 * with a subcommand per scenario (heartbeats, sessions, churn, burst,
 * oneshots-busy, blocker, queued-behind, idle, stall, ops, dispatch, list,
 * lumps, reap, callgrind-op, icount, cron, snapshot, replay). Each scenario fills a report
 * (measure/report.h), which main() prints as a table and, with --json FILE,
 * writes with the machine's facts; with --plot DIR it also draws its
 * pictures there (measure/plot.h).
 */
#ifndef TICKWHEEL_PERF_SUITE_H
#define TICKWHEEL_PERF_SUITE_H

#include "report.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The command line, parsed once by main(); 0 or NULL = the scenario's default,
 * which each scenario documents in its usage line. */
struct suite_options {
	size_t tasks;                        /* --tasks N */
	double seconds;                      /* --seconds S */
	uint64_t period_lo_ms, period_hi_ms; /* --period 100-500ms */
	size_t sessions;                     /* --sessions N */
	double rate;                         /* --rate R  (resets per second) */
	double timeout_s;                    /* --timeout 30s */
	double quiet;                        /* --quiet F  (fraction of sessions that go quiet) */
	unsigned threads;                    /* --threads N  (application threads) */
	unsigned executors;                  /* --executors N  (0: one per online CPU) */
	uint64_t block_ms;                   /* --block 2s  (blocker: how long it blocks) */
	const char *sizes;                   /* --sizes 1000,100000,... */
	const char *op;                      /* --op add  (callgrind-op) */
	const char *impl;                    /* --impl wheel | libuv | ...  (callgrind-op) */
	const char *peers;    /* --peers libev,libuv | none; NULL: every peer built in */
	const char *json;     /* --json FILE */
	const char *plot_dir; /* --plot DIR */
	uint64_t seed;        /* --seed S */
	bool quick;           /* --quick: the smallest run that still says something */
	bool coarse_clock;    /* --coarse-clock: the engine's coarse_clock option (sessions) */
	bool reset_many;      /* --reset-many: sessions reset through tw_set_delay_many */
	bool reserve;         /* --reserve: ops: the engine reserves its N tasks at create */
	const char *file;     /* replay: the recording */
	double speed;         /* --speed X: replay: time runs X times as fast */
	const char *hgrm;     /* --hgrm FILE: lateness as HdrHistogram's text */
};

/* A scenario: fills r (params, figures, targets, notes, series), draws its
 * pictures when opt->plot_dir is set, and returns 0, or 2 on a usage or
 * set-up error (after saying why on stderr). */
typedef int (*scenario_fn)(const struct suite_options *opt, struct report *r);

int scenario_heartbeats(const struct suite_options *opt, struct report *r);
int scenario_sessions(const struct suite_options *opt, struct report *r);
int scenario_churn(const struct suite_options *opt, struct report *r);
int scenario_burst(const struct suite_options *opt, struct report *r);
int scenario_oneshots_busy(const struct suite_options *opt, struct report *r);
int scenario_blocker(const struct suite_options *opt, struct report *r);
int scenario_queued_behind(const struct suite_options *opt, struct report *r);
int scenario_idle(const struct suite_options *opt, struct report *r);
int scenario_stall(const struct suite_options *opt, struct report *r);
int scenario_ops(const struct suite_options *opt, struct report *r);
int scenario_dispatch(const struct suite_options *opt, struct report *r);
int scenario_list(const struct suite_options *opt, struct report *r);
int scenario_lumps(const struct suite_options *opt, struct report *r);
int scenario_reap(const struct suite_options *opt, struct report *r);
int scenario_callgrind_op(const struct suite_options *opt, struct report *r);
int scenario_icount(const struct suite_options *opt, struct report *r);
int scenario_cron(const struct suite_options *opt, struct report *r);
int scenario_snapshot(const struct suite_options *opt, struct report *r);
int scenario_replay(const struct suite_options *opt, struct report *r);

/* true if the peer named (libuv, libevent, libev) is to run: built in and
 * allowed by --peers. */
bool suite_peer_wanted(const struct suite_options *opt, const char *name);
/* "DIR/NAME" for a picture; static buffer. */
const char *suite_plot_path(const struct suite_options *opt, const char *name);

#endif
