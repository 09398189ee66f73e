/*
 * test_engine_timing.c - when tasks fire.
 *
 * On the manual clock: a task added at manual time T with delay d fires at
 * the tw_advance() that reaches T + d, never before; a periodic task's next
 * due is its previous due plus its period, exactly, for thousands of periods;
 * after a jump the missed periods are counted, the task runs once and stays
 * on its phase. On the real clock only what holds on a slow, noisy machine is
 * asserted: no run before its due, and runs that eventually happen.
 */
#include "engine_test_support.h"

/* Dues of task k at or before now, for a first due and a period. */
static uint64_t dues_until(uint64_t now, uint64_t first, uint64_t period)
{
	if (now < first)
		return 0;
	return period ? (now - first) / period + 1 : 1;
}

Test(timing, one_shot_fires_at_the_advance_that_reaches_its_due)
{
	const uint64_t delays[] = { 1, 2, 31, 32, 33, 100, 1023, 1024, 1025, 40000 };
	for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++) {
		tw_engine *e = manual_engine(1);
		struct recorder *r = recorder_new(e);
		uint64_t t0 = manual_now(e);
		tw_id id = add_recorded(e, r, delays[i], 0, 0);
		if (delays[i] > 1)
			step(e, delays[i] - 1);
		cr_assert_eq(atomic_load(&r->runs), 0, "delay %" PRIu64 ": ran before its due",
			     delays[i]);
		step(e, 1);
		cr_assert_eq(atomic_load(&r->runs), 1, "delay %" PRIu64 ": did not run at its due",
			     delays[i]);
		cr_assert_eq(r->due[0], t0 + delays[i] * NS_PER_MS);
		cr_assert_eq(r->skipped[0], 0);
		cr_assert_eq(info_of(e, id).state, TW_COMPLETED);
		step(e, 2 * delays[i]);
		cr_assert_eq(atomic_load(&r->runs), 1);
		tw_engine_destroy(e);
		assert_recorder_sane(r);
		recorder_free(r);
	}
	assert_no_leaks();
}

/* Tasks added at different manual times, checked at every 1 ms step. */
Test(timing, tasks_added_later_count_their_delay_from_then)
{
	enum { N = 40 };
	tw_engine *e = manual_engine(2);
	struct recorder *r[N];
	uint64_t due[N];
	uint64_t t0 = manual_now(e), now = t0;
	for (int i = 0; i < N; i++) {
		r[i] = recorder_new(e);
		uint64_t delay = (uint64_t)(i * 7 % 23) + 1;
		add_recorded(e, r[i], delay, 0, 0);
		due[i] = now + delay * NS_PER_MS;
		step(e, (uint64_t)(i % 3));
		now += (uint64_t)(i % 3) * NS_PER_MS;
	}
	for (int t = 0; t < 40; t++) {
		for (int i = 0; i < N; i++)
			cr_assert_eq(atomic_load(&r[i]->runs), now >= due[i] ? 1 : 0,
				     "task %d at t0 + %" PRIu64 " ms (due t0 + %" PRIu64 ")", i,
				     (now - t0) / NS_PER_MS, (due[i] - t0) / NS_PER_MS);
		step(e, 1);
		now += NS_PER_MS;
	}
	for (int i = 0; i < N; i++) {
		cr_assert_eq(r[i]->due[0], due[i]);
		cr_assert_eq(r[i]->skipped[0], 0);
	}
	tw_engine_destroy(e);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(atomic_load(&r[i]->releases), 1);
		assert_recorder_sane(r[i]);
		recorder_free(r[i]);
	}
	assert_no_leaks();
}

/* A delay of 0 is due at once: it runs at the next advance, due = now. */
Test(timing, zero_delay_runs_at_the_next_advance)
{
	struct one_task fx = one_task_begin(1);
	add_recorded(fx.e, fx.r, 0, 0, 0);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(fx.r->due[0], fx.t0);
	destroy_checking_recorder(fx.e, fx.r);
}

/* 1 ms steps over 2000 periods of 7 ms: the run count is checked after every
 * step (never before the due, always at it) and every due exactly. */
