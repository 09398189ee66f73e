/*
 * snapshot_plan.c - what restoring a record does (snapshot_plan.h): pure, the
 * wall-clock time read once by the caller, so that every task of a file is
 * judged against the same now.
 */
#include "snapshot_plan.h"

/* A calendar task's passed fire times from wall (one) to now, up to limit; *next: its first
 * fire time after now (0: none). */
static uint64_t count_calendar(const tw_cron *cron, int64_t wall, const struct now *now,
			       uint64_t limit, int64_t *next)
{
	uint64_t n = 1;
	int64_t t;
	while (n < limit && !tw_cron_next(cron, wall, &t, 1) && t <= now->wall) {
		n++;
		wall = t;
	}
	*next = tw_cron_next(cron, now->wall, &t, 1) ? 0 : t;
	return n;
}

void tw__snapshot_plan_record(const struct snap_record *r, const tw_cron *cron,
			      const struct now *now, struct plan *p)
{
	*p = (struct plan){ .action = NO_DUE };
	if (r->bits & SNAP_PAUSED) {
		p->action = PAUSED;
		return;
	}
	int64_t w = r->due_wall_ns;
	if (!w)
		return;
	if (w > now->wall) {
		p->action = DUE;
		p->wall = w;
		return;
	}
	bool skip = r->misfire == TW_MISFIRE_SKIP;
	int64_t next = 0;
	uint64_t passed = 1;
	if (r->kind == SNAP_PERIODIC) {
		int64_t period = (int64_t)(r->period_ms * NS_PER_MS);
		passed = (uint64_t)((now->wall - w) / period) + 1;
		next = w + (int64_t)passed * period;
	} else if (r->kind == SNAP_CALENDAR) {
		/* The bound is on the missed ones, as at run time: a run's own fire time is
		 * not one of them. */
		passed = count_calendar(cron, w, now,
					skip ? TW_RESTORE_MISSED_MAX : TW_RESTORE_MISSED_MAX + 1,
					&next);
	} else if (skip) {
		p->action = SKIPPED; /* a one-shot with nothing after now: expired */
		return;
	}
	p->action = skip ? DUE_NEXT : DUE_NOW;
	p->missed = skip ? passed : passed - 1;
	p->wall = next;
	if (skip && !next)
		p->action = NO_DUE; /* no fire time left */
}
