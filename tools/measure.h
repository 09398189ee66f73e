/*
 * measure.h - what the tools measure of an engine at work: run lateness
 * (start minus due), intervals between runs of a periodic task, CPU time.
 * Callbacks record with atomics only; a serial task's intervals need none
 * (its runs never overlap and the engine orders them).
 */
#ifndef TICKWHEEL_TOOLS_MEASURE_H
#define TICKWHEEL_TOOLS_MEASURE_H

#include <stdatomic.h>
#include <stdint.h>

enum { LATENESS_BUCKETS = 20000 }; /* 1 us each: 20 ms, then one overflow bucket */

struct lateness {
	_Atomic uint64_t bucket[LATENESS_BUCKETS + 1];
	_Atomic uint64_t early, max_ns;
};

struct intervals { /* of one periodic task */
	uint64_t period_ns, last_start_ns;
	double sum, sum_squares, smallest, largest; /* deviation from the period, ns */
	uint64_t count;
};

struct interval_summary {
	uint64_t count;
	double mean_ns, sd_ns, smallest_ns, largest_ns; /* deviation from the period */
};

uint64_t monotonic_now_ns(void);
double process_cpu_seconds(void);
void lateness_note(struct lateness *l, uint64_t start_ns, uint64_t due_ns);
uint64_t lateness_percentile_us(struct lateness *l, double p);
uint64_t lateness_runs(struct lateness *l);
/* A run of the task started at start_ns; skipped firings break the interval. */
void intervals_note(struct intervals *t, uint64_t start_ns, uint64_t skipped);
struct interval_summary intervals_pool(const struct intervals *t, uint64_t n);

#endif
