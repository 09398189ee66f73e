/*
 * test_engine_postpone.c - tw_set_delay from every place a task can be in.
 *
 * A session reset (a later due on a task the wheel holds) is the common case, and
 * tw_set_delay keeps it short; every other case (a task not yet taken in by the wheel, an
 * earlier due, a paused or running task, TW_NEVER, a delay of 2^31 ms or more, a stale id, a
 * stopped engine, a thread new to the library) takes the general path. Each must give the
 * due asked for and the code the header promises. On the manual clock, whose time is exact,
 * but for the last two: a wheel thread that sleeps until a due far ahead, on the real clock.
 */
#include "engine_test_support.h"

#include <pthread.h>

#define MS(n) ((uint64_t)(n)*NS_PER_MS)

/* The due tw_get reports for id, which must equal at_ns. */
#define assert_due(e, id, at_ns)                                                                   \
	cr_assert_eq(info_of(e, id).next_due_ns, (at_ns), "next_due_ns %" PRIu64 ", not %" PRIu64, \
		     info_of(e, id).next_due_ns, (uint64_t)(at_ns))

/* The manual clock moves ms on: r's task runs no more up to 1 ms before, then once, for the
 * due at_ns. */
static void runs_once_in_at(tw_engine *e, struct recorder *r, uint64_t ms, uint64_t at_ns, int line)
{
	uint64_t before = atomic_load(&r->runs);
	step_at(e, ms - 1, line);
	cr_assert_eq(atomic_load(&r->runs), before, "line %d: ran before its due", line);
	step_at(e, 1, line);
	cr_assert_eq(atomic_load(&r->runs), before + 1, "line %d: did not run at its due", line);
	cr_assert_eq(r->due[before], at_ns, "line %d: ran for another due", line);
}
#define runs_once_in(e, r, ms, at_ns) runs_once_in_at(e, r, ms, at_ns, __LINE__)

