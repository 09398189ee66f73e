/*
 * zone.h - time zone rules read from the system's zoneinfo (TZif files,
 * RFC 8536) or from a POSIX TZ string, without tzset() or any libc time
 * state: a zone is a value that any thread may read.
 *
 * A zone is a list of the instants at which its UTC offset changes (changes
 * of abbreviation or of the DST flag alone are dropped: only the clock
 * matters here) and, for the instants after the last of them, the TZif
 * footer's POSIX rule. Times are seconds since the Unix epoch.
 */
#ifndef TICKWHEEL_CALENDAR_ZONE_H
#define TICKWHEEL_CALENDAR_ZONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A POSIX TZ rule date: Jn (1-365, 29 February never counted), n (0-365), Mm.w.d. */
struct tw__tz_date {
	char kind; /* 'J', 'n' or 'M' */
	unsigned short day, month, week, wday;
	int32_t time; /* local seconds after midnight: -167 h .. 167 h (RFC 8536) */
};

/* "CET-1CEST,M3.5.0,M10.5.0/3": offsets east of UTC, in seconds. */
struct tw__posix_tz {
	int32_t std_offset, dst_offset;
	bool has_dst;
	struct tw__tz_date start, end; /* DST starts (in standard time), ends (in DST) */
};

struct tw__zone {
	size_t count;    /* offset changes in the table */
	int64_t *at;     /* their instants, ascending */
	int32_t *offset; /* the offset from at[i] on */
	int32_t initial; /* the offset before at[0] */
	bool has_rule;   /* the footer applies after the last change */
	struct tw__posix_tz rule;
};

/* A stretch of time with one offset: [start, end), start INT64_MIN and end
 * INT64_MAX when unbounded; prev_offset is the offset just before start. */
struct tw__zone_span {
	int64_t start, end;
	int32_t offset, prev_offset;
};

/* Reads the zone named by name[0 .. len): "UTC", "Local" or "local" (the
 * process's zone, below), or an IANA name looked up in $TZDIR or
 * /usr/share/zoneinfo. The local zone is the one glibc's localtime() would
 * use: TZ ("" is UTC; ":NAME", NAME or a path to a TZif file; else a POSIX
 * TZ string), else /etc/localtime, else UTC. TZ and TZDIR are read once,
 * here, with secure_getenv. *out is NULL for UTC. Returns 0, or -1 with
 * *reason set (a static string) and *nomem set when memory ran out. */
int tw__zone_load(const char *name, size_t len, struct tw__zone **out, const char **reason,
		  bool *nomem);
void tw__zone_free(struct tw__zone *z);

/* The stretch of constant offset that holds t; z NULL is UTC. */
void tw__zone_span(const struct tw__zone *z, int64_t t, struct tw__zone_span *out);

/* TZif data (RFC 8536, versions 1 to 4) into a zone; leap-second files are
 * refused. 0, or -1 with *reason; *nomem on a failed allocation. */
int tw__zone_from_tzif(const unsigned char *data, size_t size, struct tw__zone **out,
		       const char **reason, bool *nomem);

/* A POSIX TZ string, all of it: 0 or -1. */
int tw__posix_tz_parse(const char *text, size_t len, struct tw__posix_tz *out);
/* The offset the rule gives at t, and the stretch of it around t (not
 * clamped: the caller clamps it to where the rule applies). */
void tw__posix_tz_span(const struct tw__posix_tz *p, int64_t t, struct tw__zone_span *out);

#endif
