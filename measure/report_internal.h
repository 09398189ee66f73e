/*
 * report_internal.h - the report's data, shared by report.c (collecting
 * figures), report_table.c (the table) and report_json.c (the JSON).
 */
#ifndef TICKWHEEL_MEASURE_REPORT_INTERNAL_H
#define TICKWHEEL_MEASURE_REPORT_INTERNAL_H

#include "report.h"

#include <stdbool.h>
#include <stddef.h>

#define TICKWHEEL "tickwheel"

struct figure {
	char *impl, *name, *unit;
	double value;
	enum report_better better;
};

struct param {
	char *name;
	double value;
};

struct target {
	char *name;
	char op[3];
	double limit;
};

struct series {
	char *impl, *name;
	double *x, *y;
	size_t n;
};

/* Each array grows with realloc; `n` items in use out of `cap`. */
#define ARRAY(type, field) \
	type *field;       \
	size_t n_##field, cap_##field

struct report {
	char *tool, *scenario, *command, date[32];
	ARRAY(struct figure, figures);
	ARRAY(struct param, params);
	ARRAY(struct target, targets);
	ARRAY(struct series, series);
	ARRAY(char *, notes);
	/* An allocation failed and something was dropped: the JSON would lie. */
	bool out_of_memory;
};

const struct figure *report_find_figure(const struct report *r, const char *impl, const char *name);
bool report_target_met(const struct report *r, const struct target *t);

#endif