Test(postpone, a_later_due_on_a_task_the_wheel_holds_fires_then)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 100, 0, 0);
	step(fx.e, 10); /* the wheel has taken the task in */
	cr_assert_eq(tw_set_delay(fx.e, id, 500), TW_OK);
	assert_due(fx.e, id, fx.t0 + MS(510));
	runs_once_in(fx.e, fx.r, 500, fx.t0 + MS(510));
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(postpone, a_later_due_before_the_wheel_took_the_task_in)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 100, 0, 0);
	cr_assert_eq(tw_set_delay(fx.e, id, 300), TW_OK); /* at once: mailed, maybe not taken in */
	assert_due(fx.e, id, fx.t0 + MS(300));
	runs_once_in(fx.e, fx.r, 300, fx.t0 + MS(300));
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(postpone, repeated_resets_keep_only_the_last)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 50, 0, 0);
	step(fx.e, 1);
	for (int k = 0; k < 40; k++) { /* a session reset at every message, 10 ms apart */
		cr_assert_eq(tw_set_delay(fx.e, id, 50), TW_OK);
		step(fx.e, 10);
	}
	cr_assert_eq(atomic_load(&fx.r->runs), 0, "a reset session timed out");
	runs_once_in(fx.e, fx.r, 40, fx.t0 + MS(1 + 39 * 10 + 50));
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(postpone, an_earlier_due_moves_the_task_forward)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 1000, 0, 0);
	step(fx.e, 5);
	cr_assert_eq(tw_set_delay(fx.e, id, 20), TW_OK);
	assert_due(fx.e, id, fx.t0 + MS(25));
	runs_once_in(fx.e, fx.r, 20, fx.t0 + MS(25));
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(postpone, a_periodic_task_goes_on_from_its_new_due)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 10, 0);
	step(fx.e, 10);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(tw_set_delay(fx.e, id, 35), TW_OK);
	assert_due(fx.e, id, fx.t0 + MS(45));
	for (int ms = 0; ms < 45; ms++)
		step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 3);
	cr_assert_eq(fx.r->due[1], fx.t0 + MS(45));
	cr_assert_eq(fx.r->due[2], fx.t0 + MS(55));
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(postpone, a_paused_task_takes_the_delay_on_resume)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 100, 0, 0);
	step(fx.e, 10);
	cr_assert_eq(tw_pause(fx.e, id), TW_OK);
	cr_assert_eq(tw_set_delay(fx.e, id, 300), TW_OK);
	cr_assert_eq(info_of(fx.e, id).state, TW_PAUSED);
	step(fx.e, 200);
	cr_assert_eq(tw_resume(fx.e, id), TW_OK);
	assert_due(fx.e, id, fx.t0 + MS(510));
	runs_once_in(fx.e, fx.r, 300, fx.t0 + MS(510));
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(postpone, a_running_one_shot_runs_again_at_its_new_due)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 1, 0, 0);
	start_blocked_run(fx.e, fx.r);
	cr_assert_eq(tw_set_delay(fx.e, id, 50), TW_OK);
	assert_due(fx.e, id, fx.t0 + MS(51));
	atomic_store(&fx.r->block, false);
	gate_open(&fx.r->gate, 1);
	quiesce(fx.e);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	runs_once_in(fx.e, fx.r, 50, fx.t0 + MS(51));
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(postpone, never_then_a_delay)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 0, 0);
	step(fx.e, 1);
	cr_assert_eq(tw_set_delay(fx.e, id, TW_NEVER), TW_OK);
	assert_due(fx.e, id, 0);
	step(fx.e, 100);
	cr_assert_eq(atomic_load(&fx.r->runs), 0);
	cr_assert_eq(tw_set_delay(fx.e, id, 7), TW_OK);
	assert_due(fx.e, id, fx.t0 + MS(108));
	runs_once_in(fx.e, fx.r, 7, fx.t0 + MS(108));
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(postpone, delays_of_two_to_the_31_ms_and_more)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	uint64_t t0 = manual_now(e);
	tw_id id = add_counted(e, &c, 10, 0);
	step(e, 1);
	const uint64_t delays[] = { (UINT64_C(1) << 31) - 1, UINT64_C(1) << 31, TW_MAX_DELAY_MS };
	for (size_t k = 0; k < sizeof delays / sizeof delays[0]; k++) {
		cr_assert_eq(tw_set_delay(e, id, delays[k]), TW_OK, "delay %" PRIu64, delays[k]);
		assert_due(e, id, t0 + MS(1) + MS(delays[k]));
	}
	cr_assert_eq(tw_set_delay(e, id, TW_MAX_DELAY_MS + 1), -TW_ERANGE);
	assert_due(e, id, t0 + MS(1) + MS(TW_MAX_DELAY_MS));
	cr_assert_eq(tw_set_delay(e, id, 20), TW_OK); /* back from wide to narrow */
	assert_due(e, id, t0 + MS(21));
	step(e, 20);
	cr_assert_eq(atomic_load(&c.runs), 1);
	destroy_expecting_releases(e, &c, 1);
}

Test(postpone, codes_for_ids_and_states)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id done = add_counted(e, &c, 1, 0);
	tw_id cancelled = add_counted(e, &c, 100, 0);
	step(e, 1);
	cr_assert_eq(atomic_load(&c.runs), 1);
	cr_assert_eq(tw_cancel(e, cancelled), TW_OK);
	cr_assert_eq(tw_set_delay(e, done, 10), -TW_ESTATE, "a completed one-shot");
	cr_assert_eq(tw_set_delay(e, cancelled, 10), -TW_ESTATE, "a stopped task");
	cr_assert_eq(tw_set_delay(e, 0, 10), -TW_ENOTFOUND);
	cr_assert_eq(tw_set_delay(e, done ^ (UINT64_C(1) << 40), 10), -TW_ENOTFOUND);
	cr_assert_eq(tw_set_delay(NULL, done, 10), -TW_EINVAL);
	tw_id live = add_counted(e, &c, 100, 0);
	step(e, 1);
	cr_assert_eq(tw_engine_stop(e, 0), TW_OK);
	cr_assert_eq(tw_set_delay(e, live, 10), -TW_ESHUTDOWN);
	destroy_expecting_releases(e, &c, 3);
}

