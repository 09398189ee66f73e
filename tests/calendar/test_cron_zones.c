/*
 * test_cron_zones.c - schedules in time zones, across daylight-saving changes,
 * as api/tickwheel.h says: a local time that occurs twice fires once (the
 * first time); one that does not occur fires at the jump; wild schedules
 * (hour or minute starting with '*') follow the clock. Berlin, New York,
 * Sydney (southern hemisphere), Lord Howe (a 30-minute change) and Kolkata
 * (no change), within the zoneinfo's table and past its end (2037), where
 * the file's POSIX rule applies. Also the local zone, read from TZ.
 */
#include "cron_test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Berlin, 2026: CET -> CEST on 29 March at 02:00, back on 25 October at 03:00. */
Test(cron_zones, berlin_gap_fires_at_the_jump)
{
	EXPECT_NEXT("CRON_TZ=Europe/Berlin 0 30 2 * * *", "2026-03-27T00:00:00Z",
		    "2026-03-27T02:30:00+01:00", "2026-03-28T02:30:00+01:00",
		    "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00");
	/* several skipped times still fire once; 03:00 itself, matching too, is that once */
	EXPECT_NEXT("CRON_TZ=Europe/Berlin 0 0,30 2,3 * * *", "2026-03-29T00:00:00Z",
		    "2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00",
		    "2026-03-30T02:00:00+02:00");
	/* every second of 02:30: one firing at the jump */
	EXPECT_NEXT("CRON_TZ=Europe/Berlin * 30 2 * * *", "2026-03-29T00:00:00Z",
		    "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00",
		    "2026-03-30T02:30:01+02:00");
}

Test(cron_zones, berlin_repeat_fires_once)
{
	EXPECT_NEXT("CRON_TZ=Europe/Berlin 0 30 2 * * *", "2026-10-24T00:00:00Z",
		    "2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00",
		    "2026-10-26T02:30:00+01:00");
	/* asked from inside the second pass: the first one has passed, tomorrow's is next */
	EXPECT_NEXT("CRON_TZ=Europe/Berlin 0 30 2 * * *", "2026-10-25T02:15:00+01:00",
		    "2026-10-26T02:30:00+01:00");
	EXPECT_NEXT("CRON_TZ=Europe/Berlin 0 0,30 1-3 25 OCT *", "2026-10-24T22:00:00Z",
		    "2026-10-25T01:00:00+02:00", "2026-10-25T01:30:00+02:00",
		    "2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00",
		    "2026-10-25T03:00:00+01:00", "2026-10-25T03:30:00+01:00",
		    "2027-10-25T01:00:00+02:00");
}

Test(cron_zones, berlin_wild_schedules_follow_the_clock)
{
	/* every 20 minutes: the repeated hour twice, the skipped one not at all */
	EXPECT_NEXT("CRON_TZ=Europe/Berlin 0 */20 1-3 * * *", "2026-10-24T22:00:00Z",
		    "2026-10-25T01:00:00+02:00", "2026-10-25T01:20:00+02:00",
		    "2026-10-25T01:40:00+02:00", "2026-10-25T02:00:00+02:00",
		    "2026-10-25T02:20:00+02:00", "2026-10-25T02:40:00+02:00",
		    "2026-10-25T02:00:00+01:00", "2026-10-25T02:20:00+01:00",
		    "2026-10-25T02:40:00+01:00", "2026-10-25T03:00:00+01:00");
	EXPECT_NEXT("CRON_TZ=Europe/Berlin 0 */20 1-3 * * *", "2026-03-28T22:00:00Z",
		    "2026-03-29T01:00:00+01:00", "2026-03-29T01:20:00+01:00",
		    "2026-03-29T01:40:00+01:00", "2026-03-29T03:00:00+02:00",
		    "2026-03-29T03:20:00+02:00");
	/* @hourly on the day of 25 hours: 25 firings, each an hour after the one before */
	tw_cron *c = parse_ok("CRON_TZ=Europe/Berlin @hourly");
	int64_t t[30], start = iso_ns("2026-10-25T00:00:00+02:00");
	cr_assert_eq(tw_cron_next(c, start - 1, t, 30), TW_OK);
	int on_the_day = 0;
	for (int i = 0; i < 30; i++) {
		on_the_day += t[i] < iso_ns("2026-10-26T00:00:00+01:00");
		cr_assert(i == 0 || t[i] - t[i - 1] == 3600 * NS, "firing %d is not an hour later",
			  i);
	}
	cr_assert_eq(on_the_day, 25);
	tw_cron_free(c);
}

