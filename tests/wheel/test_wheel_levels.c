/*
 * test_wheel_levels.c - exactness across the wheel's levels: due ticks on
 * and around every level boundary, from aligned and unaligned starting
 * times, huge due times, far advances, crowded slots, and same-tick order
 * between entries filed at different levels.
 */
#include "wheel_test_support.h"

#define POW2(n) (UINT64_C(1) << (n))

static const uint64_t level_starts[] = {
	0, 12345, POW2(33) + 77,
	POW2(60) + 12345, /* far from zero, well below the 2^64 - 2^42 limit */
};

#define N_LEVEL_STARTS (sizeof level_starts / sizeof level_starts[0])

enum { MAX_BOUNDARY_DUES = 160 };

/* width of one slot of level k: 1, 2^11, 2^19, 2^27, 2^35 ticks; level k - 1
 * spans two of them */
static uint64_t level_width(unsigned k)
{
	return POW2(WHEEL_LEVEL_SHIFT(k));
}

/* Due ticks on both sides of every level boundary, as delays from start and
 * as absolute ticks aligned to each level (they differ when start is not
 * aligned). Returns how many were written. */
static size_t boundary_dues(uint64_t start, uint64_t *out)
{
	size_t n = 0;
	out[n++] = start + 1;
	out[n++] = start + 2;
	for (unsigned k = 1; k < WHEEL_LEVELS; k++) {
		uint64_t p = level_width(k);
		const uint64_t delays[] = { p - 1, p, p + 1, 2 * p - 1, 2 * p, 2 * p + 1 };
		for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++)
			out[n++] = start + delays[i];
	}
	const uint64_t far_delays[] = { POW2(40),     POW2(41) - 1, POW2(41),    POW2(41) + 1,
					POW2(42) - 1, POW2(42),     POW2(42) + 1 };
	for (size_t i = 0; i < sizeof far_delays / sizeof far_delays[0]; i++)
		out[n++] = start + far_delays[i];

	/* a word of level 0's bitmap (2^6), slot widths and level spans, the
	 * wheel's span (2^41) and beyond */
	const unsigned alignments[] = { 6, 11, 12, 19, 20, 27, 28, 35, 36, 40, 41, 42 };
	for (size_t a = 0; a < sizeof alignments / sizeof alignments[0]; a++) {
		uint64_t p = POW2(alignments[a]);
		uint64_t aligned = (start / p + 1) * p; /* first multiple after start */
		const uint64_t around[] = { aligned - 1, aligned, aligned + 1, aligned + p - 1,
					    aligned + p };
		for (size_t i = 0; i < sizeof around / sizeof around[0]; i++) {
			if (around[i] > start)
				out[n++] = around[i];
		}
	}
	cr_assert_leq(n, MAX_BOUNDARY_DUES, "test bug: boundary list overflow");
	return n;
}

Test(wheel_levels, single_entry_at_each_boundary_comes_out_exactly)
{
	for (size_t s = 0; s < N_LEVEL_STARTS; s++) {
		uint64_t start = level_starts[s];
		uint64_t dues[MAX_BOUNDARY_DUES];
		size_t n = boundary_dues(start, dues);
		for (size_t i = 0; i < n; i++) {
			uint64_t due = dues[i];
			struct wheel w;
			struct timer t;
			wheel_and_timers_init(&w, start, &t, 1);

			add_timer(&w, &t, due);
			cr_assert_eq(tw__wheel_next_expiry(&w), due,
				     "start %" PRIu64 " due %" PRIu64 ": next expiry %" PRIu64,
				     start, due, tw__wheel_next_expiry(&w));
			assert_wheel_valid(&w);

			/* one jump to just before: nothing yet */
			expect_no_expiry(&w, due - 1);
			cr_assert(wheel_entry_pending(&t.entry));
			cr_assert_eq(tw__wheel_next_expiry(&w), due,
				     "start %" PRIu64 " due %" PRIu64 ": next expiry %" PRIu64
				     " at the tick before",
				     start, due, tw__wheel_next_expiry(&w));
			assert_wheel_valid(&w);

			expect_expiry(&w, due, &t, due);
			expect_no_expiry(&w, due);
			cr_assert_eq(tw__wheel_next_expiry(&w), UINT64_MAX);
			assert_wheel_valid(&w);
		}
	}
}

