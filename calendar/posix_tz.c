/*
 * posix_tz.c - POSIX TZ strings ("CET-1CEST,M3.5.0,M10.5.0/3"), as the footer
 * of a TZif file gives the rule for the times after its table (RFC 8536,
 * section 3.3, with its extensions: hours -167..167 in rule times) and as the
 * TZ variable may give the local zone.
 */
#include "civil.h"
#include "zone.h"

#include <string.h>

struct cursor {
	const char *p, *end;
};

static bool at_digit(const struct cursor *c)
{
	return c->p < c->end && *c->p >= '0' && *c->p <= '9';
}

static bool number(struct cursor *c, unsigned max, unsigned *out)
{
	unsigned n = 0;
	if (!at_digit(c))
		return false;
	while (at_digit(c)) {
		n = n * 10 + (unsigned)(*c->p++ - '0');
		if (n > max)
			return false;
	}
	*out = n;
	return true;
}

/* "CET" (three letters or more) or "<+0530>" (quoted: letters, digits, signs). */
static bool zone_name(struct cursor *c)
{
	const char *start = c->p;
	if (c->p < c->end && *c->p == '<') {
		for (c->p++; c->p < c->end && *c->p != '>'; c->p++)
			if (!strchr("+-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
				    *c->p))
				return false;
		if (c->p == c->end || c->p - start < 4)
			return false;
		c->p++;
		return true;
	}
	while (c->p < c->end && ((*c->p | 0x20) >= 'a' && (*c->p | 0x20) <= 'z'))
		c->p++;
	return c->p - start >= 3;
}

/* [+-]hh[:mm[:ss]] in seconds; hours up to max_hours. */
static bool hms(struct cursor *c, unsigned max_hours, int32_t *out)
{
	int sign = 1;
	if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
		sign = *c->p++ == '-' ? -1 : 1;
	unsigned h, m = 0, s = 0;
	if (!number(c, max_hours, &h))
		return false;
	if (c->p < c->end && *c->p == ':') {
		c->p++;
		if (!number(c, 59, &m))
			return false;
		if (c->p < c->end && *c->p == ':') {
			c->p++;
			if (!number(c, 59, &s))
				return false;
		}
	}
	*out = sign * (int32_t)(h * 3600 + m * 60 + s);
	return true;
}

static bool rule_date(struct cursor *c, struct tw__tz_date *d)
{
	unsigned a, b, w;
	*d = (struct tw__tz_date){ .time = 2 * 3600 };
	if (c->p < c->end && *c->p == 'J') {
		c->p++;
		if (!number(c, 365, &a) || a < 1)
			return false;
		d->kind = 'J', d->day = (unsigned short)a;
	} else if (c->p < c->end && *c->p == 'M') {
		c->p++;
		if (!number(c, 12, &a) || a < 1 || c->p == c->end || *c->p++ != '.' ||
		    !number(c, 5, &w) || w < 1 || c->p == c->end || *c->p++ != '.' ||
		    !number(c, 6, &b))
			return false;
		d->kind = 'M', d->month = (unsigned short)a, d->week = (unsigned short)w;
		d->wday = (unsigned short)b;
	} else {
		if (!number(c, 365, &a))
			return false;
		d->kind = 'n', d->day = (unsigned short)a;
	}
	if (c->p < c->end && *c->p == '/') {
		c->p++;
		return hms(c, 167, &d->time);
	}
	return true;
}

