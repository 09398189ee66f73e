/*
 * No firing lost: one-shots re-armed from their own callback, TW_RUN_LATE,
 * TW_NEVER, a completed one-shot, the manual clock's "only inside
 * tw_advance", the order within a millisecond, and a burst of a million
 * one-shots on one executor with the default queue.
 */
#include "engine_test_support.h"

/* A one-shot that re-arms itself from its callback `left` more times, to delay_ms, then
 * works for work_ms while that due comes. */
struct rearm {
	tw_engine *engine;
	_Atomic uint64_t runs, releases, left, rearm_rc_bad;
	uint64_t delay_ms, work_ms;
	uint64_t due[64];
};

static int rearm_callback(const tw_fire *fire, void *arg)
{
	struct rearm *r = arg;
	/* Stored before runs counts it (the test reads due[] once runs is reached); one task,
	 * serial: its runs never overlap. */
	uint64_t n = atomic_load(&r->runs);
	if (n < 64)
		r->due[n] = fire->due_ns;
	atomic_fetch_add(&r->runs, 1);
	if (atomic_load(&r->left)) {
		atomic_fetch_sub(&r->left, 1);
		if (tw_set_delay(r->engine, fire->id, r->delay_ms) != TW_OK)
			atomic_fetch_add(&r->rearm_rc_bad, 1);
		if (r->work_ms)
			sleep_ms((unsigned)r->work_ms);
	}
	return 0;
}

static void rearm_release(void *arg)
{
	atomic_fetch_add(&((struct rearm *)arg)->releases, 1);
}

static tw_id add_rearm(tw_engine *e, struct rearm *r, uint64_t delay_ms, uint64_t period_ms)
{
	tw_task_spec spec = spec_of(delay_ms, period_ms, rearm_callback, r);
	spec.release = rearm_release;
	return add_spec(e, &spec);
}

/* Real clock: the re-arm's due (0 or 1 ms) comes while the run still works 3 ms; the firing
 * is not lost: it runs right after that run returns, once per re-arm. */
Test(no_loss, one_shot_rearmed_from_its_callback_runs_after_it_real_clock)
{
	const uint64_t delays[] = { 0, 1 };
	for (size_t k = 0; k < 2; k++) {
		tw_config cfg;
		tw_config_init(&cfg);
		cfg.executors = 2;
		tw_engine *e = engine_new(&cfg);
		struct rearm r = { .engine = e, .delay_ms = delays[k], .work_ms = 3 };
		atomic_store(&r.left, 10);
		tw_id id = add_rearm(e, &r, 1, 0);
		cr_assert(wait_eq(&r.runs, 11), "delay %" PRIu64 ": %" PRIu64 " runs of 11",
			  delays[k], atomic_load(&r.runs));
		cr_assert(wait_eq(&r.releases, 1));
		tw_task_info info = info_of(e, id);
		cr_assert_eq(info.state, TW_COMPLETED);
		cr_assert_eq(info.runs, 11);
		cr_assert_eq(info_skips(&info), 0);
		cr_assert_eq(atomic_load(&r.rearm_rc_bad), 0);
		tw_engine_destroy(e);
		cr_assert_eq(atomic_load(&r.runs), 11);
		cr_assert_eq(atomic_load(&r.releases), 1);
	}
	assert_no_leaks();
}

/* Manual clock: a re-arm to 0 from the callback is due at the current manual time, so it
 * waits for the next tw_advance: exactly one run per advance, time not moving. */
Test(no_loss, one_shot_rearmed_to_now_runs_once_per_advance_manual_clock)
{
	tw_engine *e = manual_engine(1);
	struct rearm r = { .engine = e, .delay_ms = 0 };
	atomic_store(&r.left, 1000);
	tw_id id = add_rearm(e, &r, 1, 0);
	step(e, 1);
	cr_assert_eq(atomic_load(&r.runs), 1);
	uint64_t now = r.due[0]; /* the current manual time: nothing moves it but tw_advance */
	for (uint64_t i = 2; i <= 20; i++) {
		quiesce(e);
		cr_assert_eq(atomic_load(&r.runs), i - 1, "no run without a tw_advance");
		advance(e, 0);
		quiesce(e);
		cr_assert_eq(atomic_load(&r.runs), i, "tw_advance(0) runs what is due now");
		cr_assert_eq(r.due[i - 1], now, "due at the current manual time");
	}
	cr_assert_eq(info_of(e, id).state, TW_WAITING);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&r.releases), 1);
	assert_no_leaks();
}