Test(timing, periodic_dues_are_exact_over_thousands_of_periods_in_1ms_steps)
{
	enum { PERIOD = 7, DELAY = 3, PERIODS = 2000 };
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, DELAY, PERIOD, 0);
	const uint64_t first = fx.t0 + DELAY * NS_PER_MS;
	uint64_t now = fx.t0;
	for (uint64_t ms = 1; ms <= DELAY + (PERIODS - 1) * PERIOD; ms++) {
		step(fx.e, 1);
		now += NS_PER_MS;
		uint64_t want = dues_until(now, first, PERIOD * NS_PER_MS);
		uint64_t runs = atomic_load(&fx.r->runs);
		if (runs != want)
			cr_assert_fail("at t0 + %" PRIu64 " ms: %" PRIu64 " runs, wanted %" PRIu64,
				       ms, runs, want);
	}
	cr_assert_eq(atomic_load(&fx.r->runs), PERIODS);
	for (uint64_t k = 0; k < PERIODS; k++) {
		if (fx.r->due[k] != first + k * PERIOD * NS_PER_MS)
			cr_assert_fail("run %" PRIu64 ": due t0 + %" PRIu64
				       " ns, wanted t0 + %" PRIu64 " ms",
				       k + 1, fx.r->due[k] - fx.t0, DELAY + k * PERIOD);
		cr_assert_eq(fx.r->skipped[k], 0);
	}
	tw_task_info info = info_of(fx.e, id);
	cr_assert_eq(info.runs, PERIODS);
	cr_assert_eq(info_skips(&info), 0);
	cr_assert_eq(info.next_due_ns, first + PERIODS * PERIOD * NS_PER_MS);
	destroy_checking_recorder(fx.e, fx.r);
}

/* Steps of one whole period, 5000 times: no drift accumulates. */
Test(timing, periodic_dues_are_exact_over_thousands_of_whole_period_steps)
{
	enum { PERIOD = 250, PERIODS = 5000 };
	struct one_task fx = one_task_begin(1);
	add_recorded(fx.e, fx.r, PERIOD, PERIOD, 0);
	for (int k = 1; k <= PERIODS; k++) {
		step(fx.e, PERIOD);
		if (atomic_load(&fx.r->runs) != (uint64_t)k)
			cr_assert_fail("after %d periods: %" PRIu64 " runs", k,
				       atomic_load(&fx.r->runs));
	}
	for (uint64_t k = 0; k < PERIODS; k++) {
		if (fx.r->due[k] != fx.t0 + (k + 1) * PERIOD * NS_PER_MS)
			cr_assert_fail(
				"run %" PRIu64 ": due off by %" PRId64 " ns", k + 1,
				(int64_t)(fx.r->due[k] - fx.t0 - (k + 1) * PERIOD * NS_PER_MS));
		cr_assert_eq(fx.r->skipped[k], 0);
	}
	destroy_checking_recorder(fx.e, fx.r);
}

/* Steps shorter than the period but of random length (so dues fall inside
 * steps, not on their ends): each run stands for its ideal due, not for the
 * step at which it came out, and no period is counted as missed. */
Test(timing, periodic_dues_stay_ideal_with_uneven_steps)
{
	enum { PERIOD = 10, PERIODS = 3000 };
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 4, PERIOD, 0);
	const uint64_t first = fx.t0 + 4 * NS_PER_MS;
	uint64_t now = fx.t0;
	unsigned seed = 12345;
	while (atomic_load(&fx.r->runs) < PERIODS) {
		uint64_t ms = (uint64_t)(rand_r(&seed) % (PERIOD - 1)) + 1; /* 1 .. 9 */
		step(fx.e, ms);
		now += ms * NS_PER_MS;
		uint64_t want = dues_until(now, first, PERIOD * NS_PER_MS);
		if (atomic_load(&fx.r->runs) != want)
			cr_assert_fail("at t0 + %" PRIu64 " ms: %" PRIu64 " runs, wanted %" PRIu64,
				       (now - fx.t0) / NS_PER_MS, atomic_load(&fx.r->runs), want);
	}
	for (uint64_t k = 0; k < PERIODS; k++)
		if (fx.r->due[k] != first + k * PERIOD * NS_PER_MS)
			cr_assert_fail("run %" PRIu64 ": wrong due", k + 1);
	tw_task_info info = info_of(fx.e, id);
	cr_assert_eq(info_skips(&info), 0);
	destroy_checking_recorder(fx.e, fx.r);
}

