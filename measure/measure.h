/*
 * measure.h - what the tools measure of an engine at work: run lateness
 * (start minus due), intervals between runs of a periodic task, CPU time.
 * Callbacks record with atomics only; a serial task's intervals need none
 * (its runs never overlap and the engine orders them), but the deviation
 * histogram tasks may share does.
 */
#ifndef TICKWHEEL_MEASURE_MEASURE_H
#define TICKWHEEL_MEASURE_MEASURE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tickwheel.h"

#define NS_PER_MS UINT64_C(1000000)

/* Lateness buckets as HdrHistogram lays them out for three significant
 * digits: 1 us wide below 2 048 us, then 1 024 to each doubling (0.1 % of the
 * value), up to 2^36 us (19 h); anything later counts in the last. A
 * regression from 30 ms to 300 ms must read as ten times, not as "past the
 * end", and this stays the size of a plain 20 ms range of 1 us buckets. */
enum {
	LATENESS_LINEAR_US = 2048,
	LATENESS_SUB_BUCKETS = LATENESS_LINEAR_US / 2,
	LATENESS_TOP_BIT = 36,
	LATENESS_BUCKETS = LATENESS_LINEAR_US + (LATENESS_TOP_BIT - 11) * LATENESS_SUB_BUCKETS,
};

struct lateness {
	_Atomic uint64_t bucket[LATENESS_BUCKETS];
	_Atomic uint64_t early, max_ns;
};

/* The bucket of a lateness in us, and the values bucket i holds: [low, high). */
unsigned lateness_bucket_of(uint64_t us);
uint64_t lateness_bucket_low_us(unsigned i);
uint64_t lateness_bucket_high_us(unsigned i);

/* Deviations of intervals from their period: 10 us bins from -5 ms to +5 ms,
 * wide enough for a 1 ms wheel, fine enough to show its steps. */
enum { DEVIATION_BIN_NS = 10000, DEVIATION_BINS = 1000 };

struct deviations {
	_Atomic uint64_t below, bin[DEVIATION_BINS], above;
};

struct intervals { /* of one periodic task */
	uint64_t period_ns, last_start_ns;
	double sum, sum_squares, smallest, largest; /* deviation from the period, ns */
	uint64_t count;
	struct deviations *histogram; /* optional, may be shared by many tasks */
};

struct interval_summary {
	uint64_t count;
	double mean_ns, sd_ns, smallest_ns, largest_ns; /* deviation from the period */
};

/* What the engine holds (tw_stats' memory_bytes), 0 if it cannot say. */
static inline uint64_t engine_memory_bytes(tw_engine *e)
{
	tw_engine_stats st;
	return tw_stats(e, &st) == TW_OK ? st.memory_bytes : 0;
}

/* Ascending order. */
void sort_i64(int64_t *v, size_t n);

uint64_t monotonic_now_ns(void);
/* Sleeps until CLOCK_MONOTONIC reaches ns; a signal does not end it early. */
void monotonic_sleep_until(uint64_t ns);
double process_cpu_seconds(void);
void lateness_note(struct lateness *l, uint64_t start_ns, uint64_t due_ns);
/* The smallest bucket's lower edge with at least p of the runs at or below it. */
uint64_t lateness_percentile_us(struct lateness *l, double p);
uint64_t lateness_runs(struct lateness *l);
/* A run of the task started at start_ns; skipped firings break the interval. */
void intervals_note(struct intervals *t, uint64_t start_ns, uint64_t skipped);
struct interval_summary intervals_pool(const struct intervals *t, uint64_t n);
/* The histogram from its first to its last non-empty bin (below and above
 * left out): x = bin centre in us, y = intervals. A spread wider than
 * max_points bins is cut at the right; DEVIATION_BINS always suffice.
 * Returns the points written. */
/* |interval - period| at quantile p, to the 10 us bin (upper edge; beyond
 * 5 ms: 5000); and the fraction of intervals off by more than limit_us. */
double deviations_off_quantile_us(struct deviations *d, double p);
double deviations_off_fraction(struct deviations *d, double limit_us);
size_t deviations_points(struct deviations *d, double *x_us, double *y, size_t max_points);

#endif
