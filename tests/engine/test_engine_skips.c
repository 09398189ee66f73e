/*
 * test_engine_skips.c - firings that cannot run are skipped and counted, by
 * reason, and never queued as backlog: due firings = runs + skips, exactly.
 *
 *  - overlap: a serial task's previous run is still going;
 *  - overload: the executor's queue is full;
 *  - missed: the engine fell behind by whole periods.
 */
#include "engine_test_support.h"

/* A serial task blocked in its first run: every later due firing is skipped
 * for overlap (or counted missed inside a jump), and the next run reports
 * them all in tw_fire.skipped. */
Test(skips, slow_serial_task_skips_overlapping_firings)
{
	struct one_task fx = one_task_begin(2);
	tw_id id = add_recorded(fx.e, fx.r, 1, 1, 0);
	atomic_store(&fx.r->block, true);
	advance(fx.e, 1); /* t0 + 1: run 1, blocked */
	wait_started(fx.r);
	for (int i = 0; i < 20; i++)
		advance(fx.e, 1); /* t0 + 2 .. t0 + 21: 20 overlaps */
	tw_task_info info = info_of(fx.e, id);
	cr_assert_eq(info.state, TW_RUNNING);
	cr_assert_eq(info.running, 1);
	cr_assert_eq(info.runs, 1);
	cr_assert_eq(info.skipped_overlap, 20);
	cr_assert_eq(info.skipped_missed, 0);
	advance(fx.e, 10); /* t0 + 22 .. t0 + 31: 9 missed, then 1 overlap */
	info = info_of(fx.e, id);
	cr_assert_eq(info.skipped_overlap, 21);
	cr_assert_eq(info.skipped_missed, 9);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(atomic_load(&fx.r->max_in_flight), 1);

	atomic_store(&fx.r->block, false);
	gate_open(&fx.r->gate, 1);
	quiesce(fx.e);
	cr_assert_eq(info_of(fx.e, id).state, TW_WAITING);
	step(fx.e, 1); /* t0 + 32: run 2 */
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	cr_assert_eq(fx.r->due[1], fx.t0 + 32 * NS_PER_MS);
	cr_assert_eq(fx.r->skipped[1], 30);
	info = info_of(fx.e, id);
	cr_assert_eq(info.runs + info_skips(&info), 32, "due firings t0 + 1 .. t0 + 32");
	tw_engine_stats s = stats_of(fx.e);
	cr_assert_eq(s.runs, 2);
	cr_assert_eq(s.skipped_overlap, 21);
	cr_assert_eq(s.skipped_missed, 9);
	cr_assert_eq(s.skipped_overload, 0);
	destroy_expecting_one_release(fx.e, fx.r);
}

/* The callback blocks for a given number of test steps. */
struct slow {
	_Atomic uint64_t *clock; /* test steps so far; UINT64_MAX: let every run go */
	uint64_t hold;           /* steps each run lasts */
	_Atomic uint64_t runs, in_flight, max_in_flight, skipped_seen, bad;
	uint64_t period_ns;
	_Atomic uint64_t last_due;
};

static int slow_callback(const tw_fire *fire, void *arg)
{
	struct slow *s = arg;
	uint64_t until = atomic_load(s->clock) + s->hold;
	note_max(&s->max_in_flight, atomic_fetch_add(&s->in_flight, 1) + 1);
	atomic_fetch_add(&s->runs, 1);
	atomic_fetch_add(&s->skipped_seen, fire->skipped);
	uint64_t last = atomic_exchange(&s->last_due, fire->due_ns);
	if (last && s->period_ns && fire->due_ns - last != (fire->skipped + 1) * s->period_ns)
		atomic_fetch_add(&s->bad, 1);
	uint64_t deadline = test_now_ns() + 30000 * NS_PER_MS;
	uint64_t now;
	while ((now = atomic_load(s->clock)) != UINT64_MAX && now < until &&
	       test_now_ns() < deadline)
		sleep_ms(1);
	atomic_fetch_sub(&s->in_flight, 1);
	return 0;
}