/* New York, 2026: EST -> EDT on 8 March at 02:00, back on 1 November at 02:00. */
Test(cron_zones, new_york)
{
	EXPECT_NEXT("CRON_TZ=America/New_York 0 30 2 * * *", "2026-03-07T12:00:00Z",
		    "2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00");
	EXPECT_NEXT("CRON_TZ=America/New_York 0 30 1 * * *", "2026-10-31T12:00:00Z",
		    "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00");
	EXPECT_NEXT("TZ=America/New_York 0 */30 1 * * *", "2026-11-01T00:00:00-04:00",
		    "2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00",
		    "2026-11-01T01:00:00-05:00", "2026-11-01T01:30:00-05:00",
		    "2026-11-02T01:00:00-05:00");
	/* past the table (2037): the rule EST5EDT,M3.2.0,M11.1.0 */
	EXPECT_NEXT("CRON_TZ=America/New_York 0 30 2 * * *", "2050-03-12T12:00:00Z",
		    "2050-03-13T03:00:00-04:00", "2050-03-14T02:30:00-04:00");
	EXPECT_NEXT("CRON_TZ=America/New_York 0 30 1 * * *", "2050-11-05T12:00:00Z",
		    "2050-11-06T01:30:00-04:00", "2050-11-07T01:30:00-05:00");
}

/* Sydney: the southern hemisphere, AEST -> AEDT on the first Sunday of October,
 * back on the first Sunday of April at 03:00. */
Test(cron_zones, sydney)
{
	EXPECT_NEXT("CRON_TZ=Australia/Sydney 0 30 2 * * *", "2026-10-03T00:00:00Z",
		    "2026-10-04T03:00:00+11:00", "2026-10-05T02:30:00+11:00");
	EXPECT_NEXT("CRON_TZ=Australia/Sydney 0 30 2 * * *", "2026-04-04T00:00:00Z",
		    "2026-04-05T02:30:00+11:00", "2026-04-06T02:30:00+10:00");
	/* the year ends in summer time */
	EXPECT_NEXT("CRON_TZ=Australia/Sydney 0 0 0 1 1 *", "2026-06-01T00:00:00Z",
		    "2027-01-01T00:00:00+11:00", "2028-01-01T00:00:00+11:00");
	/* past the table */
	EXPECT_NEXT("CRON_TZ=Australia/Sydney 0 30 2 * * *", "2040-10-06T00:00:00Z",
		    "2040-10-07T03:00:00+11:00", "2040-10-08T02:30:00+11:00");
	EXPECT_NEXT("CRON_TZ=Australia/Sydney 0 30 2 * * *", "2041-04-06T00:00:00Z",
		    "2041-04-07T02:30:00+11:00", "2041-04-08T02:30:00+10:00");
}

/* Lord Howe: half an hour, +10:30 <-> +11, at 02:00 local. */
Test(cron_zones, lord_howe_half_hour)
{
	EXPECT_NEXT("CRON_TZ=Australia/Lord_Howe 0 15 2 * * *", "2026-10-03T00:00:00Z",
		    "2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00");
	EXPECT_NEXT("CRON_TZ=Australia/Lord_Howe 0 */15 1-2 * * *", "2045-04-01T13:00:00Z",
		    "2045-04-02T01:00:00+11:00", "2045-04-02T01:15:00+11:00",
		    "2045-04-02T01:30:00+11:00", "2045-04-02T01:45:00+11:00",
		    "2045-04-02T01:30:00+10:30", "2045-04-02T01:45:00+10:30",
		    "2045-04-02T02:00:00+10:30");
	EXPECT_NEXT("CRON_TZ=Australia/Lord_Howe 0 45 1 * * *", "2045-03-31T00:00:00Z",
		    "2045-04-01T01:45:00+11:00", "2045-04-02T01:45:00+11:00",
		    "2045-04-03T01:45:00+10:30");
}

Test(cron_zones, kolkata_and_offsets)
{
	EXPECT_NEXT("CRON_TZ=Asia/Kolkata 0 0 9 * * MON-FRI", "2026-01-02T00:00:00Z",
		    "2026-01-02T09:00:00+05:30", "2026-01-05T09:00:00+05:30");
	tw_cron *c = parse_ok("CRON_TZ=Asia/Kolkata @daily");
	int32_t off;
	cr_assert_eq(tw_cron_utc_offset(c, iso_ns("2026-07-01T00:00:00Z"), &off), TW_OK);
	cr_assert_eq(off, 5 * 3600 + 1800);
	tw_cron_free(c);
	c = parse_ok("CRON_TZ=Europe/Berlin @daily");
	cr_assert_eq(tw_cron_utc_offset(c, iso_ns("2026-03-29T00:59:59Z"), &off), TW_OK);
	cr_assert_eq(off, 3600);
	cr_assert_eq(tw_cron_utc_offset(c, iso_ns("2026-03-29T01:00:00Z"), &off), TW_OK);
	cr_assert_eq(off, 7200);
	cr_assert_eq(tw_cron_utc_offset(c, iso_ns("2060-07-01T00:00:00Z"), &off), TW_OK);
	cr_assert_eq(off, 7200);
	cr_assert_eq(tw_cron_utc_offset(c, iso_ns("1850-07-01T00:00:00Z"), &off), TW_OK);
	cr_assert_eq(off, 53 * 60 + 28, "Berlin's local mean time: %d", off); /* +00:53:28 LMT */
	tw_cron_free(c);
}

