/* report_json.c - report_write_json(): the JSON with the machine's facts (see report.h). */
#include "report_internal.h"

#include "build_info.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

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
		fprintf(f, ", \"met\": %s }", report_target_met(r, t) ? "true" : "false");
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
