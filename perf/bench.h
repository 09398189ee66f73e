/*
 * bench.h - what the wheel benchmark shares between its files: the random
 * workload (the libraries under test are peer.h's timer_impl), and
 * small helpers (random numbers, statistics, memory in use; the clock is
 * measure.h's).
 */
#ifndef TICKWHEEL_PERF_BENCH_H
#define TICKWHEEL_PERF_BENCH_H

#include "measure.h" /* the clock: monotonic_now_ns(), monotonic_sleep_until() */
#include "peer.h"    /* struct timer_impl, the libraries under test */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	BENCH_MAX_DELAY_MS = 10 * 60 * 1000, /* dues are 1 ms .. 10 minutes away */
	BENCH_SHORT_MAX_DELAY_MS = 1000,     /* real-clock expiry: 1 .. 1000 ms */
	BENCH_RESET_DELAY_MS = 30 * 1000,    /* the session-timeout reset */
};

/* The random inputs for one N: three independent permutations (so that no
 * operation touches entries in the order another one filed them) and random
 * delays. */
struct workload {
	size_t n;
	uint32_t *order[3];
	uint32_t *delay[2];    /* uniform in 1 .. BENCH_MAX_DELAY_MS */
	uint32_t *short_delay; /* uniform in 1 .. BENCH_SHORT_MAX_DELAY_MS */
};

bool workload_make(struct workload *wl, size_t n, uint64_t seed);
void workload_free(struct workload *wl);

/* The figures of one implementation at one N (bench_measure.c). */
enum figure {
	FIG_ADD,
	FIG_CANCEL,
	FIG_RESCHEDULE,
	FIG_RESET,
	FIG_EXPIRY,       /* wheel: dues 1 ms .. 10 min; peers: 1 .. 1000 ms */
	FIG_EXPIRY_SHORT, /* everyone: dues 1 .. 1000 ms */
	FIG_BYTES,
	FIG_COUNT
};

/* One implementation measured at one N: a column of `tw-perf ops`'s wheel part. */
struct bench_column {
	const struct timer_impl *impl; /* NULL: not measured, see missing */
	const char *missing;           /* what the cells say when there is no figure */
	void *set;
	unsigned expiry_reps; /* real-clock expiry repetitions at most; 0: 3 */
	double *samples;      /* [FIG_COUNT][reps] */
	double fig[FIG_COUNT];
};

/* Repetitions per figure by default: 101 at N <= 1000 down to 1 at 10M. */
unsigned bench_default_reps(size_t n);
/* Measures every column with an impl on workload wl: the median over reps
 * repetitions of each figure into fig[] (expiry: at most expiry_reps for
 * real-clock loops). A column whose set cannot be made gets impl NULL, missing "failed". */
void bench_measure(const struct workload *wl, unsigned reps, struct bench_column *cols,
		   size_t count);

/* splitmix64: small, fast, good enough for shuffling and delays. */
uint64_t bench_rng_next(uint64_t *state);
/* Uniform in [0, bound), bound > 0. */
uint32_t bench_rng_below(uint64_t *state, uint32_t bound);
void bench_shuffle_u32(uint32_t *a, size_t n, uint64_t *state);
/* A random permutation of 0 .. n-1 (malloc'd; NULL: out of memory). */
uint32_t *bench_permutation(size_t n, uint64_t *state);

double bench_median(double *v, size_t n); /* sorts v in place */
/* Value at quantile q (0..1) of v sorted ascending. */
/* Ascending order. */
void bench_sort_doubles(double *v, size_t n);
double bench_quantile_sorted(const double *v, size_t n, double q);
/* Bytes of the process heap in use (malloc'ed, mmapped blocks included);
 * under jemalloc, those this thread allocated minus those it freed. */
size_t bench_heap_in_use(void);
/* true if jemalloc replaced malloc in this process. */
bool bench_malloc_is_jemalloc(void);

#endif
