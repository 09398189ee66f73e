/*
 * test_cron_parse.c - tw_cron_parse: each piece of the syntax, seen through
 * the fire times it gives (in UTC, so no zone is involved), and every kind of
 * error with its byte position and reason.
 */
#include "cron_test.h"

#include <string.h>

Test(cron_parse, six_fields_with_seconds_and_five_without)
{
	EXPECT_NEXT("CRON_TZ=UTC */20 * * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:00:20Z",
		    "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z");
	/* five fields: minutes first, seconds 0 */
	EXPECT_NEXT("CRON_TZ=UTC */20 * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:20:00Z",
		    "2026-01-01T00:40:00Z", "2026-01-01T01:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 12 * * *", "2026-01-01T12:00:00Z", "2026-01-02T12:00:00Z");
	/* blanks: several, tabs, before and after */
	EXPECT_NEXT("  TZ=UTC \t 5   4\t3 * * *  ", "2026-01-01T00:00:00Z", "2026-01-01T03:04:05Z");
}

Test(cron_parse, lists_ranges_and_steps)
{
	EXPECT_NEXT("TZ=UTC 0 1,2,30 * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z",
		    "2026-01-01T00:02:00Z", "2026-01-01T00:30:00Z", "2026-01-01T01:01:00Z");
	EXPECT_NEXT("TZ=UTC 0 10-40/10 * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:10:00Z",
		    "2026-01-01T00:20:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:40:00Z",
		    "2026-01-01T01:10:00Z");
	/* "5/15" is 5-59/15 */
	EXPECT_NEXT("TZ=UTC 0 5/15 * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z",
		    "2026-01-01T00:20:00Z", "2026-01-01T00:35:00Z", "2026-01-01T00:50:00Z",
		    "2026-01-01T01:05:00Z");
	/* a range and a value and a step in one list; a step longer than the range */
	EXPECT_NEXT("TZ=UTC 0 0 1-2,5,20/100 * * *", "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z",
		    "2026-01-01T02:00:00Z", "2026-01-01T05:00:00Z", "2026-01-01T20:00:00Z",
		    "2026-01-02T01:00:00Z");
	/* days of the month from 1: "*\/10" is 1, 11, 21, 31 */
	EXPECT_NEXT("TZ=UTC 0 0 0 */10 * *", "2026-01-01T00:00:00Z", "2026-01-11T00:00:00Z",
		    "2026-01-21T00:00:00Z", "2026-01-31T00:00:00Z", "2026-02-01T00:00:00Z");
	/* leading zeros */
	EXPECT_NEXT("TZ=UTC 00 05 007 * * *", "2026-01-01T00:00:00Z", "2026-01-01T07:05:00Z");
}

/* "/N, N >= 1": a step past the field's range gives its first value alone, however long it is
 * written (robfig/cron reads "0 *\/1000 * * * *" so). */
Test(cron_parse, steps_of_any_size)
{
	EXPECT_NEXT("TZ=UTC 0 */1000 * * * *", "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z",
		    "2026-01-01T02:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 7/1000 * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:07:00Z",
		    "2026-01-01T01:07:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 */18446744073709551617 * * *", "2026-01-01T00:00:00Z",
		    "2026-01-02T00:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 1 2-11/00000000000000000000000000000000010 *",
		    "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2027-02-01T00:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 * * 2/65", "2026-01-01T00:00:00Z", "2026-01-06T00:00:00Z",
		    "2026-01-13T00:00:00Z");
}

/* In day-of-week, "*" and "N/step" stop at 6: 7 is Sunday only when written. 2026-01-03 is a
 * Saturday. */
Test(cron_parse, day_of_week_steps_stop_at_saturday)
{
	EXPECT_NEXT("TZ=UTC 0 0 0 * * 6/1", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z",
		    "2026-01-10T00:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 * * 5/1", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z",
		    "2026-01-03T00:00:00Z", "2026-01-09T00:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 * * */2", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z",
		    "2026-01-06T00:00:00Z", "2026-01-08T00:00:00Z", "2026-01-10T00:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 * * 7/3", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z",
		    "2026-01-11T00:00:00Z");
}

