/*
 * test_wheel.c - unit tests for the basic wheel operations: add, remove,
 * reschedule, expire and the queries, each checked against the guarantees
 * stated in wheel.h.
 */
#include "wheel_test_support.h"

static const uint64_t interesting_starts[] = { 0, 12345, (UINT64_C(1) << 33) + 77 };

#define N_STARTS (sizeof interesting_starts / sizeof interesting_starts[0])

Test(wheel, empty_wheel_has_nothing_to_do)
{
	for (size_t i = 0; i < N_STARTS; i++) {
		uint64_t start = interesting_starts[i];
		struct wheel w;
		tw__wheel_init(&w, start);
		cr_assert_eq(wheel_now(&w), start);
		cr_assert_eq(wheel_count(&w), 0);
		cr_assert_eq(tw__wheel_next_expiry(&w), UINT64_MAX);
		assert_wheel_valid(&w);

		expect_no_expiry(&w, start);
		expect_no_expiry(&w, start + 1);
		expect_no_expiry(&w, start + 1000);
		expect_no_expiry(&w, start + (UINT64_C(1) << 30));
		cr_assert_eq(wheel_count(&w), 0);
		cr_assert_eq(tw__wheel_next_expiry(&w), UINT64_MAX);
		assert_wheel_valid(&w);
	}
}

Test(wheel, new_entry_is_not_pending)
{
	struct timer t;
	timers_init(&t, 1);
	cr_assert_not(wheel_entry_pending(&t.entry));
}

Test(wheel, future_entry_comes_out_exactly_at_its_tick)
{
	for (size_t i = 0; i < N_STARTS; i++) {
		uint64_t start = interesting_starts[i];
		struct wheel w;
		struct timer t;
		wheel_and_timers_init(&w, start, &t, 1);

		add_timer(&w, &t, start + 50);
		cr_assert_eq(tw__wheel_next_expiry(&w), start + 50);
		assert_wheel_valid(&w);

		expect_no_expiry(&w, start + 49);
		cr_assert(wheel_entry_pending(&t.entry));
		cr_assert_eq(tw__wheel_next_expiry(&w), start + 50);

		expect_expiry(&w, start + 50, &t, start + 50);
		cr_assert_eq(wheel_entry_due(&t.entry), start + 50,
			     "the due tick stays readable once handed out");
		expect_no_expiry(&w, start + 50);
		cr_assert_eq(wheel_count(&w), 0);
		cr_assert_eq(tw__wheel_next_expiry(&w), UINT64_MAX);
		assert_wheel_valid(&w);
	}
}

Test(wheel, entry_due_now_comes_out_at_next_tick)
{
	for (size_t i = 0; i < N_STARTS; i++) {
		uint64_t start = interesting_starts[i];
		struct wheel w;
		struct timer t;
		wheel_and_timers_init(&w, start, &t, 1);

		add_timer(&w, &t, start);
		cr_assert_eq(wheel_entry_due(&t.entry), start + 1);
		cr_assert_eq(tw__wheel_next_expiry(&w), start + 1);
		/* advancing by zero ticks is not reaching the next tick */
		expect_no_expiry(&w, start);
		cr_assert(wheel_entry_pending(&t.entry));
		expect_expiry(&w, start + 1000, &t, start + 1);
		expect_no_expiry(&w, start + 1000);
		assert_wheel_valid(&w);
	}
}

Test(wheel, entries_due_in_the_past_come_out_at_next_tick_in_add_order)
{
	const uint64_t start = 100000;
	const uint64_t past[] = { 0, 1, start - 1, start - 64, start - 33000, start };
	enum { N = sizeof past / sizeof past[0] };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, start, t, N);

	for (size_t i = 0; i < N; i++)
		add_timer(&w, &t[i], past[i]);
	cr_assert_eq(tw__wheel_next_expiry(&w), start + 1);
	assert_wheel_valid(&w);
	expect_no_expiry(&w, start);
	for (size_t i = 0; i < N; i++)
		expect_expiry(&w, start + 5, &t[i], start + 1);
	expect_no_expiry(&w, start + 5);
}

Test(wheel, entry_due_zero_at_time_zero_is_due_at_tick_one)
{
	struct wheel w;
	struct timer t;
	wheel_and_timers_init(&w, 0, &t, 1);
	add_timer(&w, &t, 0);
	cr_assert_eq(wheel_entry_due(&t.entry), 1);
	expect_no_expiry(&w, 0);
	expect_expiry(&w, 1, &t, 1);
}