/* Without a prefix the zone is the process's, read from TZ at parse and kept. */
Test(cron_zones, local_zone_from_tz)
{
	cr_assert_eq(setenv("TZ", "Asia/Tokyo", 1), 0);
	tw_cron *c = parse_ok("0 0 9 * * *");
	cr_assert_eq(setenv("TZ", "America/New_York", 1), 0); /* too late for c */
	tw_cron *d = parse_ok("CRON_TZ=Local 0 0 9 * * *");
	int64_t t;
	cr_assert_eq(tw_cron_next(c, iso_ns("2025-12-31T12:00:00Z"), &t, 1), TW_OK);
	cr_assert_eq(t, iso_ns("2026-01-01T09:00:00+09:00"));
	cr_assert_eq(tw_cron_next(d, iso_ns("2026-01-01T00:00:00Z"), &t, 1), TW_OK);
	cr_assert_eq(t, iso_ns("2026-01-01T09:00:00-05:00"));
	tw_cron_free(c);
	tw_cron_free(d);
	/* a POSIX string, as glibc reads it */
	cr_assert_eq(setenv("TZ", "XST-3XDT,M3.5.0,M10.5.0/3", 1), 0);
	EXPECT_NEXT("0 30 2 * * *", "2026-03-28T12:00:00Z", "2026-03-29T03:00:00+04:00",
		    "2026-03-30T02:30:00+04:00");
	/* "", "UTC" and anything unknown are UTC */
	const char *utc[] = { "", "UTC", ":UTC", "No/Such_Zone", "garbage!" };
	for (size_t i = 0; i < sizeof utc / sizeof utc[0]; i++) {
		cr_assert_eq(setenv("TZ", utc[i], 1), 0);
		c = parse_ok("@daily");
		cr_assert_eq(tw_cron_next(c, iso_ns("2026-01-01T12:00:00Z"), &t, 1), TW_OK);
		cr_assert_eq(t, iso_ns("2026-01-02T00:00:00Z"), "TZ='%s'", utc[i]);
		tw_cron_free(c);
	}
	/* a path, with or without the colon */
	cr_assert_eq(setenv("TZ", ":/usr/share/zoneinfo/Asia/Kolkata", 1), 0);
	EXPECT_NEXT("@daily", "2026-01-01T12:00:00Z", "2026-01-02T00:00:00+05:30");
}

/* TZDIR moves the zoneinfo, as for glibc. */
Test(cron_zones, tzdir_moves_the_zoneinfo)
{
	cr_assert_eq(setenv("TZDIR", "/nonexistent", 1), 0);
	tw_cron *c = (tw_cron *)&c;
	tw_cron_error err;
	cr_assert_eq(tw_cron_parse("CRON_TZ=Europe/Berlin @daily", &c, &err), -TW_ENOZONE);
	cr_assert_null(c);
	/* UTC needs no file */
	tw_cron_free(parse_ok("CRON_TZ=UTC @daily"));
	cr_assert_eq(setenv("TZDIR", "/usr/share/zoneinfo/Europe", 1), 0);
	EXPECT_NEXT("CRON_TZ=Berlin 0 0 12 * * *", "2026-07-01T00:00:00Z",
		    "2026-07-01T12:00:00+02:00");
}

/* A FIFO where a zone file should be (a TZDIR the program does not control, a TZ path) is
 * refused at once: opening it to read would wait for a writer that never comes. The timeout
 * turns that wait into a failure. */
Test(cron_zones, a_fifo_is_no_zone, .timeout = 20)
{
	char dir[] = "/tmp/tw-cron-fifo-XXXXXX", path[64];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/X", dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof path, "%s/X/Fifo", dir);
	cr_assert_eq(mkfifo(path, 0600), 0);
	cr_assert_eq(setenv("TZDIR", dir, 1), 0);
	tw_cron *c = (tw_cron *)&c;
	tw_cron_error err;
	cr_assert_eq(tw_cron_parse("CRON_TZ=X/Fifo 0 0 0 * * *", &c, &err), -TW_ENOZONE);
	cr_assert_null(c);
	cr_assert_eq(err.offset, 8);
	cr_assert(strstr(err.reason, "cannot read"), "%s", err.reason);
	/* Local from a TZ that names it: no zone file, so UTC, as glibc */
	cr_assert_eq(setenv("TZ", path, 1), 0);
	EXPECT_NEXT("@daily", "2026-01-01T12:00:00Z", "2026-01-02T00:00:00Z");
	cr_assert_eq(unlink(path), 0);
	snprintf(path, sizeof path, "%s/X", dir);
	cr_assert_eq(rmdir(path), 0);
	cr_assert_eq(rmdir(dir), 0);
}

