/*
 * icount.h - what the two files of `tw-perf icount` share: the workload every
 * phase draws from, and the brackets of a phase (icount.c explains how the
 * gate counts them). icount.c holds the wheel's phases, icount_engine.c the
 * engine's.
 */
#ifndef TICKWHEEL_PERF_SUITE_ICOUNT_H
#define TICKWHEEL_PERF_SUITE_ICOUNT_H

#include "tickwheel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum {
	MAX_DELAY_MS = 10 * 60 * 1000, /* dues 1 ms .. 10 min away, as in `ops` */
	DISPATCH_WINDOW_MS = 1000,     /* dispatched one-shots are due within 1 s */
	EXECUTORS = 2,                 /* fixed: counts must not depend on the CPU count */
	DEFAULT_N = 100000,
	QUICK_N = 10000,
	MANY_PER_CALL = 64, /* ids per tw_set_delay_many call */
};

/* Each loop visits the entries in its own permutation, so that no operation
 * finds its neighbours hot from the one before (as in `ops`). */
struct icount_workload {
	size_t n;
	uint32_t *order[3];
	uint32_t *delay[2]; /* 2 .. MAX_DELAY_MS: room for an earlier due */
	uint32_t *later;    /* 1 .. MAX_DELAY_MS added for a postpone */
	uint32_t *earlier;  /* below delay[0] (both indexed by task) */
	uint32_t *soon;     /* 1 .. DISPATCH_WINDOW_MS */
};

#ifdef HAVE_CALLGRIND_H
#include <valgrind/callgrind.h>

/* The dump's name, "NAME K", is what the gate parses; it is formatted before
 * the zeroing so that the phase holds nothing but its operations. */
struct phase {
	char desc[96];
};

static inline void phase_begin(struct phase *p, const char *name, size_t k)
{
	snprintf(p->desc, sizeof p->desc, "%s %zu", name, k);
	CALLGRIND_ZERO_STATS;
}

static inline void phase_end(struct phase *p)
{
	CALLGRIND_DUMP_STATS_AT(p->desc);
	printf("icount: dumped %s\n", p->desc);
}

/* The engine's phases (icount_engine.c): add, postpone, postpone in batches,
 * reschedule earlier, cancel; then the dispatch of K one-shots. 0, or 2 after
 * saying why. */
int icount_engine_phases(const struct icount_workload *wl, tw_id *ids);
int icount_dispatch_phase(const struct icount_workload *wl, tw_id *ids);
/* K periodic tasks, then K calendar tasks, fired once each: the firing's cost. */
int icount_fire_phases(const struct icount_workload *wl, tw_id *ids);
#endif

#endif