/* Serial tasks that hold their executor for a few steps, on small queues,
 * with steps of random length: every due firing is a run or a skip, serial
 * runs never overlap, and each run's skipped count matches its gap. */
Test(skips, due_firings_equal_runs_plus_skips_under_random_load)
{
	enum { N = 24, STEPS = 1500 };
	tw_engine *e = queue_limited_engine(2, 4);
	_Atomic uint64_t clock = 0;
	struct slow s[N];
	tw_id id[N];
	uint64_t first[N];
	memset(s, 0, sizeof s);
	uint64_t t0 = manual_now(e), now = t0;
	unsigned seed = 99;
	for (int i = 0; i < N; i++) {
		s[i].clock = &clock;
		s[i].hold = (uint64_t)(i % 4); /* 0: returns at once */
		uint64_t period = (uint64_t)(rand_r(&seed) % 12) + 1;
		uint64_t delay = (uint64_t)(rand_r(&seed) % 12) + 1;
		s[i].period_ns = period * NS_PER_MS;
		tw_task_spec spec = spec_of(delay, period, slow_callback, &s[i]);
		id[i] = add_spec(e, &spec);
		first[i] = t0 + delay * NS_PER_MS;
	}
	for (int k = 0; k < STEPS; k++) {
		uint64_t ms = (uint64_t)(rand_r(&seed) % 5) + 1;
		advance(e, ms);
		now += ms * NS_PER_MS;
		atomic_fetch_add(&clock, 1);
	}
	atomic_store(&clock, UINT64_MAX);
	quiesce(e);
	uint64_t runs = 0, overlap = 0, overload = 0, missed = 0;
	for (int i = 0; i < N; i++) {
		tw_task_info info = info_of(e, id[i]);
		uint64_t dues = now >= first[i] ? (now - first[i]) / s[i].period_ns + 1 : 0;
		cr_assert_eq(info.runs + info_skips(&info), dues,
			     "task %d: %" PRIu64 " runs + %" PRIu64 " skips != %" PRIu64 " dues", i,
			     info.runs, info_skips(&info), dues);
		cr_assert_eq(info.runs, atomic_load(&s[i].runs));
		cr_assert_eq(atomic_load(&s[i].max_in_flight) <= 1, true,
			     "serial task %d overlapped", i);
		cr_assert_eq(atomic_load(&s[i].bad), 0, "task %d: skipped count != gap", i);
		/* Skips reported to callbacks: all but those after the last run. */
		cr_assert(atomic_load(&s[i].skipped_seen) <= info_skips(&info));
		runs += info.runs;
		overlap += info.skipped_overlap;
		overload += info.skipped_overload;
		missed += info.skipped_missed;
	}
	/* The load was high enough to skip firings while earlier ones ran or waited, and steps
	 * of up to 5 ms against periods from 1 ms jump whole periods (missed). Which of overlap
	 * and overload a skip is depends on whether an executor had started the previous firing
	 * yet, which is the machine's timing: only their sum is asserted. */
	cr_assert_gt(overlap + overload, 0);
	cr_assert_gt(missed, 0);
	tw_engine_stats st = stats_of(e);
	cr_assert_eq(st.runs, runs);
	cr_assert_eq(st.skipped_overlap, overlap);
	cr_assert_eq(st.skipped_overload, overload);
	cr_assert_eq(st.skipped_missed, missed);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* The same accounting on the real clock, for a callback that takes longer
 * than its period: the gap before each run is one period per due firing. */
Test(skips, real_clock_slow_serial_task_accounts_for_every_gap)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 2;
	tw_engine *e = engine_new(&cfg);
	_Atomic uint64_t clock = 0;
	struct slow s;
	memset(&s, 0, sizeof s);
	s.clock = &clock;
	s.period_ns = 2 * NS_PER_MS;
	tw_task_spec spec = spec_of(1, 2, slow_callback, &s);
	tw_id id = add_spec(e, &spec);
	/* Each run waits for the test's clock to move: it is at least 3 ms long. */
	s.hold = 1;
	while (atomic_load(&s.runs) < 10) {
		uint64_t deadline = test_now_ns() + WAIT_LIMIT_MS * NS_PER_MS;
		uint64_t seen = atomic_load(&s.runs);
		while (atomic_load(&s.runs) == seen && test_now_ns() < deadline)
			sleep_ms(1);
		cr_assert_neq(atomic_load(&s.runs), seen, "no run within %d ms",
			      (int)WAIT_LIMIT_MS);
		sleep_ms(3);
		atomic_fetch_add(&clock, 1);
	}
	cr_assert_eq(tw_pause(e, id), TW_OK);
	atomic_store(&clock, UINT64_MAX);
	quiesce(e);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(atomic_load(&s.max_in_flight), 1);
	cr_assert_eq(atomic_load(&s.bad), 0, "a run's skipped count does not match its gap");
	cr_assert_eq(info.runs, atomic_load(&s.runs));
	/* Runs at least 3 ms long every 2 ms: firings were skipped. */
	cr_assert_gt(info_skips(&info), 0);
	cr_assert(atomic_load(&s.skipped_seen) <= info_skips(&info));
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* A concurrent task is not skipped while a run is going: its next firing is
 * handed out and starts on a free executor. With every executor held by its
 * blocked runs, one more firing waits in a queue, and the ones after it are
 * skipped for overload (a task never has two firings waiting), never overlap. */
Test(skips, concurrent_task_is_never_skipped_for_overlap)
{
	tw_engine *e = manual_engine(2);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 1, 1, TW_CONCURRENT);
	start_blocked_run(e, r);
	advance(e, 1);
	cr_assert(gate_pass(&r->started, WAIT_LIMIT_MS), "the second run started beside the first");
	for (int i = 0; i < 4; i++)
		advance(e, 1);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.concurrent, true);
	cr_assert_eq(info.skipped_overlap, 0);
	cr_assert_eq(info.running, 3, "2 runs going, 1 firing waiting");
	cr_assert_eq(info.skipped_overload, 3, "the firings due while one waited");
	cr_assert_eq(info.state, TW_RUNNING);
	atomic_store(&r->block, false);
	gate_open(&r->gate, 6);
	quiesce(e);
	info = info_of(e, id);
	cr_assert_eq(info.runs, 3);
	cr_assert_eq(info.running, 0);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.runs + info_skips(&info), 6, "due firings = runs + skips");
	cr_assert_eq(atomic_load(&r->max_in_flight), 2, "its runs overlapped");
	destroy_expecting_one_release(e, r);
}

