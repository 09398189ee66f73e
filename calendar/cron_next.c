/*
 * cron_next.c - tw_cron_next and tw_cron_utc_offset: the fire times of a
 * schedule, in seconds, found field by field in the zone's local time, one
 * stretch of constant UTC offset at a time.
 *
 * The fire times form one set whatever the starting point: a local time that
 * occurs once fires then; one that occurs twice (the clock set back) fires at
 * its first occurrence only, unless the schedule is wild (its hour or minute
 * field starts with '*'), which fires at every instant whose local clock
 * matches; local times that do not occur (the clock set forward) fire once,
 * at the instant of the jump, unless the schedule is wild. tw_cron_next(after)
 * is the first members of the set after `after`: so the answers do not
 * depend on where a search started.
 */
#include "civil.h"
#include "cron.h"

#define NS_PER_S INT64_C(1000000000)
/* How far one search looks: 29 February comes back 8 years later across
 * 2100, and every schedule that ever fires does so within this. */
#define HORIZON (3660 * CAL_DAY)

/* The lowest bit of mask at or above from; -1 if none. */
static int next_bit(uint64_t mask, unsigned from)
{
	if (from > 63)
		return -1;
	mask &= ~UINT64_C(0) << from;
	return mask ? __builtin_ctzll(mask) : -1;
}

static bool day_matches(const struct tw_cron *c, unsigned dom, int64_t days)
{
	bool d = c->dom >> dom & 1, w = c->dow >> cal_weekday(days) & 1;
	return c->dom_star || c->dow_star ? d && w : d || w;
}

static int64_t local_at(int64_t days, int h, int m, int s)
{
	return days * CAL_DAY + h * INT64_C(3600) + m * INT64_C(60) + s;
}

/* The first local time (seconds) at or after from and before limit whose
 * fields match, ignoring zones. */
static bool civil_next(const struct tw_cron *c, int64_t from, int64_t limit, int64_t *out)
{
	int64_t days = cal_floor_div(from, CAL_DAY), y;
	int64_t sod = from - days * CAL_DAY;
	int h = (int)(sod / 3600), m = (int)(sod / 60 % 60), s = (int)(sod % 60), next;
	unsigned mon, d;
	cal_civil_from_days(days, &y, &mon, &d);
	for (;;) {
		if (local_at(days, h, m, s) >= limit)
			return false;
		if (!(c->month >> mon & 1)) {
			if ((next = next_bit(c->month, mon + 1)) < 0) {
				y++;
				next = next_bit(c->month, 1);
			}
			mon = (unsigned)next, d = 1, h = m = s = 0;
			days = cal_days_from_civil(y, mon, 1);
			continue;
		}
		if (!day_matches(c, d, days)) {
			if (!c->dow_star)
				goto next_day;
			/* Only the day of the month decides: straight to the next one. */
			next = next_bit(c->dom, d + 1);
			if (next < 0 || (unsigned)next > cal_month_days(y, mon)) {
				days += cal_month_days(y, mon) - d;
				goto next_day;
			}
			days += (unsigned)next - d, d = (unsigned)next, h = m = s = 0;
			continue;
		}
		if ((next = next_bit(c->hour, (unsigned)h)) < 0)
			goto next_day;
		if (next != h)
			h = next, m = s = 0;
		if ((next = next_bit(c->minute, (unsigned)m)) < 0)
			goto next_hour;
		if (next != m)
			m = next, s = 0;
		if ((next = next_bit(c->second, (unsigned)s)) < 0)
			goto next_minute;
		int64_t t = local_at(days, h, m, next);
		if (t >= limit)
			return false;
		*out = t;
		return true;
next_minute:
		s = 0;
		if (++m < 60)
			continue;
next_hour:
		m = s = 0;
		if (++h < 24)
			continue;
next_day:
		h = m = s = 0;
		cal_civil_from_days(++days, &y, &mon, &d);
	}
}

/* The first fire time at or after from and before limit (seconds). */
static bool fire_next(const struct tw_cron *c, int64_t from, int64_t limit, int64_t *out)
{
	for (int64_t t = from; t < limit;) {
		struct tw__zone_span sp;
		tw__zone_span(c->zone, t, &sp);
		int64_t o = sp.offset, local;
		bool changed = sp.start != INT64_MIN && sp.start == t;
		/* The clock jumped forward at t: local times it skipped fire now. */
		if (changed && !c->wild && sp.prev_offset < o &&
		    civil_next(c, t + sp.prev_offset, t + o, &local)) {
			*out = t;
			return true;
		}
		/* The clock went back at sp.start: times it repeats fired already. */
		int64_t lo = t;
		if (!c->wild && sp.start != INT64_MIN && sp.prev_offset > o &&
		    lo < sp.start + (sp.prev_offset - o))
			lo = sp.start + (sp.prev_offset - o);
		int64_t hi = sp.end < limit ? sp.end : limit;
		if (lo < hi && civil_next(c, lo + o, hi + o, &local)) {
			*out = local - o;
			return true;
		}
		t = hi;
	}
	return false;
}

static void fill_rest(int64_t *times, size_t from, size_t n)
{
	for (size_t i = from; i < n; i++)
		times[i] = INT64_MIN;
}

int tw_cron_next(const tw_cron *cron, int64_t after_ns, int64_t *times, size_t n)
{
	if (!cron || (!times && n))
		return -TW_EINVAL;
	if (cron->every_ns) {
		int64_t t = after_ns, step = (int64_t)cron->every_ns;
		for (size_t i = 0; i < n; i++) {
			if (t > INT64_MAX - step) {
				fill_rest(times, i, n);
				return -TW_ERANGE;
			}
			times[i] = t += step;
		}
		return TW_OK;
	}
	/* Fire times are whole seconds: the first candidate is the next whole second. */
	int64_t from = cal_floor_div(after_ns, NS_PER_S) + 1;
	for (size_t i = 0; i < n; i++) {
		int64_t t;
		if (!fire_next(cron, from, from + HORIZON, &t)) {
			fill_rest(times, i, n);
			return -TW_ENOMATCH;
		}
		if (t > INT64_MAX / NS_PER_S) {
			fill_rest(times, i, n);
			return -TW_ERANGE;
		}
		times[i] = t * NS_PER_S;
		from = t + 1;
	}
	return TW_OK;
}

int tw_cron_utc_offset(const tw_cron *cron, int64_t unix_ns, int32_t *offset_s)
{
	if (!cron || !offset_s)
		return -TW_EINVAL;
	struct tw__zone_span sp;
	tw__zone_span(cron->zone, cal_floor_div(unix_ns, NS_PER_S), &sp);
	*offset_s = sp.offset;
	return TW_OK;
}
