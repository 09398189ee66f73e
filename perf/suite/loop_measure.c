/* loop_measure.c - see loop_measure.h. */
#include "loop_measure.h"

#include "hgrm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t loops_wanted(const struct suite_options *opt, const struct loop_impl **out)
{
	size_t n = 0;
	for (size_t i = 0; suite_loops[i] != NULL; i++)
		if (i == 0 || suite_peer_wanted(opt, suite_loops[i]->name))
			out[n++] = suite_loops[i];
	return n;
}

void lateness_sort(int64_t *ns, size_t n)
{
	sort_i64(ns, n);
}

double lateness_quantile_us(const int64_t *sorted, size_t n, double p)
{
	if (!n)
		return 0;
	double rank = ceil(p * (double)n);
	size_t i = rank < 1 ? 0 : (size_t)rank - 1;
	int64_t v = sorted[i < n ? i : n - 1];
	return v > 0 ? (double)v / 1e3 : 0;
}

void lateness_report(struct report *r, const char *impl, const int64_t *sorted, size_t n)
{
	static const struct {
		const char *name;
		double p;
	} q[] = { { "lateness_p50", 0.5 },
		  { "lateness_p90", 0.9 },
		  { "lateness_p99", 0.99 },
		  { "lateness_p99_9", 0.999 },
		  { "lateness_max", 1.0 } };
	for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
		report_add(r, impl, q[i].name, lateness_quantile_us(sorted, n, q[i].p), "us",
			   BETTER_LOWER);
}

int lateness_hgrm_of(const char *path, const char *impl, const int64_t *sorted, size_t n)
{
	char peer_path[4096];
	if (strcmp(impl, suite_loops[0]->name)) {
		hgrm_path_beside(peer_path, sizeof peer_path, path, impl);
		path = peer_path;
	}
	struct lateness *l = calloc(1, sizeof *l);
	if (!l) {
		fprintf(stderr, "tw-perf: out of memory for %s\n", path);
		return 2;
	}
	/* an early run counts as 0, as in lateness_quantile_us: the figures and the file agree */
	for (size_t i = 0; i < n; i++)
		lateness_note(l, sorted[i] > 0 ? (uint64_t)sorted[i] : 0, 0);
	int rc = hgrm_write(l, path) ? 2 : 0;
	free(l);
	return rc;
}

/* Half the points spread evenly up to the 99th percentile, half at ever
 * rarer quantiles towards the max: the tail is what tells the loops apart. */
static double quantile_of_point(size_t k, size_t points, size_t n)
{
	size_t half = points / 2;
	if (k < half)
		return 0.99 * (double)(k + 1) / (double)half;
	double rarest = 1.0 / (double)n, t = (double)(k - half + 1) / (double)(points - half);
	return 1 - 0.01 * pow(rarest / 0.01, t);
}

/* How many samples are at or below v. */
static size_t count_at_or_below(const int64_t *sorted, size_t n, int64_t v)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (sorted[mid] <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t lateness_cdf_of(const int64_t *sorted, size_t n, double *x_us, double *y, size_t max_points)
{
	if (!n || max_points < 2)
		return 0;
	size_t written = 0;
	for (size_t k = 0; k < max_points; k++) {
		double q = k + 1 == max_points ? 1.0 : quantile_of_point(k, max_points, n);
		double rank = ceil(q * (double)n);
		int64_t v = sorted[rank < 1 ? 0 : (size_t)rank - 1];
		v = v > 0 ? v : 0;
		if (written && (double)v / 1e3 <= x_us[written - 1])
			continue;
		x_us[written] = (double)v / 1e3;
		y[written++] = (double)count_at_or_below(sorted, n, v) / (double)n;
	}
	return written;
}

struct plot_series cdf_plot_series(const char *title, const double *x_us, const double *y, size_t n)
{
	size_t skip = 0;
	while (skip < n && x_us[skip] <= 0)
		skip++;
	return (struct plot_series){ title, x_us + skip, y + skip, n - skip };
}
