/*
 * bench_util.c - random workload, clock, statistics and heap accounting for
 * the wheel benchmark.
 */
#include "bench.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

uint32_t rng_below(uint64_t *state, uint32_t bound)
{
	/* Lemire's multiply-shift; the bias is below 2^-32 for our bounds. */
	return (uint32_t)(((rng_next(state) >> 32) * bound) >> 32);
}

void shuffle_u32(uint32_t *a, size_t n, uint64_t *state)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = rng_below(state, (uint32_t)i);
		uint32_t t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
}

static uint32_t *random_permutation(size_t n, uint64_t *state)
{
	uint32_t *a = malloc(n * sizeof *a);
	if (a == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		a[i] = (uint32_t)i;
	shuffle_u32(a, n, state);
	return a;
}

static uint32_t *random_delays(size_t n, uint32_t max_ms, uint64_t *state)
{
	uint32_t *a = malloc(n * sizeof *a);
	if (a == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		a[i] = 1 + rng_below(state, max_ms);
	return a;
}

bool workload_make(struct workload *wl, size_t n, uint64_t seed)
{
	uint64_t state = seed;
	memset(wl, 0, sizeof *wl);
	wl->n = n;
	for (size_t k = 0; k < 3; k++)
		if ((wl->order[k] = random_permutation(n, &state)) == NULL)
			goto fail;
	for (size_t k = 0; k < 2; k++)
		if ((wl->delay[k] = random_delays(n, BENCH_MAX_DELAY_MS, &state)) == NULL)
			goto fail;
	wl->short_delay = random_delays(n, BENCH_SHORT_MAX_DELAY_MS, &state);
	if (wl->short_delay == NULL)
		goto fail;
	return true;
fail:
	workload_free(wl);
	return false;
}

void workload_free(struct workload *wl)
{
	for (size_t k = 0; k < 3; k++)
		free(wl->order[k]);
	for (size_t k = 0; k < 2; k++)
		free(wl->delay[k]);
	free(wl->short_delay);
	memset(wl, 0, sizeof *wl);
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sleep_until_ns(uint64_t when)
{
	struct timespec ts = { .tv_sec = (time_t)(when / 1000000000u),
			       .tv_nsec = (long)(when % 1000000000u) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double median(double *v, size_t n)
{
	qsort(v, n, sizeof *v, compare_doubles);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double quantile_sorted(const double *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}