struct from_new_thread {
	tw_engine *e;
	tw_id id;
	int rc;
};

static void *set_delay_from_new_thread(void *arg)
{
	struct from_new_thread *t = arg;
	t->rc = tw_set_delay(t->e, t->id, 400);
	return NULL;
}

Test(postpone, from_a_thread_new_to_the_library)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	uint64_t t0 = manual_now(e);
	struct from_new_thread t = { .e = e, .id = add_counted(e, &c, 100, 0), .rc = 1 };
	step(e, 1);
	pthread_t thread;
	cr_assert_eq(pthread_create(&thread, NULL, set_delay_from_new_thread, &t), 0);
	cr_assert_eq(pthread_join(thread, NULL), 0);
	cr_assert_eq(t.rc, TW_OK);
	assert_due(e, t.id, t0 + MS(401));
	destroy_expecting_releases(e, &c, 1);
}

Test(postpone, the_new_due_replaces_a_firing_that_waits_for_the_run)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 1, 10, TW_RUN_LATE);
	start_blocked_run(fx.e, fx.r);
	advance(fx.e, 10); /* the due of t0 + 11 comes while the first run goes: it waits */
	/* The due a period on, where the wheel holds the task: a firing of t0 + 11 would now
	 * be on the task's phase, so only the call itself can have dropped it. */
	cr_assert_eq(tw_set_delay(fx.e, id, 10), TW_OK);
	assert_due(fx.e, id, fx.t0 + MS(21));
	atomic_store(&fx.r->block, false);
	gate_open(&fx.r->gate, 1);
	quiesce(fx.e);
	cr_assert_eq(atomic_load(&fx.r->runs), 1, "the replaced firing ran");
	runs_once_in(fx.e, fx.r, 10, fx.t0 + MS(21));
	destroy_expecting_one_release(fx.e, fx.r);
}

/* On the real clock: a wheel thread that sleeps until a due far ahead takes in no change
 * due after it until then. */
static tw_engine *real_engine(void)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	return engine_new(&cfg);
}

Test(postpone, a_task_not_taken_in_yet_keeps_its_later_due, .timeout = 30)
{
	tw_engine *e = real_engine();
	struct counts first = { 0 };
	add_counted(e, &first, 1000, 0); /* the wheel thread sleeps until this one's due */
	sleep_ms(50);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 1500, 0, 0); /* due after that: waits in the mailbox */
	cr_assert_eq(tw_set_delay(e, id, 2500), TW_OK);
	uint64_t due = info_of(e, id).next_due_ns;
	cr_assert(wait_eq(&first.runs, 1));
	cr_assert(wait_eq(&r->runs, 1), "the postponed task never ran");
	cr_assert_eq(r->due[0], due, "ran for a due it no longer had");
	destroy_expecting_one_release(e, r);
	cr_assert_eq(atomic_load(&first.releases), 1);
}

Test(postpone, an_earlier_due_wakes_a_wheel_thread_that_sleeps_long, .timeout = 30)
{
	tw_engine *e = real_engine();
	struct counts far = { 0 };
	add_counted(e, &far, 60000, 0); /* the wheel thread sleeps until this one's due */
	sleep_ms(50);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 90000, 0, 0);       /* waits in the mailbox */
	cr_assert_eq(tw_set_delay(e, id, 120000), TW_OK); /* later still */
	cr_assert_eq(tw_set_delay(e, id, 20), TW_OK);     /* earlier: the wheel must wake */
	cr_assert(wait_eq(&r->runs, 1), "the task waited for the wheel thread's own wake-up");
	cr_assert_eq(atomic_load(&far.runs), 0);
	destroy_expecting_one_release(e, r);
	cr_assert_eq(atomic_load(&far.releases), 1);
}
