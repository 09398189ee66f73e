/* report_table.c - report_print(): the table (see report.h). */
#include "report_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the table ---- */

/* A row per figure name, first reported first, then targets on names never
 * reported; a column per impl, tickwheel first. */
struct table {
	const struct report *r;
	const char **rows, **impls;
	size_t n_rows, n_impls;
	bool targets;
};

static bool listed(const char **list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

static void add_unique(const char **list, size_t *n, const char *s)
{
	if (!listed(list, *n, s))
		list[(*n)++] = s;
}

static bool table_open(struct table *t, const struct report *r)
{
	*t = (struct table){ .r = r, .targets = r->n_targets > 0 };
	t->rows = malloc((r->n_figures + r->n_targets + 1) * sizeof *t->rows);
	t->impls = malloc((r->n_figures + 1) * sizeof *t->impls);
	if (!t->rows || !t->impls) {
		free(t->rows);
		free(t->impls);
		return false;
	}
	for (size_t i = 0; i < r->n_figures; i++)
		if (!strcmp(r->figures[i].impl, TICKWHEEL))
			add_unique(t->impls, &t->n_impls, TICKWHEEL);
	for (size_t i = 0; i < r->n_figures; i++) {
		add_unique(t->impls, &t->n_impls, r->figures[i].impl);
		add_unique(t->rows, &t->n_rows, r->figures[i].name);
	}
	for (size_t i = 0; i < r->n_targets; i++)
		add_unique(t->rows, &t->n_rows, r->targets[i].name);
	return true;
}

/* Four significant digits without an exponent for everyday sizes. */
static void format_value(char *buf, size_t size, double v)
{
	double a = fabs(v);
	if (!isfinite(v))
		snprintf(buf, size, "%g", v);
	else if (a >= 1e12 || (a > 0 && a < 1e-3))
		snprintf(buf, size, "%.3e", v);
	else if (v == floor(v))
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size, "%.*f", a >= 1000 ? 0 : a >= 100 ? 1 : a >= 10 ? 2 : 3, v);
}

static void format_targets(const struct table *t, const char *name, char *buf, size_t size,
			   bool verdict)
{
	size_t used = 0;
	bool met = true, any = false;
	buf[0] = 0;
	for (size_t i = 0; i < t->r->n_targets && !verdict; i++) {
		const struct target *g = &t->r->targets[i];
		if (strcmp(g->name, name))
			continue;
		char v[32];
		format_value(v, sizeof v, g->limit);
		int n = snprintf(buf + used, size - used, "%s%s %s", used ? ", " : "", g->op, v);
		used = n > 0 && (size_t)n < size - used ? used + (size_t)n : used;
	}
	for (size_t i = 0; i < t->r->n_targets && verdict; i++) {
		if (!strcmp(t->r->targets[i].name, name)) {
			any = true;
			met = met && report_target_met(t->r, &t->r->targets[i]);
		}
	}
	if (verdict && any)
		snprintf(buf, size, "%s", met ? "met" : "missed");
}

/* The text of a cell; row SIZE_MAX is the heading. */
static void cell(const struct table *t, size_t row, size_t col, char *buf, size_t size)
{
	static const char *const heading[] = { "figure", "unit" };
	size_t impl_cols = 2 + t->n_impls;
	buf[0] = 0;
	if (row == SIZE_MAX) {
		const char *target_heads[] = { "target", "verdict" };
		snprintf(buf, size, "%s",
			 col < 2         ? heading[col] :
			 col < impl_cols ? t->impls[col - 2] :
					   target_heads[col - impl_cols]);
		return;
	}
	const char *name = t->rows[row];
	if (col >= impl_cols) {
		format_targets(t, name, buf, size, col > impl_cols);
		return;
	}
	const struct figure *f = NULL;
	for (size_t i = 0; i < t->r->n_figures && !f; i++)
		if (!strcmp(t->r->figures[i].name, name))
			f = &t->r->figures[i];
	if (col == 0 || !f) {
		snprintf(buf, size, "%s", col == 0 ? name : col == 1 ? "" : "-");
		return;
	}
	if (col == 1) {
		const struct figure *own = report_find_figure(t->r, TICKWHEEL, name);
		snprintf(buf, size, "%s", (own ? own : f)->unit);
		return;
	}
	const char *impl = t->impls[col - 2];
	const struct figure *mine = report_find_figure(t->r, impl, name);
	const struct figure *base = report_find_figure(t->r, TICKWHEEL, name);
	if (!mine) {
		snprintf(buf, size, "-");
		return;
	}
	char v[32];
	format_value(v, sizeof v, mine->value);
	if (mine != base && base && base->value != 0 && isfinite(base->value) &&
	    isfinite(mine->value)) {
		double ratio = mine->value / base->value;
		snprintf(buf, size, "%s (x%.*f)", v, fabs(ratio) < 100 ? 2 : 0, ratio);
	} else {
		snprintf(buf, size, "%s", v);
	}
}

void report_print(const struct report *r, FILE *out)
{
	struct table t;
	if (!r || !table_open(&t, r)) {
		fprintf(out, "report: out of memory\n");
		return;
	}
	fprintf(out, "%s %s: %s\n", r->tool, r->scenario, r->command);
	size_t cols = 2 + t.n_impls + (t.targets ? 2 : 0), width[64] = { 0 };
	cols = cols < 64 ? cols : 64;
	char buf[256];
	for (size_t row = 0; row <= t.n_rows; row++) {
		for (size_t col = 0; col < cols; col++) {
			cell(&t, row == 0 ? SIZE_MAX : row - 1, col, buf, sizeof buf);
			size_t len = strlen(buf);
			width[col] = len > width[col] ? len : width[col];
		}
	}
	for (size_t row = 0; row <= t.n_rows; row++) {
		size_t end = 0; /* no trailing blanks: stop after the last cell with text */
		for (size_t col = 0; col < cols; col++) {
			cell(&t, row == 0 ? SIZE_MAX : row - 1, col, buf, sizeof buf);
			end = *buf ? col + 1 : end;
		}
		for (size_t col = 0; col < end; col++) {
			cell(&t, row == 0 ? SIZE_MAX : row - 1, col, buf, sizeof buf);
			/* Names and units read left to right, numbers line up right. */
			bool left = col < 2 || (t.targets && col + 1 == cols);
			int w = col + 1 == end && left ? 0 : (int)width[col];
			fprintf(out, "%s%*s", col ? "  " : "", left ? -w : w, buf);
		}
		fputc('\n', out);
		if (row == 0) {
			size_t total = 0;
			for (size_t col = 0; col < cols; col++)
				total += width[col] + (col ? 2 : 0);
			for (size_t i = 0; i < total; i++)
				fputc('-', out);
			fputc('\n', out);
		}
	}
	for (size_t i = 0; i < r->n_notes; i++)
		fprintf(out, "note: %s\n", r->notes[i]);
	if (r->out_of_memory)
		fprintf(out, "note: out of memory: some figures were dropped\n");
	free(t.rows);
	free(t.impls);
}