/* "@every" takes any duration tw_parse_duration reads, however many characters it is written in. */
Test(cron_parse, every_takes_a_duration_of_any_length)
{
	/* 200 leading zeros, then 1.5 s with 100 fraction digits, then a blank */
	char expr[400] = "TZ=UTC @every ";
	size_t n = strlen(expr);
	memset(expr + n, '0', 200);
	strcpy(expr + n + 200, "1.5");
	memset(expr + n + 203, '0', 100);
	strcpy(expr + n + 303, "s ");
	uint64_t ns;
	expr[strlen(expr) - 1] = '\0';
	cr_assert_eq(tw_parse_duration(expr + n, &ns), TW_OK);
	cr_assert_eq(ns, UINT64_C(1500000000));
	expr[strlen(expr)] = ' ';
	tw_cron *c = parse_ok(expr);
	int64_t t[2];
	cr_assert_eq(tw_cron_next(c, 10 * NS, t, 2), TW_OK);
	cr_assert_eq(t[0], 10 * NS + 1500000000);
	cr_assert_eq(t[1], 10 * NS + 3000000000);
	tw_cron_free(c);
}

Test(cron_parse, month_and_day_names_in_any_case)
{
	EXPECT_NEXT("TZ=UTC 0 0 0 1 jan,Jul *", "2026-01-01T00:00:00Z", "2026-07-01T00:00:00Z",
		    "2027-01-01T00:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 1 MAR-may *", "2026-01-01T00:00:00Z", "2026-03-01T00:00:00Z",
		    "2026-04-01T00:00:00Z", "2026-05-01T00:00:00Z", "2027-03-01T00:00:00Z");
	/* 2026-01-02 is a Friday */
	EXPECT_NEXT("TZ=UTC 0 0 9 * * Mon-FRI", "2026-01-02T00:00:00Z", "2026-01-02T09:00:00Z",
		    "2026-01-05T09:00:00Z", "2026-01-06T09:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 9 * * sat,SUN", "2026-01-02T00:00:00Z", "2026-01-03T09:00:00Z",
		    "2026-01-04T09:00:00Z", "2026-01-10T09:00:00Z");
}

Test(cron_parse, sunday_is_0_and_7)
{
	const char *const sundays[] = { "2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z" };
	const char *exprs[] = { "TZ=UTC 0 0 0 * * 0", "TZ=UTC 0 0 0 * * 7", "TZ=UTC 0 0 0 * * SUN",
				"TZ=UTC 0 0 0 * * 0,7" };
	for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++)
		expect_next(exprs[i], "2026-01-01T00:00:00Z", sundays, 2);
	/* 5-7: Friday, Saturday, Sunday */
	EXPECT_NEXT("TZ=UTC 0 0 0 * * 5-7", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z",
		    "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-09T00:00:00Z");
}

Test(cron_parse, question_mark_is_a_star_in_the_day_fields)
{
	EXPECT_NEXT("TZ=UTC 0 0 0 15 * ?", "2026-01-01T00:00:00Z", "2026-01-15T00:00:00Z",
		    "2026-02-15T00:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 ? * TUE", "2026-01-01T00:00:00Z", "2026-01-06T00:00:00Z",
		    "2026-01-13T00:00:00Z");
}

