/*
 * cli.h - the command line of the tools (tw-jitter, tw-showcase, tw-perf), the
 * Unix way: -h or --help prints the usage on stdout and exits 0, --version
 * prints "PROG (tickwheel) VERSION" and exits 0; a bad command line gets one
 * line on stderr that names the option and the value, then a hint to try
 * --help, and exit status 2. Output paths are checked before a run starts, so
 * that a long run does not end in "cannot write".
 *
 * Options are long ones, "--name VALUE" or "--name=VALUE", matched exactly
 * (no abbreviations); "--" ends them. Not getopt_long: it abbreviates, it
 * permutes argv (which the reports record), and what it answers on a bad
 * option does not always say which argument was bad.
 */
#ifndef TICKWHEEL_MEASURE_CLI_H
#define TICKWHEEL_MEASURE_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The exit status of a bad command line, or of an output that cannot be written. */
enum { CLI_USAGE = 2 };

struct cli_option {
	const char *name; /* "--tasks" */
	int id;           /* what cli_next() returns for it, above 0 */
	bool has_value;   /* "--tasks N" rather than "--quick" */
};

struct cli {
	const char *prog;                 /* "tw-jitter", the messages' prefix */
	void (*usage)(FILE *out);         /* the usage text: stdout for --help */
	const struct cli_option *options; /* ends with { NULL, 0, false } */
	int argc;
	char **argv;
	int next;           /* the argument read next */
	bool no_options;    /* after "--" */
	const char *option; /* the option just read, as in the table */
	const char *value;  /* its value; or the argument that is not an option */
};

enum { CLI_END = 0, CLI_ARGUMENT = -1 };

/* Reads argv[first ..]. */
void cli_init(struct cli *c, const char *prog, void (*usage)(FILE *out),
	      const struct cli_option *options, int argc, char **argv, int first);

/* The id of the next option (its value, if it takes one, in c->value),
 * CLI_ARGUMENT for an argument that is not an option (in c->value), CLI_END
 * after the last. Answers -h, --help and --version itself (exit 0). An
 * unknown option, a missing value or a value to an option that takes none:
 * a message and exit 2. */
int cli_next(struct cli *c);

/* "PROG (tickwheel) VERSION" on stdout; the version is meson's project version. */
void cli_version(const char *prog);

/* "PROG: MESSAGE" and "Try 'PROG --help' for more information." on stderr, exit 2. */
_Noreturn void cli_fail(const char *prog, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The same for a bad value: "PROG: OPTION 'VALUE': WHY". */
_Noreturn void cli_bad_value(const char *prog, const char *option, const char *value,
			     const char *why_fmt, ...) __attribute__((format(printf, 4, 5)));

/* The value parsers: each exits through cli_bad_value() on a bad value. */

/* A whole number in decimal digits only (no sign, no blanks), min .. max. */
uint64_t cli_count(const char *prog, const char *option, const char *text, uint64_t min,
		   uint64_t max);
/* A finite decimal number above `above` and at most `at_most`; why says so. */
double cli_real(const char *prog, const char *option, const char *text, double above,
		double at_most, const char *why);
/* A duration as tw_parse_duration() reads it ("200ms", "1.5s", "2m"; a bare
 * number is ms), in whole milliseconds, min_ms .. max_ms; returns ms. */
uint64_t cli_ms(const char *prog, const char *option, const char *text, uint64_t min_ms,
		uint64_t max_ms);
/* A range "100-500ms", or one duration (lo == hi), the same way. */
void cli_ms_range(const char *prog, const char *option, const char *text, uint64_t min_ms,
		  uint64_t max_ms, uint64_t *lo_ms, uint64_t *hi_ms);

/* Exits 2 with "PROG: cannot write OPTION PATH: REASON" unless a file can be
 * written at path: an existing one is opened for writing (not truncated), a
 * new one is created and removed again, so that a run that fails later leaves
 * nothing behind. */
void cli_check_file(const char *prog, const char *option, const char *path);
/* The same for a directory to write files into: made if missing (its parent
 * must exist), then a file is created in it and removed. true if it made the
 * directory: rmdir() it if the run fails before writing there. */
bool cli_check_dir(const char *prog, const char *option, const char *path);

#endif