/* Many periodic tasks of different periods and phases at once, 1 ms steps. */
Test(timing, many_periodic_tasks_keep_their_own_phases)
{
	enum { N = 48, MS = 3000 };
	tw_engine *e = manual_engine(2);
	struct recorder *r[N];
	uint64_t first[N], period[N];
	uint64_t t0 = manual_now(e);
	for (int i = 0; i < N; i++) {
		r[i] = recorder_new(e);
		period[i] = (uint64_t)(i % 16) + 1 + (i >= 32 ? 97 : 0);
		uint64_t delay = (uint64_t)(i * 5 % 13) + 1;
		add_recorded(e, r[i], delay, period[i], 0);
		first[i] = t0 + delay * NS_PER_MS;
	}
	uint64_t now = t0;
	for (int ms = 1; ms <= MS; ms++) {
		step(e, 1);
		now += NS_PER_MS;
		for (int i = 0; i < N; i++) {
			uint64_t want = dues_until(now, first[i], period[i] * NS_PER_MS);
			if (atomic_load(&r[i]->runs) != want)
				cr_assert_fail("task %d at t0 + %d ms: %" PRIu64
					       " runs, wanted %" PRIu64,
					       i, ms, atomic_load(&r[i]->runs), want);
		}
	}
	for (int i = 0; i < N; i++) {
		uint64_t runs = atomic_load(&r[i]->runs);
		for (uint64_t k = 0; k < runs && k < MAX_RECORDED; k++)
			if (r[i]->due[k] != first[i] + k * period[i] * NS_PER_MS)
				cr_assert_fail("task %d run %" PRIu64 ": wrong due", i, k + 1);
	}
	tw_engine_stats s = stats_of(e);
	uint64_t total = 0;
	for (int i = 0; i < N; i++)
		total += atomic_load(&r[i]->runs);
	cr_assert_eq(s.runs, total);
	cr_assert_eq(s.skipped_missed + s.skipped_overlap + s.skipped_overload, 0);
	tw_engine_destroy(e);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(atomic_load(&r[i]->releases), 1);
		assert_recorder_sane(r[i]);
		recorder_free(r[i]);
	}
	assert_no_leaks();
}

/* ---- missed periods ---- */

/* A jump over 99 whole periods: they are counted as missed, the task runs
 * once for its latest due, and then continues on its phase. */
Test(timing, large_advance_counts_missed_periods_and_runs_once)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 10, 0);
	step(fx.e, 10);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	step(fx.e, 1000); /* t0 + 1010: dues t0 + 20 .. t0 + 1010 */
	cr_assert_eq(atomic_load(&fx.r->runs), 2, "a jump must not fire a burst");
	cr_assert_eq(fx.r->due[1], fx.t0 + 1010 * NS_PER_MS);
	cr_assert_eq(fx.r->skipped[1], 99);
	tw_task_info info = info_of(fx.e, id);
	cr_assert_eq(info.skipped_missed, 99);
	cr_assert_eq(info.skipped_overlap, 0);
	cr_assert_eq(info.skipped_overload, 0);
	cr_assert_eq(info.next_due_ns, fx.t0 + 1020 * NS_PER_MS);
	step(fx.e, 9);
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 3);
	cr_assert_eq(fx.r->due[2], fx.t0 + 1020 * NS_PER_MS);
	cr_assert_eq(fx.r->skipped[2], 0);
	/* Due firings = runs + skips: 102 dues from t0 + 10 to t0 + 1020. */
	info = info_of(fx.e, id);
	cr_assert_eq(info.runs + info_skips(&info), 102);
	tw_engine_stats s = stats_of(fx.e);
	cr_assert_eq(s.skipped_missed, 99);
	cr_assert_eq(s.runs, 3);
	destroy_checking_recorder(fx.e, fx.r);
}

/* A jump that ends between two dues: the run stands for the latest due at or
 * before the jump's end, and the phase is kept. */
Test(timing, jump_ending_between_dues_keeps_the_phase)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 10, 0);
	step(fx.e, 10);
	step(fx.e, 1005); /* t0 + 1015: dues t0 + 20 .. t0 + 1010 */
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	cr_assert_eq(fx.r->due[1], fx.t0 + 1010 * NS_PER_MS);
	cr_assert_eq(fx.r->skipped[1], 99);
	cr_assert_eq(info_of(fx.e, id).next_due_ns, fx.t0 + 1020 * NS_PER_MS);
	step(fx.e, 4);
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 3);
	cr_assert_eq(fx.r->due[2], fx.t0 + 1020 * NS_PER_MS);
	destroy_checking_recorder(fx.e, fx.r);
}

/* A jump before the first run: missed firings count from the first due. */
Test(timing, jump_over_the_first_dues)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 10, 0);
	step(fx.e, 55); /* dues t0 + 10, 20, 30, 40, 50 */
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(fx.r->due[0], fx.t0 + 50 * NS_PER_MS);
	cr_assert_eq(fx.r->skipped[0], 4);
	tw_task_info info = info_of(fx.e, id);
	cr_assert_eq(info.skipped_missed, 4);
	cr_assert_eq(info.runs + info_skips(&info), 5);
	cr_assert_eq(info.next_due_ns, fx.t0 + 60 * NS_PER_MS);
	destroy_checking_recorder(fx.e, fx.r);
}

/* Jumps of every size against a few periods: at each one, due firings =
 * runs + skips exactly, one run per jump at most, every run on the phase. */
