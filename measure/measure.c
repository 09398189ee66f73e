/* measure.c - see measure.h. */
#include "measure.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

uint64_t monotonic_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void monotonic_sleep_until(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

double process_cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

unsigned lateness_bucket_of(uint64_t us)
{
	if (us < LATENESS_LINEAR_US)
		return (unsigned)us;
	unsigned top = 63u - (unsigned)__builtin_clzll(us); /* 11 or more */
	if (top >= LATENESS_TOP_BIT)
		return LATENESS_BUCKETS - 1;
	unsigned shift = top - 10; /* keeps the 11 bits below and at the top one */
	return LATENESS_LINEAR_US + (top - 11) * LATENESS_SUB_BUCKETS + (unsigned)(us >> shift) -
	       LATENESS_SUB_BUCKETS;
}

static uint64_t bucket_edge_us(unsigned i, unsigned above)
{
	if (i < LATENESS_LINEAR_US)
		return i + above;
	unsigned j = i - LATENESS_LINEAR_US, top = 11 + j / LATENESS_SUB_BUCKETS;
	return (uint64_t)(LATENESS_SUB_BUCKETS + j % LATENESS_SUB_BUCKETS + above) << (top - 10);
}

uint64_t lateness_bucket_low_us(unsigned i)
{
	return bucket_edge_us(i, 0);
}

uint64_t lateness_bucket_high_us(unsigned i)
{
	return bucket_edge_us(i, 1);
}

void lateness_note(struct lateness *l, uint64_t start_ns, uint64_t due_ns)
{
	if (start_ns < due_ns) {
		atomic_fetch_add_explicit(&l->early, 1, memory_order_relaxed);
		return;
	}
	uint64_t late = start_ns - due_ns, us = late / 1000;
	atomic_fetch_add_explicit(&l->bucket[lateness_bucket_of(us)], 1, memory_order_relaxed);
	uint64_t max = atomic_load_explicit(&l->max_ns, memory_order_relaxed);
	while (late > max && !atomic_compare_exchange_weak(&l->max_ns, &max, late))
		;
}

uint64_t lateness_runs(struct lateness *l)
{
	uint64_t total = 0;
	for (unsigned i = 0; i < LATENESS_BUCKETS; i++)
		total += atomic_load_explicit(&l->bucket[i], memory_order_relaxed);
	return total;
}

uint64_t lateness_percentile_us(struct lateness *l, double p)
{
	uint64_t total = lateness_runs(l), seen = 0;
	for (unsigned i = 0; i < LATENESS_BUCKETS; i++) {
		seen += atomic_load_explicit(&l->bucket[i], memory_order_relaxed);
		if (total && (double)seen >= p * (double)total)
			return lateness_bucket_low_us(i);
	}
	return 0;
}

static void deviations_note(struct deviations *d, double deviation_ns)
{
	double bin = floor(deviation_ns / DEVIATION_BIN_NS) + DEVIATION_BINS / 2;
	_Atomic uint64_t *slot = bin < 0               ? &d->below :
				 bin >= DEVIATION_BINS ? &d->above :
							 &d->bin[(size_t)bin];
	atomic_fetch_add_explicit(slot, 1, memory_order_relaxed);
}

void intervals_note(struct intervals *t, uint64_t start_ns, uint64_t skipped)
{
	if (t->last_start_ns && !skipped) {
		double deviation = (double)(start_ns - t->last_start_ns) - (double)t->period_ns;
		if (!t->count || deviation < t->smallest)
			t->smallest = deviation;
		if (!t->count || deviation > t->largest)
			t->largest = deviation;
		if (t->histogram)
			deviations_note(t->histogram, deviation);
		t->sum += deviation;
		t->sum_squares += deviation * deviation;
		t->count++;
	}
	t->last_start_ns = start_ns;
}

struct interval_summary intervals_pool(const struct intervals *t, uint64_t n)
{
	struct interval_summary s = { 0 };
	double sum = 0, sum_squares = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (!t[i].count)
			continue;
		if (!s.count || t[i].smallest < s.smallest_ns)
			s.smallest_ns = t[i].smallest;
		if (!s.count || t[i].largest > s.largest_ns)
			s.largest_ns = t[i].largest;
		s.count += t[i].count;
		sum += t[i].sum;
		sum_squares += t[i].sum_squares;
	}
	if (s.count) {
		s.mean_ns = sum / (double)s.count;
		double variance = sum_squares / (double)s.count - s.mean_ns * s.mean_ns;
		s.sd_ns = sqrt(variance > 0 ? variance : 0);
	}
	return s;
}

/* Intervals off by less than (k + 1) x 10 us, for k from 0: a bin and its mirror. */
static uint64_t off_within(struct deviations *d, size_t k)
{
	size_t half = DEVIATION_BINS / 2;
	return atomic_load_explicit(&d->bin[half + k], memory_order_relaxed) +
	       atomic_load_explicit(&d->bin[half - 1 - k], memory_order_relaxed);
}

static uint64_t deviations_total(struct deviations *d)
{
	uint64_t total = atomic_load(&d->below) + atomic_load(&d->above);
	for (size_t i = 0; i < DEVIATION_BINS; i++)
		total += atomic_load_explicit(&d->bin[i], memory_order_relaxed);
	return total;
}

double deviations_off_quantile_us(struct deviations *d, double p)
{
	uint64_t total = deviations_total(d), seen = 0;
	for (size_t k = 0; k < DEVIATION_BINS / 2; k++) {
		seen += off_within(d, k);
		if (total && (double)seen >= p * (double)total)
			return (double)(k + 1) * DEVIATION_BIN_NS / 1e3;
	}
	return (double)DEVIATION_BINS / 2 * DEVIATION_BIN_NS / 1e3;
}

double deviations_off_fraction(struct deviations *d, double limit_us)
{
	uint64_t total = deviations_total(d), within = 0;
	for (size_t k = 0;
	     (double)(k + 1) * DEVIATION_BIN_NS / 1e3 <= limit_us && k < DEVIATION_BINS / 2; k++)
		within += off_within(d, k);
	return total ? (double)(total - within) / (double)total : 0;
}

size_t deviations_points(struct deviations *d, double *x_us, double *y, size_t max_points)
{
	size_t first = DEVIATION_BINS, last = 0, n = 0;
	for (size_t i = 0; i < DEVIATION_BINS; i++) {
		if (atomic_load_explicit(&d->bin[i], memory_order_relaxed)) {
			first = first < i ? first : i;
			last = i;
		}
	}
	for (size_t i = first; i <= last && n < max_points; i++, n++) {
		x_us[n] = ((double)i - DEVIATION_BINS / 2 + 0.5) * DEVIATION_BIN_NS / 1e3;
		y[n] = (double)atomic_load_explicit(&d->bin[i], memory_order_relaxed);
	}
	return n;
}

static int compare_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

void sort_i64(int64_t *v, size_t n)
{
	qsort(v, n, sizeof *v, compare_i64);
}
