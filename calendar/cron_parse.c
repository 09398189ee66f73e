/*
 * cron_parse.c - tw_cron_parse and tw_cron_free: cron expressions as Vixie
 * cron and robfig/cron read them, with an optional seconds field first.
 *
 * One pass from left to right; the first error found is reported, at the
 * byte where it is, with a static reason. The zone is read after the rest
 * has parsed: a typo costs no file read, and nothing is kept allocated before.
 */
#include "cron.h"

#include <stdlib.h>
#include <string.h>

struct field {
	unsigned min, max; /* values accepted */
	unsigned star_max; /* what "*" and "N/step" reach: day-of-week stops at 6 */
	const char *const *names;
	unsigned names_base;
	bool question;
	const char *out_of_range;
};

static const char *const month_names[] = { "jan", "feb", "mar", "apr", "may", "jun", "jul",
					   "aug", "sep", "oct", "nov", "dec", NULL };
static const char *const day_names[] = { "sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL };

enum { SECOND, MINUTE, HOUR, DOM, MONTH, DOW, FIELDS };

static const struct field fields[FIELDS] = {
	[SECOND] = { 0, 59, 59, NULL, 0, false, "out of range: seconds are 0-59" },
	[MINUTE] = { 0, 59, 59, NULL, 0, false, "out of range: minutes are 0-59" },
	[HOUR] = { 0, 23, 23, NULL, 0, false, "out of range: hours are 0-23" },
	[DOM] = { 1, 31, 31, NULL, 0, true, "out of range: days of the month are 1-31" },
	[MONTH] = { 1, 12, 12, month_names, 1, false, "out of range: months are 1-12 or JAN-DEC" },
	[DOW] = { 0, 7, 6, day_names, 0, true,
		  "out of range: days of the week are 0-7 (0 and 7: Sunday) or SUN-SAT" },
};

static const struct {
	const char *name, *fields;
} macros[] = {
	{ "@yearly", "0 0 0 1 1 *" },  { "@annually", "0 0 0 1 1 *" },
	{ "@monthly", "0 0 0 1 * *" }, { "@weekly", "0 0 0 * * 0" },
	{ "@daily", "0 0 0 * * *" },   { "@midnight", "0 0 0 * * *" },
	{ "@hourly", "0 0 * * * *" },
};

struct parser {
	const char *expr;
	tw_cron_error *err;
};

static int fail(struct parser *ps, const char *at, const char *reason)
{
	if (ps->err) {
		ps->err->offset = (size_t)(at - ps->expr);
		ps->err->reason = reason;
	}
	return -TW_ESYNTAX;
}

static bool blank(char ch)
{
	return ch == ' ' || ch == '\t';
}

static bool letter(char ch)
{
	return (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z';
}

static const char *skip_blanks(const char *p)
{
	while (blank(*p))
		p++;
	return p;
}

/* Case-insensitive comparison of p[0 .. len) with a lower-case word. */
static bool same_word(const char *p, size_t len, const char *word)
{
	if (strlen(word) != len)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] | 0x20 : p[i]) != word[i])
			return false;
	return true;
}

/* A number or a name at *p, before end; advances. */
static int value(struct parser *ps, const struct field *f, const char **p, const char *end,
		 unsigned *out)
{
	const char *start = *p;
	if (*p < end && **p >= '0' && **p <= '9') {
		unsigned v = 0;
		for (; *p < end && **p >= '0' && **p <= '9'; ++*p)
			if ((v = v * 10 + (unsigned)(**p - '0')) > 999)
				return fail(ps, start, f->out_of_range);
		if (v < f->min || v > f->max)
			return fail(ps, start, f->out_of_range);
		*out = v;
		return TW_OK;
	}
	if (!f->names || *p == end || !letter(**p))
		return fail(ps, start,
			    f->names ? "a number or a name expected" : "a number expected");
	while (*p < end && letter(**p))
		++*p;
	for (unsigned i = 0; f->names[i]; i++)
		if (same_word(start, (size_t)(*p - start), f->names[i])) {
			*out = f->names_base + i;
			return TW_OK;
		}
	return fail(ps, start,
		    f->names == month_names ? "not a month name (JAN-DEC)" :
					      "not a day name (SUN-SAT)");
}

