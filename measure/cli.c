/* cli.c - see cli.h. */
#include "cli.h"
#include "measure.h"

#include "tickwheel.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef TW_TOOLS_VERSION
#error "TW_TOOLS_VERSION (meson's project version) is set in measure/meson.build"
#endif

void cli_init(struct cli *c, const char *prog, void (*usage)(FILE *out),
	      const struct cli_option *options, int argc, char **argv, int first)
{
	*c = (struct cli){ .prog = prog,
			   .usage = usage,
			   .options = options,
			   .argc = argc,
			   .argv = argv,
			   .next = first };
}

static void hint(const char *prog)
{
	fprintf(stderr, "Try '%s --help' for more information.\n", prog);
}

_Noreturn void cli_fail(const char *prog, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	hint(prog);
	exit(CLI_USAGE);
}

_Noreturn void cli_bad_value(const char *prog, const char *option, const char *value,
			     const char *why_fmt, ...)
{
	va_list ap;
	va_start(ap, why_fmt);
	fprintf(stderr, "%s: %s '%s': ", prog, option, value);
	vfprintf(stderr, why_fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	hint(prog);
	exit(CLI_USAGE);
}

/* --help and --version end here: their output must have got out. */
static _Noreturn void done(const char *prog)
{
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "%s: writing to stdout: %s\n", prog, strerror(errno));
		exit(CLI_USAGE);
	}
	exit(0);
}

void cli_version(const char *prog)
{
	printf("%s (tickwheel) %s\n", prog, TW_TOOLS_VERSION);
}

int cli_next(struct cli *c)
{
	if (c->next >= c->argc)
		return CLI_END;
	const char *arg = c->argv[c->next++];
	c->option = NULL;
	c->value = NULL;
	if (!c->no_options && !strcmp(arg, "--")) {
		c->no_options = true;
		return cli_next(c);
	}
	if (c->no_options || arg[0] != '-' || !arg[1]) {
		c->value = arg;
		return CLI_ARGUMENT;
	}
	if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
		c->usage(stdout);
		done(c->prog);
	}
	if (!strcmp(arg, "--version")) {
		cli_version(c->prog);
		done(c->prog);
	}
	const char *eq = strchr(arg, '=');
	size_t len = arg[1] == '-' && eq ? (size_t)(eq - arg) : strlen(arg);
	const struct cli_option *o = c->options;
	while (o->name && (strlen(o->name) != len || strncmp(o->name, arg, len)))
		o++;
	if (!o->name)
		cli_fail(c->prog, "unknown option '%.*s'", (int)len, arg);
	c->option = o->name;
	if (!o->has_value) {
		if (eq && arg[1] == '-')
			cli_fail(c->prog, "option '%s' takes no value: '%s'", o->name, arg);
		return o->id;
	}
	if (eq && arg[1] == '-')
		c->value = eq + 1;
	else if (c->next < c->argc)
		c->value = c->argv[c->next++];
	else
		cli_fail(c->prog, "option '%s' needs a value", o->name);
	return o->id;
}

static bool all_digits(const char *text)
{
	if (!*text)
		return false;
	for (; *text; text++)
		if (*text < '0' || *text > '9')
			return false;
	return true;
}

uint64_t cli_count(const char *prog, const char *option, const char *text, uint64_t min,
		   uint64_t max)
{
	errno = 0;
	char *end;
	unsigned long long n = all_digits(text) ? strtoull(text, &end, 10) : 0;
	if (!all_digits(text) || errno || n < min || n > max)
		cli_bad_value(prog, option, text,
			      "needs a whole number from %" PRIu64 " to %" PRIu64, min, max);
	return n;
}

double cli_real(const char *prog, const char *option, const char *text, double above,
		double at_most, const char *why)
{
	char *end;
	errno = 0;
	double x = strtod(text, &end);
	/* no blanks, no hexadecimal, no inf or nan: a number as people write one */
	bool plain = *text && strspn(text, "0123456789.eE+-") == strlen(text);
	if (!plain || *end || errno || !isfinite(x) || !(x > above) || x > at_most)
		cli_bad_value(prog, option, text, "%s", why);
	return x;
}

