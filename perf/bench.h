/*
 * bench.h - what the wheel benchmark shares between its files: the interface
 * every timer implementation under test provides, the random workload, and
 * small helpers (random numbers, statistics, memory in use; the clock is
 * measure.h's).
 */
#ifndef TICKWHEEL_PERF_BENCH_H
#define TICKWHEEL_PERF_BENCH_H

#include "measure.h" /* the clock: monotonic_now_ns(), monotonic_sleep_until() */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	BENCH_MAX_DELAY_MS = 10 * 60 * 1000, /* dues are 1 ms .. 10 minutes away */
	BENCH_SHORT_MAX_DELAY_MS = 1000,     /* real-clock expiry: 1 .. 1000 ms */
	BENCH_RESET_DELAY_MS = 30 * 1000,    /* the session-timeout reset */
};

/*
 * One timer implementation under test. Each measured loop lives inside the
 * adapter, so the only per-operation overhead besides the library call is the
 * loop itself and one read of the order and delay arrays. Timer i is the i-th
 * handle of one array that the adapter allocates in create(); order[] says
 * in which (random) sequence they are touched. Delays are relative to the
 * implementation's own current time.
 */
struct timer_impl {
	const char *name;
	const char *(*version)(void);
	/* true: a real-clock event loop, whose expiry can only be measured on
	 * timers due within about a second (see expiry_arm) */
	bool real_clock;
	size_t handle_size;
	/* An empty timer set with n handles, all initialised; NULL on failure. */
	void *(*create)(size_t n);
	void (*destroy)(void *set);
	/* Arms timer order[i], which is not armed, delay_ms[i] from now. */
	void (*add)(void *set, const uint32_t *order, const uint32_t *delay_ms, size_t n);
	/* Disarms timer order[i], which is armed. */
	void (*cancel)(void *set, const uint32_t *order, size_t n);
	/* Moves armed timer order[i] to delay_ms[i] from now. */
	void (*reschedule)(void *set, const uint32_t *order, const uint32_t *delay_ms, size_t n);
	/* Moves armed timer order[i] to delay_ms from now (same for all). */
	void (*reset)(void *set, const uint32_t *order, size_t n, uint32_t delay_ms);
	/* Untimed: refreshes the clock, arms every timer as add() does, and
	 * returns once all of them are due (a real-clock loop sleeps until
	 * max_delay_ms after the last one was armed; the wheel only records the
	 * virtual tick to advance to). */
	void (*expiry_arm)(void *set, const uint32_t *order, const uint32_t *delay_ms, size_t n,
			   uint32_t max_delay_ms);
	/* The measured part: hands out every armed timer; returns how many. */
	size_t (*expire_all)(void *set);
};

extern const struct timer_impl wheel_impl;
#ifdef HAVE_LIBUV
extern const struct timer_impl libuv_impl;
#endif
#ifdef HAVE_LIBEVENT
extern const struct timer_impl libevent_impl;
#endif
#ifdef HAVE_LIBEV
extern const struct timer_impl libev_impl;
#endif

/* All implementations built in, the wheel first; NULL-terminated. */
extern const struct timer_impl *const bench_impls[];
const struct timer_impl *bench_find_impl(const char *name);

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