/* Manual clock, 1 ms re-arm during a run: the due comes inside the advance that follows,
 * while the run... has returned already (quiesce in between): plain one run per ms. And a
 * delay 0 task added between two advances runs only at the next one. */
Test(no_loss, due_now_waits_for_the_next_advance)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, 0, 0);
	sleep_ms(20);
	quiesce(e);
	cr_assert_eq(atomic_load(&c.runs), 0, "a due at the current manual time waits");
	cr_assert_eq(info_of(e, id).state, TW_WAITING);
	step(e, 0);
	cr_assert_eq(atomic_load(&c.runs), 1);
	destroy_expecting_releases(e, &c, 1);
}

/* A firing that comes due while the one-shot's own run is going, on the manual clock: the
 * run is blocked, the re-arm's due passes inside an advance, and it runs after the run. */
Test(no_loss, one_shot_rearmed_during_a_blocked_run_runs_after_it_manual_clock)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 1, 0, 0);
	start_blocked_run(e, r);
	cr_assert_eq(tw_set_delay(e, id, 2), TW_OK, "re-armed while running");
	advance(e, 5); /* its due passes during the run */
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_RUNNING);
	cr_assert_eq(info_skips(&info), 0);
	atomic_store(&r->block, false);
	gate_open(&r->gate, 1);
	quiesce(e);
	cr_assert_eq(atomic_load(&r->runs), 2, "the re-arm ran after the run");
	cr_assert_eq(info_of(e, id).state, TW_COMPLETED);
	destroy_expecting_one_release(e, r);
}

/* Periodic, serial: by default a firing due during the task's run is skipped (overlap);
 * with TW_RUN_LATE it runs right after that run, once, and further ones are skipped. */
Test(no_loss, run_late_runs_an_overlapping_firing_after_the_run)
{
	const unsigned flags[] = { 0, TW_RUN_LATE };
	for (size_t k = 0; k < 2; k++) {
		tw_engine *e = manual_engine(1);
		struct recorder *r = recorder_new(e);
		tw_id id = add_recorded(e, r, 1, 10, flags[k]);
		start_blocked_run(e, r);
		advance(e, 10); /* t0 + 11: due during the run */
		advance(e, 10); /* t0 + 21: another */
		atomic_store(&r->block, false);
		gate_open(&r->gate, 1);
		quiesce(e);
		tw_task_info info = info_of(e, id);
		if (flags[k]) {
			cr_assert_eq(atomic_load(&r->runs), 2);
			cr_assert_eq(info.skipped_overlap, 1, "the older of the two waiting ones");
			cr_assert_eq(r->due[1], r->due[0] + 20 * NS_PER_MS,
				     "it ran for the latest due");
		} else {
			cr_assert_eq(atomic_load(&r->runs), 1);
			cr_assert_eq(info.skipped_overlap, 2);
		}
		cr_assert_eq(info.runs + info_skips(&info), 3, "due firings = runs + skips");
		destroy_expecting_one_release(e, r);
	}
}

/* TW_NEVER: no due at all until one is given; not a period; huge values keep ERANGE. */
Test(no_loss, never_means_no_due_until_one_is_given)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, TW_NEVER, 0);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.next_due_ns, 0);
	step(e, 1000);
	cr_assert_eq(atomic_load(&c.runs), 0);
	cr_assert_eq(tw_set_delay(e, id, 5), TW_OK);
	cr_assert_neq(info_of(e, id).next_due_ns, 0);
	cr_assert_eq(tw_set_delay(e, id, TW_NEVER), TW_OK, "taken back before it came");
	step(e, 10);
	cr_assert_eq(atomic_load(&c.runs), 0);
	cr_assert_eq(tw_set_delay(e, id, 5), TW_OK);
	step(e, 5);
	cr_assert_eq(atomic_load(&c.runs), 1);
	/* A periodic task set to TW_NEVER waits; resume gives it now + period. */
	struct counts p = { 0 };
	tw_id periodic = add_counted(e, &p, 1, 3);
	step(e, 1);
	cr_assert_eq(tw_set_delay(e, periodic, TW_NEVER), TW_OK);
	step(e, 30);
	cr_assert_eq(atomic_load(&p.runs), 1);
	cr_assert_eq(info_of(e, periodic).next_due_ns, 0);
	cr_assert_eq(tw_pause(e, periodic), TW_OK);
	cr_assert_eq(tw_resume(e, periodic), TW_OK);
	step(e, 3);
	cr_assert_eq(atomic_load(&p.runs), 2);
	tw_id ids[2] = { periodic, id };
	int results[2];
	cr_assert_eq(tw_set_delay_many(e, ids, 2, TW_NEVER, results), -TW_ESTATE);
	cr_assert_eq(results[0], TW_OK);
	cr_assert_eq(results[1], -TW_ESTATE, "the one-shot completed");
	step(e, 30);
	cr_assert_eq(atomic_load(&p.runs), 2);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), 1);
	cr_assert_eq(atomic_load(&p.releases), 1);
	assert_no_leaks();
}

