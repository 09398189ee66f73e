/*
 * bench_measure.c - the measured sequence of the wheel microbenchmark, which
 * `tw-perf ops` runs: per implementation, ns per add, cancel, reschedule,
 * reset and expired timer, and bytes per timer, at one N. See README.md for
 * the method.
 */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned bench_default_reps(size_t n)
{
	if (n <= 1000)
		return 101;
	if (n <= 100000)
		return 9;
	if (n <= 1000000)
		return 7;
	return 1; /* 10 000 000: one run, to stay within a few minutes */
}

static double ns_per_op(uint64_t start, uint64_t end, size_t ops)
{
	return ops ? (double)(end - start) / (double)ops : NAN;
}

/* Fires what one expire_all() left behind, so that every timer is idle. */
static void expire_leftovers(const struct timer_impl *impl, void *set, size_t left)
{
	for (int tries = 0; left > 0 && tries < 200; tries++) {
		monotonic_sleep_until(monotonic_now_ns() + 10000000u);
		size_t fired = impl->expire_all(set);
		left = fired < left ? left - fired : 0;
	}
	if (left > 0) {
		fprintf(stderr, "%s: %zu timers never fired; giving up\n", impl->name, left);
		exit(1);
	}
}

static double measure_expiry(const struct timer_impl *impl, void *set, const struct workload *wl,
			     const uint32_t *delay_ms, uint32_t max_delay_ms)
{
	impl->expiry_arm(set, wl->order[0], delay_ms, wl->n, max_delay_ms);
	uint64_t start = monotonic_now_ns();
	size_t fired = impl->expire_all(set);
	uint64_t end = monotonic_now_ns();
	if (fired != wl->n) {
		fprintf(stderr, "warning: %s fired %zu of %zu timers in one pass\n", impl->name,
			fired, wl->n);
		expire_leftovers(impl, set, wl->n - fired);
	}
	return ns_per_op(start, end, fired);
}

/*
 * One repetition of the operation sequence; each timed loop touches the
 * timers in a permutation independent of the one that filed them:
 *   add (order 0) | reschedule (order 1) | cancel (order 2) |
 *   add untimed | reset (order 1) | cancel untimed.
 */
static void measure_operations(const struct timer_impl *impl, void *set, const struct workload *wl,
			       double out[FIG_COUNT])
{
	size_t n = wl->n;
	uint64_t t0 = monotonic_now_ns();
	impl->add(set, wl->order[0], wl->delay[0], n);
	uint64_t t1 = monotonic_now_ns();
	impl->reschedule(set, wl->order[1], wl->delay[1], n);
	uint64_t t2 = monotonic_now_ns();
	impl->cancel(set, wl->order[2], n);
	uint64_t t3 = monotonic_now_ns();
	impl->add(set, wl->order[0], wl->delay[0], n);
	uint64_t t4 = monotonic_now_ns();
	impl->reset(set, wl->order[1], n, BENCH_RESET_DELAY_MS);
	uint64_t t5 = monotonic_now_ns();
	impl->cancel(set, wl->order[2], n);
	out[FIG_ADD] = ns_per_op(t0, t1, n);
	out[FIG_RESCHEDULE] = ns_per_op(t1, t2, n);
	out[FIG_CANCEL] = ns_per_op(t2, t3, n);
	out[FIG_RESET] = ns_per_op(t4, t5, n);
}

/* Heap bytes a set of n armed timers takes, per timer: handles, the
 * implementation's own arrays and structures (growth slack included). */
static double measure_bytes(const struct timer_impl *impl, const struct workload *wl)
{
	size_t before = bench_heap_in_use();
	void *set = impl->create(wl->n);
	if (set == NULL)
		return NAN;
	impl->add(set, wl->order[0], wl->delay[0], wl->n);
	size_t after = bench_heap_in_use();
	impl->cancel(set, wl->order[2], wl->n);
	impl->destroy(set);
	return (double)(after - before) / (double)wl->n;
}

static double *sample(const struct bench_column *col, unsigned reps, int figure, unsigned rep)
{
	return &col->samples[(size_t)figure * reps + rep];
}

static void column_start(struct bench_column *col, const struct workload *wl, unsigned reps)
{
	const struct timer_impl *impl = col->impl;
	unsigned cap = col->expiry_reps ? col->expiry_reps : 3; /* each costs a 1 s sleep */
	col->expiry_reps = impl->real_clock && reps > cap ? cap : reps;
	col->fig[FIG_BYTES] = measure_bytes(impl, wl);
	col->samples = malloc((size_t)FIG_COUNT * reps * sizeof *col->samples);
	col->set = col->samples ? impl->create(wl->n) : NULL;
	if (col->set != NULL)
		return;
	free(col->samples);
	col->samples = NULL;
	col->impl = NULL;
	col->missing = "failed";
}

static void column_measure_expiry(struct bench_column *col, const struct workload *wl,
				  unsigned reps, unsigned r)
{
	const struct timer_impl *impl = col->impl;
	double ns_short =
		measure_expiry(impl, col->set, wl, wl->short_delay, BENCH_SHORT_MAX_DELAY_MS);
	*sample(col, reps, FIG_EXPIRY_SHORT, r) = ns_short;
	*sample(col, reps, FIG_EXPIRY, r) =
		impl->real_clock ?
			ns_short :
			measure_expiry(impl, col->set, wl, wl->delay[0], BENCH_MAX_DELAY_MS);
}

/* Medians into col->fig (sorting the samples); frees the set and samples. */
static void column_finish(struct bench_column *col, unsigned reps)
{
	for (int f = FIG_ADD; f <= FIG_EXPIRY_SHORT; f++) {
		unsigned count = f >= FIG_EXPIRY ? col->expiry_reps : reps;
		col->fig[f] = bench_median(sample(col, reps, f, 0), count);
	}
	col->impl->destroy(col->set);
	col->set = NULL;
	free(col->samples);
	col->samples = NULL;
}

/*
 * The implementations take turns within each repetition (wheel, libuv,
 * libevent, libev, then the next repetition), so that a noisy stretch of this
 * shared machine lands on all of them.
 */
void bench_measure(const struct workload *wl, unsigned reps, struct bench_column *cols,
		   size_t count)
{
	for (size_t c = 0; c < count; c++)
		if (cols[c].impl != NULL)
			column_start(&cols[c], wl, reps);
	for (unsigned r = 0; r < reps; r++)
		for (size_t c = 0; c < count; c++) {
			double one[FIG_COUNT];
			if (cols[c].impl == NULL)
				continue;
			measure_operations(cols[c].impl, cols[c].set, wl, one);
			for (int f = FIG_ADD; f <= FIG_RESET; f++)
				*sample(&cols[c], reps, f, r) = one[f];
		}
	for (unsigned r = 0; r < reps; r++)
		for (size_t c = 0; c < count; c++)
			if (cols[c].impl != NULL && r < cols[c].expiry_reps)
				column_measure_expiry(&cols[c], wl, reps, r);
	for (size_t c = 0; c < count; c++)
		if (cols[c].impl != NULL)
			column_finish(&cols[c], reps);
}