Test(wheel_levels, single_entry_approached_in_shrinking_steps_comes_out_exactly)
{
	for (size_t s = 0; s < N_LEVEL_STARTS; s++) {
		uint64_t start = level_starts[s];
		uint64_t dues[MAX_BOUNDARY_DUES];
		size_t n = boundary_dues(start, dues);
		for (size_t i = 0; i < n; i++) {
			uint64_t due = dues[i];
			struct wheel w;
			struct timer t;
			wheel_and_timers_init(&w, start, &t, 1);
			add_timer(&w, &t, due);

			/* halve the distance while it is long, then go tick by
			 * tick: every cascade point on the way gets crossed */
			while (due - wheel_now(&w) > 70) {
				expect_no_expiry(&w, wheel_now(&w) + (due - wheel_now(&w)) / 2);
				cr_assert_eq(tw__wheel_next_expiry(&w), due,
					     "due %" PRIu64 ": next expiry %" PRIu64
					     " at tick %" PRIu64,
					     due, tw__wheel_next_expiry(&w), wheel_now(&w));
			}
			while (wheel_now(&w) + 1 < due) {
				expect_no_expiry(&w, wheel_now(&w) + 1);
				cr_assert_eq(tw__wheel_next_expiry(&w), due);
			}
			assert_wheel_valid(&w);
			expect_expiry(&w, due, &t, due);
			cr_assert_eq(wheel_count(&w), 0);
		}
	}
}

/* Drives the wheel the way an event loop would: sleep until next expiry,
 * then expire to it. Checks order and exactness, and that it makes progress. */
static void drain_like_an_event_loop(struct wheel *w, struct timer *timers, size_t n)
{
	size_t wakeups = 0;
	while (wheel_count(w) > 0) {
		uint64_t next = tw__wheel_next_expiry(w);
		assert_next_expiry_bounds(w, timers, n);
		cr_assert_lt(wakeups++, 1000 + 100 * n,
			     "no progress: next expiry %" PRIu64 " at tick %" PRIu64, next,
			     wheel_now(w));
		expect_drain_in_order(w, next, timers, n);
	}
	cr_assert_eq(tw__wheel_next_expiry(w), UINT64_MAX);
}

Test(wheel_levels, all_boundary_entries_in_one_wheel_come_out_in_order)
{
	for (size_t s = 0; s < N_LEVEL_STARTS; s++) {
		uint64_t start = level_starts[s];
		uint64_t dues[MAX_BOUNDARY_DUES];
		struct timer t[MAX_BOUNDARY_DUES];
		size_t n = boundary_dues(start, dues);
		uint64_t last_due = 0;

		/* in one advance */
		struct wheel w;
		wheel_and_timers_init(&w, start, t, n);
		for (size_t i = 0; i < n; i++) {
			add_timer(&w, &t[i], dues[i]);
			last_due = max_u64(last_due, dues[i]);
		}
		assert_wheel_valid(&w);
		cr_assert_eq(expect_drain_in_order(&w, last_due, t, n), n);

		/* and waking up only when the wheel says so */
		wheel_and_timers_init(&w, start, t, n);
		for (size_t i = 0; i < n; i++)
			add_timer(&w, &t[n - 1 - i], dues[i]);
		drain_like_an_event_loop(&w, t, n);
		assert_wheel_valid(&w);
	}
}