Test(wheel, target_in_the_past_does_not_move_time_back)
{
	struct wheel w;
	struct timer t;
	wheel_and_timers_init(&w, 5000, &t, 1);
	add_timer(&w, &t, 5001);

	expect_no_expiry(&w, 4999);
	expect_no_expiry(&w, 0);
	cr_assert_eq(wheel_now(&w), 5000);
	cr_assert(wheel_entry_pending(&t.entry));
	cr_assert_eq(tw__wheel_next_expiry(&w), 5001);

	/* a later add still counts from the unmoved current tick */
	struct timer u;
	timers_init(&u, 1);
	u.id = 1;
	add_timer(&w, &u, 4000);
	cr_assert_eq(wheel_entry_due(&u.entry), 5001);
	expect_expiry(&w, 5001, &t, 5001);
	expect_expiry(&w, 5001, &u, 5001);
	expect_no_expiry(&w, 3);
	cr_assert_eq(wheel_now(&w), 5001);
	assert_wheel_valid(&w);
}

Test(wheel, one_advance_hands_out_each_entry_at_its_own_tick)
{
	enum { N = 6 };
	const uint64_t due[N] = { 700, 10, 300, 10, 65, 299 };
	/* by due tick, then by add order for the two due at 10 */
	const unsigned order[N] = { 1, 3, 4, 5, 2, 0 };
	struct wheel w;
	struct timer t[N];
	struct handout got[N];
	wheel_and_timers_init(&w, 0, t, N);
	for (size_t i = 0; i < N; i++)
		add_timer(&w, &t[i], due[i]);
	cr_assert_eq(tw__wheel_next_expiry(&w), 10);

	cr_assert_eq(expire_all(&w, 100000, got, N), N);
	for (size_t i = 0; i < N; i++) {
		cr_assert_eq(got[i].id, order[i], "hand-out %zu is timer %u", i, got[i].id);
		cr_assert_eq(got[i].tick, due[order[i]]);
	}
	cr_assert_eq(wheel_count(&w), 0);
	assert_wheel_valid(&w);
}

Test(wheel, removed_entry_never_comes_out_and_can_be_added_again)
{
	struct wheel w;
	struct timer t;
	wheel_and_timers_init(&w, 12345, &t, 1);

	add_timer(&w, &t, 20000);
	remove_timer(&w, &t);
	cr_assert_eq(tw__wheel_next_expiry(&w), UINT64_MAX);
	assert_wheel_valid(&w);
	expect_no_expiry(&w, 30000);

	add_timer(&w, &t, 30010);
	cr_assert_eq(tw__wheel_next_expiry(&w), 30010);
	expect_no_expiry(&w, 30009);
	expect_expiry(&w, 40000, &t, 30010);
	assert_wheel_valid(&w);
}

Test(wheel, removing_from_a_tick_keeps_the_order_of_the_rest)
{
	enum { N = 7 };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 0, t, N);
	for (size_t i = 0; i < N; i++)
		add_timer(&w, &t[i], 40);

	/* the oldest, one in the middle, and the newest of the tick */
	remove_timer(&w, &t[0]);
	remove_timer(&w, &t[3]);
	remove_timer(&w, &t[6]);
	assert_wheel_valid(&w);
	cr_assert_eq(expect_drain_in_order(&w, 40, t, N), 4);
	cr_assert_eq(wheel_count(&w), 0);
}

Test(wheel, reschedule_moves_a_pending_entry_later_or_earlier)
{
	struct wheel w;
	struct timer t[2];
	wheel_and_timers_init(&w, 1000, t, 2);
	add_timer(&w, &t[0], 1500);
	add_timer(&w, &t[1], 1600);

	reschedule_timer(&w, &t[0], 1700); /* later */
	cr_assert_eq(tw__wheel_next_expiry(&w), 1600);
	reschedule_timer(&w, &t[1], 1200); /* earlier */
	cr_assert_eq(tw__wheel_next_expiry(&w), 1200);
	assert_wheel_valid(&w);

	expect_no_expiry(&w, 1199);
	expect_expiry(&w, 1699, &t[1], 1200);
	expect_no_expiry(&w, 1699);
	expect_expiry(&w, 5000, &t[0], 1700);
	expect_no_expiry(&w, 5000);
}

Test(wheel, reschedule_into_the_past_is_due_at_next_tick)
{
	struct wheel w;
	struct timer t[2];
	wheel_and_timers_init(&w, 1000, t, 2);
	add_timer(&w, &t[0], 1001);
	add_timer(&w, &t[1], 90000);

	reschedule_timer(&w, &t[1], 3);
	cr_assert_eq(wheel_entry_due(&t[1].entry), 1001);
	/* rescheduled last, so it follows the entry already due then */
	expect_expiry(&w, 2000, &t[0], 1001);
	expect_expiry(&w, 2000, &t[1], 1001);
	expect_no_expiry(&w, 100000);
}

