/*
 * test_cron_next.c - tw_cron_next in UTC: strictly after the time given, on
 * whole seconds; leap years and 29 February across 2100; the 29th to the 31st
 * in short months; year ends; times before 1970; a schedule that never fires
 * (-TW_ENOMATCH, quickly); the end of the int64_t range (-TW_ERANGE).
 */
#include "cron_test.h"

Test(cron_next, strictly_after_on_whole_seconds)
{
	tw_cron *c = parse_ok("TZ=UTC * * * * * *");
	int64_t t[2], base = iso_ns("2026-01-01T00:00:00Z");
	/* on a fire time: the next one */
	cr_assert_eq(tw_cron_next(c, base, t, 2), TW_OK);
	cr_assert(t[0] == base + NS && t[1] == base + 2 * NS);
	/* a nanosecond before one: that one */
	cr_assert_eq(tw_cron_next(c, base - 1, t, 1), TW_OK);
	cr_assert_eq(t[0], base);
	/* anywhere in a second: the next whole one */
	cr_assert_eq(tw_cron_next(c, base + NS / 2, t, 1), TW_OK);
	cr_assert_eq(t[0], base + NS);
	/* before 1970 too: floor, not truncation */
	cr_assert_eq(tw_cron_next(c, -NS / 2, t, 2), TW_OK);
	cr_assert(t[0] == 0 && t[1] == NS, "%lld %lld", (long long)t[0], (long long)t[1]);
	tw_cron_free(c);
	EXPECT_NEXT("TZ=UTC 0 0 0 1 1 *", "1900-06-01T00:00:00Z", "1901-01-01T00:00:00Z",
		    "1902-01-01T00:00:00Z");
	EXPECT_NEXT("TZ=UTC 59 59 23 31 12 *", "1969-12-31T23:59:58Z", "1969-12-31T23:59:59Z",
		    "1970-12-31T23:59:59Z");
}

Test(cron_next, leap_years_and_29_february)
{
	/* 2100 is not a leap year, 2000 was */
	EXPECT_NEXT("TZ=UTC 0 0 12 29 2 *", "2023-01-01T00:00:00Z", "2024-02-29T12:00:00Z",
		    "2028-02-29T12:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 12 29 2 ?", "2096-03-01T00:00:00Z", "2104-02-29T12:00:00Z",
		    "2108-02-29T12:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 29 FEB *", "1999-01-01T00:00:00Z", "2000-02-29T00:00:00Z",
		    "2004-02-29T00:00:00Z");
	/* the last days of February, leap year or not */
	EXPECT_NEXT("TZ=UTC 0 0 0 28-31 2 *", "2027-02-01T00:00:00Z", "2027-02-28T00:00:00Z",
		    "2028-02-28T00:00:00Z", "2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z");
	/* every day across 28 February 2100 */
	EXPECT_NEXT("TZ=UTC 0 0 0 * * *", "2100-02-27T12:00:00Z", "2100-02-28T00:00:00Z",
		    "2100-03-01T00:00:00Z");
}

Test(cron_next, the_29th_to_the_31st_skip_short_months)
{
	EXPECT_NEXT("TZ=UTC 0 0 0 31 * *", "2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z",
		    "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z",
		    "2026-10-31T00:00:00Z", "2026-12-31T00:00:00Z", "2027-01-31T00:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 30 * *", "2026-01-30T00:00:00Z", "2026-03-30T00:00:00Z",
		    "2026-04-30T00:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 29,30,31 * *", "2026-01-31T00:00:00Z", "2026-03-29T00:00:00Z",
		    "2026-03-30T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-29T00:00:00Z",
		    "2026-04-30T00:00:00Z", "2026-05-29T00:00:00Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 31 4,6,9,11,12 *", "2026-01-01T00:00:00Z", "2026-12-31T00:00:00Z",
		    "2027-12-31T00:00:00Z");
}

/* Where croniter 1.3.5 is wrong (gen_conformance.py leaves these rows out). */
Test(cron_next, where_croniter_errs)
{
	/* 1 March is one of 1, 11, 21, 31 (croniter: 11 March) */
	EXPECT_NEXT("TZ=UTC 0 0 0 */10 * *", "2024-02-28T23:00:00Z", "2024-03-01T00:00:00Z",
		    "2024-03-11T00:00:00Z");
	EXPECT_NEXT("CRON_TZ=Europe/Berlin 0 0 0 */10 * *", "2024-02-28T23:00:00Z",
		    "2024-03-01T00:00:00+01:00", "2024-03-11T00:00:00+01:00");
	/* Sunday 1 February 2026 in 5-7 (croniter: Friday the 6th) */
	EXPECT_NEXT("CRON_TZ=Europe/Berlin 0 0 0 * * 5-7", "2026-01-30T12:00:00Z",
		    "2026-01-31T00:00:00+01:00", "2026-02-01T00:00:00+01:00",
		    "2026-02-06T00:00:00+01:00");
}

