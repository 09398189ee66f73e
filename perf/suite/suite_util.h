/*
 * suite_util.h - small things the scenarios share: a seeded random generator
 * (splitmix64: the same seed, the same run), growable sample arrays with
 * quantiles, the dues of a period within a window, pinning to one CPU, and
 * the CPU time of one thread of the process found by its thread id.
 */
#ifndef TICKWHEEL_PERF_SUITE_UTIL_H
#define TICKWHEEL_PERF_SUITE_UTIL_H

#include "bench.h"

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Draws of bench.h's bench_rng_next(), as bench_rng_below and bench_permutation: one
 * generator for the whole kit. */
double su_uniform(uint64_t *state); /* [0, 1) */
/* How many of the dues d0 + k x p (k >= 0; p > 0) fall in (a, b]. */
uint64_t su_dues_in(uint64_t d0, uint64_t p, uint64_t a, uint64_t b);

struct su_samples {
	double *v;
	size_t n, cap;
	bool sorted, oom; /* oom: a push found no memory and dropped its sample */
};

void su_push(struct su_samples *s, double x);
/* Sorts the samples (once) and reads the p-quantile, 0 <= p <= 1; 0 if empty. */
double su_quantile(struct su_samples *s, double p);
void su_samples_free(struct su_samples *s);

/* What one read of CLOCK_MONOTONIC costs here, ns (median over batches). */
double su_clock_read_ns(void);
/* The calling thread's CPU time, ns. */
uint64_t su_self_cpu_ns(void);

/* Pins the calling thread to the last CPU it may run on, after saving its
 * affinity in saved (sched_setaffinity(0, ...) puts it back); that CPU, or -1. */
int su_pin_last_cpu(cpu_set_t *saved);

/* The ids of the process's threads now, up to max; how many there are. */
size_t su_threads(pid_t *out, size_t max);
/* What the threads of this process whose name begins with prefix ("" for all; tickwheel's
 * are "tw-wheel" and "tw-exec-N": tickwheel.h) have had, summed from their schedstat: CPU
 * time and the times they were put on a CPU (each wake-up, each return from preemption).
 * False if there is none, or one could not be read. A thread that ended is not counted. */
struct su_sched {
	uint64_t cpu_ns, slices;
};
bool su_threads_sched(const char *prefix, struct su_sched *out);

#endif