int tw__posix_tz_parse(const char *text, size_t len, struct tw__posix_tz *out)
{
	struct cursor c = { text, text + len };
	struct tw__posix_tz p = { 0 };
	int32_t west;
	if (!zone_name(&c) || !hms(&c, 24, &west))
		return -1;
	p.std_offset = -west; /* POSIX counts west of Greenwich */
	if (c.p == c.end) {
		*out = p;
		return 0;
	}
	if (!zone_name(&c))
		return -1;
	p.dst_offset = p.std_offset + 3600;
	if (c.p < c.end && *c.p != ',') {
		if (!hms(&c, 24, &west))
			return -1;
		p.dst_offset = -west;
	}
	if (c.p == c.end) {
		/* No rule: the United States' since 2007, every year (POSIX leaves it open). glibc
		 * moves $TZDIR/posixrules' table to the string instead, which gives New York's own
		 * offsets past the table's end: api/tickwheel.h says which is promised. */
		p.start = (struct tw__tz_date){ 'M', 0, 3, 2, 0, 2 * 3600 };
		p.end = (struct tw__tz_date){ 'M', 0, 11, 1, 0, 2 * 3600 };
	} else if (*c.p++ != ',' || !rule_date(&c, &p.start) || c.p == c.end || *c.p++ != ',' ||
		   !rule_date(&c, &p.end) || c.p != c.end) {
		return -1;
	}
	p.has_dst = p.dst_offset != p.std_offset;
	*out = p;
	return 0;
}

/* The instant (UTC) of a rule date in year y, its time read with offset. */
static int64_t rule_instant(const struct tw__tz_date *d, int64_t y, int32_t offset)
{
	int64_t jan1 = cal_days_from_civil(y, 1, 1), days;
	if (d->kind == 'J') {
		days = jan1 + d->day - 1 + (cal_leap(y) && d->day >= 60);
	} else if (d->kind == 'n') {
		days = jan1 + d->day;
	} else {
		int64_t first = cal_days_from_civil(y, d->month, 1);
		unsigned day = 1 + (d->wday + 7 - cal_weekday(first)) % 7 + (d->week - 1u) * 7;
		while (day > cal_month_days(y, d->month))
			day -= 7; /* week 5: the last one */
		days = first + day - 1;
	}
	return days * CAL_DAY + d->time - offset;
}

struct change {
	int64_t at;
	int32_t offset;
	bool to_dst;
};

void tw__posix_tz_span(const struct tw__posix_tz *p, int64_t t, struct tw__zone_span *out)
{
	if (!p->has_dst) {
		*out = (struct tw__zone_span){ INT64_MIN, INT64_MAX, p->std_offset, p->std_offset };
		return;
	}
	int64_t y;
	unsigned m, d;
	cal_civil_from_days(cal_floor_div(t + p->std_offset, CAL_DAY), &y, &m, &d);
	/* The changes of three years around t, in order; at a tie the end of DST
	 * comes first, so that a rule with DST all year ("J1/0,J365/25") keeps it. */
	struct change ch[6];
	for (size_t k = 0; k < 3; k++) {
		ch[2 * k] =
			(struct change){ rule_instant(&p->start, y - 1 + (int64_t)k, p->std_offset),
					 p->dst_offset, true };
		ch[2 * k + 1] =
			(struct change){ rule_instant(&p->end, y - 1 + (int64_t)k, p->dst_offset),
					 p->std_offset, false };
	}
	for (int i = 1; i < 6; i++)
		for (int j = i; j > 0 && (ch[j - 1].at > ch[j].at ||
					  (ch[j - 1].at == ch[j].at && ch[j - 1].to_dst));
		     j--) {
			struct change x = ch[j];
			ch[j] = ch[j - 1];
			ch[j - 1] = x;
		}
	int i = 5;
	while (i > 0 && ch[i].at > t)
		i--;
	if (ch[i].at > t) {
		/* Before all six: not reached for t inside its own year; a stretch that
		 * ends at the first change, with no change at its start, is still true. */
		*out = (struct tw__zone_span){ t, ch[0].at, ch[5].offset, ch[5].offset };
		return;
	}
	int j = i, k = i + 1;
	while (j > 0 && ch[j - 1].offset == ch[i].offset)
		j--;
	while (k < 6 && ch[k].offset == ch[i].offset)
		k++;
	out->offset = ch[i].offset;
	out->start = ch[j].at;
	/* Where the three years end without a change, the stretch is cut there:
	 * a boundary with the same offset on both sides, which callers pass over. */
	out->prev_offset = j > 0 ? ch[j - 1].offset : ch[i].offset;
	out->end = k < 6 ? ch[k].at : (ch[5].at > t ? ch[5].at : t + CAL_DAY);
}