Test(wheel, reschedule_to_the_same_tick_counts_as_last_added)
{
	enum { N = 4 };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 0, t, N);
	for (size_t i = 0; i < N; i++)
		add_timer(&w, &t[i], 3000);

	reschedule_timer(&w, &t[0], 3000);
	reschedule_timer(&w, &t[2], 3000);
	assert_wheel_valid(&w);
	/* expected order: 1, 3, 0, 2 */
	expect_expiry(&w, 3000, &t[1], 3000);
	expect_expiry(&w, 3000, &t[3], 3000);
	expect_expiry(&w, 3000, &t[0], 3000);
	expect_expiry(&w, 3000, &t[2], 3000);
	expect_no_expiry(&w, 3000);
}

Test(wheel, reschedule_of_an_entry_not_in_the_wheel_adds_it)
{
	struct wheel w;
	struct timer t;
	wheel_and_timers_init(&w, 0, &t, 1);

	reschedule_timer(&w, &t, 80); /* never added */
	cr_assert_eq(tw__wheel_next_expiry(&w), 80);
	expect_expiry(&w, 100, &t, 80);

	reschedule_timer(&w, &t, 150); /* handed out, so not pending */
	expect_no_expiry(&w, 149);
	expect_expiry(&w, 150, &t, 150);

	add_timer(&w, &t, 151); /* a plain add after a hand-out works too */
	remove_timer(&w, &t);
	reschedule_timer(&w, &t, 152); /* and after a remove */
	expect_expiry(&w, 200, &t, 152);
	assert_wheel_valid(&w);
}

Test(wheel, same_tick_entries_come_out_in_add_order)
{
	enum { N = 200 };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 777, t, N);
	/* add in a scrambled id order so that id order would be wrong */
	for (size_t i = 0; i < N; i++)
		add_timer(&w, &t[(i * 73) % N], 777 + 2500);
	assert_wheel_valid(&w);
	cr_assert_eq(expect_drain_in_order(&w, 777 + 2500, t, N), N);
}

enum { A, B, C };

/* A, B and C filed for tick 5000 from a wheel at 0: A from far (it cascades from a high
 * level), B and C close to the tick, in that order. */
static void file_a_b_c(struct wheel *w, struct timer *t)
{
	add_timer(w, &t[A], 5000);
	expect_no_expiry(w, 4990);
	add_timer(w, &t[B], 5000);
	expect_no_expiry(w, 4999);
	add_timer(w, &t[C], 5000);
}

/* The example of the brief: A cascades from a high level, B and C are filed
 * close to the tick, then A is refiled last. */
Test(wheel, same_tick_order_mixes_cascaded_and_directly_filed_entries)
{
	enum { N = 3 };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 0, t, N);

	file_a_b_c(&w, t);
	reschedule_timer(&w, &t[A], 5000);
	assert_wheel_valid(&w);

	expect_expiry(&w, 5000, &t[B], 5000);
	expect_expiry(&w, 5000, &t[C], 5000);
	expect_expiry(&w, 5000, &t[A], 5000);
	expect_no_expiry(&w, 5000);
}

Test(wheel, same_tick_order_without_refiling_keeps_first_add_first)
{
	enum { N = 3 };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 0, t, N);

	file_a_b_c(&w, t);
	expect_expiry(&w, 5000, &t[A], 5000);
	expect_expiry(&w, 5000, &t[B], 5000);
	expect_expiry(&w, 5000, &t[C], 5000);
}

Test(wheel, count_and_pending_follow_every_operation)
{
	enum { N = 5 };
	struct wheel w;
	struct timer t[N];
	wheel_and_timers_init(&w, 10, t, N);

	for (size_t i = 0; i < N; i++)
		add_timer(&w, &t[i], 20 + i);
	cr_assert_eq(wheel_count(&w), N);
	remove_timer(&w, &t[4]);
	reschedule_timer(&w, &t[0], 100);
	reschedule_timer(&w, &t[4], 24);
	cr_assert_eq(wheel_count(&w), N);

	expect_expiry(&w, 22, &t[1], 21);
	cr_assert_eq(wheel_count(&w), N - 1);
	for (size_t i = 0; i < N; i++)
		cr_assert_eq(wheel_entry_pending(&t[i].entry), i != 1, "timer %zu", i);
	expect_expiry(&w, 22, &t[2], 22);
	expect_no_expiry(&w, 22);
	cr_assert_eq(wheel_count(&w), N - 2);
	assert_next_expiry_bounds(&w, t, N);
	assert_wheel_valid(&w);
}

