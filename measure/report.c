/* report.c - see report.h. */
#include "report_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Room for one more item: the array's new address. If realloc fails the old
 * array stays, the caller drops its item and the report remembers the loss. */
static void *grow(struct report *r, void *items, size_t n, size_t *cap, size_t size)
{
	if (n < *cap)
		return items;
	size_t want = *cap ? *cap * 2 : 8;
	void *p = want <= SIZE_MAX / size ? realloc(items, want * size) : NULL;
	if (!p) {
		r->out_of_memory = true;
		return items;
	}
	*cap = want;
	return p;
}

#define GROW(r, field)                                                                         \
	((r)->field =                                                                          \
		 grow((r), (r)->field, (r)->n_##field, &(r)->cap_##field, sizeof *(r)->field), \
	 (r)->n_##field < (r)->cap_##field)

static char *copy(struct report *r, const char *s)
{
	char *c = strdup(s ? s : "");
	if (!c)
		r->out_of_memory = true;
	return c;
}

/* The command as a shell would take it back: arguments with odd characters
 * go in single quotes. */
static char *command_line(int argc, char **argv)
{
	size_t len = 1;
	for (int i = 0; i < argc; i++)
		len += 4 * strlen(argv[i]) + 3;
	char *s = malloc(len), *p = s;
	if (!s)
		return NULL;
	*p = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		bool plain =
			*a && !a[strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					   "0123456789-_./=:,+%@")];
		if (i)
			*p++ = ' ';
		if (!plain)
			*p++ = '\'';
		for (; *a; a++) {
			if (*a == '\'') {
				memcpy(p, "'\\''", 4);
				p += 4;
			} else {
				*p++ = *a;
			}
		}
		if (!plain)
			*p++ = '\'';
		*p = 0;
	}
	return s;
}

struct report *report_open(const char *tool, const char *scenario, int argc, char **argv)
{
	struct report *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->tool = copy(r, tool);
	r->scenario = copy(r, scenario);
	r->command = command_line(argc, argv);
	time_t now = time(NULL);
	struct tm tm;
	if (!gmtime_r(&now, &tm) || !strftime(r->date, sizeof r->date, "%Y-%m-%dT%H:%M:%SZ", &tm))
		strcpy(r->date, "unknown");
	if (!r->tool || !r->scenario || !r->command) {
		report_free(r);
		return NULL;
	}
	return r;
}

void report_free(struct report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_figures; i++) {
		free(r->figures[i].impl);
		free(r->figures[i].name);
		free(r->figures[i].unit);
	}
	for (size_t i = 0; i < r->n_params; i++)
		free(r->params[i].name);
	for (size_t i = 0; i < r->n_targets; i++)
		free(r->targets[i].name);
	for (size_t i = 0; i < r->n_series; i++) {
		free(r->series[i].impl);
		free(r->series[i].name);
		free(r->series[i].x);
		free(r->series[i].y);
	}
	for (size_t i = 0; i < r->n_notes; i++)
		free(r->notes[i]);
	free(r->figures);
	free(r->params);
	free(r->targets);
	free(r->series);
	free(r->notes);
	free(r->tool);
	free(r->scenario);
	free(r->command);
	free(r);
}

void report_param(struct report *r, const char *name, double value)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_params; i++) {
		if (!strcmp(r->params[i].name, name)) {
			r->params[i].value = value;
			return;
		}
	}
	char *c = copy(r, name);
	if (!c || !GROW(r, params)) {
		free(c);
		return;
	}
	r->params[r->n_params++] = (struct param){ c, value };
}

static struct figure *find_figure(const struct report *r, const char *impl, const char *name)
{
	for (size_t i = 0; i < r->n_figures; i++)
		if (!strcmp(r->figures[i].impl, impl) && !strcmp(r->figures[i].name, name))
			return &r->figures[i];
	return NULL;
}

void report_add(struct report *r, const char *impl, const char *name, double value,
		const char *unit, enum report_better better)
{
	if (!r)
		return;
	struct figure *f = find_figure(r, impl, name);
	char *u = copy(r, unit);
	if (f) {
		if (u) {
			free(f->unit);
			*f = (struct figure){ f->impl, f->name, u, value, better };
		}
		return;
	}
	char *i = copy(r, impl), *n = copy(r, name);
	if (!u || !i || !n || !GROW(r, figures)) {
		free(u), free(i), free(n);
		return;
	}
	r->figures[r->n_figures++] = (struct figure){ i, n, u, value, better };
}

void report_target(struct report *r, const char *name, const char *op, double limit)
{
	if (!r)
		return;
	if (strcmp(op, "<=") && strcmp(op, ">=")) {
		/* Kept so that it counts as missed rather than vanishing. */
		fprintf(stderr, "report: target on %s: op '%s' is neither <= nor >=\n", name, op);
		op = "?";
	}
	for (size_t i = 0; i < r->n_targets; i++) {
		if (!strcmp(r->targets[i].name, name) && !strcmp(r->targets[i].op, op)) {
			r->targets[i].limit = limit;
			return;
		}
	}
	char *c = copy(r, name);
	if (!c || !GROW(r, targets)) {
		free(c);
		return;
	}
	struct target *t = &r->targets[r->n_targets++];
	*t = (struct target){ .name = c, .limit = limit };
	strcpy(t->op, op);
}

void report_note(struct report *r, const char *fmt, ...)
{
	if (!r)
		return;
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *s = len >= 0 ? malloc((size_t)len + 1) : NULL;
	if (!s || !GROW(r, notes)) {
		r->out_of_memory = true;
		free(s);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(s, (size_t)len + 1, fmt, ap);
	va_end(ap);
	r->notes[r->n_notes++] = s;
}

void report_series(struct report *r, const char *impl, const char *name, const double *x,
		   const double *y, size_t n)
{
	if (!r)
		return;
	bool fits = n <= SIZE_MAX / sizeof *x;
	struct series s = { copy(r, impl), copy(r, name),
			    fits ? malloc(n ? n * sizeof *x : 1) : NULL,
			    fits ? malloc(n ? n * sizeof *y : 1) : NULL, n };
	if (!s.impl || !s.name || !s.x || !s.y || !GROW(r, series)) {
		r->out_of_memory = true;
		free(s.impl), free(s.name), free(s.x), free(s.y);
		return;
	}
	if (n) {
		memcpy(s.x, x, n * sizeof *x);
		memcpy(s.y, y, n * sizeof *y);
	}
	r->series[r->n_series++] = s;
}

const struct figure *report_find_figure(const struct report *r, const char *impl, const char *name)
{
	return find_figure(r, impl, name);
}

bool report_target_met(const struct report *r, const struct target *t)
{
	const struct figure *f = find_figure(r, TICKWHEEL, t->name);
	if (!f || isnan(f->value))
		return false;
	if (!strcmp(t->op, "<="))
		return f->value <= t->limit;
	return !strcmp(t->op, ">=") && f->value >= t->limit;
}

int report_missed(const struct report *r)
{
	int missed = 0;
	for (size_t i = 0; r && i < r->n_targets; i++)
		missed += !report_target_met(r, &r->targets[i]);
	return missed;
}
