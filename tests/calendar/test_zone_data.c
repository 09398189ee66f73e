/*
 * test_zone_data.c - the zone reader (calendar/zone*.c) against glibc: for
 * every zone of the system's zoneinfo, the offset at instants from 1900 to
 * 2100 (the table and, past 2037, the footer's rule) must be what
 * localtime_r gives with TZ set to it. Then data that is not a zone: every
 * truncation and many corruptions of a real file are refused or read
 * without a fault (ASan watches), and POSIX TZ strings good and bad.
 */
#include "../test_util.h"
#include "cron_test.h"
#include "zone.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ZONEINFO "/usr/share/zoneinfo"

static int zones_checked, instants_checked;

static int32_t glibc_offset(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	cr_assert_not_null(localtime_r(&tt, &tm));
	return (int32_t)tm.tm_gmtoff;
}

static int check_zone(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	const char *name = path + strlen(ZONEINFO) + 1;
	if (type != FTW_F || !S_ISREG(st->st_mode) || !strncmp(name, "right/", 6) ||
	    !strncmp(name, "posix/", 6) || strchr(name, '.') || !strcmp(name, "Factory"))
		return 0;
	char head[4] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s", path);
	ssize_t got = read(fd, head, 4);
	cr_assert_eq(close(fd), 0);
	if (got != 4 || memcmp(head, "TZif", 4))
		return 0; /* zone1970.tab and the like */
	char expr[300];
	snprintf(expr, sizeof expr, "CRON_TZ=%s @daily", name);
	tw_cron *c = parse_ok(expr);
	cr_assert_eq(setenv("TZ", name, 1), 0);
	tzset();
	/* every 37 days and 5 hours from 1900 to 2100, 2000 instants */
	int64_t from = iso_ns("1900-01-01T00:00:00Z") / NS, step = 37 * CAL_DAY + 5 * 3600;
	for (int i = 0; i < 2000; i++) {
		int64_t t = from + i * step;
		int32_t ours;
		cr_assert_eq(tw_cron_utc_offset(c, t * NS, &ours), TW_OK);
		int32_t theirs = glibc_offset(t);
		char when[40];
		cr_assert_eq(ours, theirs, "%s at %s: %d s, glibc %d s", name,
			     utc_text(t * NS, when, sizeof when), ours, theirs);
		instants_checked++;
	}
	tw_cron_free(c);
	zones_checked++;
	return 0;
}

Test(zone_data, every_zone_agrees_with_glibc)
{
	cr_assert_eq(nftw(ZONEINFO, check_zone, 16, FTW_PHYS), 0);
	cr_assert_gt(zones_checked, 300, "only %d zones: is tzdata installed?", zones_checked);
	cr_log_info("%d zones, %d instants", zones_checked, instants_checked);
}

/* A few zones hour by hour for 20 years, across the table's end (2037). */
Test(zone_data, hour_by_hour)
{
	const char *zones[] = { "Europe/Berlin",       "America/New_York",  "Australia/Sydney",
				"Australia/Lord_Howe", "America/Sao_Paulo", "Europe/Dublin",
				"Pacific/Apia",        "Africa/Casablanca", "America/Nuuk" };
	for (size_t z = 0; z < sizeof zones / sizeof zones[0]; z++) {
		char expr[100];
		snprintf(expr, sizeof expr, "CRON_TZ=%s @daily", zones[z]);
		tw_cron *c = parse_ok(expr);
		cr_assert_eq(setenv("TZ", zones[z], 1), 0);
		tzset();
		for (int64_t t = iso_ns("2027-01-01T00:00:00Z") / NS;
		     t < iso_ns("2047-01-01T00:00:00Z") / NS; t += 3600) {
			int32_t ours;
			cr_assert_eq(tw_cron_utc_offset(c, t * NS, &ours), TW_OK);
			if (ours == glibc_offset(t))
				continue;
			char when[40];
			cr_assert_fail("%s at %s: %d, glibc %d", zones[z],
				       utc_text(t * NS, when, sizeof when), ours, glibc_offset(t));
		}
		tw_cron_free(c);
	}
}