/* Vixie cron's and robfig/cron's rule: both day fields restricted, either matches. */
Test(cron_parse, day_of_month_or_day_of_week)
{
	/* the 1st, the 15th and every Monday of January 2026 (Mondays: 5, 12, 19, 26) */
	EXPECT_NEXT("TZ=UTC 0 0 0 1,15 * MON", "2025-12-31T00:00:00Z", "2026-01-01T00:00:00Z",
		    "2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z", "2026-01-15T00:00:00Z",
		    "2026-01-19T00:00:00Z", "2026-01-26T00:00:00Z", "2026-02-01T00:00:00Z");
	/* a star in either: the other alone */
	EXPECT_NEXT("TZ=UTC 0 0 0 * * MON", "2025-12-31T00:00:00Z", "2026-01-05T00:00:00Z",
		    "2026-01-12T00:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 13 * *", "2025-12-31T00:00:00Z", "2026-01-13T00:00:00Z",
		    "2026-02-13T00:00:00Z");
	/* "*\/2" is a restriction (robfig/cron): odd days or Fridays */
	EXPECT_NEXT("TZ=UTC 0 0 0 */2 * FRI", "2026-01-01T12:00:00Z", "2026-01-02T00:00:00Z",
		    "2026-01-03T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-07T00:00:00Z",
		    "2026-01-09T00:00:00Z");
	/* "*\/1" is a star: Fridays alone */
	EXPECT_NEXT("TZ=UTC 0 0 0 */1 * FRI", "2026-01-01T12:00:00Z", "2026-01-02T00:00:00Z",
		    "2026-01-09T00:00:00Z");
	/* Friday the 13th needs both at once: this is either */
	EXPECT_NEXT("TZ=UTC 0 0 0 13 FEB FRI", "2026-01-01T00:00:00Z", "2026-02-06T00:00:00Z",
		    "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z",
		    "2027-02-05T00:00:00Z");
}

Test(cron_parse, macros)
{
	EXPECT_NEXT("TZ=UTC @yearly", "2026-05-05T00:00:00Z", "2027-01-01T00:00:00Z",
		    "2028-01-01T00:00:00Z");
	EXPECT_NEXT("TZ=UTC @annually", "2026-05-05T00:00:00Z", "2027-01-01T00:00:00Z");
	EXPECT_NEXT("TZ=UTC @monthly", "2026-05-05T00:00:00Z", "2026-06-01T00:00:00Z",
		    "2026-07-01T00:00:00Z");
	/* 2026-05-05 is a Tuesday: Sunday the 10th */
	EXPECT_NEXT("TZ=UTC @weekly", "2026-05-05T00:00:00Z", "2026-05-10T00:00:00Z",
		    "2026-05-17T00:00:00Z");
	EXPECT_NEXT("TZ=UTC @daily", "2026-05-05T00:00:00Z", "2026-05-06T00:00:00Z");
	EXPECT_NEXT("TZ=UTC @MIDNIGHT", "2026-05-05T00:00:00Z", "2026-05-06T00:00:00Z");
	EXPECT_NEXT("TZ=UTC @hourly", "2026-05-05T00:00:00Z", "2026-05-05T01:00:00Z",
		    "2026-05-05T02:00:00Z");
	EXPECT_NEXT("  CRON_TZ=UTC   @daily  ", "2026-05-05T00:00:00Z", "2026-05-06T00:00:00Z");
}

/* @every: a fixed period from the time asked about, to the ns, any zone. */
Test(cron_parse, every_is_a_period_from_the_start)
{
	tw_cron *c = parse_ok("@every 150ms");
	int64_t t[3];
	cr_assert_eq(tw_cron_next(c, 1000, t, 3), TW_OK);
	cr_assert(t[0] == 1000 + 150000000 && t[1] == 1000 + 300000000 && t[2] == 1000 + 450000000);
	tw_cron_free(c);
	c = parse_ok("CRON_TZ=Europe/Berlin @every 1.5s");
	cr_assert_eq(tw_cron_next(c, -7, t, 2), TW_OK);
	cr_assert(t[0] == 1500000000 - 7 && t[1] == 3000000000 - 7);
	tw_cron_free(c);
	/* a bare number is milliseconds, as tw_parse_duration reads it */
	c = parse_ok("@EVERY\t2");
	cr_assert_eq(tw_cron_next(c, 0, t, 1), TW_OK);
	cr_assert_eq(t[0], 2000000);
	tw_cron_free(c);
}

