/*
 * wheel_test_support.c - the helpers of wheel_test_support.h, compiled once for
 * the wheel suites.
 */
#include "wheel_test_support.h"

/* Filing order shared by every timer of one test process (Criterion runs
 * each test in its own worker, so tests do not see each other's count). */
static uint64_t filing_counter;

void timers_init(struct timer *timers, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		wheel_entry_init(&timers[i].entry);
		timers[i].id = (unsigned)i;
		timers[i].expected_due = 0;
		timers[i].filed_seq = 0;
	}
}

void wheel_and_timers_init(struct wheel *w, uint64_t now, struct timer *timers, size_t n)
{
	tw__wheel_init(w, now);
	timers_init(timers, n);
}

uint64_t effective_due(const struct wheel *w, uint64_t due)
{
	return due > wheel_now(w) ? due : wheel_now(w) + 1;
}

static void note_filed(const struct wheel *w, struct timer *t, uint64_t due)
{
	t->expected_due = effective_due(w, due);
	t->filed_seq = ++filing_counter;
}

void assert_filed(const struct timer *t)
{
	cr_assert(wheel_entry_pending(&t->entry), "timer %u not pending after filing", t->id);
	cr_assert_eq(wheel_entry_due(&t->entry), t->expected_due,
		     "timer %u filed due %" PRIu64 ", expected %" PRIu64, t->id,
		     wheel_entry_due(&t->entry), t->expected_due);
}

void add_timer(struct wheel *w, struct timer *t, uint64_t due)
{
	size_t count = wheel_count(w);
	cr_assert_not(wheel_entry_pending(&t->entry), "test bug: adding pending timer %u", t->id);
	note_filed(w, t, due);
	tw__wheel_add(w, &t->entry, due);
	assert_filed(t);
	cr_assert_eq(wheel_count(w), count + 1, "count %zu after add, expected %zu", wheel_count(w),
		     count + 1);
}

void reschedule_timer(struct wheel *w, struct timer *t, uint64_t due)
{
	size_t count = wheel_count(w);
	size_t expected_count = count + (wheel_entry_pending(&t->entry) ? 0 : 1);
	note_filed(w, t, due);
	tw__wheel_reschedule(w, &t->entry, due);
	assert_filed(t);
	cr_assert_eq(wheel_count(w), expected_count, "count %zu after reschedule, expected %zu",
		     wheel_count(w), expected_count);
}

void remove_timer(struct wheel *w, struct timer *t)
{
	size_t count = wheel_count(w);
	cr_assert(wheel_entry_pending(&t->entry), "test bug: removing timer %u that is not pending",
		  t->id);
	tw__wheel_remove(w, &t->entry);
	cr_assert_not(wheel_entry_pending(&t->entry), "timer %u still pending after remove", t->id);
	cr_assert_eq(wheel_count(w), count - 1, "count %zu after remove, expected %zu",
		     wheel_count(w), count - 1);
}

void expect_no_expiry(struct wheel *w, uint64_t target)
{
	uint64_t before = wheel_now(w);
	size_t count = wheel_count(w);
	struct timer *t = timer_of(wheel_expire(w, target));
	cr_assert_null(t,
		       "timer %u (due %" PRIu64 ") handed out at tick %" PRIu64
		       " while advancing from %" PRIu64 " to %" PRIu64,
		       t ? t->id : 0, t ? wheel_entry_due(&t->entry) : 0, wheel_now(w), before,
		       target);
	cr_assert_eq(wheel_now(w), max_u64(before, target),
		     "now %" PRIu64 " after advancing from %" PRIu64 " to %" PRIu64, wheel_now(w),
		     before, target);
	cr_assert_eq(wheel_count(w), count, "count changed without a hand-out");
}

void expect_expiry(struct wheel *w, uint64_t target, const struct timer *expected, uint64_t tick)
{
	size_t count = wheel_count(w);
	struct timer *t = timer_of(wheel_expire(w, target));
	cr_assert_not_null(t,
			   "expected timer %u at tick %" PRIu64 ", got nothing (now %" PRIu64 ")",
			   expected->id, tick, wheel_now(w));
	cr_assert_eq(t->id, expected->id,
		     "expected timer %u at tick %" PRIu64 ", got timer %u at %" PRIu64,
		     expected->id, tick, t->id, wheel_now(w));
	cr_assert_eq(wheel_now(w), tick, "timer %u handed out at tick %" PRIu64 ", due %" PRIu64,
		     t->id, wheel_now(w), tick);
	cr_assert_eq(wheel_entry_due(&t->entry), tick);
	cr_assert_not(wheel_entry_pending(&t->entry), "timer %u still pending once handed out",
		      t->id);
	cr_assert_eq(wheel_count(w), count - 1);
}

