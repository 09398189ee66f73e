/*
 * cron_test.h - what the calendar suites share: ISO 8601 times to ns and back
 * (written with calendar/civil.h, not libc's time functions, which would
 * depend on the process's TZ), and a check of an expression's next times.
 */
#ifndef TICKWHEEL_TESTS_CALENDAR_CRON_TEST_H
#define TICKWHEEL_TESTS_CALENDAR_CRON_TEST_H

#include "civil.h"
#include "tickwheel.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#define NS INT64_C(1000000000)

/* "2026-03-29T03:00:00+02:00", "...Z": ns since the epoch. */
static inline int64_t iso_ns(const char *text)
{
	int y, mo, d, h, mi, s, oh = 0, om = 0, len = 0;
	char sign = 'Z';
	int got = sscanf(text, "%d-%d-%dT%d:%d:%d%n", &y, &mo, &d, &h, &mi, &s, &len);
	cr_assert_eq(got, 6, "bad time in the test: %s", text);
	if (text[len] != 'Z') {
		cr_assert_eq(sscanf(text + len, "%c%d:%d", &sign, &oh, &om), 3, "bad offset: %s",
			     text);
	}
	int64_t off = (oh * 3600 + om * 60) * (sign == '-' ? -1 : 1);
	int64_t secs = cal_days_from_civil(y, (unsigned)mo, (unsigned)d) * CAL_DAY + h * 3600 +
		       mi * 60 + s - off;
	return secs * NS;
}

/* ns as "YYYY-MM-DDTHH:MM:SSZ" (whole seconds) into buf. */
static inline const char *utc_text(int64_t ns, char *buf, size_t size)
{
	int64_t s = cal_floor_div(ns, NS), days = cal_floor_div(s, CAL_DAY), y;
	unsigned m, d;
	cal_civil_from_days(days, &y, &m, &d);
	int64_t sod = s - days * CAL_DAY;
	snprintf(buf, size, "%04lld-%02u-%02uT%02lld:%02lld:%02lldZ", (long long)y, m, d,
		 (long long)(sod / 3600), (long long)(sod / 60 % 60), (long long)(sod % 60));
	return buf;
}

static inline tw_cron *parse_ok(const char *expr)
{
	tw_cron *c = NULL;
	tw_cron_error err;
	int rc = tw_cron_parse(expr, &c, &err);
	cr_assert_eq(rc, TW_OK, "'%s': %s at %zu: %s", expr, tw_strerror(rc), err.offset,
		     err.reason ? err.reason : "(no reason)");
	cr_assert_null(err.reason);
	return c;
}

/* The next times of expr after `after` are want[0 .. n). */
static inline void expect_next(const char *expr, const char *after, const char *const *want,
			       size_t n)
{
	tw_cron *c = parse_ok(expr);
	int64_t got[64];
	cr_assert_leq(n, 64);
	int rc = tw_cron_next(c, iso_ns(after), got, n);
	cr_assert_eq(rc, TW_OK, "'%s' after %s: %s", expr, after, tw_strerror(rc));
	for (size_t i = 0; i < n; i++) {
		char a[40], b[40];
		cr_assert_eq(got[i], iso_ns(want[i]), "'%s' after %s, time %zu: %s, not %s (%s)",
			     expr, after, i, utc_text(got[i], a, sizeof a),
			     utc_text(iso_ns(want[i]), b, sizeof b), want[i]);
	}
	tw_cron_free(c);
}

#define EXPECT_NEXT(expr, after, ...)                                            \
	do {                                                                     \
		const char *const want_[] = { __VA_ARGS__ };                     \
		expect_next(expr, after, want_, sizeof want_ / sizeof want_[0]); \
	} while (0)

#endif
