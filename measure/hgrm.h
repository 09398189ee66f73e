/*
 * hgrm.h - a lateness distribution (measure.h) in HdrHistogram's
 * percentile-distribution text, the `.hgrm` file its plotter
 * (HistogramLogAnalyzer, hdrhistogram.github.io/HdrHistogram/plotFiles.html)
 * draws on a log-percentile axis: a header line, one line per percentile level
 * (value, percentile as a fraction, count up to it, 1/(1 - percentile)),
 * levels closing in on 100 % five to each halving of what is left, as
 * HdrHistogram's outputPercentileDistribution writes them, then "#[...]"
 * footers with the mean, the deviation, the largest value and the count.
 * Values in milliseconds, each its bucket's lower edge (as
 * lateness_percentile_us: exact to the microsecond below 2 ms, to 0.1 %
 * above); the 100 % line is the largest value itself.
 */
#ifndef TICKWHEEL_MEASURE_HGRM_H
#define TICKWHEEL_MEASURE_HGRM_H

#include "measure.h"

#include <stdio.h>

void hgrm_print(struct lateness *l, FILE *out);
/* 0, or -1 after saying why on stderr. */
int hgrm_write(struct lateness *l, const char *path);
/* The file beside path for another distribution: "-" name before its ".hgrm" (after it when
 * path has none), into out of size n; cut short if it does not fit. */
void hgrm_path_beside(char *out, size_t n, const char *path, const char *name);
/* The same levels as points for a log-percentile chart, as HdrHistogram's plotter draws
 * them: x = 1/(1 - percentile) (1 at 0 %, 100 at 99 %), y = the value in us; 100 %, which
 * has no x, is drawn at x = the runs counted (one run in that many). Returns the points
 * written, at most max_points. */
size_t hgrm_points(struct lateness *l, double *x, double *y_us, size_t max_points);

#endif