Test(wheel_levels, huge_due_times_never_fire_while_advancing_far, .timeout = 30)
{
	const uint64_t jumps[] = { POW2(20),         POW2(30) + 7, POW2(36),
				   POW2(40) + 12345, POW2(41) + 5, POW2(42) };

	for (size_t s = 0; s < N_LEVEL_STARTS; s++) {
		uint64_t start = level_starts[s];
		const uint64_t huge[] = { UINT64_MAX,           UINT64_MAX - 1,        POW2(63),
					  POW2(63) + 1,         UINT64_MAX - POW2(42), POW2(62) + 3,
					  start + POW2(42) + 1, start + POW2(50) };
		enum { N = sizeof huge / sizeof huge[0] };
		struct wheel w;
		struct timer t[N];
		wheel_and_timers_init(&w, start, t, N);
		for (size_t i = 0; i < N; i++)
			add_timer(&w, &t[i], huge[i]);
		for (size_t j = 0; j < sizeof jumps / sizeof jumps[0]; j++) {
			expect_no_expiry(&w, start + jumps[j]);
			assert_next_expiry_bounds(&w, t, N);
			assert_wheel_valid(&w);
		}
		for (size_t i = 0; i < N; i++)
			cr_assert(wheel_entry_pending(&t[i].entry), "timer %zu", i);
		cr_assert_eq(wheel_count(&w), N);
	}
}

/* wheel.h allows time up to 2^64 - 2^42: window arithmetic near the top of
 * the range must not overflow. */
Test(wheel_levels, time_close_to_its_limit_stays_exact, .timeout = 30)
{
	const uint64_t limit = UINT64_MAX - POW2(42) + 1; /* 2^64 - 2^42 */
	const uint64_t start = limit - POW2(41) - 12345;
	uint64_t dues[MAX_BOUNDARY_DUES + 4];
	struct timer t[MAX_BOUNDARY_DUES + 4];
	uint64_t candidates[MAX_BOUNDARY_DUES];
	size_t n_candidates = boundary_dues(start, candidates);
	size_t n = 0;
	for (size_t i = 0; i < n_candidates; i++) {
		if (candidates[i] < limit)
			dues[n++] = candidates[i];
	}
	/* beyond where time may go: they must simply stay */
	dues[n++] = limit;
	dues[n++] = limit + 1;
	dues[n++] = UINT64_MAX - 1;
	dues[n++] = UINT64_MAX;

	struct wheel w;
	wheel_and_timers_init(&w, start, t, n);
	for (size_t i = 0; i < n; i++)
		add_timer(&w, &t[i], dues[i]);
	assert_wheel_valid(&w);
	expect_drain_in_order(&w, start + POW2(40), t, n);
	assert_next_expiry_bounds(&w, t, n);
	expect_drain_in_order(&w, limit - 1, t, n);
	assert_wheel_valid(&w);
	cr_assert_eq(wheel_count(&w), 4);
	assert_next_expiry_bounds(&w, t, n);
}

Test(wheel_levels, single_huge_entry_keeps_exact_next_expiry, .timeout = 30)
{
	const uint64_t huge[] = { UINT64_MAX, POW2(63), UINT64_MAX - POW2(42), POW2(45) + 3 };
	for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
		struct wheel w;
		struct timer t;
		wheel_and_timers_init(&w, 12345, &t, 1);
		add_timer(&w, &t, huge[i]);
		for (unsigned j = 1; j <= 4; j++) {
			cr_assert_eq(tw__wheel_next_expiry(&w), huge[i],
				     "due %" PRIu64 ": next expiry %" PRIu64 " at %" PRIu64,
				     huge[i], tw__wheel_next_expiry(&w), wheel_now(&w));
			expect_no_expiry(&w, 12345 + j * POW2(40) + j);
		}
		cr_assert_eq(tw__wheel_next_expiry(&w), huge[i]);
	}
}