Test(timing, random_jumps_keep_due_firings_equal_to_runs_plus_skips)
{
	const uint64_t periods[] = { 1, 3, 10, 64, 1000 };
	for (size_t p = 0; p < sizeof periods / sizeof periods[0]; p++) {
		const uint64_t period = periods[p];
		tw_engine *e = manual_engine(1);
		struct recorder *r = recorder_new(e);
		uint64_t t0 = manual_now(e);
		tw_id id = add_recorded(e, r, 5, period, 0);
		const uint64_t first = t0 + 5 * NS_PER_MS;
		uint64_t now = t0, runs_before = 0;
		unsigned seed = (unsigned)period;
		for (int j = 0; j < 400; j++) {
			uint64_t ms = (uint64_t)(rand_r(&seed) % (4 * period + 3)) + 1;
			step(e, ms);
			now += ms * NS_PER_MS;
			uint64_t dues = dues_until(now, first, period * NS_PER_MS);
			tw_task_info info = info_of(e, id);
			cr_assert_eq(info.runs + info_skips(&info), dues,
				     "period %" PRIu64 ", jump %d: %" PRIu64 " runs + %" PRIu64
				     " skips != %" PRIu64 " dues",
				     period, j, info.runs, info_skips(&info), dues);
			cr_assert_eq(info.skipped_overlap + info.skipped_overload, 0);
			cr_assert(info.runs - runs_before <= 1, "burst of %" PRIu64 " runs",
				  info.runs - runs_before);
			if (dues)
				cr_assert_eq(info.next_due_ns, first + dues * period * NS_PER_MS);
			runs_before = info.runs;
		}
		uint64_t runs = atomic_load(&r->runs);
		uint64_t counted = 0;
		for (uint64_t k = 0; k < runs; k++) {
			cr_assert_eq((r->due[k] - first) % (period * NS_PER_MS), 0, "off phase");
			counted += r->skipped[k] + 1;
			cr_assert_eq(r->due[k], first + (counted - 1) * period * NS_PER_MS,
				     "run %" PRIu64 ": skipped count does not match the gap",
				     k + 1);
		}
		tw_engine_destroy(e);
		assert_recorder_sane(r);
		recorder_free(r);
	}
	assert_no_leaks();
}

/* A one-shot overtaken by a jump runs once, for its own due, and is late
 * (not skipped): nothing else was due. */
Test(timing, one_shot_overtaken_by_a_jump_runs_for_its_due)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 0, 0);
	step(fx.e, 5000);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(fx.r->due[0], fx.t0 + 10 * NS_PER_MS);
	cr_assert_eq(fx.r->skipped[0], 0);
	tw_task_info info = info_of(fx.e, id);
	cr_assert_eq(info_skips(&info), 0);
	cr_assert_eq(info.state, TW_COMPLETED);
	destroy_checking_recorder(fx.e, fx.r);
}

/* ---- postponing ---- */

/* A session timeout reset every millisecond never fires; once the resets
 * stop it fires exactly its delay after the last one. */
Test(timing, repeatedly_postponed_task_fires_after_the_last_postponement)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 30, 0, 0);
	for (int i = 1; i <= 2000; i++) {
		step(fx.e, 1);
		cr_assert_eq(tw_set_delay(fx.e, id, 30), TW_OK);
	}
	cr_assert_eq(atomic_load(&fx.r->runs), 0, "a postponed task fired");
	cr_assert_eq(info_of(fx.e, id).next_due_ns, fx.t0 + 2030 * NS_PER_MS);
	step(fx.e, 29);
	cr_assert_eq(atomic_load(&fx.r->runs), 0);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(fx.r->due[0], fx.t0 + 2030 * NS_PER_MS);
	destroy_checking_recorder(fx.e, fx.r);
}

/* Postponed far (across wheel levels) and brought back, many times. */
Test(timing, due_moved_back_and_forth_fires_at_the_last_one)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 50, 0, 0);
	const uint64_t delays[] = { 100000, 3, 5000000, 40, 1, 70000, 25 };
	for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++)
		cr_assert_eq(tw_set_delay(fx.e, id, delays[i]), TW_OK);
	step(fx.e, 24);
	cr_assert_eq(atomic_load(&fx.r->runs), 0);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(fx.r->due[0], fx.t0 + 25 * NS_PER_MS);
	step(fx.e, 200000);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	destroy_checking_recorder(fx.e, fx.r);
}

/* ---- lateness ---- */

/* On the manual clock a run that happens at its due is 0 us late; a run
 * overtaken by a jump is as late as the jump made it. */