/* "1ms", "90s", "2h": ms as short as it goes exactly. */
static const char *ms_text(uint64_t ms, char *buf, size_t size)
{
	if (ms && ms % 3600000 == 0)
		snprintf(buf, size, "%" PRIu64 "h", ms / 3600000);
	else if (ms && ms % 1000 == 0)
		snprintf(buf, size, "%" PRIu64 "s", ms / 1000);
	else
		snprintf(buf, size, "%" PRIu64 "ms", ms);
	return buf;
}

static void check_ms(const char *prog, const char *option, const char *text, uint64_t ns,
		     uint64_t min_ms, uint64_t max_ms)
{
	char lo[32], hi[32];
	if (ns % NS_PER_MS)
		cli_bad_value(prog, option, text, "whole milliseconds only");
	if (ns / NS_PER_MS < min_ms || ns / NS_PER_MS > max_ms)
		cli_bad_value(prog, option, text, "needs %s to %s", ms_text(min_ms, lo, sizeof lo),
			      ms_text(max_ms, hi, sizeof hi));
}

uint64_t cli_ms(const char *prog, const char *option, const char *text, uint64_t min_ms,
		uint64_t max_ms)
{
	uint64_t ns;
	int rc = tw_parse_duration(text, &ns);
	if (rc == -TW_ERANGE)
		cli_bad_value(prog, option, text, "too long");
	if (rc)
		cli_bad_value(prog, option, text,
			      "not a duration such as 200ms, 1.5s or 2m (a bare number is ms)");
	check_ms(prog, option, text, ns, min_ms, max_ms);
	return ns / NS_PER_MS;
}

void cli_ms_range(const char *prog, const char *option, const char *text, uint64_t min_ms,
		  uint64_t max_ms, uint64_t *lo_ms, uint64_t *hi_ms)
{
	uint64_t lo, hi;
	int rc = tw_parse_duration_range(text, &lo, &hi);
	if (rc == -TW_ERANGE)
		cli_bad_value(prog, option, text, "too long");
	if (rc)
		cli_bad_value(prog, option, text,
			      "not a duration such as 200ms or a range such as 100-500ms, "
			      "low end first");
	check_ms(prog, option, text, lo, min_ms, max_ms);
	check_ms(prog, option, text, hi, min_ms, max_ms);
	*lo_ms = lo / NS_PER_MS;
	*hi_ms = hi / NS_PER_MS;
}

static _Noreturn void cannot_write(const char *prog, const char *option, const char *path, int err)
{
	fprintf(stderr, "%s: cannot write %s %s: %s\n", prog, option, path, strerror(err));
	exit(CLI_USAGE);
}

void cli_check_file(const char *prog, const char *option, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd >= 0) {
		close(fd);
		unlink(path);
		return;
	}
	struct stat st;
	if (errno != EEXIST || stat(path, &st))
		cannot_write(prog, option, path, errno);
	if (S_ISDIR(st.st_mode))
		cannot_write(prog, option, path, EISDIR);
	/* /dev/stdout, a pipe: opening and closing one could end its reader's input */
	if (!S_ISREG(st.st_mode)) {
		if (access(path, W_OK))
			cannot_write(prog, option, path, errno);
		return;
	}
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		cannot_write(prog, option, path, errno);
	close(fd);
}

bool cli_check_dir(const char *prog, const char *option, const char *path)
{
	bool made = mkdir(path, 0777) == 0;
	if (!made && errno != EEXIST)
		cannot_write(prog, option, path, errno);
	size_t size = strlen(path) + sizeof "/.tw-probe-XXXXXX";
	char *probe = malloc(size);
	if (!probe) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(CLI_USAGE);
	}
	snprintf(probe, size, "%s/.tw-probe-XXXXXX", path);
	int fd = mkstemp(probe);
	if (fd < 0) {
		int err = errno;
		free(probe);
		if (made)
			rmdir(path);
		cannot_write(prog, option, path, err);
	}
	close(fd);
	unlink(probe);
	free(probe);
	return made;
}
