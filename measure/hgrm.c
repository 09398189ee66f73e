/* hgrm.c - see hgrm.h. */
#include "hgrm.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* What bucket i stands for, in ms. */
static double value_ms(struct lateness *l, unsigned i)
{
	if (i == LATENESS_BUCKETS)
		return (double)atomic_load_explicit(&l->max_ns, memory_order_relaxed) / 1e6;
	return (double)i / 1e3;
}

static void footer(struct lateness *l, uint64_t total, FILE *out)
{
	double sum = 0, squares = 0;
	for (unsigned i = 0; i <= LATENESS_BUCKETS; i++) {
		double n = (double)atomic_load_explicit(&l->bucket[i], memory_order_relaxed);
		double v = i == LATENESS_BUCKETS ? value_ms(l, i) : ((double)i + 0.5) / 1e3;
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
	fprintf(out, "#[Buckets = %12d, SubBuckets     = %12d]\n", LATENESS_BUCKETS + 1, 1);
}

void hgrm_print(struct lateness *l, FILE *out)
{
	uint64_t total = lateness_runs(l), seen = 0;
	fprintf(out, "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount",
		"1/(1-Percentile)");
	unsigned i = 0;
	double level = 0; /* percent */
	while (total) {
		/* the first bucket whose count reaches the level (at least one value) */
		double need = fmax(1, ceil(level / 100 * (double)total));
		while (i < LATENESS_BUCKETS &&
		       (double)(seen + atomic_load_explicit(&l->bucket[i], memory_order_relaxed)) <
			       need)
			seen += atomic_load_explicit(&l->bucket[i++], memory_order_relaxed);
		uint64_t upto = seen + atomic_load_explicit(&l->bucket[i], memory_order_relaxed);
		if (upto >= total && level > 0)
			break;
		fprintf(out, "%12.3f %2.12f %10llu %14.2f\n", value_ms(l, i), level / 100,
			(unsigned long long)upto, 1 / (1 - level / 100));
		/* five levels to each halving of what is left above this one */
		double ticks = 5 * pow(2, floor(log2(100 / (100 - level))) + 1);
		level += 100 / ticks;
	}
	if (total)
		fprintf(out, "%12.3f %2.12f %10llu\n",
			(double)atomic_load_explicit(&l->max_ns, memory_order_relaxed) / 1e6, 1.0,
			(unsigned long long)total);
	footer(l, total, out);
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