static unsigned char *slurp(const char *path, size_t *size)
{
	static unsigned char buf[1 << 16];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	ssize_t n = read(fd, buf, sizeof buf);
	cr_assert_gt(n, 0);
	cr_assert_eq(close(fd), 0);
	*size = (size_t)n;
	return buf;
}

/* A reader that trusts its input reads past it: every prefix of a real file, and
 * random bytes written over it, are refused or read within bounds. */
Test(zone_data, damaged_files_are_refused_without_a_fault)
{
	size_t size;
	const unsigned char *orig = slurp(ZONEINFO "/America/New_York", &size);
	unsigned char *copy = malloc(size);
	cr_assert_not_null(copy);
	int refused = 0;
	for (size_t len = 0; len < size; len++) {
		/* exactly len bytes: ASan sees a read past them */
		unsigned char *exact = malloc(len ? len : 1);
		cr_assert_not_null(exact);
		memcpy(exact, orig, len);
		struct tw__zone *z = NULL;
		const char *reason = NULL;
		bool nomem = false;
		if (tw__zone_from_tzif(exact, len, &z, &reason, &nomem)) {
			cr_assert_not_null(reason);
			refused++;
		} else {
			tw__zone_free(z);
		}
		free(exact);
	}
	cr_assert_geq(refused, (int)size - 2, "a truncated file was taken: %d of %zu refused",
		      refused, size); /* the last newline of the footer alone may go */
	uint64_t seed = 15;
	for (int round = 0; round < 20000; round++) {
		memcpy(copy, orig, size);
		for (int k = 0; k < 4; k++)
			copy[test_rng_next(&seed) % size] = (unsigned char)test_rng_next(&seed);
		struct tw__zone *z = NULL;
		const char *reason;
		bool nomem = false;
		if (!tw__zone_from_tzif(copy, size, &z, &reason, &nomem)) {
			struct tw__zone_span sp;
			for (int64_t t = -4000000000; t < 9000000000; t += 300000000) {
				tw__zone_span(z, t, &sp);
				cr_assert(sp.start <= t && t < sp.end);
			}
			tw__zone_free(z);
		}
	}
	free(copy);
}

Test(zone_data, posix_strings)
{
	const char *good[] = { "UTC0",
			       "EST5EDT,M3.2.0,M11.1.0",
			       "CET-1CEST,M3.5.0,M10.5.0/3",
			       "<+0530>-5:30",
			       "IST-1GMT0,M10.5.0,M3.5.0/1",
			       "<-02>2<-01>,M3.5.0/-1,M10.5.0/0",
			       "EST5EDT,0/0,J365/25",
			       "AAA3BBB,J60/2,300/-2:30:15",
			       "NZST-12NZDT,M9.5.0,M4.1.0/3",
			       "EST5EDT",
			       "<+1030>-10:30<+11>-11,M10.1.0,M4.1.0" };
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		struct tw__posix_tz p;
		cr_assert_eq(tw__posix_tz_parse(good[i], strlen(good[i]), &p), 0, "'%s'", good[i]);
	}
	const char *bad[] = { "",
			      "E5",
			      "EST",
			      "EST5EDT,M3.2.0",
			      "EST5EDT,M13.2.0,M11.1.0",
			      "EST5EDT,M3.6.0,M11.1.0",
			      "EST5EDT,M3.2.7,M11.1.0",
			      "EST25",
			      "<+05",
			      "<>5",
			      "EST5EDT,J0,J365",
			      "EST5EDT,M3.2.0/168,M11.1.0",
			      "EST5EDT,M3.2.0,M11.1.0,",
			      "EST5 ",
			      "EST5EDT4x" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct tw__posix_tz p;
		cr_assert_eq(tw__posix_tz_parse(bad[i], strlen(bad[i]), &p), -1, "'%s'", bad[i]);
	}
	/* DST all year: one offset, never a change */
	struct tw__posix_tz p;
	cr_assert_eq(tw__posix_tz_parse("EST5EDT,0/0,J365/25", 19, &p), 0);
	for (int64_t t = 0; t < 3 * 366 * CAL_DAY; t += 7 * 3600) {
		struct tw__zone_span sp;
		tw__posix_tz_span(&p, t, &sp);
		cr_assert_eq(sp.offset, -4 * 3600, "at %lld", (long long)t);
		cr_assert(sp.start <= t && t < sp.end);
	}
}
