/*
 * snapshot_plan.h - what restoring a snapshot's record does, judged against one
 * reading of now (snapshot_plan.c): added paused, with no due, due at its time,
 * or, its due passed, due at once or at its next time after now, as its misfire
 * policy says, with the firings it missed counted.
 */
#ifndef TICKWHEEL_CORE_SNAPSHOT_PLAN_H
#define TICKWHEEL_CORE_SNAPSHOT_PLAN_H

#include "base.h"
#include "snapshot.h"

/* What restoring a record does. */
enum action {
	SKIPPED,  /* a duplicate, declined, or expired: not added */
	NO_DUE,   /* added waiting with no due (saved so: TW_NEVER, or no fire time left) */
	PAUSED,   /* added paused */
	DUE,      /* added with its due at wall-clock time wall */
	DUE_NOW,  /* added due at once: a passed due, TW_MISFIRE_RUN_ONCE */
	DUE_NEXT, /* added with its first due after now: a passed due, TW_MISFIRE_SKIP */
};

struct plan {
	uint8_t action;
	bool resolved, added;
	int64_t wall; /* DUE, DUE_NEXT: the due's wall-clock time */
	uint64_t missed;
	tw_id id;
	tw_resolved to;
};

struct now {
	int64_t offset, wall;
	uint64_t ns;
};

/* What restoring r does, judged against now; a calendar task's expression parsed as cron. */
void tw__snapshot_plan_record(const struct snap_record *r, const tw_cron *cron,
			      const struct now *now, struct plan *p);

#endif