Test(cron_next, year_ends)
{
	EXPECT_NEXT("TZ=UTC 59 59 23 31 12 *", "2026-12-31T23:59:59Z", "2027-12-31T23:59:59Z");
	EXPECT_NEXT("TZ=UTC */30 * * * * *", "2026-12-31T23:59:15Z", "2026-12-31T23:59:30Z",
		    "2027-01-01T00:00:00Z", "2027-01-01T00:00:30Z");
	EXPECT_NEXT("TZ=UTC 0 0 0 1 1 *", "2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z");
	/* a weekday across the year's end: 2027-01-01 is a Friday */
	EXPECT_NEXT("TZ=UTC 0 0 8 * * FRI", "2026-12-26T00:00:00Z", "2027-01-01T08:00:00Z",
		    "2027-01-08T08:00:00Z");
	/* the last day of each month, as far as one list can say it (no "L") */
	EXPECT_NEXT("TZ=UTC 0 0 0 31 1,3,5,7,8,10,12 *", "2026-10-31T00:00:00Z",
		    "2026-12-31T00:00:00Z", "2027-01-31T00:00:00Z");
}

Test(cron_next, a_schedule_that_never_fires_ends_quickly)
{
	const char *never[] = { "TZ=UTC 0 0 30 2 *", "TZ=UTC 0 0 0 31 2,4,6,9,11 *",
				"TZ=UTC 0 0 0 30,31 FEB ?", "CRON_TZ=Europe/Berlin 0 0 31 4 *" };
	for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
		tw_cron *c = parse_ok(never[i]);
		int64_t t[2] = { 1, 2 };
		cr_assert_eq(tw_cron_next(c, 0, t, 2), -TW_ENOMATCH, "'%s'", never[i]);
		cr_assert(t[0] == INT64_MIN && t[1] == INT64_MIN, "'%s': the slots", never[i]);
		tw_cron_free(c);
	}
}

Test(cron_next, the_end_of_the_range_is_a_range_error)
{
	/* the last whole second an int64_t of ns holds: 2262-04-11T23:47:16Z */
	tw_cron *c = parse_ok("TZ=UTC * * * * * *");
	int64_t t[3];
	int64_t last = INT64_MAX / NS * NS;
	cr_assert_eq(tw_cron_next(c, last - 2 * NS, t, 3), -TW_ERANGE);
	cr_assert(t[0] == last - NS && t[1] == last && t[2] == INT64_MIN);
	cr_assert_eq(tw_cron_next(c, INT64_MAX, t, 1), -TW_ERANGE);
	/* and from the other end */
	cr_assert_eq(tw_cron_next(c, INT64_MIN, t, 1), TW_OK);
	cr_assert_eq(t[0], (cal_floor_div(INT64_MIN, NS) + 1) * NS);
	tw_cron_free(c);
	c = parse_ok("@every 1h");
	cr_assert_eq(tw_cron_next(c, INT64_MAX - 3600 * NS - 1, t, 2), -TW_ERANGE);
	cr_assert(t[0] == INT64_MAX - 1 && t[1] == INT64_MIN);
	tw_cron_free(c);
}

/* The same fire times whatever the step of the search: one call for 200, or
 * 200 calls each starting from the last time found. */
Test(cron_next, one_call_or_many_give_the_same_times)
{
	const char *exprs[] = { "TZ=UTC 7 */13 1-5,20 * * MON,FRI", "TZ=UTC 0 0 0 29 2,3 *",
				"CRON_TZ=Europe/Berlin 0 */30 1-3 * * *",
				"CRON_TZ=America/New_York 0 30 2 * 3,11 *" };
	for (size_t k = 0; k < sizeof exprs / sizeof exprs[0]; k++) {
		tw_cron *c = parse_ok(exprs[k]);
		enum { N = 200 };
		int64_t all[N], one, after = iso_ns("2025-06-01T00:00:00Z");
		cr_assert_eq(tw_cron_next(c, after, all, N), TW_OK, "'%s'", exprs[k]);
		for (int i = 0; i < N; i++) {
			cr_assert_eq(tw_cron_next(c, after, &one, 1), TW_OK);
			cr_assert_eq(one, all[i], "'%s': time %d", exprs[k], i);
			cr_assert(i == 0 || all[i] > all[i - 1]);
			after = one;
		}
		tw_cron_free(c);
	}
}
