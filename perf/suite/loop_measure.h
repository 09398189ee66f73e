/*
 * loop_measure.h - what heartbeats, burst and idle share around the loops:
 * which loops to run and exact
 * lateness percentiles from recorded samples.
 *
 * Samples rather than the histogram of measure.h: the peers are compared on
 * exact values, not on buckets 0.1 % wide; the histogram is made of them only
 * for HdrHistogram's text (--hgrm).
 */
#ifndef TICKWHEEL_PERF_LOOP_MEASURE_H
#define TICKWHEEL_PERF_LOOP_MEASURE_H

#include "measure.h"
#include "peer.h"
#include "plot.h"
#include "report.h"
#include "suite.h"

#include <stddef.h>
#include <stdint.h>

/* tickwheel, then each peer wanted by opt; returns how many (at most 4). */
size_t loops_wanted(const struct suite_options *opt, const struct loop_impl **out);

/* Sorts the lateness samples (ns, signed: negative = before its due). */
void lateness_sort(int64_t *ns, size_t n);
/* The p-quantile of sorted samples in us, negatives counted as 0 (the
 * histogram's rule: the smallest value with at least p of the runs at or
 * below it). */
double lateness_quantile_us(const int64_t *sorted, size_t n, double p);
/* lateness_p50 .. lateness_max of sorted samples as figures of impl. */
void lateness_report(struct report *r, const char *impl, const int64_t *sorted, size_t n);
/* The samples in HdrHistogram's percentile text (hgrm.h): tickwheel's to path, a peer's
 * beside it with "-NAME" before ".hgrm". 0, or 2 after saying why on stderr. */
int lateness_hgrm_of(const char *path, const char *impl, const int64_t *sorted, size_t n);
/* A CDF of sorted samples: x = lateness in us, y = fraction of runs at or
 * below it, at most max_points points. Returns the points written. */
size_t lateness_cdf_of(const int64_t *sorted, size_t n, double *x_us, double *y, size_t max_points);
/* A CDF as a plot series on a log x axis, where lateness 0 has no place. */
struct plot_series cdf_plot_series(const char *title, const double *x_us, const double *y,
				   size_t n);

#endif
