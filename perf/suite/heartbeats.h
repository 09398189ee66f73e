/*
 * heartbeats.h - what the two files of `tw-perf heartbeats` share: each
 * timer's records (heartbeats.c runs the loops and fills them) and the
 * figures and pictures made of them (heartbeats_report.c).
 */
#ifndef TICKWHEEL_PERF_SUITE_HEARTBEATS_H
#define TICKWHEEL_PERF_SUITE_HEARTBEATS_H

#include "measure.h"
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
	int64_t *late;       /* lateness of each run, ns */
	uint8_t *after_skip; /* the run followed skipped firings: no interval */
	size_t cap, n;
};

struct beats {
	struct beat *beat;
	struct intervals *iv; /* apart from beat[]: intervals_pool() wants an array */
	int64_t *late;        /* every beat's slots */
	uint8_t *after_skip;
	size_t count;
	atomic_bool recording;
	_Atomic uint64_t overflow;
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
	double cdf_x[CDF_POINTS], cdf_y[CDF_POINTS];
	size_t cdf_n;
	double dev_y[DEV_BINS + 2]; /* [0]: below the range, [DEV_BINS + 1]: above */
};

/* The figures of one loop's run (o->impl set), cpu seconds over its timed
 * window; afterwards the beats' slots hold scratch. */
void heartbeats_report_run(struct report *r, struct outcome *o, struct beats *b, double cpu);
/* The series every loop shares the axes of, then the pictures if asked. */
void heartbeats_pictures(const struct suite_options *opt, struct report *r, struct outcome *o,
			 size_t n);
/* The machine's wake-up floor at the scenario's periods (wake_floor.h). */
bool heartbeats_measure_floor(const struct params *p, struct report *r, struct wake_floor *f);
void heartbeats_report_floor(struct report *r, const struct wake_floor *f);

#endif
