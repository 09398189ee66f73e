/*
 * ops.h - what the ops scenario's files share: the figures of the wheel and
 * the peers (bench_measure.c) and of the engine API (ops_engine.c) at each N,
 * which ops.c reports and ops_series.c turns into series and pictures.
 */
#ifndef TICKWHEEL_PERF_SUITE_OPS_H
#define TICKWHEEL_PERF_SUITE_OPS_H

#include "bench.h"
#include "suite.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum engine_op {
	ENG_ADD,       /* tw_add into slots the previous repetition freed */
	ENG_ADD_FRESH, /* tw_add while the task table grows (the first pass) */
	ENG_CANCEL,
	ENG_POSTPONE,      /* tw_set_delay to a due later than the task's: no mail */
	ENG_POSTPONE_MANY, /* the same through tw_set_delay_many, 64 ids a call */
	ENG_EARLIER,       /* tw_set_delay to a due earlier than where it is filed: mailed */
	ENG_GET,           /* tw_get of a random task of N */
	ENG_GET_HOT,       /* tw_get on a hot set of 1000 tasks */
	ENG_ADD_CANCEL,    /* a request timeout: tw_add of a 30 s one-shot, then its tw_cancel */
	ENG_OPS
};

struct engine_figures {
	double ns[ENG_OPS]; /* ns per operation, median over reps */
	double bytes_per_task;
	double create_ms; /* tw_engine_create, with the reservation when asked */
	/* memory_bytes with N tasks ended (cancelled) and kept for retain_ms, less an empty
	 * engine's: what retention holds under churn */
	double kept_ended_bytes;
	/* one dependent random read over as much memory as the tasks took: the
	 * cache miss a postpone cannot avoid */
	double miss_ns;
	unsigned reps;
	size_t failed; /* operations that did not return TW_OK */
};

/* Short names of the operations, for figure and series names. */
extern const char *const engine_op_names[ENG_OPS];

/* true if an engine of n tasks fits in the memory available now; else false
 * with the reason in why. */
bool ops_engine_fits(size_t n, char *why, size_t len);
/* Measures the engine API at n live tasks (reserve: the engine reserves n tasks at create).
 * 0, or -1 after saying why. */
int ops_engine_measure(size_t n, uint64_t seed, bool reserve, struct engine_figures *out);
/* ns per CLOCK_MONOTONIC read, which a real-clock engine adds to every tw_add
 * and tw_set_delay. */
double ops_clock_read_ns(void);

/* Request timeouts on the real clock (ops_real.c): paced adds and cancels. */
struct real_figures {
	double pair_ns;          /* tw_add + tw_cancel, in the caller */
	double wakeups_per_pair; /* the wheel thread's wake-ups */
};
/* 0, or -1 if the engine refused. */
int ops_request_timeouts_real(struct real_figures *out);

enum { MAX_SIZES = 8, IMPLS = 4, TARGET_N = 1000000, BIG_N = 10000000, WHEEL_OPS = 6 };

/* The implementations as the report names them: the wheel is tickwheel's. */
extern const char *const report_names[IMPLS];

struct wheel_op {
	int fig; /* enum figure */
	const char *name, *label;
	double ratio_target; /* issue 2, against libev at N = 1 000 000; 0: none */
};
extern const struct wheel_op wheel_ops[WHEEL_OPS];

struct ops_run {
	const struct suite_options *opt;
	struct report *r;
	size_t sizes[MAX_SIZES], count;
	struct bench_column wheel[MAX_SIZES][IMPLS]; /* impl NULL: not measured */
	bool engine_done[MAX_SIZES];
	struct engine_figures engine[MAX_SIZES];
};

/* Series "ns_per_op_<op>" per implementation and "ns_per_op_engine_<op>",
 * x = N; with --plot, ops-<op>.png per wheel operation and ops-engine.png. */
void ops_series(const struct ops_run *o);

#endif