struct bad {
	const char *expr;
	int code;
	size_t offset;
	const char *reason; /* a part of it */
};

Test(cron_parse, errors_say_where_and_why)
{
	const struct bad cases[] = {
		{ "", -TW_ESYNTAX, 0, "empty" },
		{ "   ", -TW_ESYNTAX, 3, "empty" },
		{ "* * * *", -TW_ESYNTAX, 7, "too few fields" },
		{ "0 0 0 * * * *", -TW_ESYNTAX, 12, "too many fields" },
		{ "60 * * * * *", -TW_ESYNTAX, 0, "seconds are 0-59" },
		{ "0 60 * * * *", -TW_ESYNTAX, 2, "minutes are 0-59" },
		{ "0 0 24 * * *", -TW_ESYNTAX, 4, "hours are 0-23" },
		{ "0 0 0 0 * *", -TW_ESYNTAX, 6, "days of the month are 1-31" },
		{ "0 0 0 32 * *", -TW_ESYNTAX, 6, "days of the month are 1-31" },
		{ "0 0 0 1 13 *", -TW_ESYNTAX, 8, "months are 1-12" },
		{ "0 0 0 1 0 *", -TW_ESYNTAX, 8, "months are 1-12" },
		{ "0 0 0 * * 8", -TW_ESYNTAX, 10, "days of the week are 0-7" },
		{ "0 0 0 * JANUARY *", -TW_ESYNTAX, 8, "not a month name" },
		{ "0 0 0 * * MONDAY", -TW_ESYNTAX, 10, "not a day name" },
		{ "0 0 0 * * MON-", -TW_ESYNTAX, 14, "a number or a name" },
		{ "x * * * *", -TW_ESYNTAX, 0, "a number expected" },
		{ "0 JAN * * * *", -TW_ESYNTAX, 2, "a number expected" },
		{ "0 30-10 * * * *", -TW_ESYNTAX, 2, "must not end before it starts" },
		{ "0 0 0 * * FRI-MON", -TW_ESYNTAX, 10, "must not end before it starts" },
		{ "0 */0 * * * *", -TW_ESYNTAX, 4, "step must be 1 or more" },
		{ "0 */ * * * *", -TW_ESYNTAX, 4, "a step expected" },
		{ "0 1,,2 * * * *", -TW_ESYNTAX, 4, "empty item" },
		{ "0 1, * * * *", -TW_ESYNTAX, 4, "empty item" },
		{ "0 ,1 * * * *", -TW_ESYNTAX, 2, "empty item" },
		{ "0 1-2-3 * * * *", -TW_ESYNTAX, 5, "unexpected character" },
		{ "0 5x * * * *", -TW_ESYNTAX, 3, "unexpected character" },
		{ "0 9999 * * * *", -TW_ESYNTAX, 2, "minutes are 0-59" },
		{ "? * * * * *", -TW_ESYNTAX, 0, "'?' is allowed only" },
		{ "0 0 ? * * *", -TW_ESYNTAX, 4, "'?' is allowed only" },
		{ "@often", -TW_ESYNTAX, 0, "unknown macro" },
		{ "@daily 5", -TW_ESYNTAX, 7, "unexpected text after the macro" },
		{ "@every", -TW_ESYNTAX, 6, "@every needs a duration" },
		{ "@every 0s", -TW_ESYNTAX, 7, "above 0" },
		{ "@every soon", -TW_ESYNTAX, 7, "not a duration" },
		{ "@every 1s 2s", -TW_ESYNTAX, 10, "unexpected text after the duration" },
		{ "@every 10000000000s", -TW_ESYNTAX, 7, "too long" },
		{ "@every 100-200ms", -TW_ESYNTAX, 7, "not a duration" },
		{ "CRON_TZ= 0 * * * * *", -TW_ESYNTAX, 8, "time zone name expected" },
		{ "CRON_TZ=UTC", -TW_ESYNTAX, 11, "missing after the time zone" },
		{ "TZ=UTC  ", -TW_ESYNTAX, 8, "missing after the time zone" },
		{ "TZ=UTC 0 0 1 1", -TW_ESYNTAX, 14, "too few fields" },
		{ "CRON_TZ=Mars/Olympus_Mons 0 0 * * *", -TW_ENOZONE, 8, "unknown time zone" },
		{ "TZ=../../etc/passwd 0 0 * * *", -TW_ENOZONE, 3, "not a time zone name" },
		{ "TZ=/etc/passwd 0 0 * * *", -TW_ENOZONE, 3, "not a time zone name" },
		{ "TZ=Europe//Berlin 0 0 * * *", -TW_ENOZONE, 3, "not a time zone name" },
		{ "TZ=Europe 0 0 * * *", -TW_ENOZONE, 3, "cannot read" }, /* a directory */
		/* the syntax is checked before the zone is read */
		{ "TZ=Nowhere 0 0 * * * * *", -TW_ESYNTAX, 23, "too many fields" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct bad *b = &cases[i];
		tw_cron *c = (tw_cron *)&c; /* not NULL: the call must clear it */
		tw_cron_error err = { 99, "unset" };
		int rc = tw_cron_parse(b->expr, &c, &err);
		cr_assert_eq(rc, b->code, "'%s': %s, not %s", b->expr, tw_strerror(rc),
			     tw_strerror(b->code));
		cr_assert_null(c, "'%s': *out not NULL after a failure", b->expr);
		cr_assert_eq(err.offset, b->offset, "'%s': offset %zu, not %zu (%s)", b->expr,
			     err.offset, b->offset, err.reason);
		cr_assert(err.reason && strstr(err.reason, b->reason), "'%s': reason '%s'", b->expr,
			  err.reason);
	}
}

Test(cron_parse, null_arguments)
{
	tw_cron *c;
	tw_cron_error err;
	cr_assert_eq(tw_cron_parse(NULL, &c, &err), -TW_EINVAL);
	cr_assert_null(c);
	cr_assert_not_null(err.reason);
	cr_assert_eq(tw_cron_parse("@daily", NULL, &err), -TW_EINVAL);
	/* err is optional */
	cr_assert_eq(tw_cron_parse("0 61 * * *", &c, NULL), -TW_ESYNTAX);
	cr_assert_eq(tw_cron_parse("TZ=UTC 0 1 * * *", &c, NULL), TW_OK);
	int64_t t;
	cr_assert_eq(tw_cron_next(NULL, 0, &t, 1), -TW_EINVAL);
	cr_assert_eq(tw_cron_next(c, 0, NULL, 1), -TW_EINVAL);
	cr_assert_eq(tw_cron_next(c, 0, NULL, 0), TW_OK);
	int32_t off;
	cr_assert_eq(tw_cron_utc_offset(NULL, 0, &off), -TW_EINVAL);
	cr_assert_eq(tw_cron_utc_offset(c, 0, NULL), -TW_EINVAL);
	tw_cron_free(c);
	tw_cron_free(NULL);
}

/* The new codes have names of their own, and the old ones keep theirs. */
Test(cron_parse, strerror_names_the_calendar_codes)
{
	const int codes[] = { TW_ESYNTAX, TW_ENOZONE, TW_ENOMATCH };
	for (size_t i = 0; i < 3; i++) {
		const char *s = tw_strerror(-codes[i]);
		cr_assert_str_neq(s, "unknown error", "code %d", codes[i]);
		cr_assert_str_eq(s, tw_strerror(codes[i]));
		for (int other = TW_OK; other < codes[i]; other++)
			cr_assert_str_neq(s, tw_strerror(other), "codes %d and %d", codes[i],
					  other);
	}
	cr_assert_str_eq(tw_strerror(TW_ENOTSNAPSHOT + 1), "unknown error"); /* the last code + 1 */
}