Test(wheel, next_expiry_of_a_single_entry_is_its_due_tick)
{
	struct wheel w;
	struct timer t[2];
	wheel_and_timers_init(&w, 12345, t, 2);

	add_timer(&w, &t[0], 12345 + 70000);
	const uint64_t stops[] = { 12346, 20000, 12345 + 65536, 12345 + 69999 };
	for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
		expect_no_expiry(&w, stops[i]);
		cr_assert_eq(tw__wheel_next_expiry(&w), 12345 + 70000, "at tick %" PRIu64,
			     stops[i]);
	}

	/* back to one entry after removing the earlier of two */
	add_timer(&w, &t[1], 12345 + 69999 + 5);
	remove_timer(&w, &t[1]);
	cr_assert_eq(tw__wheel_next_expiry(&w), 12345 + 70000);
	/* and after the earlier of two was handed out */
	add_timer(&w, &t[1], 12345 + 69999 + 300000);
	expect_expiry(&w, UINT64_C(1) << 30, &t[0], 12345 + 70000);
	cr_assert_eq(tw__wheel_next_expiry(&w), 12345 + 69999 + 300000);
}

/* A tiny deterministic generator for the tests that want scattered values. */
static uint64_t lcg_next(uint64_t *state)
{
	*state = *state * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
	return *state >> 17;
}

Test(wheel, next_expiry_stays_between_now_and_the_earliest_due)
{
	enum { N = 600 };
	struct wheel w;
	static struct timer t[N];
	uint64_t state = 42;
	const uint64_t scales[] = { 70, 2000, 3600000, 200000000 };
	wheel_and_timers_init(&w, 987654, t, N);

	for (unsigned round = 0; round < 300; round++) {
		for (unsigned k = 0; k < 20; k++) {
			struct timer *x = &t[lcg_next(&state) % N];
			uint64_t due = wheel_now(&w) + lcg_next(&state) % scales[k % 4];
			if (!wheel_entry_pending(&x->entry))
				add_timer(&w, x, due);
			else if (k % 3 == 0)
				remove_timer(&w, x);
			else
				reschedule_timer(&w, x, due);
		}
		assert_next_expiry_bounds(&w, t, N);
		uint64_t step = lcg_next(&state) % (round % 10 == 9 ? 5000000 : 3000);
		expect_drain_in_order(&w, wheel_now(&w) + step, t, N);
		assert_next_expiry_bounds(&w, t, N);
	}
	assert_wheel_valid(&w);
}

Test(wheel, stepping_one_tick_at_a_time_hands_out_each_entry_at_its_tick)
{
	enum { N = 400, HORIZON = 5000 };
	struct wheel w;
	static struct timer t[N];
	uint64_t state = 7;
	size_t handed_out = 0;
	wheel_and_timers_init(&w, 0, t, N);
	for (size_t i = 0; i < N; i++)
		add_timer(&w, &t[i], 1 + lcg_next(&state) % HORIZON);
	assert_wheel_valid(&w);

	for (uint64_t tick = 1; tick <= HORIZON; tick++) {
		handed_out += expect_drain_in_order(&w, tick, t, N);
		if (tick % 997 == 0)
			assert_wheel_valid(&w);
	}
	cr_assert_eq(handed_out, N);
	cr_assert_eq(wheel_count(&w), 0);
}

Test(wheel, look_ahead_gives_a_ticks_entries_in_order_and_nothing_else)
{
	for (size_t i = 0; i < N_STARTS; i++) {
		uint64_t start = interesting_starts[i];
		struct wheel w;
		struct timer t[4];
		wheel_and_timers_init(&w, start, t, 4);
		add_timer(&w, &t[0], start + 200);
		add_timer(&w, &t[1], start + 200);
		add_timer(&w, &t[2], start + 201);
		add_timer(&w, &t[3], start + 10000); /* beyond level 0: not there yet */
		cr_assert_eq(wheel_first_at(&w, start + 200), &t[0].entry);
		cr_assert_eq(wheel_next_at(wheel_first_at(&w, start + 200)), &t[1].entry);
		cr_assert_null(wheel_next_at(&t[1].entry));
		cr_assert_eq(wheel_first_at(&w, start + 201), &t[2].entry);
		cr_assert_null(wheel_first_at(&w, start + 199));
		cr_assert_null(wheel_first_at(&w, start + 10000));
		cr_assert_null(wheel_first_at(&w, start), "not the current tick");
		tw__wheel_remove(&w, &t[0].entry);
		cr_assert_eq(wheel_first_at(&w, start + 200), &t[1].entry);
		expect_no_expiry(&w, start + 199);
		cr_assert_eq(wheel_first_at(&w, start + 200), &t[1].entry, "nothing moved it");
		assert_wheel_valid(&w);
	}
}
