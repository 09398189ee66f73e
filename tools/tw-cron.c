/*
 * tw-cron - a cron expression's next fire times, as tw_cron_next finds them,
 * printed in ISO 8601 with their UTC offset (like `systemd-analyze calendar`):
 *
 *   tw-cron '0 *\/5 * * * *' --count 10 --tz Asia/Tokyo
 *   tw-cron 'CRON_TZ=Europe/Berlin 0 30 2 * * *' --after 2026-03-28T00:00:00Z
 *
 * --tz ZONE is the zone of an expression without CRON_TZ= (else the process's
 * local zone, as the library takes it) and the zone the times are printed in
 * (else the schedule's own). --after is unix seconds or an ISO 8601 time with
 * its offset; the default is now. A bad expression is shown with a caret
 * under the byte where it goes wrong; exit status 2 for a bad command line,
 * 1 when the schedule runs out of fire times (-TW_ENOMATCH, -TW_ERANGE)
 * after printing those it has. Public API only (tickwheel.h), like the other
 * tools.
 */
#include "cli.h"
#include "tickwheel.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG       "tw-cron"
#define NS         INT64_C(1000000000)
#define MAX_COUNT  100000
#define MAX_PREFIX 300

static void usage(FILE *out)
{
	fprintf(out,
		"usage: tw-cron EXPRESSION [--count N] [--after TIME] [--tz ZONE]\n"
		"       tw-cron -h | --help | --version\n"
		"\n"
		"Prints the next fire times of a cron expression (api/tickwheel.h, \"Calendar\n"
		"schedules\"): six fields with seconds first, or five; *, lists, ranges, steps,\n"
		"JAN-DEC, SUN-SAT, ?; @yearly @monthly @weekly @daily @hourly @every DURATION;\n"
		"an optional CRON_TZ=ZONE prefix.\n"
		"\n"
		"  --count N     how many fire times, 1 .. %d (default 10)\n"
		"  --after TIME  the times after this one: unix seconds (1774742400), or ISO 8601\n"
		"                with its offset (2026-03-29T01:30:00+01:00, ...Z); default now\n"
		"  --tz ZONE     the zone of an expression without CRON_TZ= (default: the local\n"
		"                zone), and the zone the times are printed in (default: the\n"
		"                schedule's): Europe/Berlin, UTC, Local\n"
		"  -h, --help    this text\n"
		"  --version     the version\n"
		"\n"
		"Exit status: 0; 1 when the schedule has fewer fire times than asked (none within\n"
		"3660 days, or past 2262); 2 on a bad command line.\n",
		MAX_COUNT);
}

/* Digits, at least one; advances. */
static bool digits(const char **p, int count, int *out)
{
	int v = 0;
	for (int i = 0; i < count; i++, ++*p) {
		if (**p < '0' || **p > '9')
			return false;
		v = v * 10 + (**p - '0');
	}
	*out = v;
	return true;
}

/* "[-]SECONDS[.FRACTION]" or "YYYY-MM-DD(T| )HH:MM[:SS[.F]](Z|+HH[:MM]|-HH[:MM])", in ns. */
static bool parse_time(const char *text, int64_t *out)
{
	const char *p = text;
	int y, mo, d, h, mi, s = 0, oh = 0, om = 0;
	int64_t frac = 0, scale = NS;
	if (digits(&p, 4, &y) && *p == '-') {
		p++;
		if (!digits(&p, 2, &mo) || *p++ != '-' || !digits(&p, 2, &d) ||
		    (*p != 'T' && *p != ' ') || !(p++, digits(&p, 2, &h)) || *p++ != ':' ||
		    !digits(&p, 2, &mi))
			return false;
		if (*p == ':' && (p++, !digits(&p, 2, &s)))
			return false;
		if (*p == '.')
			for (p++; *p >= '0' && *p <= '9'; p++)
				if (scale > 1)
					frac += (*p - '0') * (scale /= 10);
		int sign = *p == '+' ? 1 : *p == '-' ? -1 : 0;
		if (*p == 'Z') {
			p++;
		} else if (!sign || (p++, !digits(&p, 2, &oh)) ||
			   (*p == ':' && (p++, !digits(&p, 2, &om)))) {
			return false;
		}
		if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 ||
		    oh > 23 || om > 59)
			return false;
		struct tm tm = { .tm_year = y - 1900,
				 .tm_mon = mo - 1,
				 .tm_mday = d,
				 .tm_hour = h,
				 .tm_min = mi,
				 .tm_sec = s };
		int64_t secs = (int64_t)timegm(&tm) - sign * (oh * 3600 + om * 60);
		*out = secs * NS + frac;
		return true;
	}
	p = text; /* the year's digits were read ahead */
	bool minus = *p == '-';
	p += minus;
	int64_t secs = 0;
	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++)
		if ((secs = secs * 10 + (*p - '0')) > INT64_MAX / NS - 1)
			return false;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (scale > 1)
				frac += (*p - '0') * (scale /= 10);
	if (*p)
		return false;
	*out = minus ? -(secs * NS + frac) : secs * NS + frac;
	return true;
}