/* One executor with room for one firing, blocked in a callback: the first
 * firing of another task waits in the queue, the next ones find it full and
 * are skipped for overload, not queued. */
Test(skips, full_queue_skips_for_overload)
{
	tw_engine *e = queue_limited_engine(1, 1);
	struct recorder *blocker = recorder_new(e), *r = recorder_new(e);
	uint64_t t0 = manual_now(e);
	run_blocked_one_shot(e, blocker); /* t0 + 1: the blocker holds the only executor */
	tw_id id = add_recorded(e, r, 1, 1, TW_CONCURRENT); /* dues t0 + 2, 3, ... */
	advance(e, 1);                                      /* t0 + 2: queued */
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.skipped_overload, 0);
	cr_assert_eq(info.running, 1);
	for (int i = 0; i < 9; i++)
		advance(e, 1); /* t0 + 3 .. t0 + 11: queue full */
	info = info_of(e, id);
	cr_assert_eq(info.skipped_overload, 9);
	cr_assert_eq(info.skipped_overlap, 0);
	cr_assert_eq(info.runs, 0);
	cr_assert_eq(info.running, 1, "firings piled up behind a full queue");
	cr_assert_eq(stats_of(e).skipped_overload, 9);

	gate_open(&blocker->gate, 1);
	quiesce(e);
	cr_assert_eq(atomic_load(&r->runs), 1);
	cr_assert_eq(r->due[0], t0 + 2 * NS_PER_MS);
	cr_assert_eq(r->skipped[0], 0);
	step(e, 1); /* t0 + 12 */
	cr_assert_eq(atomic_load(&r->runs), 2);
	cr_assert_eq(r->due[1], t0 + 12 * NS_PER_MS);
	cr_assert_eq(r->skipped[1], 9);
	info = info_of(e, id);
	cr_assert_eq(info.runs + info_skips(&info), 11, "due firings t0 + 2 .. t0 + 12");
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&r->releases), 1);
	cr_assert_eq(atomic_load(&blocker->releases), 1);
	assert_recorder_sane(r);
	assert_recorder_sane(blocker);
	recorder_free(blocker);
	recorder_free(r);
	assert_no_leaks();
}

