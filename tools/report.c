/* report.c - see report.h. */
#include "report.h"

#include "build_info.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

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

static bool target_met(const struct report *r, const struct target *t)
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
		missed += !target_met(r, &r->targets[i]);
	return missed;
}

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
			met = met && target_met(t->r, &t->r->targets[i]);
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
		const struct figure *own = find_figure(t->r, TICKWHEEL, name);
		snprintf(buf, size, "%s", (own ? own : f)->unit);
		return;
	}
	const char *impl = t->impls[col - 2];
	const struct figure *mine = find_figure(t->r, impl, name);
	const struct figure *base = find_figure(t->r, TICKWHEEL, name);
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

/* ---- JSON ---- */

/* The length of a valid UTF-8 sequence at s, or 0: JSON must be UTF-8. */
static size_t utf8_length(const unsigned char *s)
{
	static const struct {
		unsigned char lead_lo, lead_hi, second_lo, second_hi, length;
	} forms[] = {
		{ 0xc2, 0xdf, 0x80, 0xbf, 2 }, { 0xe0, 0xe0, 0xa0, 0xbf, 3 },
		{ 0xe1, 0xec, 0x80, 0xbf, 3 }, { 0xed, 0xed, 0x80, 0x9f, 3 },
		{ 0xee, 0xef, 0x80, 0xbf, 3 }, { 0xf0, 0xf0, 0x90, 0xbf, 4 },
		{ 0xf1, 0xf3, 0x80, 0xbf, 4 }, { 0xf4, 0xf4, 0x80, 0x8f, 4 },
	};
	for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
		if (s[0] < forms[f].lead_lo || s[0] > forms[f].lead_hi)
			continue;
		if (s[1] < forms[f].second_lo || s[1] > forms[f].second_hi)
			return 0;
		for (size_t i = 2; i < forms[f].length; i++)
			if ((s[i] & 0xc0) != 0x80)
				return 0;
		return forms[f].length;
	}
	return 0;
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		const char *esc = *p == '"'  ? "\\\"" :
				  *p == '\\' ? "\\\\" :
				  *p == '\n' ? "\\n" :
				  *p == '\r' ? "\\r" :
				  *p == '\t' ? "\\t" :
				  *p == '\b' ? "\\b" :
				  *p == '\f' ? "\\f" :
					       NULL;
		size_t len;
		if (esc) {
			fputs(esc, f);
		} else if (*p < 0x20) {
			fprintf(f, "\\u%04x", *p);
		} else if (*p < 0x80) {
			fputc(*p, f);
		} else if ((len = utf8_length(p))) {
			fwrite(p, 1, len, f);
			p += len - 1;
		} else {
			fputs("\\ufffd", f);
		}
	}
	fputc('"', f);
}

static void json_number(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.10g", v);
	else
		fputs("null", f);
}

static void json_numbers(FILE *f, const double *v, size_t n)
{
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputs(", ", f);
		json_number(f, v[i]);
	}
	fputc(']', f);
}

static void json_member(FILE *f, const char *before, const char *name, const char *value)
{
	fprintf(f, "%s", before);
	json_string(f, name);
	fputs(": ", f);
	json_string(f, value);
}

static void cpu_model(char *buf, size_t size)
{
	snprintf(buf, size, "unknown");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		char *colon = strchr(line, ':');
		if (strncmp(line, "model name", 10) || !colon)
			continue;
		colon += 1 + strspn(colon + 1, " \t");
		colon[strcspn(colon, "\n")] = 0;
		snprintf(buf, size, "%s", colon);
		break;
	}
	fclose(f);
}

static void json_machine(FILE *f, const struct report *r)
{
	char host[256] = "unknown", kernel[2 * sizeof(((struct utsname *)0)->release) + 2];
	char cpu[256];
	struct utsname u;
	if (gethostname(host, sizeof host - 1))
		snprintf(host, sizeof host, "unknown");
	if (uname(&u))
		memset(&u, 0, sizeof u);
	snprintf(kernel, sizeof kernel, "%s %s", u.release, u.version);
	cpu_model(cpu, sizeof cpu);
	fputs("  \"machine\": {", f);
	json_member(f, "", "host", host);
	json_member(f, ", ", "kernel", kernel);
	json_member(f, ", ", "arch", u.machine);
	json_member(f, ",\n              ", "cpu", cpu);
	fprintf(f, ", \"cpus\": %ld", sysconf(_SC_NPROCESSORS_ONLN));
	json_member(f, ",\n              ", "compiler", TW_COMPILER);
	json_member(f, ", ", "build", TW_BUILD_OPTIONS);
	json_member(f, ",\n              ", "git", TW_GIT_REVISION);
	json_member(f, ", ", "date", r->date);
	fputs("},\n", f);
}

static const char *better_name(enum report_better b)
{
	return b == BETTER_LOWER ? "lower" : b == BETTER_HIGHER ? "higher" : "neither";
}

static void json_body(FILE *f, const struct report *r)
{
	json_member(f, "{\n  ", "tool", r->tool);
	json_member(f, ", ", "scenario", r->scenario);
	json_member(f, ",\n  ", "command", r->command);
	fputs(",\n", f);
	json_machine(f, r);
	fputs("  \"params\": {", f);
	for (size_t i = 0; i < r->n_params; i++) {
		fputs(i ? ", " : "", f);
		json_string(f, r->params[i].name);
		fputs(": ", f);
		json_number(f, r->params[i].value);
	}
	fputs("},\n  \"figures\": [", f);
	for (size_t i = 0; i < r->n_figures; i++) {
		const struct figure *g = &r->figures[i];
		json_member(f, i ? ",\n    { " : "\n    { ", "impl", g->impl);
		json_member(f, ", ", "name", g->name);
		fputs(", \"value\": ", f);
		json_number(f, g->value);
		json_member(f, ", ", "unit", g->unit);
		json_member(f, ", ", "better", better_name(g->better));
		fputs(" }", f);
	}
	fputs(" ],\n  \"targets\": [", f);
	for (size_t i = 0; i < r->n_targets; i++) {
		const struct target *t = &r->targets[i];
		json_member(f, i ? ",\n    { " : "\n    { ", "name", t->name);
		json_member(f, ", ", "op", t->op);
		fputs(", \"limit\": ", f);
		json_number(f, t->limit);
		fprintf(f, ", \"met\": %s }", target_met(r, t) ? "true" : "false");
	}
	fputs(" ],\n  \"series\": [", f);
	for (size_t i = 0; i < r->n_series; i++) {
		const struct series *s = &r->series[i];
		json_member(f, i ? ",\n    { " : "\n    { ", "impl", s->impl);
		json_member(f, ", ", "name", s->name);
		fputs(",\n      \"x\": ", f);
		json_numbers(f, s->x, s->n);
		fputs(",\n      \"y\": ", f);
		json_numbers(f, s->y, s->n);
		fputs(" }", f);
	}
	fputs(" ],\n  \"notes\": [", f);
	for (size_t i = 0; i < r->n_notes; i++) {
		fputs(i ? ",\n    " : "\n    ", f);
		json_string(f, r->notes[i]);
	}
	fputs(" ]\n}\n", f);
}

int report_write_json(const struct report *r, const char *path)
{
	if (!r || r->out_of_memory) {
		fprintf(stderr, "report: out of memory while collecting figures: not writing %s\n",
			path);
		return -1;
	}
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "report: %s: %s\n", path, strerror(errno));
		return -1;
	}
	json_body(f, r);
	bool failed = ferror(f);
	if (fclose(f) || failed) {
		fprintf(stderr, "report: writing %s failed\n", path);
		return -1;
	}
	return 0;
}