Test(wheel_levels, far_advance_costs_occupied_slots_not_ticks, .timeout = 30)
{
	enum { N = 4000 };
	static struct timer t[N];
	struct wheel w;
	uint64_t x = 99;
	wheel_and_timers_init(&w, 5, t, N);

	/* log-uniform dues up to 2^44, a quarter of them beyond any advance */
	for (size_t i = 0; i < N; i++) {
		x = x * UINT64_C(6364136223846793005) + 1;
		unsigned bits = (unsigned)(x >> 58) % 45;
		uint64_t due = 5 + POW2(bits) + ((x >> 13) & (POW2(bits) - 1));
		if (i % 4 == 0)
			due = UINT64_MAX - i;
		add_timer(&w, &t[i], due);
	}
	assert_wheel_valid(&w);

	const uint64_t targets[] = { POW2(20), POW2(30) + 3, POW2(36), POW2(42) };
	size_t handed_out = 0;
	for (size_t j = 0; j < sizeof targets / sizeof targets[0]; j++) {
		handed_out += expect_drain_in_order(&w, targets[j], t, N);
		assert_next_expiry_bounds(&w, t, N);
		assert_wheel_valid(&w);
	}
	cr_assert_gt(handed_out, N / 2, "test bug: too few dues in range");
	/* thousands of single huge jumps, each crossing the whole wheel */
	for (unsigned j = 1; j <= 2000; j++)
		expect_drain_in_order(&w, POW2(42) + j * POW2(32), t, N);
	size_t still_due = 0;
	for (size_t i = 0; i < N; i++)
		still_due += t[i].expected_due > wheel_now(&w);
	cr_assert_eq(wheel_count(&w), still_due);
	cr_assert_geq(still_due, N / 4);
}

/* Many entries in one slot of level k, spread over a few ticks of it. */
static size_t fill_crowded_slot(struct wheel *w, struct timer *t, size_t n, uint64_t window,
				uint64_t width)
{
	for (size_t i = 0; i < n; i++)
		add_timer(w, &t[i], window + (i % 8) * (width / 8));
	return n;
}

Test(wheel_levels, crowded_slot_comes_out_in_order_however_it_is_approached)
{
	enum { N = 4000 };
	static struct timer t[N];
	for (unsigned k = 1; k <= 3; k++) {
		uint64_t width = level_width(k);
		uint64_t window = 40 * width;
		uint64_t window_end = window + width - 1;
		struct wheel w;

		/* one jump */
		wheel_and_timers_init(&w, 0, t, N);
		fill_crowded_slot(&w, t, N, window, width);
		cr_assert_eq(expect_drain_in_order(&w, window_end, t, N), N);

		/* event-loop wake-ups */
		wheel_and_timers_init(&w, 0, t, N);
		fill_crowded_slot(&w, t, N, window, width);
		drain_like_an_event_loop(&w, t, N);

		/* tick by tick (in strides on level 3, whose windows are 2^27
		 * ticks) through the two windows before it and its own */
		uint64_t stride = width > POW2(20) ? width / 4096 + 3 : 1;
		wheel_and_timers_init(&w, 0, t, N);
		fill_crowded_slot(&w, t, N, window, width);
		expect_no_expiry(&w, window - 2 * width - 1);
		uint64_t tick = window - 2 * width;
		size_t handed_out = 0;
		for (uint64_t j = 0; j <= 8; j++) {
			/* the crowd's eight due ticks, then the window's end */
			uint64_t stop = j < 8 ? window + j * (width / 8) : window_end + 1;
			for (; tick < stop; tick = tick + stride < stop ? tick + stride : stop)
				expect_no_expiry(&w, tick);
			if (j == 0)
				assert_wheel_valid(&w);
			if (j < 8)
				handed_out += expect_drain_in_order(&w, stop, t, N);
			tick = stop + 1;
		}
		cr_assert_eq(handed_out, N);
	}
}

/*
 * While a crowded slot is being cascaded down ahead of its window, new
 * entries for the same ticks arrive, old ones are refiled or removed. The
 * hand-out order must still follow the filing order within each tick.
 */
Test(wheel_levels, crowded_slot_takes_changes_while_it_cascades)
{
	enum { CROWD = 3000, EXTRA = 3000, N = CROWD + EXTRA };
	static struct timer t[N];
	for (unsigned k = 1; k <= 3; k++) {
		uint64_t width = level_width(k);
		uint64_t window = 40 * width;
		uint64_t x = k;
		size_t next_extra = CROWD;
		struct wheel w;
		wheel_and_timers_init(&w, 0, t, N);
		fill_crowded_slot(&w, t, CROWD, window, width);

		/* visit about 1500 ticks spread over the last two windows
		 * before the crowded one, changing the wheel at each */
		uint64_t first = window - 2 * width;
		uint64_t stride = width >= 1024 ? (2 * width) / 1500 : 1;
		for (uint64_t tick = first; tick < window; tick += stride) {
			expect_no_expiry(&w, tick);
			x = x * UINT64_C(6364136223846793005) + 1;
			uint64_t due = window + ((x >> 20) % 8) * (width / 8);
			if (next_extra < N && (x >> 40) % 2 == 0)
				add_timer(&w, &t[next_extra++], due);
			struct timer *old = &t[(x >> 33) % CROWD];
			if ((x >> 50) % 5 == 0 && wheel_entry_pending(&old->entry))
				remove_timer(&w, old);
			else
				reschedule_timer(&w, old, due);
			assert_next_expiry_bounds(&w, t, N);
		}
		assert_wheel_valid(&w);
		expect_drain_in_order(&w, window + width - 1, t, N);
		cr_assert_eq(wheel_count(&w), 0);
	}
}