/* Several one-shots due in one tick on a queue with room for two: two get in,
 * the rest wait for room (never skipped), and all run once it frees. */
Test(skips, one_shots_due_together_wait_for_room)
{
	enum { N = 6 };
	tw_engine *e = queue_limited_engine(1, 2);
	struct recorder *blocker = recorder_new(e);
	struct counts c[N];
	memset(c, 0, sizeof c);
	tw_id id[N];
	run_blocked_one_shot(e, blocker);
	for (int i = 0; i < N; i++)
		id[i] = add_counted(e, &c[i], 1, 0);
	advance(e, 1);
	uint64_t queued = 0, waiting = 0;
	for (int i = 0; i < N; i++) {
		tw_task_info info = info_of(e, id[i]);
		cr_assert_eq(info.skipped_overload, 0);
		queued += info.running;
		waiting += info.state == TW_WAITING;
		/* The first two, in the order they came due, hold the queue. */
		cr_assert_eq(info.running, i < 2 ? 1u : 0u, "task %d", i);
	}
	cr_assert_eq(queued, 2);
	cr_assert_eq(waiting, N - 2);
	gate_open(&blocker->gate, 1);
	quiesce(e);
	for (int i = 0; i < N; i++) {
		tw_task_info info = info_of(e, id[i]);
		cr_assert_eq(info.state, TW_COMPLETED);
		cr_assert_eq(info.runs, 1);
		cr_assert_eq(info_skips(&info), 0);
		cr_assert_eq(atomic_load(&c[i].runs), 1);
		cr_assert(wait_eq(&c[i].releases, 1), "task %d not released", i);
	}
	tw_engine_stats s = stats_of(e);
	cr_assert_eq(s.skipped_overload, 0);
	cr_assert_eq(s.tasks_completed, N + 1);
	tw_engine_destroy(e);
	for (int i = 0; i < N; i++)
		cr_assert_eq(atomic_load(&c[i].releases), 1);
	assert_recorder_sane(blocker);
	recorder_free(blocker);
	assert_no_leaks();
}

