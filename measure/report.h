/*
 * report.h - the figures a measuring program produces, printed as a table and
 * written as JSON together with the facts of the machine and the build, so
 * that two runs can be compared (perf/compare.py) and plotted.
 *
 * A figure belongs to an implementation ("tickwheel", "libev", ...): the table
 * has one column per implementation, in the order they first reported, and
 * shows each peer's value with its ratio to tickwheel's. A target applies to
 * tickwheel's figure of that name and prints as met or missed.
 *
 * JSON written by report_write_json():
 *   { "tool": "tw-perf", "scenario": "heartbeats", "command": "tw-perf heartbeats --tasks 20000",
 *     "machine": { "host", "kernel", "arch", "cpu", "cpus", "compiler", "build", "git", "date" },
 *     "params": { "tasks": 20000, ... },
 *     "figures": [ { "impl": "tickwheel", "name": "lateness_p99", "value": 315.0,
 *                    "unit": "us", "better": "lower" }, ... ],
 *     "targets": [ { "name": "lateness_p99", "op": "<=", "limit": 1200.0, "met": true } ],
 *     "series": [ { "impl": "tickwheel", "name": "lateness_cdf", "x": [...], "y": [...] } ],
 *     "notes": [ "libuv re-arms repeats from now: it drifts by design", ... ] }
 */
#ifndef TICKWHEEL_MEASURE_REPORT_H
#define TICKWHEEL_MEASURE_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Which way a figure gets better; the regression gate reads it. */
enum report_better { BETTER_LOWER, BETTER_HIGHER, BETTER_NEITHER };

struct report;

/* An empty report; the command line is recorded as given. NULL: out of memory. */
struct report *report_open(const char *tool, const char *scenario, int argc, char **argv);
void report_free(struct report *r);

/* A parameter of the run (tasks, seconds, ...): a JSON "params" entry. */
void report_param(struct report *r, const char *name, double value);
/* A measured figure. A second report of the same impl and name replaces the first. */
void report_add(struct report *r, const char *impl, const char *name, double value,
		const char *unit, enum report_better better);
/* A target on tickwheel's figure `name`: op is "<=" or ">=". */
void report_target(struct report *r, const char *name, const char *op, double limit);
/* A line printed under the table and kept in the JSON. */
void report_note(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Points for a picture (CDF, histogram, cost against N); JSON only. Copied. */
void report_series(struct report *r, const char *impl, const char *name, const double *x,
		   const double *y, size_t n);

/* The table: figure, unit, one column per impl (peers with "(x0.42)" ratios
 * against tickwheel), target and verdict; then the notes. */
void report_print(const struct report *r, FILE *out);
/* 0, or -1 after saying why on stderr. */
int report_write_json(const struct report *r, const char *path);
/* How many targets tickwheel missed (a figure never reported counts as missed). */
int report_missed(const struct report *r);

#endif