/* "2026-03-29T03:00:00+02:00", with a fraction only when there is one. */
static void print_time(int64_t ns, int32_t offset)
{
	int64_t s = ns / NS - (ns % NS < 0), sub = ns - s * NS;
	time_t local = (time_t)(s + offset);
	struct tm tm;
	if (!gmtime_r(&local, &tm)) {
		printf("%" PRId64 " ns\n", ns);
		return;
	}
	char when[64], frac[16] = "";
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
	if (sub) {
		snprintf(frac, sizeof frac, ".%09" PRId64, sub);
		for (size_t len = strlen(frac); len > 4 && !strcmp(frac + len - 3, "000"); len -= 3)
			frac[len - 3] = '\0';
	}
	int32_t a = offset < 0 ? -offset : offset;
	printf("%s%s%c%02d:%02d", when, frac, offset < 0 ? '-' : '+', (int)(a / 3600),
	       (int)(a / 60 % 60));
	if (a % 60)
		printf(":%02d", (int)(a % 60)); /* local mean time before 1900 */
	putchar('\n');
}

/* The message, the expression, and a caret under the byte that is wrong; exit 2. */
static _Noreturn void bad_expression(const char *expr, int rc, const tw_cron_error *err)
{
	fprintf(stderr, "%s: %s: %s\n  %s\n  ", PROG, tw_strerror(rc),
		err->reason ? err->reason : "?", expr);
	for (size_t i = 0; i < err->offset && expr[i]; i++)
		if (((unsigned char)expr[i] & 0xc0) != 0x80) /* one column per UTF-8 character */
			fputc(expr[i] == '\t' ? '\t' : ' ', stderr);
	fputs("^\n", stderr);
	exit(CLI_USAGE);
}

static bool has_zone(const char *expr)
{
	expr += strspn(expr, " \t");
	return !strncmp(expr, "CRON_TZ=", 8) || !strncmp(expr, "TZ=", 3);
}

enum { OPT_COUNT = 1, OPT_AFTER, OPT_TZ };

static const struct cli_option options[] = {
	{ "--count", OPT_COUNT, true },
	{ "--after", OPT_AFTER, true },
	{ "--tz", OPT_TZ, true },
	{ NULL, 0, false },
};

int main(int argc, char **argv)
{
	const char *expr = NULL, *tz = NULL, *after_text = NULL;
	size_t count = 10;
	int64_t after = 0;
	struct cli c;
	cli_init(&c, PROG, usage, options, argc, argv, 1);
	for (int id; (id = cli_next(&c)) != CLI_END;) {
		switch (id) {
		case OPT_COUNT:
			count = cli_count(PROG, c.option, c.value, 1, MAX_COUNT);
			break;
		case OPT_AFTER:
			if (!parse_time(c.value, &after))
				cli_bad_value(
					PROG, c.option, c.value,
					"needs unix seconds or an ISO 8601 time with its offset "
					"(2026-03-29T01:30:00+01:00, 2026-03-29T00:30:00Z)");
			after_text = c.value;
			break;
		case OPT_TZ:
			tz = c.value;
			break;
		default:
			if (expr)
				cli_fail(PROG, "unexpected argument '%s': one expression, quoted",
					 c.value);
			expr = c.value;
		}
	}
	if (!expr)
		cli_fail(PROG, "no expression: tw-cron EXPRESSION [options]");
	/* The zone to print in: a schedule of its own, which only lends its zone. */
	tw_cron *shown = NULL, *cron = NULL;
	tw_cron_error err;
	char prefixed[MAX_PREFIX + 64];
	if (tz) {
		if (!*tz || strlen(tz) > MAX_PREFIX || strpbrk(tz, " \t"))
			cli_bad_value(PROG, "--tz", tz, "not a time zone name");
		snprintf(prefixed, sizeof prefixed, "CRON_TZ=%s @every 1s", tz);
		int rc = tw_cron_parse(prefixed, &shown, &err);
		if (rc)
			cli_bad_value(PROG, "--tz", tz, "%s",
				      err.reason ? err.reason : tw_strerror(rc));
	}
	size_t prefix = 0;
	char *full = NULL;
	if (tz && !has_zone(expr)) {
		prefix = strlen("CRON_TZ=") + strlen(tz) + 1;
		full = malloc(prefix + strlen(expr) + 1);
		if (!full) {
			fprintf(stderr, "%s: out of memory\n", PROG);
			return CLI_USAGE;
		}
		snprintf(full, prefix + strlen(expr) + 1, "CRON_TZ=%s %s", tz, expr);
	}
	int rc = tw_cron_parse(full ? full : expr, &cron, &err);
	free(full);
	if (rc) {
		tw_cron_free(shown);
		err.offset = err.offset >= prefix ? err.offset - prefix : 0;
		bad_expression(expr, rc, &err);
	}
	if (!after_text) {
		struct timespec now;
		if (clock_gettime(CLOCK_REALTIME, &now)) {
			perror(PROG ": clock_gettime");
			return CLI_USAGE;
		}
		after = (int64_t)now.tv_sec * NS + now.tv_nsec;
	}
	int64_t *times = malloc(count * sizeof *times);
	if (!times) {
		fprintf(stderr, "%s: out of memory\n", PROG);
		return CLI_USAGE;
	}
	rc = tw_cron_next(cron, after, times, count);
	for (size_t i = 0; i < count && times[i] != INT64_MIN; i++) {
		int32_t offset;
		tw_cron_utc_offset(shown ? shown : cron, times[i], &offset);
		print_time(times[i], offset);
	}
	if (rc == -TW_ENOMATCH)
		fprintf(stderr, "%s: no more fire times: none within 3660 days\n", PROG);
	else if (rc)
		fprintf(stderr, "%s: no more fire times: %s (past 2262)\n", PROG, tw_strerror(rc));
	free(times);
	tw_cron_free(cron);
	tw_cron_free(shown);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "%s: writing to stdout: %s\n", PROG, strerror(errno));
		return CLI_USAGE;
	}
	return rc ? 1 : 0;
}