/* Engine statistics add up the per-task counters. */
Test(skips, stats_count_runs_skips_and_failures)
{
	tw_engine *e = manual_engine(1);
	struct recorder *ok = recorder_new(e), *bad = recorder_new(e), *slow = recorder_new(e);
	atomic_store(&bad->fail, 1);
	tw_id a = add_recorded(e, ok, 1, 1, 0);
	tw_id b = add_recorded(e, bad, 2, 2, 0);
	for (int i = 0; i < 10; i++)
		step(e, 1);
	tw_id c = add_recorded(e, slow, 1, 1, 0);
	atomic_store(&slow->block, true);
	advance(e, 1);
	wait_started(slow);
	for (int i = 0; i < 3; i++)
		advance(e, 1);
	atomic_store(&slow->block, false);
	gate_open(&slow->gate, 1);
	quiesce(e);
	tw_task_info ia = info_of(e, a), ib = info_of(e, b), ic = info_of(e, c);
	cr_assert_eq(ib.failures, ib.runs);
	cr_assert_eq(ia.failures, 0);
	tw_engine_stats s = stats_of(e);
	cr_assert_eq(s.runs, ia.runs + ib.runs + ic.runs);
	cr_assert_eq(s.runs,
		     atomic_load(&ok->runs) + atomic_load(&bad->runs) + atomic_load(&slow->runs));
	cr_assert_eq(s.failures, ib.failures);
	cr_assert_eq(s.skipped_overlap,
		     ia.skipped_overlap + ib.skipped_overlap + ic.skipped_overlap);
	cr_assert_eq(ic.skipped_overlap, 3);
	/* The others' firings queued behind the slow run: their next ones are overload skips
	 * (the previous firing had not started), not overlaps. */
	cr_assert_eq(s.skipped_overload,
		     ia.skipped_overload + ib.skipped_overload + ic.skipped_overload);
	cr_assert_eq(ic.skipped_overload, 0);
	cr_assert_eq(s.skipped_missed, 0);
	uint64_t late = 0;
	for (int i = 0; i < TW_LATENESS_BUCKETS; i++)
		late += s.lateness_us[i];
	cr_assert_eq(late, s.runs, "every run has a lateness");
	tw_engine_destroy(e);
	recorder_free(ok);
	recorder_free(bad);
	recorder_free(slow);
	assert_no_leaks();
}

/* queue_capacity is the number of firings an executor may hold: with 3, the
 * fourth one-shot of a tick finds the queue full and waits for room. */
Test(skips, queue_holds_exactly_queue_capacity_firings)
{
	const unsigned capacities[] = { 1, 2, 3, 5, 8 };
	for (size_t k = 0; k < sizeof capacities / sizeof capacities[0]; k++) {
		enum { N = 12 };
		tw_engine *e = queue_limited_engine(1, capacities[k]);
		struct recorder *blocker = recorder_new(e);
		struct counts c[N];
		memset(c, 0, sizeof c);
		tw_id id[N];
		run_blocked_one_shot(e, blocker);
		for (int i = 0; i < N; i++)
			id[i] = add_counted(e, &c[i], 1, 0);
		advance(e, 1);
		uint64_t held = 0, waiting = 0;
		for (int i = 0; i < N; i++) {
			tw_task_info info = info_of(e, id[i]);
			held += info.running;
			waiting += info.state == TW_WAITING && !info.running;
			cr_assert_eq(info.skipped_overload, 0, "one-shots wait, never skipped");
		}
		cr_assert_eq(held, capacities[k], "queue_capacity %u: %" PRIu64 " firings held",
			     capacities[k], held);
		cr_assert_eq(waiting, N - capacities[k]);
		gate_open(&blocker->gate, 1);
		quiesce(e);
		tw_engine_destroy(e);
		uint64_t runs = 0;
		for (int i = 0; i < N; i++) {
			runs += atomic_load(&c[i].runs);
			cr_assert_eq(atomic_load(&c[i].releases), 1);
		}
		cr_assert_eq(runs, N, "the waiting ones ran once room freed");
		assert_recorder_sane(blocker);
		recorder_free(blocker);
	}
	assert_no_leaks();
}

/*
 * A firing that came due during its task's own run waits for it; a new due given meanwhile
 * takes its place (issue 24). The one replaced was due and never runs: it counts as overlap,
 * and the next run's tw_fire.skipped reports it, so that due firings stay runs plus skips.
 */
enum replace_how { BY_SET_DELAY, BY_SET_DUE, BY_SET_NEVER, BY_PERIODIC_SET_DELAY };

struct replacer {
	tw_engine *engine;
	enum replace_how how;
	_Atomic tw_id id;
	_Atomic uint64_t runs, failed_calls;
	uint64_t due[4], skipped[4];
};

