/*
 * duration.c - durations as people write them: "200ms", "1.5s", "2m", and
 * ranges such as "100-500ms". Integer arithmetic only, so "0.1s" is exactly
 * 100 000 000 ns, and every overflow is caught.
 */
#include "tickwheel.h"

#include <string.h>

#define MS UINT64_C(1000000)

static const struct {
	const char *name;
	uint64_t ns;
} units[] = {
	{ "ns", 1 },
	{ "us", 1000 },
	{ "ms", 1000000 },
	{ "s", 1000000000 },
	{ "min", UINT64_C(60000000000) },
	{ "m", UINT64_C(60000000000) },
	{ "h", UINT64_C(3600000000000) },
};

/* The unit at *text (none: milliseconds); advances past it. */
static int parse_unit(const char **text, uint64_t *ns)
{
	if (!**text) {
		*ns = MS;
		return TW_OK;
	}
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		size_t n = strlen(units[i].name);
		if (!strncmp(*text, units[i].name, n)) {
			*text += n;
			*ns = units[i].ns;
			return TW_OK;
		}
	}
	return -TW_EINVAL;
}

/* "12.5" at *text: the whole part and the fraction's digits; advances. */
static int parse_number(const char **text, uint64_t *whole, uint64_t *fraction,
			uint64_t *fraction_scale)
{
	const char *p = *text;
	*whole = 0, *fraction = 0, *fraction_scale = 1;
	if (*p < '0' || *p > '9')
		return -TW_EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		uint64_t digit = (uint64_t)(*p - '0');
		if (*whole > (UINT64_MAX - digit) / 10)
			return -TW_ERANGE;
		*whole = *whole * 10 + digit;
	}
	if (*p == '.') {
		if (p[1] < '0' || p[1] > '9')
			return -TW_EINVAL;
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (*fraction_scale <
			    UINT64_C(1000000000000000000)) { /* finer is below 1 ns */
				*fraction = *fraction * 10 + (uint64_t)(*p - '0');
				*fraction_scale *= 10;
			}
	}
	*text = p;
	return TW_OK;
}

struct number {
	uint64_t whole, fraction, scale; /* whole + fraction / scale */
};

/* n units of unit_ns each, down to whole ns. */
static int to_ns(struct number n, uint64_t unit_ns, uint64_t *out)
{
	if (n.whole > UINT64_MAX / unit_ns)
		return -TW_ERANGE;
	uint64_t part = unit_ns >= n.scale ? n.fraction * (unit_ns / n.scale) :
					     n.fraction / (n.scale / unit_ns);
	if (n.whole * unit_ns > UINT64_MAX - part)
		return -TW_ERANGE;
	*out = n.whole * unit_ns + part;
	return TW_OK;
}

int tw_parse_duration(const char *text, uint64_t *out_ns)
{
	uint64_t lo, hi;
	if (!out_ns)
		return -TW_EINVAL;
	int rc = tw_parse_duration_range(text, &lo, &hi);
	if (rc)
		return rc;
	if (lo != hi || strchr(text, '-'))
		return -TW_EINVAL; /* a range where one duration is wanted */
	*out_ns = lo;
	return TW_OK;
}

/* "100-500ms", "1s-2m", "200ms": a unit written only after a range applies to
 * both ends; no unit at all means milliseconds. */
int tw_parse_duration_range(const char *text, uint64_t *lo_ns, uint64_t *hi_ns)
{
	if (!text || !lo_ns || !hi_ns)
		return -TW_EINVAL;
	const char *p = text;
	struct number lo, hi;
	uint64_t lo_unit = 0, hi_unit;
	int rc = parse_number(&p, &lo.whole, &lo.fraction, &lo.scale);
	if (!rc && *p && *p != '-')
		rc = parse_unit(&p, &lo_unit);
	if (rc)
		return rc;
	hi = lo;
	hi_unit = lo_unit ? lo_unit : MS;
	if (*p == '-') {
		p++;
		if ((rc = parse_number(&p, &hi.whole, &hi.fraction, &hi.scale)) ||
		    (rc = parse_unit(&p, &hi_unit)))
			return rc;
	}
	if (*p)
		return -TW_EINVAL;
	uint64_t lo_ns_, hi_ns_;
	if ((rc = to_ns(lo, lo_unit ? lo_unit : hi_unit, &lo_ns_)) ||
	    (rc = to_ns(hi, hi_unit, &hi_ns_)))
		return rc;
	if (lo_ns_ > hi_ns_)
		return -TW_EINVAL;
	*lo_ns = lo_ns_;
	*hi_ns = hi_ns_;
	return TW_OK;
}
