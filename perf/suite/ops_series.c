/*
 * ops_series.c - the ops scenario's series (cost against N) and pictures:
 * one PNG per wheel operation with a line per implementation (all of them in
 * one picture would be some twenty lines), and one for the engine API.
 */
#include "ops.h"
#include "plot.h"

#include <stdio.h>

static const char *const engine_op_titles[ENG_OPS] = {
	[ENG_ADD] = "tw_add",
	[ENG_ADD_FRESH] = "tw_add, table growing",
	[ENG_CANCEL] = "tw_cancel",
	[ENG_POSTPONE] = "tw_set_delay later",
	[ENG_POSTPONE_MANY] = "tw_set_delay_many later, 64 a call",
	[ENG_EARLIER] = "tw_set_delay earlier",
	[ENG_GET] = "tw_get",
	[ENG_GET_HOT] = "tw_get, hot set of 1000",
};

static void draw(const struct ops_run *o, const char *file, const char *what,
		 const struct plot_series *s, size_t count)
{
	if (!o->opt->plot_dir || count == 0)
		return;
	char title[128];
	snprintf(title, sizeof title, "%s: ns per operation against N", what);
	struct plot p = { .title = title,
			  .xlabel = "live timers N",
			  .ylabel = "ns per operation",
			  .logx = true,
			  .logy = true,
			  .style = PLOT_LINESPOINTS };
	plot_png(suite_plot_path(o->opt, file), &p, s, count); /* says why if it cannot */
}

/* One implementation's figure against N, where it was measured. */
static size_t wheel_points(const struct ops_run *o, int c, int fig, double *x, double *y)
{
	size_t m = 0;
	for (size_t k = 0; k < o->count; k++)
		if (o->wheel[k][c].impl) {
			x[m] = (double)o->sizes[k];
			y[m++] = o->wheel[k][c].fig[fig];
		}
	return m;
}

static void wheel_series(const struct ops_run *o)
{
	char name[64], file[64];
	for (size_t i = 0; i < WHEEL_OPS; i++) {
		double x[IMPLS + 1][MAX_SIZES], y[IMPLS + 1][MAX_SIZES];
		struct plot_series s[IMPLS + 1];
		size_t lines = 0;
		snprintf(name, sizeof name, "ns_per_op_%s", wheel_ops[i].name);
		for (int c = 0; c < IMPLS; c++) {
			size_t m = wheel_points(o, c, wheel_ops[i].fig, x[c], y[c]);
			if (!m)
				continue;
			report_series(o->r, report_names[c], name, x[c], y[c], m);
			s[lines++] = (struct plot_series){ c ? report_names[c] : "tickwheel wheel",
							   x[c], y[c], m };
		}
		if (wheel_ops[i].fig == FIG_EXPIRY_SHORT)
			continue; /* drawn with expiry */
		if (wheel_ops[i].fig == FIG_EXPIRY) {
			size_t m = wheel_points(o, 0, FIG_EXPIRY_SHORT, x[IMPLS], y[IMPLS]);
			if (m)
				s[lines++] =
					(struct plot_series){ "tickwheel wheel, dues 1..1000 ms",
							      x[IMPLS], y[IMPLS], m };
		}
		snprintf(file, sizeof file, "ops-%s.png", wheel_ops[i].name);
		draw(o, file, wheel_ops[i].label, s, lines);
	}
}

static void engine_series(const struct ops_run *o)
{
	double x[MAX_SIZES], y[ENG_OPS][MAX_SIZES];
	struct plot_series s[ENG_OPS];
	size_t m = 0;
	char name[64];
	for (size_t k = 0; k < o->count; k++)
		if (o->engine_done[k]) {
			x[m] = (double)o->sizes[k];
			for (int op = 0; op < ENG_OPS; op++)
				y[op][m] = o->engine[k].ns[op];
			m++;
		}
	if (!m)
		return;
	for (int op = 0; op < ENG_OPS; op++) {
		snprintf(name, sizeof name, "ns_per_op_engine_%s", engine_op_names[op]);
		report_series(o->r, "tickwheel", name, x, y[op], m);
		s[op] = (struct plot_series){ engine_op_titles[op], x, y[op], m };
	}
	draw(o, "ops-engine.png", "engine API (manual clock)", s, ENG_OPS);
}

void ops_series(const struct ops_run *o)
{
	wheel_series(o);
	engine_series(o);
}