static int replace_callback(const tw_fire *fire, void *arg)
{
	struct replacer *c = arg;
	/* Stored before runs counts it, as record_callback does; one serial task. */
	uint64_t n = atomic_load(&c->runs) + 1;
	if (n <= 4) {
		c->due[n - 1] = fire->due_ns;
		c->skipped[n - 1] = fire->skipped;
	}
	atomic_fetch_add(&c->runs, 1);
	if (n != 1)
		return 0;
	tw_engine *e = c->engine;
	tw_id id = atomic_load(&c->id);
	int bad = 0;
	if (c->how == BY_PERIODIC_SET_DELAY) {
		bad |= tw_advance(e, 10) != TW_OK; /* its next period comes due: it waits */
		bad |= tw_set_delay(e, id, 5) != TW_OK;
	} else {
		bad |= tw_set_delay(e, id, 0) != TW_OK;
		bad |= tw_advance(e, 0) != TW_OK; /* due now, during this run: it waits */
		if (c->how == BY_SET_DELAY)
			bad |= tw_set_delay(e, id, 1) != TW_OK;
		else if (c->how == BY_SET_DUE)
			bad |= tw_set_due(e, id, fire->due_ns + NS_PER_MS) != TW_OK;
		else
			bad |= tw_set_delay(e, id, TW_NEVER) != TW_OK;
		if (c->how != BY_SET_NEVER)
			bad |= tw_advance(e, 1) != TW_OK; /* the new due comes, and waits in turn */
	}
	if (bad)
		atomic_fetch_add(&c->failed_calls, 1);
	return 0;
}

static void replaced_waiting_firing(enum replace_how how)
{
	tw_engine *e = manual_engine(1);
	struct replacer c = { .engine = e, .how = how };
	uint64_t t0 = manual_now(e);
	bool periodic = how == BY_PERIODIC_SET_DELAY;
	tw_task_spec spec = spec_of(periodic ? 10 : 1, periodic ? 10 : 0, replace_callback, &c);
	spec.flags = periodic ? TW_RUN_LATE : 0;
	tw_id id = add_spec(e, &spec);
	atomic_store(&c.id, id);
	step(e, periodic ? 10 : 1);
	cr_assert_eq(atomic_load(&c.failed_calls), 0);
	uint64_t due_firings = how == BY_SET_NEVER ? 2 : 3;
	uint64_t runs = how == BY_SET_NEVER ? 1 : 2;
	if (periodic) {
		step(e, 5); /* t0 + 25: the due set in run 1 */
		cr_assert_eq(c.due[1], t0 + 25 * NS_PER_MS);
	} else if (how != BY_SET_NEVER) {
		cr_assert_eq(c.due[1], t0 + 2 * NS_PER_MS, "the later due ran, after run 1");
	}
	cr_assert_eq(atomic_load(&c.runs), runs);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.skipped_overlap, 1, "the replaced firing counts as overlap");
	cr_assert_eq(info.runs + info_skips(&info), due_firings);
	if (runs > 1)
		cr_assert_eq(c.skipped[1], 1, "the next run reports it");
	cr_assert_eq(stats_of(e).skipped_overlap, 1);
	cr_assert_eq(info.state, how == BY_SET_NEVER || periodic ? TW_WAITING : TW_COMPLETED);
	if (periodic) {
		step(e, 10); /* t0 + 35, on the new phase, nothing more skipped */
		cr_assert_eq(atomic_load(&c.runs), 3);
		cr_assert_eq(c.skipped[2], 0);
		info = info_of(e, id);
		cr_assert_eq(info.runs + info_skips(&info), 4);
	}
	tw_engine_destroy(e);
}

Test(skips, set_delay_replacing_a_waiting_one_shot_firing_counts_it)
{
	replaced_waiting_firing(BY_SET_DELAY);
}

Test(skips, set_due_replacing_a_waiting_one_shot_firing_counts_it)
{
	replaced_waiting_firing(BY_SET_DUE);
}

Test(skips, set_delay_never_replacing_a_waiting_firing_counts_it)
{
	replaced_waiting_firing(BY_SET_NEVER);
}

Test(skips, set_delay_replacing_a_waiting_run_late_firing_counts_it)
{
	replaced_waiting_firing(BY_PERIODIC_SET_DELAY);
}