/* One item of a list, [start, end): "*", "?", "N", "N-M", each with "/STEP". */
static int item(struct parser *ps, const struct field *f, const char *start, const char *end,
		uint64_t *bits, bool *star)
{
	const char *p = start;
	unsigned lo, hi, step = 1;
	bool any = false, single = false;
	int rc;
	if (*p == '*' || *p == '?') {
		if (*p == '?' && !f->question)
			return fail(ps, p, "'?' is allowed only in day-of-month and day-of-week");
		lo = f->min, hi = f->star_max, any = true;
		p++;
	} else {
		if ((rc = value(ps, f, &p, end, &lo)))
			return rc;
		hi = lo, single = true;
		if (p < end && *p == '-') {
			p++;
			if ((rc = value(ps, f, &p, end, &hi)))
				return rc;
			if (hi < lo)
				return fail(ps, start, "a range must not end before it starts");
			single = false;
		}
	}
	if (p < end && *p == '/') {
		const char *at = ++p;
		step = 0;
		/* Any step past the widest field (0-59) gives its first value alone, as in
		 * robfig/cron: saturating keeps "/1000" and longer from overflowing the loop. */
		for (; p < end && *p >= '0' && *p <= '9'; p++)
			step = step > 64 ? step : step * 10 + (unsigned)(*p - '0');
		if (p == at)
			return fail(ps, at, "a step expected after '/'");
		if (!step)
			return fail(ps, at, "a step must be 1 or more");
		/* "5/15": 5 to the end, by 15; in day-of-week the end is 6, as for "*", so
		 * "6/1" is Saturday alone (robfig/cron's days end at 6), and "7/N" Sunday */
		if (single)
			hi = lo > f->star_max ? lo : f->star_max;
	}
	if (p < end)
		return fail(ps, p, *p == ',' ? "empty item in a list" : "unexpected character");
	*star |= any && step == 1;
	for (unsigned v = lo; v <= hi; v += step)
		*bits |= UINT64_C(1) << v;
	return TW_OK;
}

static int field(struct parser *ps, int which, const char *start, const char *end, uint64_t *bits,
		 bool *star)
{
	const struct field *f = &fields[which];
	*bits = 0, *star = false;
	for (const char *p = start;;) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *stop = comma ? comma : end;
		if (stop == p)
			return fail(ps, p, "empty item in a list");
		int rc = item(ps, f, p, stop, bits, star);
		if (rc)
			return rc;
		if (!comma)
			break;
		p = comma + 1;
	}
	if (which == DOW && (*bits >> 7 & 1))
		*bits = (*bits | 1) & 0x7f; /* 7 is Sunday too */
	return TW_OK;
}

/* The six (or five) fields in [p, ...) up to the terminating NUL. */
static int fields_of(struct parser *ps, const char *p, struct tw_cron *c)
{
	const char *start[FIELDS + 1], *end[FIELDS + 1];
	int n = 0;
	for (p = skip_blanks(p); *p; p = skip_blanks(p)) {
		if (n == FIELDS)
			return fail(ps, p, "too many fields: 5 or 6 expected (seconds first)");
		start[n] = p;
		while (*p && !blank(*p))
			p++;
		end[n++] = p;
	}
	if (n < 5)
		return fail(ps, p, "too few fields: 5 or 6 expected (seconds first)");
	int first = n == 5 ? MINUTE : SECOND; /* five fields: no seconds, they are 0 */
	uint64_t bits[FIELDS] = { [SECOND] = 1 };
	bool star[FIELDS] = { false };
	for (int i = 0; i < n; i++) {
		int rc = field(ps, first + i, start[i], end[i], &bits[first + i], &star[first + i]);
		if (rc)
			return rc;
	}
	c->second = bits[SECOND], c->minute = bits[MINUTE], c->hour = (uint32_t)bits[HOUR];
	c->dom = (uint32_t)bits[DOM], c->month = (uint32_t)bits[MONTH],
	c->dow = (uint32_t)bits[DOW];
	c->dom_star = star[DOM], c->dow_star = star[DOW];
	c->wild = *start[MINUTE - first] == '*' || *start[HOUR - first] == '*';
	return TW_OK;
}