Test(timing, lateness_histogram_on_the_manual_clock)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	add_counted(e, &c, 10, 0);
	step(e, 10);
	tw_engine_stats s = stats_of(e);
	cr_assert_eq(s.runs, 1);
	cr_assert_eq(s.lateness_us[0], 1, "a run at its due is in bucket 0");
	cr_assert_eq(s.lateness_max_ns, 0);
	add_counted(e, &c, 1, 0);
	step(e, 6); /* due + 5 ms: 5000 us, in [4096, 8192) us, bucket 13 */
	s = stats_of(e);
	cr_assert_eq(s.runs, 2);
	cr_assert_eq(s.lateness_us[13], 1);
	cr_assert_eq(s.lateness_max_ns, 5 * NS_PER_MS);
	uint64_t sum = 0;
	for (int b = 0; b < TW_LATENESS_BUCKETS; b++)
		sum += s.lateness_us[b];
	cr_assert_eq(sum, 2);
	destroy_expecting_releases(e, &c, 2);
}

/* ---- the real clock ---- */

struct realtime {
	_Atomic uint64_t runs, early, bad_gap;
	uint64_t period_ns;
	_Atomic uint64_t last_due;
};

static int realtime_callback(const tw_fire *fire, void *arg)
{
	struct realtime *rt = arg;
	if (test_now_ns() < fire->due_ns)
		atomic_fetch_add(&rt->early, 1);
	uint64_t last = atomic_exchange(&rt->last_due, fire->due_ns);
	/* The gap to the previous run is one period per due firing. */
	if (last && rt->period_ns && fire->due_ns - last != (fire->skipped + 1) * rt->period_ns)
		atomic_fetch_add(&rt->bad_gap, 1);
	atomic_fetch_add(&rt->runs, 1);
	return 0;
}

/* On the real clock no run starts before its due, and dues keep the phase
 * (a late machine may skip firings, which the gaps account for). */
Test(timing, real_clock_never_runs_before_the_due)
{
	enum { N = 12 };
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 2;
	tw_engine *e = engine_new(&cfg);
	struct realtime rt[N];
	memset(rt, 0, sizeof rt);
	for (int i = 0; i < N; i++) {
		rt[i].period_ns = (uint64_t)(i % 2 ? 3 + i : 0) * NS_PER_MS;
		add_task(e, (uint64_t)i + 1, rt[i].period_ns / NS_PER_MS, realtime_callback,
			 &rt[i]);
	}
	for (int i = 0; i < N; i++)
		cr_assert(wait_ge(&rt[i].runs, rt[i].period_ns ? 5 : 1), "task %d did not run", i);
	cr_assert_eq(tw_engine_stop(e, WAIT_LIMIT_MS), TW_OK);
	tw_engine_destroy(e);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(atomic_load(&rt[i].early), 0, "task %d ran before its due", i);
		cr_assert_eq(atomic_load(&rt[i].bad_gap), 0, "task %d left its phase", i);
		if (!rt[i].period_ns)
			cr_assert_eq(atomic_load(&rt[i].runs), 1);
	}
	assert_no_leaks();
}

/* The first due is the add time plus the delay: never earlier, and later
 * by less than one 1 ms tick (the engine may count delays from the grid). */
Test(timing, real_clock_due_is_add_time_plus_delay)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	tw_engine *e = engine_new(&cfg);
	struct recorder *r = recorder_new(e);
	uint64_t before = test_now_ns();
	add_recorded(e, r, 20, 0, 0);
	uint64_t after = test_now_ns();
	cr_assert(wait_eq(&r->returned, 1)); /* runs counts at entry, before due[] is written */
	uint64_t low = before + 20 * NS_PER_MS, high = after + 21 * NS_PER_MS;
	cr_assert(r->due[0] >= low && r->due[0] < high,
		  "due %" PRIu64 " not within [%" PRIu64 ", %" PRIu64 ")", r->due[0], low, high);
	quiesce(e);
	destroy_expecting_one_release(e, r);
}

