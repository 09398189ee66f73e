/*
 * heartbeats.h - what the two files of `tw-perf heartbeats` share: each
 * timer's records (heartbeats.c runs the loops and fills them) and the
 * figures and pictures made of them (heartbeats_report.c); `tw-perf blocker`
 * (blocker.c) runs the same beats with one more timer beside them.
 */
#ifndef TICKWHEEL_PERF_SUITE_HEARTBEATS_H
#define TICKWHEEL_PERF_SUITE_HEARTBEATS_H

#include "measure.h"
#include "peer.h"
#include "report.h"
#include "suite.h"
#include "wake_floor.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	DEV_BIN_US = 10,
	DEV_BINS = 1000, /* interval - period from -5 ms to +5 ms, then the two beyond */
	CDF_POINTS = 200,
	INTERVAL_SD_TARGET_US = 50,
};

struct beat {
	uint64_t first_due_ns, period_ns;
	uint64_t k; /* runs and skips so far: the next run stands for due number k */
	uint64_t skipped;
	int64_t *late; /* lateness of each run, ns */
	/* firings skipped just before each run (saturating); after one, no interval */
	uint32_t *skips_before;
	size_t cap, n;
};

struct beats;

/* One more timer on the beats' loop, for a scenario built on heartbeats
 * (tw-perf blocker): a one-shot due offset_ns after the beats' start. */
struct beats_extra {
	uint64_t offset_ns;
	/* Its run, on the loop's thread or an executor. */
	void (*fire)(struct beats *b, uint64_t start_ns);
	/* The timed window is over (its CPU and wake-ups read), the loop still
	 * there and its runs still recorded: the hook may read its counts, and
	 * run it on (run_until) so that firings due in the window still start. */
	void (*ended)(struct beats *b);
	/* The loop is gone, the records final; called before the beats' own
	 * figures are made, which reuse the records' room (the hook may drop
	 * each beat's last runs: lower beat[i].n). */
	void (*records)(struct beats *b);
	void *ctx;
};

struct beats {
	struct beat *beat;
	struct intervals *iv; /* apart from beat[]: intervals_pool() wants an array */
	int64_t *late;        /* every beat's slots */
	uint32_t *skips_before;
	size_t count;
	atomic_bool recording;
	_Atomic uint64_t overflow;
	/* set by heartbeats_run() before the first timer is armed */
	const struct loop_impl *impl;
	void *loop;
	uint64_t start_ns, end_ns; /* the first dues come after start; the timed window ends */
	const struct beats_extra *extra;
};

struct params {
	const struct suite_options *opt;
	size_t tasks;
	double seconds;
	uint64_t lo_ms, hi_ms;
};

/* What the pictures and the comparison need once the loop is gone. */
struct outcome {
	const char *impl;
	double p99_us, cpu_per_run_us;
	size_t runs;
	/* Per run: the loop's own wake-ups, and every other time one of the process's threads
	 * was put on a CPU (for tickwheel, mostly its executors woken by the wheel thread);
	 * -1 where the threads' scheduling could not be read. */
	double loop_wakeups_per_run, other_wakeups_per_run;
	double net_cpu_per_run_us; /* heartbeats_report_net; -1 where not known */
	double cdf_x[CDF_POINTS], cdf_y[CDF_POINTS];
	size_t cdf_n;
	double dev_y[DEV_BINS + 2]; /* [0]: below the range, [DEV_BINS + 1]: above */
};

/* The scenario's sizes from opt (under --quick, quick_tasks tasks), recorded
 * as the report's parameters. */
struct params heartbeats_params(const struct suite_options *opt, size_t quick_tasks,
				struct report *r);
/* One loop's run from set-up to teardown, its figures into r and o; extra may
 * be NULL. 0, or 2 after saying why. */
int heartbeats_run(const struct loop_impl *impl, const struct params *p, struct report *r,
		   struct outcome *o, const struct beats_extra *extra);
/* The figures of one loop's run (o->impl set), cpu seconds over its timed
 * window, and its lateness to the --hgrm file (hgrm, NULL for none, see
 * lateness_hgrm_of); afterwards the beats' slots hold scratch. 0, or 2 when
 * that file cannot be written. */
int heartbeats_report_run(struct report *r, struct outcome *o, struct beats *b, double cpu,
			  const char *hgrm);
/* The series every loop shares the axes of, then the pictures if asked. */
void heartbeats_pictures(const struct suite_options *opt, struct report *r, struct outcome *o,
			 size_t n);
/* The machine's wake-up floor at the scenario's periods, and what a hand-over to a
 * second thread adds to it (wake_floor.h). */
bool heartbeats_measure_floor(const struct params *p, struct report *r, struct wake_floor *f);
void heartbeats_report_floor(struct report *r, const struct wake_floor *f);
/* Each loop's CPU per run net of its wake-ups at the floor's prices (f with its hand-over). */
void heartbeats_report_net(struct report *r, struct outcome *o, size_t n,
			   const struct wake_floor *f);

#endif
