/*
 * test_wheel_reentrant.c - changes made between two wheel_expire() calls of
 * one advance: to the entry in hand, to an entry waiting in the same tick, to
 * an entry due later, and new entries added from inside the loop.
 *
 * Each expect_expiry() below is one wheel_expire() call towards the same
 * target, so the operations written between them run inside the loop.
 */
#include "wheel_test_support.h"

Test(wheel_reentrant, entry_in_hand_rescheduled_to_current_tick_comes_out_next_tick)
{
	enum { N = 3 };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 0, t, N);
	add_timer(&w, &t[0], 100);
	add_timer(&w, &t[1], 100);
	add_timer(&w, &t[2], 101);

	expect_expiry(&w, 200, &t[0], 100);
	reschedule_timer(&w, &t[0], 100);
	cr_assert_eq(wheel_entry_due(&t[0].entry), 101);
	expect_expiry(&w, 200, &t[1], 100);
	expect_expiry(&w, 200, &t[2], 101);
	expect_expiry(&w, 200, &t[0], 101); /* filed after t[2] */
	expect_no_expiry(&w, 200);
	assert_wheel_valid(&w);
}

Test(wheel_reentrant, entry_in_hand_rescheduled_when_target_is_current_tick_waits)
{
	enum { N = 2 };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 0, t, N);
	add_timer(&w, &t[0], 100);
	add_timer(&w, &t[1], 100);

	expect_expiry(&w, 100, &t[0], 100);
	reschedule_timer(&w, &t[0], 0); /* into the past: next tick */
	expect_expiry(&w, 100, &t[1], 100);
	expect_no_expiry(&w, 100);
	cr_assert(wheel_entry_pending(&t[0].entry));
	cr_assert_eq(tw__wheel_next_expiry(&w), 101);
	expect_expiry(&w, 101, &t[0], 101);
}

/* A periodic timer refiling itself from the loop, at periods that land on
 * and around level boundaries, all within one advance. */
Test(wheel_reentrant, periodic_entry_in_hand_fires_at_every_period_in_one_advance)
{
	const uint64_t periods[] = { 1, 7, 31, 32, 33, 64, 1000, 1024, 1025, 32769 };
	for (size_t p = 0; p < sizeof periods / sizeof periods[0]; p++) {
		const uint64_t period = periods[p];
		const uint64_t first = 12345 + 3;
		const uint64_t target = first + 200 * period + period / 2;
		struct wheel w;
		struct timer t;
		wheel_and_timers_init(&w, 12345, &t, 1);
		add_timer(&w, &t, first);

		uint64_t expected_tick = first;
		unsigned fired = 0;
		struct wheel_entry *e;
		while ((e = wheel_expire(&w, target)) != NULL) {
			cr_assert_eq(e, &t.entry);
			cr_assert_eq(wheel_now(&w), expected_tick,
				     "period %" PRIu64 " firing %u at %" PRIu64, period, fired,
				     wheel_now(&w));
			fired++;
			expected_tick += period;
			if (fired % 2)
				tw__wheel_add(&w, e, wheel_now(&w) + period);
			else
				tw__wheel_reschedule(&w, e, wheel_now(&w) + period);
		}
		cr_assert_eq(fired, 201, "period %" PRIu64, period);
		cr_assert_eq(wheel_now(&w), target);
		cr_assert_eq(tw__wheel_next_expiry(&w), expected_tick);
		assert_wheel_valid(&w);
	}
}

/* n timers filed for tick 50 and the first of them handed out: the others wait in the
 * tick the expire loop is in. */
static void file_at_50_and_hand_out_the_first(struct wheel *w, struct timer *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		add_timer(w, &t[i], 50);
	expect_expiry(w, 60, &t[0], 50);
}

Test(wheel_reentrant, entry_waiting_in_same_tick_can_be_removed)
{
	enum { N = 4 };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 0, t, N);
	file_at_50_and_hand_out_the_first(&w, t, N);
	remove_timer(&w, &t[1]);
	expect_expiry(&w, 60, &t[2], 50);
	remove_timer(&w, &t[3]); /* the last of the tick */
	expect_no_expiry(&w, 60);
	cr_assert_eq(wheel_count(&w), 0);
	assert_wheel_valid(&w);
}

Test(wheel_reentrant, entry_waiting_in_same_tick_rescheduled_to_it_moves_to_next_tick)
{
	enum { N = 3 };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 0, t, N);
	file_at_50_and_hand_out_the_first(&w, t, N);
	reschedule_timer(&w, &t[1], 50); /* the current tick is already past */
	cr_assert_eq(wheel_entry_due(&t[1].entry), 51);
	expect_expiry(&w, 60, &t[2], 50);
	expect_expiry(&w, 60, &t[1], 51);
	expect_no_expiry(&w, 60);
}