/* The order within a millisecond: the order of filing; moving a task to the millisecond it
 * is already filed in keeps its place; one moved earlier goes behind. One executor. */
struct order {
	_Atomic uint64_t n;
	tw_id seen[16];
};

static int order_callback(const tw_fire *fire, void *arg)
{
	struct order *o = arg;
	uint64_t i = atomic_fetch_add(&o->n, 1);
	if (i < 16)
		o->seen[i] = fire->id;
	return 0;
}

Test(no_loss, order_within_a_millisecond_is_the_order_of_filing)
{
	tw_engine *e = manual_engine(1);
	struct order o = { 0 };
	tw_task_spec spec = spec_of(5, 0, order_callback, &o);
	tw_id a = add_spec(e, &spec), b = add_spec(e, &spec), c = add_spec(e, &spec);
	spec.delay_ms = 9;
	tw_id d = add_spec(e, &spec);
	step(e, 1);
	cr_assert_eq(tw_set_delay(e, a, 4), TW_OK, "same millisecond: keeps its place");
	cr_assert_eq(tw_set_delay(e, d, 4), TW_OK, "moved earlier: filed behind");
	step(e, 4);
	cr_assert_eq(atomic_load(&o.n), 4);
	const tw_id want[] = { a, b, c, d };
	for (int i = 0; i < 4; i++)
		cr_assert_eq(o.seen[i], want[i], "position %d", i);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* Manual clock: changes are taken in when the next tw_advance begins, so a task changed twice
 * between two advances has the place of its first change, however long the wait between. */
Test(no_loss, manual_clock_files_a_task_changed_twice_at_its_first_change)
{
	tw_engine *e = manual_engine(1);
	struct order o = { 0 };
	tw_task_spec spec = spec_of(7, 0, order_callback, &o);
	tw_id x = add_spec(e, &spec);
	spec.delay_ms = 5;
	tw_id y = add_spec(e, &spec);
	sleep_ms(5); /* a wheel thread taking changes in as they come would file x at 7 now */
	cr_assert_eq(tw_set_delay(e, x, 5), TW_OK);
	step(e, 5);
	cr_assert_eq(atomic_load(&o.n), 2);
	cr_assert_eq(o.seen[0], x, "x was added first: its place is its add's");
	cr_assert_eq(o.seen[1], y);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/*
 * Manual clock: a task's place is that of its first change that files it (an add, a move
 * earlier, a resume); a postpone, a pause or a period change made before files nothing and
 * gives it no place (issue 24: the rule, now written). Here x's first change of each pair is
 * of that kind, made before y is moved: y, moved earlier first, goes first.
 */
enum unfiling_change { POSTPONE, PAUSE, SET_PERIOD };

static void first_change_that_files(enum unfiling_change how)
{
	tw_engine *e = manual_engine(1);
	struct order o = { 0 };
	tw_task_spec spec = spec_of(100, 0, order_callback, &o);
	tw_id x = add_spec(e, &spec), y = add_spec(e, &spec);
	step(e, 1);
	if (how == POSTPONE)
		cr_assert_eq(tw_set_delay(e, x, 200), TW_OK);
	else if (how == PAUSE)
		cr_assert_eq(tw_pause(e, x), TW_OK);
	else
		cr_assert_eq(tw_set_period(e, x, 50), TW_OK);
	cr_assert_eq(tw_set_delay(e, y, 5), TW_OK);
	cr_assert_eq(tw_set_delay(e, x, 5), TW_OK); /* while paused: applies on resume */
	if (how == PAUSE)
		cr_assert_eq(tw_resume(e, x), TW_OK);
	step(e, 5);
	cr_assert_eq(atomic_load(&o.n), 2);
	cr_assert_eq(o.seen[0], y, "y was filed first");
	cr_assert_eq(o.seen[1], x);
	tw_engine_destroy(e);
	assert_no_leaks();
}

Test(no_loss, manual_clock_a_postpone_gives_no_place)
{
	first_change_that_files(POSTPONE);
}

Test(no_loss, manual_clock_a_pause_gives_no_place)
{
	first_change_that_files(PAUSE);
}

Test(no_loss, manual_clock_a_period_change_gives_no_place)
{
	first_change_that_files(SET_PERIOD);
}

/* A one-shot re-armed twice during its own blocked run: the later due takes the place of
 * the waiting firing, which counts as overlap; one run follows, for the later due. */
Test(no_loss, a_later_due_replaces_the_waiting_firing_of_a_one_shot)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 1, 0, 0);
	start_blocked_run(e, r);
	cr_assert_eq(tw_set_delay(e, id, 1), TW_OK);
	advance(e, 2); /* comes due during the run: waits */
	cr_assert_eq(tw_set_delay(e, id, 1), TW_OK, "re-armed again: replaces the waiting one");
	advance(e, 2);
	atomic_store(&r->block, false);
	gate_open(&r->gate, 1);
	quiesce(e);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(atomic_load(&r->runs), 2);
	cr_assert_eq(r->due[1], r->due[0] + 3 * NS_PER_MS, "the run is for the later due");
	cr_assert_eq(info.state, TW_COMPLETED);
	destroy_expecting_one_release(e, r);
}