/* The offsets of Local, parsed with TZ set to tz, against glibc's localtime_r() under the
 * same TZ, every 7 hours 2 minutes from 1990 to 2100; the differing instants counted. */
static int differences_from_glibc(const char *tz)
{
	cr_assert_eq(setenv("TZ", tz, 1), 0);
	tzset();
	tw_cron *c = parse_ok("@daily");
	int diff = 0;
	for (int64_t t = iso_ns("1990-01-01T00:00:00Z") / NS;
	     t < iso_ns("2100-01-01T00:00:00Z") / NS; t += 7 * 3600 + 120) {
		time_t tt = (time_t)t;
		struct tm tm;
		int32_t off;
		cr_assert_not_null(localtime_r(&tt, &tm));
		cr_assert_eq(tw_cron_utc_offset(c, t * NS, &off), TW_OK);
		diff += off != tm.tm_gmtoff;
	}
	tw_cron_free(c);
	return diff;
}

/* A TZ that is a POSIX string with rules gives glibc's offsets: both hemispheres, a negative
 * DST ("IST-1GMT0": winter is the saving), a DST offset of its own, Julian days, times past
 * 24 h, changes on New Year's Day far enough from midnight UTC. */
Test(cron_zones, local_posix_strings_match_glibc)
{
	const char *tz[] = {
		"CET-1CEST,M3.5.0,M10.5.0/3",
		"XST-3XDT,M3.5.0,M10.5.0/3",
		"AEST-10AEDT,M10.1.0,M4.1.0/3",
		"<-03>3<-02>,M3.5.0/-2,M10.5.0/-1",
		"IST-1GMT0,M10.5.0,M3.5.0/1",
		"NZST-12NZDT-13:45,M9.5.0,M4.1.0/3",
		"EST5EDT4,M3.2.0/2:30,M11.1.0/26",
		"ABC-2DEF,J60/5,J300",
		"ABC-2DEF,59/5,300/1",
		"<+0530>-5:30<+0630>,M1.1.0/12,M6.3.4",
	};
	for (size_t i = 0; i < sizeof tz / sizeof tz[0]; i++)
		cr_assert_eq(differences_from_glibc(tz[i]), 0, "TZ=%s", tz[i]);
}

/* Where tickwheel departs from glibc, as api/tickwheel.h says: POSIX and RFC 8536's reading. */
Test(cron_zones, local_posix_strings_where_glibc_differs)
{
	/* No rules: M3.2.0,M11.1.0 every year (glibc moves $TZDIR/posixrules' table to the
	 * string, so its dates differ before 2007 and its offsets are New York's after 2037). */
	cr_assert_eq(setenv("TZ", "CET-1CEST", 1), 0);
	EXPECT_NEXT("0 0 3 * * *", "2000-03-11T12:00:00Z", "2000-03-12T03:00:00+02:00",
		    "2000-03-13T03:00:00+02:00");
	EXPECT_NEXT("0 0 3 * * *", "2000-11-04T12:00:00Z", "2000-11-05T03:00:00+01:00");
	EXPECT_NEXT("0 0 3 * * *", "2050-07-01T12:00:00Z", "2050-07-02T03:00:00+02:00");
	cr_assert_gt(differences_from_glibc("CET-1CEST"), 0, "glibc agrees now: update the header");
	/* DST all year (RFC 8536, 3.3.1): daylight time at every instant; glibc takes the rules of
	 * the UTC year, and gives standard time for the first hours of each */
	const char *all_year = "EST5EDT,0/0,J365/25";
	cr_assert_eq(setenv("TZ", all_year, 1), 0);
	tw_cron *c = parse_ok("@daily");
	const char *at[] = { "2026-01-01T00:00:00Z", "2026-01-01T03:59:59Z", "2026-07-01T00:00:00Z",
			     "2026-12-31T23:59:59Z", "2099-01-01T02:00:00Z" };
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
		int32_t off;
		cr_assert_eq(tw_cron_utc_offset(c, iso_ns(at[i]), &off), TW_OK);
		cr_assert_eq(off, -4 * 3600, "%s: %d", at[i], off);
	}
	tw_cron_free(c);
	cr_assert_gt(differences_from_glibc(all_year), 0, "glibc agrees now: update the header");
}