Test(wheel_reentrant, entry_due_later_can_be_removed_or_moved_from_the_loop)
{
	enum { N = 5 };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 1000, t, N);
	add_timer(&w, &t[0], 1050);
	add_timer(&w, &t[1], 1060);
	add_timer(&w, &t[2], 1070);
	add_timer(&w, &t[3], 1090);
	add_timer(&w, &t[4], 1080);

	expect_expiry(&w, 1100, &t[0], 1050);
	remove_timer(&w, &t[1]);              /* due later, gone */
	reschedule_timer(&w, &t[3], 1065);    /* earlier, still ahead */
	reschedule_timer(&w, &t[4], 1000000); /* beyond the target */
	expect_expiry(&w, 1100, &t[3], 1065);
	reschedule_timer(&w, &t[2], 1065); /* to the tick in hand */
	expect_expiry(&w, 1100, &t[2], 1066);
	expect_no_expiry(&w, 1100);
	cr_assert(wheel_entry_pending(&t[4].entry));
	cr_assert_eq(tw__wheel_next_expiry(&w), 1000000);
	assert_wheel_valid(&w);
}

Test(wheel_reentrant, entries_added_from_the_loop_come_out_in_the_same_advance)
{
	enum { OLD0, OLD1, NOW, LATER, SAME_TICK, BEYOND, PAST, N };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 0, t, N);
	add_timer(&w, &t[OLD0], 50);
	add_timer(&w, &t[OLD1], 60);

	expect_expiry(&w, 100, &t[OLD0], 50);
	add_timer(&w, &t[NOW], 50);       /* due now: next tick */
	add_timer(&w, &t[LATER], 75);     /* within the target */
	add_timer(&w, &t[SAME_TICK], 60); /* behind OLD1 in its tick */
	add_timer(&w, &t[BEYOND], 101);   /* just past the target */
	add_timer(&w, &t[PAST], 3);       /* in the past: next tick, after NOW */
	expect_expiry(&w, 100, &t[NOW], 51);
	expect_expiry(&w, 100, &t[PAST], 51);
	expect_expiry(&w, 100, &t[OLD1], 60);
	expect_expiry(&w, 100, &t[SAME_TICK], 60);
	expect_expiry(&w, 100, &t[LATER], 75);
	expect_no_expiry(&w, 100);
	cr_assert(wheel_entry_pending(&t[BEYOND].entry));
	cr_assert_eq(tw__wheel_next_expiry(&w), 101);
}

Test(wheel_reentrant, far_entries_added_from_the_loop_come_out_in_the_same_advance)
{
	const uint64_t target = UINT64_C(1) << 30;
	const uint64_t far[] = { 10 + 40000, 10 + (UINT64_C(1) << 25) + 3, 10 + 33, target - 1,
				 target };
	enum { N = 1 + sizeof far / sizeof far[0] };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 0, t, N);
	add_timer(&w, &t[0], 10);

	expect_expiry(&w, target, &t[0], 10);
	for (size_t i = 0; i < N - 1; i++)
		add_timer(&w, &t[1 + i], far[i]);
	/* in due order: 10 + 33, 10 + 40000, 10 + 2^25 + 3, target - 1, target */
	const unsigned order[] = { 3, 1, 2, 4, 5 };
	for (size_t i = 0; i < N - 1; i++)
		expect_expiry(&w, target, &t[order[i]], t[order[i]].expected_due);
	expect_no_expiry(&w, target);
	assert_wheel_valid(&w);
}

Test(wheel_reentrant, removing_everything_from_the_loop_ends_the_advance)
{
	enum { N = 10 };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 0, t, N);
	for (size_t i = 0; i < N; i++)
		add_timer(&w, &t[i], 10 + i * 1000);

	expect_expiry(&w, 1000000, &t[0], 10);
	for (size_t i = 1; i < N; i++)
		remove_timer(&w, &t[i]);
	expect_no_expiry(&w, 1000000);
	cr_assert_eq(wheel_count(&w), 0);
	cr_assert_eq(tw__wheel_next_expiry(&w), UINT64_MAX);
	assert_wheel_valid(&w);
}

/* Half of a crowded tick refiles itself from the loop; the refiled half
 * comes out next tick in the order of refiling. */
Test(wheel_reentrant, crowded_tick_refiling_from_the_loop_keeps_refiling_order)
{
	enum { N = 1000 };
	static struct timer t[N];
	static unsigned refiled[N];
	size_t n_refiled = 0;
	struct wheel w;
	wheel_and_timers_init(&w, 0, t, N);
	for (size_t i = 0; i < N; i++)
		add_timer(&w, &t[(i * 7) % N], 40000);

	struct wheel_entry *e;
	size_t seen = 0;
	while ((e = wheel_expire(&w, 40000)) != NULL) {
		struct timer *x = timer_of(e);
		cr_assert_eq(x->id, (seen * 7) % N, "hand-out %zu", seen);
		cr_assert_eq(wheel_now(&w), 40000);
		seen++;
		if (x->id % 2 == 0) {
			reschedule_timer(&w, x, 40000);
			refiled[n_refiled++] = x->id;
		}
		if (seen == N / 2) /* a newcomer lands behind every refiled one so far */
			add_timer(&w, &t[1], 39000);
	}
	cr_assert_eq(seen, N);
	cr_assert_eq(wheel_count(&w), n_refiled + 1);
	for (size_t i = 0; i < n_refiled; i++) {
		if (i == N / 4) /* the newcomer was filed after the first N/4 refiles */
			expect_expiry(&w, 40001, &t[1], 40001);
		expect_expiry(&w, 40001, &t[refiled[i]], 40001);
	}
	expect_no_expiry(&w, 40001);
	assert_wheel_valid(&w);
}