/* tw_set_period while a firing waits for the task's run: a one-shot's firing stays one (it
 * runs once and completes the task); a TW_RUN_LATE periodic firing of the old period is
 * skipped as overlap, and the task goes on at the due it had. */
Test(no_loss, set_period_while_a_firing_waits_for_the_run)
{
	for (int periodic = 0; periodic < 2; periodic++) {
		tw_engine *e = manual_engine(1);
		struct recorder *r = recorder_new(e);
		tw_id id = add_recorded(e, r, 1, periodic ? 10 : 0, periodic ? TW_RUN_LATE : 0);
		start_blocked_run(e, r);
		if (!periodic)
			cr_assert_eq(tw_set_delay(e, id, 2), TW_OK);
		advance(e, 10); /* the due comes during the run: it waits */
		cr_assert_eq(tw_set_period(e, id, 50), TW_OK);
		atomic_store(&r->block, false);
		gate_open(&r->gate, 1);
		quiesce(e);
		tw_task_info info = info_of(e, id);
		tw_engine_stats st = stats_of(e);
		if (periodic) {
			cr_assert_eq(atomic_load(&r->runs), 1, "the waiting firing was skipped");
			cr_assert_eq(info.skipped_overlap, 1);
			cr_assert_eq(st.skipped_overlap, 1, "the engine counts it too");
			cr_assert_eq(info.state, TW_WAITING);
			cr_assert_eq(info.next_due_ns, r->due[0] + 20 * NS_PER_MS,
				     "the due it had");
		} else {
			cr_assert_eq(atomic_load(&r->runs), 2, "the one-shot's firing ran");
			cr_assert_eq(info.state, TW_COMPLETED, "and completed it: not re-armed");
			step(e, 100);
			cr_assert_eq(atomic_load(&r->runs), 2, "no second run for the same due");
		}
		destroy_expecting_one_release(e, r);
	}
}

/* tw_cancel drops a firing queued and not started, and one waiting for the run, and counts
 * both as missed at once, for the task and the engine alike. */
