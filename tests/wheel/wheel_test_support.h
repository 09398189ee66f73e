/*
 * wheel_test_support.h - helpers shared by the wheel unit-test suites.
 *
 * A test owns "timers": objects that embed a wheel entry the way the wheel's
 * real users do, plus the bookkeeping a test needs to predict the hand-out
 * order (the expected due tick and when the timer was last filed). Defined in
 * wheel_test_support.c.
 */
#ifndef TICKWHEEL_TESTS_WHEEL_TEST_SUPPORT_H
#define TICKWHEEL_TESTS_WHEEL_TEST_SUPPORT_H

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "wheel.h"

/* Test-side view of one timer. */
struct timer {
	struct wheel_entry entry;
	unsigned id;
	uint64_t expected_due; /* what the test expects the wheel to use */
	uint64_t filed_seq;    /* when the test last added or rescheduled it */
};

/* One hand-out, as seen by the owner: which timer, at which tick. */
struct handout {
	unsigned id;
	uint64_t tick;
};

enum { MAX_SORTED_TIMERS = 8192 };

static inline uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static inline struct timer *timer_of(struct wheel_entry *e)
{
	if (e == NULL)
		return NULL;
	return (struct timer *)((char *)e - offsetof(struct timer, entry));
}

/* n timers, not filed, their ids their indexes. */
void timers_init(struct timer *timers, size_t n);

/* A wheel whose time is now, and n timers for it: what a test starts from. */
void wheel_and_timers_init(struct wheel *w, uint64_t now, struct timer *timers, size_t n);

#define assert_wheel_valid(w) \
	cr_assert(tw__wheel_check(w), "tw__wheel_check failed at tick %" PRIu64, wheel_now(w))

/* The due tick the header promises for a request: never now or earlier. */
uint64_t effective_due(const struct wheel *w, uint64_t due);

/* t is pending with the due the test expects (after add_timer or reschedule_timer). */
void assert_filed(const struct timer *t);

/* tw__wheel_add with bookkeeping: checks the count, pending flag and due tick. */
void add_timer(struct wheel *w, struct timer *t, uint64_t due);

/* tw__wheel_reschedule with bookkeeping; t may be pending or not. */
void reschedule_timer(struct wheel *w, struct timer *t, uint64_t due);

/* tw__wheel_remove with bookkeeping. */
void remove_timer(struct wheel *w, struct timer *t);

/* Advancing to target hands out nothing, and time then stands at target
 * (or stays where it was, for a target in the past). */
void expect_no_expiry(struct wheel *w, uint64_t target);

/* The next hand-out on the way to target is timer expected, at tick. */
void expect_expiry(struct wheel *w, uint64_t target, const struct timer *expected, uint64_t tick);

/*
 * Runs the expire loop to target without touching the wheel in between and
 * records every hand-out, checking what must hold for each one: it is out of
 * the wheel, it comes out at its due tick, and time only moves forward up to
 * target.
 */
size_t expire_all(struct wheel *w, uint64_t target, struct handout *out, size_t capacity);

/*
 * Advances to target and checks that exactly the pending timers due by then
 * come out, each at its due tick, ordered by due tick and then by when they
 * were last filed. Returns how many came out.
 */
size_t expect_drain_in_order(struct wheel *w, uint64_t target, struct timer *timers, size_t n);

/* Bounds that must hold for tw__wheel_next_expiry() whatever the wheel holds. */
void assert_next_expiry_bounds(const struct wheel *w, const struct timer *timers, size_t n);

#endif
