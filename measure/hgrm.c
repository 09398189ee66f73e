/* hgrm.c - see hgrm.h. */
#include "hgrm.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* What bucket i stands for, in ms. */
static double value_ms(unsigned i)
{
	return (double)lateness_bucket_low_us(i) / 1e3;
}

static void footer(struct lateness *l, uint64_t total, FILE *out)
{
	double sum = 0, squares = 0;
	for (unsigned i = 0; i < LATENESS_BUCKETS; i++) {
		double n = (double)atomic_load_explicit(&l->bucket[i], memory_order_relaxed);
		double v = (double)(lateness_bucket_low_us(i) + lateness_bucket_high_us(i)) / 2e3;
		sum += n * v;
		squares += n * v * v;
	}
	double mean = total ? sum / (double)total : 0;
	double var = total ? squares / (double)total - mean * mean : 0;
	fprintf(out, "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", mean,
		sqrt(var > 0 ? var : 0));
	fprintf(out, "#[Max     = %12.3f, Total count    = %12llu]\n",
		(double)atomic_load_explicit(&l->max_ns, memory_order_relaxed) / 1e6,
		(unsigned long long)total);
	fprintf(out, "#[Buckets = %12d, SubBuckets     = %12d]\n", LATENESS_TOP_BIT - 10,
		LATENESS_LINEAR_US);
}

/* Walks the percentile levels as HdrHistogram's outputPercentileDistribution does. */
struct levels {
	struct lateness *l;
	uint64_t total, seen; /* runs; those in the buckets before `bucket` */
	unsigned bucket;
	double level; /* percent */
};

/* The next level below 100 %: its bucket, and the runs up to that bucket; false after it. */
static bool next_level(struct levels *it, unsigned *bucket, double *level, uint64_t *upto)
{
	struct lateness *l = it->l;
	if (!it->total)
		return false;
	/* the first bucket whose count reaches the level (at least one value) */
	double need = fmax(1, ceil(it->level / 100 * (double)it->total));
	while (it->bucket < LATENESS_BUCKETS - 1 &&
	       (double)(it->seen +
			atomic_load_explicit(&l->bucket[it->bucket], memory_order_relaxed)) < need)
		it->seen += atomic_load_explicit(&l->bucket[it->bucket++], memory_order_relaxed);
	*upto = it->seen + atomic_load_explicit(&l->bucket[it->bucket], memory_order_relaxed);
	if (*upto >= it->total && it->level > 0)
		return false;
	*bucket = it->bucket;
	*level = it->level;
	/* five levels to each halving of what is left above this one */
	it->level += 100 / (5 * pow(2, floor(log2(100 / (100 - it->level))) + 1));
	return true;
}

void hgrm_print(struct lateness *l, FILE *out)
{
	struct levels it = { .l = l, .total = lateness_runs(l) };
	fprintf(out, "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount",
		"1/(1-Percentile)");
	unsigned i;
	double level;
	uint64_t upto;
	while (next_level(&it, &i, &level, &upto))
		fprintf(out, "%12.3f %2.12f %10llu %14.2f\n", value_ms(i), level / 100,
			(unsigned long long)upto, 1 / (1 - level / 100));
	if (it.total)
		fprintf(out, "%12.3f %2.12f %10llu\n",
			(double)atomic_load_explicit(&l->max_ns, memory_order_relaxed) / 1e6, 1.0,
			(unsigned long long)it.total);
	footer(l, it.total, out);
}

size_t hgrm_points(struct lateness *l, double *x, double *y_us, size_t max_points)
{
	struct levels it = { .l = l, .total = lateness_runs(l) };
	unsigned i;
	double level;
	uint64_t upto;
	size_t n = 0;
	while (n < max_points && next_level(&it, &i, &level, &upto)) {
		x[n] = 1 / (1 - level / 100);
		y_us[n++] = value_ms(i) * 1e3;
	}
	if (it.total && n < max_points) { /* the largest: one run in total */
		x[n] = fmax((double)it.total, n ? x[n - 1] : 1);
		y_us[n++] = (double)atomic_load_explicit(&l->max_ns, memory_order_relaxed) / 1e3;
	}
	return n;
}

void hgrm_path_beside(char *out, size_t n, const char *path, const char *name)
{
	size_t len = strlen(path);
	size_t stem = len > 5 && !strcmp(path + len - 5, ".hgrm") ? len - 5 : len;
	snprintf(out, n, "%.*s-%s.hgrm", (int)stem, path, name);
}

int hgrm_write(struct lateness *l, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	hgrm_print(l, f);
	if (fclose(f)) {
		fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}
