/*
 * bench_util.c - random workload, clock, statistics and heap accounting for
 * the wheel benchmark.
 */
#include "bench.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

uint64_t bench_rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

uint32_t bench_rng_below(uint64_t *state, uint32_t bound)
{
	/* Lemire's multiply-shift; the bias is below 2^-32 for our bounds. */
	return (uint32_t)(((bench_rng_next(state) >> 32) * bound) >> 32);
}

void bench_shuffle_u32(uint32_t *a, size_t n, uint64_t *state)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = bench_rng_below(state, (uint32_t)i);
		uint32_t t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
}

uint32_t *bench_permutation(size_t n, uint64_t *state)
{
	uint32_t *a = malloc(n * sizeof *a);
	if (a == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		a[i] = (uint32_t)i;
	bench_shuffle_u32(a, n, state);
	return a;
}

static uint32_t *random_delays(size_t n, uint32_t max_ms, uint64_t *state)
{
	uint32_t *a = malloc(n * sizeof *a);
	if (a == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		a[i] = 1 + bench_rng_below(state, max_ms);
	return a;
}

bool workload_make(struct workload *wl, size_t n, uint64_t seed)
{
	uint64_t state = seed;
	memset(wl, 0, sizeof *wl);
	wl->n = n;
	for (size_t k = 0; k < 3; k++)
		if ((wl->order[k] = bench_permutation(n, &state)) == NULL)
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

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void bench_sort_doubles(double *v, size_t n)
{
	qsort(v, n, sizeof *v, compare_doubles);
}

double bench_median(double *v, size_t n)
{
	bench_sort_doubles(v, n);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double bench_quantile_sorted(const double *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

typedef int (*mallctl_fn)(const char *name, void *old, size_t *old_len, void *new, size_t new_len);

/* jemalloc's mallctl when jemalloc replaced malloc in this process (tw-perf
 * links it for the engine), else NULL; looked up at run time so that the
 * benchmark builds and runs without jemalloc. */
static mallctl_fn jemalloc_ctl(void)
{
	static mallctl_fn ctl;
	static bool looked;
	if (!looked) {
		void *sym = dlsym(RTLD_DEFAULT, "mallctl");
		memcpy(&ctl, &sym, sizeof ctl);
		looked = true;
	}
	return ctl;
}

bool bench_malloc_is_jemalloc(void)
{
	return jemalloc_ctl() != NULL;
}

size_t bench_heap_in_use(void)
{
	/* Under jemalloc glibc's mallinfo2 sees an empty heap. jemalloc's
	 * arena statistics miss what its thread caches hand out; this thread's
	 * own counters are exact, and the implementations allocate on it. */
	mallctl_fn ctl = jemalloc_ctl();
	uint64_t allocated = 0, deallocated = 0;
	size_t len = sizeof allocated;
	if (ctl && ctl("thread.allocated", &allocated, &len, NULL, 0) == 0 &&
	    ctl("thread.deallocated", &deallocated, &len, NULL, 0) == 0)
		return (size_t)(allocated - deallocated);
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}
