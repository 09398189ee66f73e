/*
 * reference_model.h - the obviously correct timer queue that the randomized
 * test holds the wheel against.
 *
 * For every timer it keeps whether it is pending, its due tick and the
 * sequence number of its last add or reschedule; the next hand-out is the
 * pending timer with the smallest (due, sequence). A binary heap with lazily
 * dropped stale keys finds it, so the model stays cheap with thousands of
 * timers.
 */
#ifndef TICKWHEEL_TESTS_REFERENCE_MODEL_H
#define TICKWHEEL_TESTS_REFERENCE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	MAX_TIMERS = 4096,
	HEAP_CAPACITY = 8 * MAX_TIMERS,
};

/* model_expire() result once nothing more is due up to the target */
#define NO_TIMER INT64_C(-1)

struct model_timer {
	bool pending;
	uint64_t due;
	uint64_t seq;
};

/* A heap key; stale once its timer is refiled or leaves the model. */
struct model_key {
	uint64_t due;
	uint64_t seq;
	uint32_t id;
};

struct model {
	uint64_t now;
	uint64_t last_seq;
	size_t count;
	size_t n_timers;
	struct model_timer timer[MAX_TIMERS];
	/* min-heap on (due, seq), may hold stale keys */
	struct model_key heap[HEAP_CAPACITY];
	size_t heap_size;
};

/* Starts with n_timers timers, none pending, at tick now. */
void model_init(struct model *m, uint64_t now, size_t n_timers);

/* An add or a reschedule: either way the timer counts as last filed. A due
 * tick at or before now means the next tick. */
void model_file(struct model *m, uint32_t id, uint64_t due);

void model_remove(struct model *m, uint32_t id);

/* The pending timer that comes out next, or NULL when none is pending. */
const struct model_key *model_earliest(struct model *m);

/* One step of an advance to target: hands out the next timer due by then
 * (returns its id, and now becomes its due tick), or returns NO_TIMER and
 * moves now to target unless target is in the past. */
int64_t model_expire(struct model *m, uint64_t target);

#endif