static uint64_t coarse_now_ns(void)
{
	struct timespec t;
	cr_assert_eq(clock_gettime(CLOCK_MONOTONIC_COARSE, &t), 0);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A due set through the coarse clock, by a call made between coarse_before and after: at
 * least the coarse clock plus two of its ticks plus the delay (the engine's own reading
 * came after coarse_before), and so never earlier than asked from before, the precise
 * clock, unless the coarse clock lagged it by more than two ticks then, as tickwheel.h
 * allows (a VM whose timekeeping CPU was held up). At most three ticks and the grid's
 * 1 ms late. Returns whether the lag allowed an early due. */
static bool check_coarse_due(const char *what, uint64_t due, uint64_t before,
			     uint64_t coarse_before, uint64_t after, uint64_t tick,
			     uint64_t delay_ms)
{
	uint64_t delay_ns = delay_ms * NS_PER_MS;
	cr_assert(due >= coarse_before + 2 * tick + delay_ns,
		  "%s: due %" PRIu64 " ns before the coarse clock + two ticks + the delay", what,
		  coarse_before + 2 * tick + delay_ns - due);
	bool lagged = before > coarse_before + 2 * tick;
	if (!lagged)
		cr_assert(due >= before + delay_ns, "%s: due %" PRIu64 " ns early", what,
			  before + delay_ns - due);
	cr_assert(due <= after + 3 * tick + delay_ns + NS_PER_MS, "%s: due %" PRIu64 " ns late",
		  what, due - after - delay_ns);
	return lagged;
}

/* With coarse_clock a delay counts from CLOCK_MONOTONIC_COARSE plus two of its
 * ticks: never shorter than asked while the coarse clock lags by two ticks at
 * most, longer by at most three ticks and the grid's 1 ms. Checked for tw_add
 * and for tw_set_delay, many times over. */
Test(timing, coarse_clock_dues_are_never_shorter_than_asked)
{
	enum { N = 200, DELAY_MS = 60000 };
	struct timespec res;
	cr_assert_eq(clock_getres(CLOCK_MONOTONIC_COARSE, &res), 0);
	uint64_t tick = (uint64_t)res.tv_sec * 1000000000u + (uint64_t)res.tv_nsec;
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	cfg.coarse_clock = true;
	tw_engine *e = engine_new(&cfg);
	struct counts c = { 0 };
	unsigned lagged = 0;
	for (int i = 0; i < N; i++) {
		uint64_t before = test_now_ns(), coarse_before = coarse_now_ns();
		tw_id id = add_counted(e, &c, DELAY_MS, 0);
		uint64_t after = test_now_ns();
		lagged += check_coarse_due("add", info_of(e, id).next_due_ns, before, coarse_before,
					   after, tick, DELAY_MS);
		if (i % 8 == 0)
			sleep_ms(1); /* let the coarse clock move between calls */
		before = test_now_ns();
		coarse_before = coarse_now_ns();
		cr_assert_eq(tw_set_delay(e, id, DELAY_MS), TW_OK);
		after = test_now_ns();
		lagged += check_coarse_due("set_delay", info_of(e, id).next_due_ns, before,
					   coarse_before, after, tick, DELAY_MS);
		cr_assert_eq(tw_cancel(e, id), TW_OK);
	}
	cr_log_info("%u of %d calls came while the coarse clock lagged by more than two ticks",
		    lagged, 2 * N);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.runs), 0);
	cr_assert_eq(atomic_load(&c.releases), N);
	assert_no_leaks();
}

/* A manual clock keeps dues exact: coarse_clock is ignored with it. */
Test(timing, coarse_clock_is_ignored_on_the_manual_clock)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	cfg.manual_clock = true;
	cfg.coarse_clock = true;
	tw_engine *e = engine_new(&cfg);
	struct counts c = { 0 };
	uint64_t t0 = manual_now(e);
	tw_id id = add_counted(e, &c, 25, 0);
	cr_assert_eq(info_of(e, id).next_due_ns, t0 + 25 * NS_PER_MS);
	step(e, 25);
	cr_assert_eq(atomic_load(&c.runs), 1);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* With nothing due the wheel thread sleeps: an idle engine does not tick. */
Test(timing, real_clock_idle_engine_does_not_wake_up)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	tw_engine *e = engine_new(&cfg);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, 1000000, 0); /* due in 1000 s */
	sleep_ms(300);
	tw_engine_stats s = stats_of(e);
	/* A wheel ticking every 1 ms would have woken about 300 times. */
	cr_assert(s.wheel_wakeups <= 5, "%" PRIu64 " wake-ups in 300 ms with nothing due",
		  s.wheel_wakeups);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.runs), 0);
	cr_assert_eq(atomic_load(&c.releases), 1);
	assert_no_leaks();
}

/* ---- many at once ---- */

/* 600 tasks (more than one read-side section of tw_set_delay_many), in a
 * shuffled order: postponed, each lands where tw_set_delay would put it;
 * brought earlier (the wheel must move them), they fire then. */
Test(timing, set_delay_many_moves_every_task_like_set_delay)
{
	enum { N = 600 };
	tw_engine *e = manual_engine(2);
	struct counts c = { 0 };
	uint64_t t0 = manual_now(e);
	tw_id ids[N];
	int results[N];
	for (size_t i = 0; i < N; i++)
		ids[i] = add_counted(e, &c, 10, 0);
	uint64_t rng = 7;
	for (size_t i = N - 1; i > 0; i--) {
		rng = rng * 6364136223846793005u + 1442695040888963407u;
		size_t j = (size_t)(rng >> 33) % (i + 1);
		tw_id t = ids[i];
		ids[i] = ids[j];
		ids[j] = t;
	}
	memset(results, 0x5a, sizeof results);
	cr_assert_eq(tw_set_delay_many(e, ids, N, 50, results), TW_OK);
	for (size_t i = 0; i < N; i++) {
		cr_assert_eq(results[i], TW_OK, "id %zu", i);
		cr_assert_eq(info_of(e, ids[i]).next_due_ns, t0 + 50 * NS_PER_MS, "id %zu", i);
	}
	step(e, 40);
	cr_assert_eq(atomic_load(&c.runs), 0, "a postponed task fired");
	cr_assert_eq(tw_set_delay_many(e, ids, N / 2, 3, NULL), TW_OK); /* due at 43 */
	step(e, 2);
	cr_assert_eq(atomic_load(&c.runs), 0);
	step(e, 1);
	cr_assert_eq(atomic_load(&c.runs), N / 2, "the half brought earlier fired at its due");
	step(e, 6);
	cr_assert_eq(atomic_load(&c.runs), N / 2);
	step(e, 1);
	cr_assert_eq(atomic_load(&c.runs), N, "the other half fired at t0 + 50");
	destroy_expecting_releases(e, &c, N);
}