Test(no_loss, cancel_counts_dropped_firings_at_once)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	struct counts c = { 0 };
	add_recorded(e, r, 1, 0, 0); /* holds the one executor */
	tw_id victim = add_counted(e, &c, 2, 0);
	start_blocked_run(e, r);
	advance(e, 1); /* the victim's firing queues behind the blocked run */
	cr_assert_eq(tw_set_delay(e, victim, 1), TW_OK);
	advance(e, 1); /* its re-arm comes due while that firing waits: it waits too */
	cr_assert_eq(tw_cancel(e, victim), TW_OK);
	cr_assert_eq(info_of(e, victim).skipped_missed, 2, "both dropped, counted at once");
	atomic_store(&r->block, false);
	gate_open(&r->gate, 1);
	quiesce(e);
	cr_assert_eq(atomic_load(&c.runs), 0);
	tw_engine_stats st = stats_of(e);
	cr_assert_eq(st.skipped_missed, 2);
	cr_assert_eq(info_of(e, victim).skipped_missed, 2, "not counted twice");
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), 1);
	recorder_free(r);
	assert_no_leaks();
}

/* A burst of a million one-shots on one executor with the default queue (4096): every one
 * runs; those that found the queue full waited (their lateness shows it). */
static int count_only(const tw_fire *fire, void *arg)
{
	(void)fire;
	atomic_fetch_add((_Atomic uint64_t *)arg, 1);
	return 0;
}

#if defined(__SANITIZE_ADDRESS__)
#define BURST 200000 /* ASan makes every add several times slower */
#else
#define BURST 1000000
#endif

Test(no_loss, a_million_one_shots_on_one_executor_all_run, .timeout = 120)
{
	uint64_t n = BURST;
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	tw_engine *e = engine_new(&cfg);
	_Atomic uint64_t runs = 0;
	for (uint64_t i = 0; i < n; i++) {
		tw_task_spec spec = spec_of(50 + i % 200, 0, count_only, &runs);
		tw_id id;
		cr_assert_eq(tw_add(e, &spec, &id), TW_OK);
	}
	uint64_t deadline = test_now_ns() + 60000 * NS_PER_MS;
	while (atomic_load(&runs) < n && test_now_ns() < deadline)
		sleep_ms(5);
	cr_assert_eq(atomic_load(&runs), n, "%" PRIu64 " of %" PRIu64 " ran", atomic_load(&runs),
		     n);
	/* a task completes once its callback has returned: the last may be on its way */
	tw_engine_stats s = stats_of(e);
	for (int waited = 0; s.tasks_completed < n && waited < 5000; waited++) {
		sleep_ms(1);
		s = stats_of(e);
	}
	cr_assert_eq(s.skipped_overload, 0);
	cr_assert_eq(s.tasks_completed, n);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* Real clock: the wheel thread reads a bounded amount of mail per round and keeps the rest
 * for the next rounds; a burst of adds far beyond one round's, then of cancels, is taken in
 * whole: every one-shot runs, every cancelled task is released and reaped. */
Test(no_loss, a_burst_of_mail_beyond_one_round_is_all_taken_in)
{
	enum { N = 50000 };
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 2;
	cfg.retain_ms = 1;
	tw_engine *e = engine_new(&cfg);
	struct counts runs = { 0 }, cancelled = { 0 };
	for (int i = 0; i < N; i++)
		add_counted(e, &runs, 5, 0);
	cr_assert(wait_eq(&runs.runs, N), "%" PRIu64 " runs of %d", atomic_load(&runs.runs), N);
	cr_assert(wait_eq(&runs.releases, N));
	tw_id *ids = malloc(N * sizeof *ids);
	cr_assert_not_null(ids);
	for (int i = 0; i < N; i++)
		ids[i] = add_counted(e, &cancelled, 60000, 0);
	for (int i = 0; i < N; i++)
		cr_assert_eq(tw_cancel(e, ids[i]), TW_OK);
	cr_assert_eq(atomic_load(&cancelled.releases), N);
	/* Reaped: the ids stop answering once the wheel thread took in every cancel. */
	uint64_t deadline = test_now_ns() + WAIT_LIMIT_MS * NS_PER_MS;
	tw_task_info info;
	while (tw_get(e, ids[N - 1], &info) == TW_OK && test_now_ns() < deadline)
		sleep_ms(1);
	cr_assert_eq(tw_get(e, ids[N - 1], &info), -TW_ENOTFOUND, "the last cancel was not reaped");
	tw_engine_stats st = stats_of(e);
	cr_assert_eq(st.tasks_live, 0);
	cr_assert_eq(st.tasks_completed, N);
	cr_assert_eq(st.tasks_stopped, N);
	free(ids);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&cancelled.runs), 0);
	assert_no_leaks();
}
