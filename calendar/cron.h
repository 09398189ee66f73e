/*
 * cron.h - a parsed schedule, what tw_cron_parse (cron_parse.c) makes and
 * tw_cron_next (cron_next.c) reads. Fields are bit sets: bit v set when the
 * value v matches.
 */
#ifndef TICKWHEEL_CALENDAR_CRON_H
#define TICKWHEEL_CALENDAR_CRON_H

#include "tickwheel.h"
#include "zone.h"

struct tw_cron {
	uint64_t second, minute; /* 0-59 */
	uint32_t hour;           /* 0-23 */
	uint32_t dom;            /* 1-31 */
	uint32_t month;          /* 1-12 */
	uint32_t dow;            /* 0-6, Sunday 0 (7 is folded into 0) */
	/* Written "*" or "?" (a step of 1 at most): the other day field alone decides. */
	bool dom_star, dow_star;
	/* The hour or the minute field starts with "*": the schedule follows the
	 * clock through daylight-saving changes (see the header). */
	bool wild;
	uint64_t every_ns;     /* @every: the period; 0 for a calendar schedule */
	struct tw__zone *zone; /* NULL: UTC */
};

#endif