/* Real clock: a change whose due comes at or after the tick the wheel thread sleeps until
 * does not wake it (it takes the change in when it wakes for that tick, before firing it);
 * one due sooner does, and runs. Counted by wheel_wakeups, with a wide margin: each of the
 * adds below, a millisecond apart, found the wheel thread asleep and used to wake it. */
Test(timing, changes_due_after_the_armed_tick_do_not_wake_the_wheel_thread)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	tw_engine *e = engine_new(&cfg);
	struct counts anchor = { 0 }, later = { 0 }, soon = { 0 };
	add_counted(e, &anchor, 3000, 0); /* the wheel thread sleeps until its tick */
	sleep_ms(20);
	enum { ADDS = 200 };
	uint64_t before = stats_of(e).wheel_wakeups;
	for (int i = 0; i < ADDS; i++) {
		add_counted(e, &later, 10000, 0);
		sleep_ms(1);
	}
	uint64_t woke = stats_of(e).wheel_wakeups - before;
	cr_assert_leq(woke, ADDS / 10, "%" PRIu64 " wake-ups for %d adds due later", woke, ADDS);
	add_counted(e, &soon, 5, 0);
	cr_assert(wait_eq(&soon.runs, 1), "a task due before the armed tick runs");
	cr_assert_eq(atomic_load(&anchor.runs), 0);
	destroy_expecting_releases(e, &later, ADDS);
}

/* Wake-ups of the wheel thread per ms of the test's time, over `gaps` pauses of 1 ms, each
 * after a cancel of a task due much later when cancel is true. */
/* The wheel thread's wake-ups a ms beyond one per run of beat, over `gaps` pauses of a ms
 * (with a cancel each if cancel): a wheel thread held up meanwhile wakes less, and the beat
 * runs less with it, so the difference does not move with how the machine treats it. */
static double extra_wakeups_per_ms(tw_engine *e, struct counts *beat, struct counts *c, int gaps,
				   bool cancel)
{
	uint64_t t0 = test_now_ns(), before = stats_of(e).wheel_wakeups;
	uint64_t runs_before = atomic_load(&beat->runs);
	for (int i = 0; i < gaps; i++) {
		if (cancel)
			cr_assert_eq(tw_cancel(e, add_counted(e, c, 100000, 0)), TW_OK);
		sleep_ms(1);
	}
	uint64_t woke = stats_of(e).wheel_wakeups - before;
	uint64_t runs = atomic_load(&beat->runs) - runs_before;
	return ((double)woke - (double)runs) / ((double)(test_now_ns() - t0) / NS_PER_MS);
}

/* Real clock: an ended task needs the wheel thread only to be kept retain_ms and reaped, so
 * a cancel does not wake it when it wakes within a few ticks anyway (a heartbeat of 2 ms
 * here). Each cancel below, a millisecond apart, found it asleep and used to wake it: about
 * one wake-up more per cancel. The wake-ups beyond the heartbeat's are compared with those
 * of the same pauses without cancels. */
Test(timing, cancels_do_not_wake_a_wheel_thread_that_wakes_soon)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	tw_engine *e = engine_new(&cfg);
	struct counts beat = { 0 }, c = { 0 };
	add_counted(e, &beat, 2, 2);
	enum { GAPS = 200 };
	double quiet = extra_wakeups_per_ms(e, &beat, &c, GAPS, false);
	double cancelling = extra_wakeups_per_ms(e, &beat, &c, GAPS, true);
	cr_assert_leq(cancelling, quiet + 0.25,
		      "%.2f wake-ups a ms beyond the heartbeat's while cancelling, %.2f without (a "
		      "cancel a ms)",
		      cancelling, quiet);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), GAPS);
	cr_assert_eq(atomic_load(&c.runs), 0);
	assert_no_leaks();
}

