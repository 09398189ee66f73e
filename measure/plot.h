/*
 * plot.h - pictures with gnuplot (Debian gnuplot-nox): the program writes a
 * gnuplot script with the data inline to `gnuplot` through a pipe, which
 * renders a PNG. No temporary files.
 */
#ifndef TICKWHEEL_MEASURE_PLOT_H
#define TICKWHEEL_MEASURE_PLOT_H

#include "measure.h"

#include <stdbool.h>
#include <stddef.h>

enum plot_style { PLOT_LINES, PLOT_STEPS, PLOT_BOXES, PLOT_LINESPOINTS };

struct plot {
	const char *title, *xlabel, *ylabel;
	bool logx, logy;
	enum plot_style style;
};

struct plot_series {
	const char *title; /* legend */
	const double *x, *y;
	size_t n;
};

/* Draws the series into a PNG at path. 0, or -1 after saying why on stderr
 * (gnuplot missing, gnuplot failed, nothing to draw). */
int plot_png(const char *path, const struct plot *p, const struct plot_series *s, size_t count);

/* true if a gnuplot the pictures can be drawn with is on the PATH: a tool that
 * is to draw after a long run asks before it. */
bool plot_gnuplot_found(void);

/* Several plots side by side in one PNG (a gnuplot multiplot), each with its
 * own series; every panel needs at least one series. */
struct plot_panel {
	struct plot plot;
	const struct plot_series *series;
	size_t count;
};
int plot_png_panels(const char *path, const struct plot_panel *panels, size_t count);

/* The cumulative distribution of a lateness histogram: x = lateness in us,
 * y = fraction of runs at or below it, one point per non-empty bucket up to
 * max_points (coarser steps if there are more). Returns the points written. */
size_t lateness_cdf(struct lateness *l, double *x_us, double *y, size_t max_points);

#endif