/* "@every 150ms" at p (after "@every"): the duration, then nothing. */
static int every(struct parser *ps, const char *p, struct tw_cron *c)
{
	const char *tok = skip_blanks(p), *end = tok;
	while (*end && !blank(*end))
		end++;
	if (tok == end)
		return fail(ps, tok, "@every needs a duration (150ms, 5s, 2m, 1h)");
	if (*skip_blanks(end))
		return fail(ps, skip_blanks(end), "unexpected text after the duration");
	/* tw_parse_duration takes a string: the token is copied whole, for it takes
	 * any number of leading zeros and fraction digits, whatever the length. */
	char *text = malloc((size_t)(end - tok) + 1);
	if (!text) {
		if (ps->err)
			ps->err->reason = "out of memory";
		return -TW_ENOMEM;
	}
	memcpy(text, tok, (size_t)(end - tok));
	text[end - tok] = '\0';
	uint64_t ns;
	int rc = tw_parse_duration(text, &ns);
	free(text);
	if (rc == -TW_ERANGE || (!rc && ns > (uint64_t)INT64_MAX))
		return fail(ps, tok, "duration too long");
	if (rc)
		return fail(ps, tok, "not a duration (150ms, 5s, 2m, 1h)");
	if (!ns)
		return fail(ps, tok, "@every needs a duration above 0");
	c->every_ns = ns;
	return TW_OK;
}

static int macro(struct parser *ps, const char *p, struct tw_cron *c)
{
	const char *end = p;
	while (*end && !blank(*end))
		end++;
	if (same_word(p, (size_t)(end - p), "@every"))
		return every(ps, end, c);
	for (size_t i = 0; i < sizeof macros / sizeof macros[0]; i++) {
		if (!same_word(p, (size_t)(end - p), macros[i].name))
			continue;
		if (*skip_blanks(end))
			return fail(ps, skip_blanks(end), "unexpected text after the macro");
		struct parser inner = { macros[i].fields, NULL };
		return fields_of(&inner, macros[i].fields, c);
	}
	return fail(ps, p,
		    "unknown macro (@yearly, @annually, @monthly, @weekly, @daily, @midnight, "
		    "@hourly, @every DURATION)");
}

int tw_cron_parse(const char *expr, tw_cron **out, tw_cron_error *err)
{
	struct parser ps = { expr, err };
	if (err)
		*err = (tw_cron_error){ 0, NULL };
	if (out)
		*out = NULL;
	if (!expr || !out) {
		if (err)
			err->reason = "NULL argument";
		return -TW_EINVAL;
	}
	struct tw_cron c = { 0 };
	const char *p = skip_blanks(expr), *zone = NULL, *zone_end = NULL;
	if (!*p)
		return fail(&ps, p, "empty expression");
	size_t prefix = !strncmp(p, "CRON_TZ=", 8) ? 8 : !strncmp(p, "TZ=", 3) ? 3 : 0;
	if (prefix) {
		zone = zone_end = p + prefix;
		while (*zone_end && !blank(*zone_end))
			zone_end++;
		if (zone == zone_end)
			return fail(&ps, zone, "a time zone name expected after '='");
		p = skip_blanks(zone_end);
		if (!*p)
			return fail(&ps, p, "the schedule is missing after the time zone");
	}
	const char *body = p;
	int rc = *p == '@' ? macro(&ps, p, &c) : fields_of(&ps, p, &c);
	if (rc)
		return rc;
	const char *reason;
	bool nomem;
	if (tw__zone_load(zone ? zone : "local", zone ? (size_t)(zone_end - zone) : 5, &c.zone,
			  &reason, &nomem)) {
		if (nomem) {
			if (err)
				err->reason = reason;
			return -TW_ENOMEM;
		}
		fail(&ps, zone ? zone : body, reason);
		return -TW_ENOZONE;
	}
	struct tw_cron *made = malloc(sizeof *made);
	if (!made) {
		tw__zone_free(c.zone);
		if (err)
			err->reason = "out of memory";
		return -TW_ENOMEM;
	}
	*made = c;
	*out = made;
	return TW_OK;
}

void tw_cron_free(tw_cron *cron)
{
	if (!cron)
		return;
	tw__zone_free(cron->zone);
	free(cron);
}