/* Polls tw_get until the task is forgotten or WAIT_LIMIT_MS passed. */
static bool forgotten(tw_engine *e, tw_id id)
{
	uint64_t deadline = test_now_ns() + WAIT_LIMIT_MS * NS_PER_MS;
	tw_task_info info;
	while (tw_get(e, id, &info) == TW_OK) {
		if (test_now_ns() > deadline)
			return false;
		sleep_ms(1);
	}
	return tw_get(e, id, &info) == -TW_ENOTFOUND;
}

/* Real clock, and a wheel thread with nothing armed: a task that ended, by a cancel or as a
 * one-shot's run on an executor, still wakes it, so that it is reaped after retain_ms, and
 * not sooner: a wheel thread that slept counts from the clock, not from its last tick. */
Test(timing, ended_tasks_wake_a_sleeping_wheel_thread_to_be_reaped)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	cfg.retain_ms = 20;
	tw_engine *e = engine_new(&cfg);
	struct counts c = { 0 };
	tw_id cancelled = add_counted(e, &c, 1000000, 0);
	sleep_ms(50); /* asleep with nothing due before 1000 s: its wheel is 50 ticks behind */
	uint64_t t0 = test_now_ns();
	cr_assert_eq(tw_cancel(e, cancelled), TW_OK);
	cr_assert(forgotten(e, cancelled), "a cancelled task is reaped");
	uint64_t kept_ms = (test_now_ns() - t0) / NS_PER_MS;
	cr_assert_geq(kept_ms, cfg.retain_ms, "kept %" PRIu64 " ms: counted from the wheel's tick",
		      kept_ms);
	tw_id oneshot = add_counted(e, &c, 1, 0);
	cr_assert(wait_eq(&c.runs, 1));
	cr_assert(forgotten(e, oneshot), "a one-shot that ran is reaped");
	destroy_expecting_releases(e, &c, 2);
}

/* Real clock: cancels while the wheel thread sleeps until a due far ahead (a server's
 * request timeouts, all 1000 s ahead here) do not wake it each: the first wakes it, which
 * then sleeps until that task's reaping, retain_ms later, and those that follow within that
 * time wait for it. A cancel a ms used to wake it about 200 times here. */
Test(timing, cancels_within_retain_ms_wake_a_far_sleeping_wheel_thread_once)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	cfg.retain_ms = 2000;
	tw_engine *e = engine_new(&cfg);
	struct counts anchor = { 0 }, c = { 0 };
	add_counted(e, &anchor, 1000000, 0);
	sleep_ms(20);
	enum { CANCELS = 200 };
	uint64_t t0 = test_now_ns(), before = stats_of(e).wheel_wakeups;
	for (int i = 0; i < CANCELS; i++) {
		cr_assert_eq(tw_cancel(e, add_counted(e, &c, 1000000, 0)), TW_OK);
		sleep_ms(1);
	}
	uint64_t woke = stats_of(e).wheel_wakeups - before;
	uint64_t took_ms = (test_now_ns() - t0) / NS_PER_MS;
	if (took_ms < cfg.retain_ms) /* else the machine stalled the test: reaps came due */
		cr_assert_leq(woke, 10, "%" PRIu64 " wake-ups for %d cancels in %" PRIu64 " ms",
			      woke, CANCELS, took_ms);
	destroy_expecting_releases(e, &c, CANCELS);
}

/* Real clock: a task cancelled while the wheel thread sleeps until a tick within retain_ms
 * is not taken in before that tick, but kept retain_ms from its end, not from then: here
 * reaped about 600 ms after the cancel, where counting from the wheel thread's tick (400 ms
 * after the start) would keep it until about 990 ms. The bound between leaves room for a
 * thread held up a while. */
Test(timing, a_task_taken_in_late_is_kept_retain_ms_from_its_end)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	cfg.retain_ms = 600;
	tw_engine *e = engine_new(&cfg);
	struct counts anchor = { 0 }, c = { 0 };
	uint64_t start = test_now_ns();
	add_counted(e, &anchor, 400, 0); /* the wheel thread sleeps until its tick */
	tw_id id = add_counted(e, &c, 1000000, 0);
	sleep_ms(10);
	uint64_t cancelled = test_now_ns();
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	cr_assert(forgotten(e, id));
	uint64_t kept_ms = (test_now_ns() - cancelled) / NS_PER_MS;
	uint64_t anchor_ms = (cancelled - start) / NS_PER_MS;
	cr_assert_geq(kept_ms, cfg.retain_ms, "forgotten %" PRIu64 " ms after its end", kept_ms);
	if (anchor_ms < 100) /* else the machine stalled the test itself: nothing to compare */
		cr_assert_lt(kept_ms, cfg.retain_ms + 250,
			     "kept %" PRIu64 " ms: counted from the wheel thread's late take-in",
			     kept_ms);
	cr_assert(wait_eq(&anchor.runs, 1));
	tw_engine_destroy(e);
	assert_no_leaks();
}