/*
 * Entries due at one tick T but filed at very different times land in
 * different levels and cascade down at different moments; they must still
 * come out in filing order.
 */
static void file_at_every_level_then_drain(uint64_t start, bool follow_wakeups)
{
	enum { N = 2 * WHEEL_LEVELS + 2 };
	struct wheel w;
	struct timer t[N];
	const uint64_t target = start + 3 * level_width(WHEEL_LEVELS - 1) + 12345;
	size_t n = 0;
	wheel_and_timers_init(&w, start, t, N);

	for (int k = WHEEL_LEVELS - 1; k >= 0; k--) {
		uint64_t stop = target - 2 * level_width((unsigned)k) - (uint64_t)k;
		for (unsigned wakeups = 0; follow_wakeups && tw__wheel_next_expiry(&w) < stop;
		     wakeups++) {
			uint64_t next = tw__wheel_next_expiry(&w);
			cr_assert_lt(wakeups, 10000, "no progress at tick %" PRIu64, next);
			cr_assert_geq(next, wheel_now(&w));
			expect_no_expiry(&w, next);
		}
		expect_no_expiry(&w, stop);
		/* one due at T, one just after it, so T is not alone */
		add_timer(&w, &t[n++], target);
		add_timer(&w, &t[n++], target + 1 + (uint64_t)(k % 2));
	}
	expect_no_expiry(&w, target - 1);
	add_timer(&w, &t[n++], target);
	reschedule_timer(&w, &t[0], target); /* the oldest becomes the newest */
	add_timer(&w, &t[n++], target);
	assert_wheel_valid(&w);
	cr_assert_eq(expect_drain_in_order(&w, target + 2, t, n), n);
}

/*
 * Entries due beyond the wheel's span (2^41 ticks ahead) wait in the top
 * level and are re-filed as time comes closer; a crowded group of them is
 * re-filed a batch at a time. Entries filed for the same tick meanwhile must
 * still come out in filing order.
 */
Test(wheel_levels, same_tick_order_holds_beyond_the_span)
{
	enum { CROWD = 200, STOPS = 1100, N = CROWD + STOPS };
	static struct timer t[N];
	for (size_t s = 0; s < N_LEVEL_STARTS; s++) {
		const uint64_t start = level_starts[s];
		const uint64_t due = start + POW2(42) + 5;
		const uint64_t stride = POW2(32) + 12345;
		size_t n = 0;
		struct wheel w;
		wheel_and_timers_init(&w, start, t, N);
		while (n < CROWD)
			add_timer(&w, &t[n++], due);

		for (uint64_t stop = start + stride; stop < due; stop += stride) {
			expect_no_expiry(&w, stop);
			cr_assert_lt(n, N, "test bug: more stops than timers");
			add_timer(&w, &t[n], due);
			/* and one of the crowd becomes the newest */
			reschedule_timer(&w, &t[(n * 7) % CROWD], due);
			n++;
			assert_next_expiry_bounds(&w, t, n);
		}
		assert_wheel_valid(&w);
		cr_assert_eq(expect_drain_in_order(&w, due, t, n), n);
	}
}

Test(wheel_levels, same_tick_order_holds_across_levels)
{
	for (size_t s = 0; s < N_LEVEL_STARTS; s++) {
		file_at_every_level_then_drain(level_starts[s], false);
		file_at_every_level_then_drain(level_starts[s], true);
	}
}
