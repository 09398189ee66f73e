/*
 * civil.h - the proleptic Gregorian calendar on a count of days since
 * 1970-01-01 (Howard Hinnant's days_from_civil and civil_from_days): exact for
 * any year an int64_t of seconds can reach, no table, no libc time state.
 */
#ifndef TICKWHEEL_CALENDAR_CIVIL_H
#define TICKWHEEL_CALENDAR_CIVIL_H

#include <stdbool.h>
#include <stdint.h>

#define CAL_DAY INT64_C(86400)

/* Rounds toward minus infinity, as times before 1970 need. */
static inline int64_t cal_floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return q - (a % b != 0 && (a < 0) != (b < 0));
}

static inline bool cal_leap(int64_t y)
{
	return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

static inline unsigned cal_month_days(int64_t y, unsigned month)
{
	static const unsigned char days[13] = { 0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	return days[month] + (month == 2 && cal_leap(y));
}

static inline int64_t cal_days_from_civil(int64_t y, unsigned month, unsigned day)
{
	y -= month <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static inline void cal_civil_from_days(int64_t days, int64_t *y, unsigned *month, unsigned *day)
{
	days += 719468;
	int64_t era = (days >= 0 ? days : days - 146096) / 146097;
	int64_t doe = days - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	*day = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
	*month = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*month <= 2);
}

/* 0 = Sunday; 1970-01-01 was a Thursday. */
static inline unsigned cal_weekday(int64_t days)
{
	int64_t w = (days + 4) % 7;
	return (unsigned)(w < 0 ? w + 7 : w);
}

#endif