size_t expire_all(struct wheel *w, uint64_t target, struct handout *out, size_t capacity)
{
	uint64_t start = wheel_now(w);
	uint64_t last_tick = start;
	size_t count_before = wheel_count(w);
	size_t n = 0;
	struct wheel_entry *e;

	while ((e = wheel_expire(w, target)) != NULL) {
		struct timer *t = timer_of(e);
		uint64_t tick = wheel_now(w);
		cr_assert_lt(n, capacity, "more hand-outs than the %zu expected", capacity);
		cr_assert_not(wheel_entry_pending(e), "timer %u still pending once handed out",
			      t->id);
		cr_assert_eq(wheel_entry_due(e), tick,
			     "timer %u due %" PRIu64 " handed out at %" PRIu64, t->id,
			     wheel_entry_due(e), tick);
		cr_assert_gt(tick, start,
			     "timer %u handed out at %" PRIu64 ", not after the starting tick",
			     t->id, tick);
		cr_assert_geq(tick, last_tick, "time went back to %" PRIu64, tick);
		cr_assert_leq(tick, target, "tick %" PRIu64 " beyond target %" PRIu64, tick,
			      target);
		cr_assert_eq(wheel_count(w), count_before - n - 1);
		last_tick = tick;
		out[n++] = (struct handout){ .id = t->id, .tick = tick };
	}
	cr_assert_eq(wheel_now(w), max_u64(start, target),
		     "now %" PRIu64 " after draining to %" PRIu64, wheel_now(w), target);
	return n;
}

static int compare_by_due_then_filing(const void *pa, const void *pb)
{
	const struct timer *a = *(const struct timer *const *)pa;
	const struct timer *b = *(const struct timer *const *)pb;
	if (a->expected_due != b->expected_due)
		return a->expected_due < b->expected_due ? -1 : 1;
	if (a->filed_seq != b->filed_seq)
		return a->filed_seq < b->filed_seq ? -1 : 1;
	return 0;
}

size_t expect_drain_in_order(struct wheel *w, uint64_t target, struct timer *timers, size_t n)
{
	static struct timer *expected[MAX_SORTED_TIMERS];
	static struct handout got[MAX_SORTED_TIMERS];
	size_t n_expected = 0;

	cr_assert_leq(n, MAX_SORTED_TIMERS, "test bug: too many timers");
	for (size_t i = 0; i < n; i++) {
		if (wheel_entry_pending(&timers[i].entry) && timers[i].expected_due <= target)
			expected[n_expected++] = &timers[i];
	}
	qsort(expected, n_expected, sizeof expected[0], compare_by_due_then_filing);

	size_t n_got = expire_all(w, target, got, MAX_SORTED_TIMERS);
	for (size_t i = 0; i < n_got && i < n_expected; i++) {
		cr_assert_eq(got[i].id, expected[i]->id,
			     "hand-out %zu: timer %u at tick %" PRIu64
			     ", expected timer %u due %" PRIu64,
			     i, got[i].id, got[i].tick, expected[i]->id, expected[i]->expected_due);
		cr_assert_eq(got[i].tick, expected[i]->expected_due);
	}
	cr_assert_eq(n_got, n_expected, "%zu hand-outs up to %" PRIu64 ", expected %zu", n_got,
		     target, n_expected);
	return n_got;
}

void assert_next_expiry_bounds(const struct wheel *w, const struct timer *timers, size_t n)
{
	uint64_t earliest = UINT64_MAX;
	size_t pending = 0;
	for (size_t i = 0; i < n; i++) {
		if (wheel_entry_pending(&timers[i].entry)) {
			pending++;
			if (timers[i].expected_due < earliest)
				earliest = timers[i].expected_due;
		}
	}
	uint64_t next = tw__wheel_next_expiry(w);
	cr_assert_eq(wheel_count(w), pending);
	if (pending == 0) {
		cr_assert_eq(next, UINT64_MAX, "next expiry %" PRIu64 " on an empty wheel", next);
		return;
	}
	cr_assert_leq(next, earliest, "next expiry %" PRIu64 " after the earliest due %" PRIu64,
		      next, earliest);
	cr_assert_geq(next, wheel_now(w), "next expiry %" PRIu64 " before now %" PRIu64, next,
		      wheel_now(w));
	if (pending == 1)
		cr_assert_eq(next, earliest,
			     "single entry due %" PRIu64 " but next expiry %" PRIu64, earliest,
			     next);
}
