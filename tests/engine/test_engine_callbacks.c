/*
 * test_engine_callbacks.c - what callbacks may do, and what failing ones get.
 *
 * Any callback may call any operation, on its own task or another: reschedule
 * itself, cancel itself, add tasks, pause others. Callbacks never run on the
 * wheel thread, nor on the caller's thread. A callback that fails
 * max_failures times in a row pauses its task, visibly in tw_get(); resuming
 * it starts the count again.
 */
#include "engine_test_support.h"

/* ---- where callbacks run ---- */

struct where {
	tw_engine *engine;
	pthread_t test_thread;
	_Atomic uint64_t runs, on_test_thread, quiesce_rc, get_rc, state_seen, running_seen;
};

static int where_callback(const tw_fire *fire, void *arg)
{
	struct where *w = arg;
	if (pthread_equal(pthread_self(), w->test_thread))
		atomic_fetch_add(&w->on_test_thread, 1);
	atomic_store(&w->quiesce_rc, (uint64_t)(int64_t)tw_quiesce(w->engine));
	tw_task_info info;
	atomic_store(&w->get_rc, (uint64_t)(int64_t)tw_get(w->engine, fire->id, &info));
	atomic_store(&w->state_seen, info.state);
	atomic_store(&w->running_seen, info.running);
	atomic_fetch_add(&w->runs, 1);
	return 0;
}

/* tw_quiesce from a callback would wait for itself: it answers -TW_ECALLBACK.
 * tw_get of its own task shows it running. */
Test(callbacks, run_off_the_caller_thread_and_cannot_quiesce)
{
	tw_engine *e = manual_engine(2);
	struct where w = { .engine = e, .test_thread = pthread_self() };
	tw_id id = add_task(e, 1, 1, where_callback, &w);
	for (int i = 0; i < 5; i++)
		step(e, 1);
	cr_assert_eq(atomic_load(&w.runs), 5);
	cr_assert_eq(atomic_load(&w.on_test_thread), 0);
	cr_assert_eq((int)(int64_t)atomic_load(&w.quiesce_rc), -TW_ECALLBACK);
	cr_assert_eq((int)(int64_t)atomic_load(&w.get_rc), TW_OK);
	cr_assert_eq(atomic_load(&w.state_seen), TW_RUNNING);
	cr_assert_eq(atomic_load(&w.running_seen), 1);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* The wheel thread is not the one running callbacks: with every executor
 * blocked in a callback, tw_advance() still returns and firings of other
 * tasks are still handed out (here: queued) and counted. */
Test(callbacks, blocked_callbacks_do_not_stop_the_wheel)
{
	tw_engine *e = manual_engine(1);
	struct recorder *blocker = recorder_new(e), *other = recorder_new(e);
	tw_id b = add_recorded(e, blocker, 1, 1, 0);
	tw_id o = add_recorded(e, other, 1, 1, 0);
	atomic_store(&blocker->block, true);
	advance(e, 1);
	wait_started(blocker);
	for (int i = 0; i < 50; i++)
		advance(e, 1);
	tw_task_info ib = info_of(e, b), io = info_of(e, o);
	cr_assert_eq(ib.skipped_overlap, 50);
	/* The other task's firing at t0 + 1 waits behind the blocker (or ran
	 * before it); each later one is skipped for overlap while it waits. */
	cr_assert_eq(io.runs + io.running + info_skips(&io), 51);
	atomic_store(&blocker->block, false);
	gate_open(&blocker->gate, 1);
	quiesce(e);
	tw_engine_destroy(e);
	assert_recorder_sane(blocker);
	assert_recorder_sane(other);
	recorder_free(blocker);
	recorder_free(other);
	assert_no_leaks();
}

/* ---- operations from callbacks ---- */

struct self {
	tw_engine *engine;
	uint64_t until_run; /* act until this run */
	uint64_t delay;     /* for rescheduling */
	_Atomic uint64_t runs, releases, bad_rc, returned;
	uint64_t due[64];
};

static void self_release(void *arg)
{
	struct self *s = arg;
	if (atomic_load(&s->returned) != atomic_load(&s->runs))
		atomic_fetch_add(&s->bad_rc, 1000);
	atomic_fetch_add(&s->releases, 1);
}

/* A one-shot that reschedules itself until its until_run-th run, with a
 * delay that grows by one each time. */
static int reschedule_callback(const tw_fire *fire, void *arg)
{
	struct self *s = arg;
	atomic_fetch_add(&s->runs, 1);
	if (fire->run <= 64)
		s->due[fire->run - 1] = fire->due_ns;
	if (fire->run < s->until_run && tw_set_delay(s->engine, fire->id, s->delay + fire->run))
		atomic_fetch_add(&s->bad_rc, 1);
	atomic_fetch_add(&s->returned, 1);
	return 0;
}

Test(callbacks, one_shot_reschedules_itself)
{
	tw_engine *e = manual_engine(1);
	struct self s = { .engine = e, .until_run = 10, .delay = 4 };
	uint64_t t0 = manual_now(e);
	tw_task_spec spec = spec_of(4, 0, reschedule_callback, &s);
	spec.release = self_release;
	tw_id id = add_spec(e, &spec);
	/* runs at t0 + 4, then each one delay + run later: + 5, + 6, ... */
	uint64_t dues[10];
	dues[0] = t0 + 4 * NS_PER_MS;
	for (uint64_t k = 1; k < 10; k++)
		dues[k] = dues[k - 1] + (4 + k) * NS_PER_MS;
	uint64_t now = t0;
	for (int i = 0; i < 200; i++) {
		step(e, 1);
		now += NS_PER_MS;
		uint64_t want = 0;
		while (want < 10 && dues[want] <= now)
			want++;
		cr_assert_eq(atomic_load(&s.runs), want, "at t0 + %" PRIu64 " ms",
			     (now - t0) / NS_PER_MS);
		cr_assert_eq(info_of(e, id).state, want < 10 ? TW_WAITING : TW_COMPLETED);
	}
	cr_assert_eq(atomic_load(&s.bad_rc), 0);
	cr_assert_eq(atomic_load(&s.runs), 10);
	for (uint64_t k = 0; k < 10; k++)
		cr_assert_eq(s.due[k], dues[k], "run %" PRIu64, k + 1);
	cr_assert_eq(info_of(e, id).state, TW_COMPLETED);
	cr_assert(wait_eq(&s.releases, 1));
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&s.releases), 1);
	assert_no_leaks();
}

static int cancel_self_callback(const tw_fire *fire, void *arg)
{
	struct self *s = arg;
	atomic_fetch_add(&s->runs, 1);
	if (fire->run == s->until_run && tw_cancel(s->engine, fire->id) != TW_OK)
		atomic_fetch_add(&s->bad_rc, 1);
	/* Cancelled: the task is stopped while this run finishes. */
	tw_task_info info;
	if (fire->run == s->until_run &&
	    (tw_get(s->engine, fire->id, &info) != TW_OK || info.state != TW_STOPPED))
		atomic_fetch_add(&s->bad_rc, 1);
	if (atomic_load(&s->releases))
		atomic_fetch_add(&s->bad_rc, 100); /* released while running */
	atomic_fetch_add(&s->returned, 1);
	return 0;
}

Test(callbacks, periodic_task_cancels_itself)
{
	tw_engine *e = manual_engine(1);
	struct self s = { .engine = e, .until_run = 3 };
	tw_task_spec spec = spec_of(2, 2, cancel_self_callback, &s);
	spec.release = self_release;
	tw_id id = add_spec(e, &spec);
	for (int i = 0; i < 100; i++)
		step(e, 1);
	cr_assert_eq(atomic_load(&s.bad_rc), 0);
	cr_assert_eq(atomic_load(&s.runs), 3);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_STOPPED);
	cr_assert_eq(info.runs, 3);
	cr_assert_eq(info.next_due_ns, 0);
	cr_assert(wait_eq(&s.releases, 1));
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&s.releases), 1);
	assert_no_leaks();
}

/* A parent that adds a child one-shot at each of its runs. */
struct family {
	tw_engine *engine;
	_Atomic uint64_t parent_runs, bad_rc, children;
	struct counts kids;
	tw_id child[16];
	uint64_t child_due[16];
};

static int parent_callback(const tw_fire *fire, void *arg)
{
	struct family *f = arg;
	atomic_fetch_add(&f->parent_runs, 1);
	if (fire->run > 16)
		return 0;
	tw_task_spec spec = spec_of(3, 0, count_callback, &f->kids);
	spec.release = count_release;
	tw_id id = 0;
	if (tw_add(f->engine, &spec, &id) != TW_OK || id == 0) {
		atomic_fetch_add(&f->bad_rc, 1);
		return 0;
	}
	tw_task_info info;
	if (tw_get(f->engine, id, &info) != TW_OK || info.state != TW_WAITING)
		atomic_fetch_add(&f->bad_rc, 1);
	f->child[fire->run - 1] = id;
	f->child_due[fire->run - 1] = info.next_due_ns;
	atomic_fetch_add(&f->children, 1);
	return 0;
}

Test(callbacks, callback_adds_tasks)
{
	tw_engine *e = manual_engine(2);
	struct family f = { .engine = e };
	uint64_t t0 = manual_now(e);
	tw_id parent = add_task(e, 5, 5, parent_callback, &f);
	for (int i = 0; i < 53; i++)
		step(e, 1); /* parent at t0 + 5, 10, ... 50; children 3 ms after */
	cr_assert_eq(atomic_load(&f.bad_rc), 0);
	cr_assert_eq(atomic_load(&f.parent_runs), 10);
	cr_assert_eq(atomic_load(&f.children), 10);
	cr_assert_eq(atomic_load(&f.kids.runs), 10);
	for (int k = 0; k < 10; k++) {
		cr_assert_eq(f.child_due[k], t0 + (uint64_t)(5 * (k + 1) + 3) * NS_PER_MS);
		cr_assert_eq(info_of(e, f.child[k]).state, TW_COMPLETED);
		for (int j = 0; j < k; j++)
			cr_assert_neq(f.child[j], f.child[k]);
	}
	cr_assert(wait_eq(&f.kids.releases, 10));
	cr_assert_eq(tw_cancel(e, parent), TW_OK);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&f.kids.releases), 10);
	assert_no_leaks();
}

/* A controller task that acts on another task. */
struct control {
	tw_engine *engine;
	tw_id target;
	_Atomic uint64_t runs, bad_rc;
};

static int pause_resume_callback(const tw_fire *fire, void *arg)
{
	struct control *c = arg;
	atomic_fetch_add(&c->runs, 1);
	int rc = fire->run % 2 ? tw_pause(c->engine, c->target) : tw_resume(c->engine, c->target);
	if (rc != TW_OK)
		atomic_fetch_add(&c->bad_rc, 1);
	return 0;
}

Test(callbacks, callback_pauses_and_resumes_another_task)
{
	tw_engine *e = manual_engine(2);
	struct recorder *r = recorder_new(e);
	struct control c = { .engine = e };
	uint64_t t0 = manual_now(e);
	c.target = add_recorded(e, r, 2, 2, 0);       /* t0 + 2, 4 */
	add_task(e, 5, 5, pause_resume_callback, &c); /* pause at t0 + 5, resume at t0 + 10 */
	for (int i = 0; i < 9; i++)
		step(e, 1);
	cr_assert_eq(atomic_load(&c.runs), 1);
	cr_assert_eq(atomic_load(&r->runs), 2, "the target ran while paused");
	tw_task_info info = info_of(e, c.target);
	cr_assert_eq(info.state, TW_PAUSED);
	cr_assert_eq(info.paused_by_failures, false);
	step(e, 1); /* t0 + 10: resumed, next due t0 + 12 */
	cr_assert_eq(atomic_load(&c.runs), 2);
	cr_assert_eq(info_of(e, c.target).state, TW_WAITING);
	cr_assert_eq(info_of(e, c.target).next_due_ns, t0 + 12 * NS_PER_MS);
	step(e, 1);
	cr_assert_eq(atomic_load(&r->runs), 2);
	step(e, 1);
	cr_assert_eq(atomic_load(&r->runs), 3);
	cr_assert_eq(r->due[2], t0 + 12 * NS_PER_MS);
	cr_assert_eq(r->skipped[2], 0, "a resumed task does not catch up");
	cr_assert_eq(atomic_load(&c.bad_rc), 0);
	destroy_expecting_one_release(e, r);
}

static int cancel_other_callback(const tw_fire *fire, void *arg)
{
	(void)fire;
	struct control *c = arg;
	atomic_fetch_add(&c->runs, 1);
	if (tw_cancel(c->engine, c->target) != TW_OK)
		atomic_fetch_add(&c->bad_rc, 1);
	return 0;
}

Test(callbacks, callback_cancels_another_task)
{
	tw_engine *e = manual_engine(2);
	struct recorder *r = recorder_new(e);
	struct control c = { .engine = e };
	c.target = add_recorded(e, r, 3, 3, 0);       /* t0 + 3, 6 */
	add_task(e, 7, 0, cancel_other_callback, &c); /* t0 + 7 */
	for (int i = 0; i < 50; i++)
		step(e, 1);
	cr_assert_eq(atomic_load(&c.runs), 1);
	cr_assert_eq(atomic_load(&c.bad_rc), 0);
	cr_assert_eq(atomic_load(&r->runs), 2);
	cr_assert_eq(info_of(e, c.target).state, TW_STOPPED);
	cr_assert(wait_eq(&r->releases, 1));
	destroy_expecting_one_release(e, r);
}

/* A callback changing the period of another task. */
static int set_period_callback(const tw_fire *fire, void *arg)
{
	(void)fire;
	struct control *c = arg;
	atomic_fetch_add(&c->runs, 1);
	if (tw_set_period(c->engine, c->target, 10) != TW_OK)
		atomic_fetch_add(&c->bad_rc, 1);
	return 0;
}

Test(callbacks, callback_changes_another_tasks_period)
{
	tw_engine *e = manual_engine(2);
	struct recorder *r = recorder_new(e);
	struct control c = { .engine = e };
	uint64_t t0 = manual_now(e);
	c.target = add_recorded(e, r, 4, 4, 0);     /* t0 + 4, 8, 12 */
	add_task(e, 9, 0, set_period_callback, &c); /* t0 + 9: then 12, 22, 32 */
	for (int i = 0; i < 35; i++)
		step(e, 1);
	cr_assert_eq(atomic_load(&c.bad_rc), 0);
	cr_assert_eq(atomic_load(&r->runs), 5);
	const uint64_t want[] = { 4, 8, 12, 22, 32 };
	for (int k = 0; k < 5; k++)
		cr_assert_eq(r->due[k], t0 + want[k] * NS_PER_MS, "run %d", k + 1);
	destroy_checking_recorder(e, r);
}

/* ---- failing callbacks ---- */

struct failing {
	_Atomic uint64_t runs;
	_Atomic unsigned pattern; /* bit k: run k + 1 (mod 32) fails */
	_Atomic uint64_t returned_nonzero;
	int value; /* what a failing run returns */
};

/* A manual engine that pauses a task after max_failures failed runs in a row (0: never). */
static tw_engine *failing_engine(unsigned max_failures)
{
	tw_config cfg = manual_config(1);
	cfg.max_failures = max_failures;
	return engine_new(&cfg);
}

static int failing_callback(const tw_fire *fire, void *arg)
{
	struct failing *f = arg;
	atomic_fetch_add(&f->runs, 1);
	unsigned fails = (atomic_load(&f->pattern) >> ((fire->run - 1) % 32)) & 1u;
	if (fails)
		atomic_fetch_add(&f->returned_nonzero, 1);
	return fails ? f->value : 0;
}

Test(callbacks, failing_callback_is_paused_after_max_failures_in_a_row)
{
	tw_engine *e = failing_engine(3);
	struct failing f = { .pattern = 0xffffffffu, .value = 1 };
	uint64_t t0 = manual_now(e);
	tw_id id = add_task(e, 1, 1, failing_callback, &f);
	step(e, 1);
	step(e, 1);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.consecutive_failures, 2);
	cr_assert_eq(info.paused_by_failures, false);
	step(e, 1);
	info = info_of(e, id);
	cr_assert_eq(info.state, TW_PAUSED);
	cr_assert_eq(info.paused_by_failures, true);
	cr_assert_eq(info.consecutive_failures, 3);
	cr_assert_eq(info.failures, 3);
	cr_assert_eq(info.runs, 3);
	for (int i = 0; i < 20; i++)
		step(e, 1);
	cr_assert_eq(atomic_load(&f.runs), 3, "a task paused by failures ran");
	cr_assert_eq(info_of(e, id).paused_by_failures, true);
	cr_assert_eq(tw_pause(e, id), -TW_ESTATE, "it is paused already");

	/* Resume resets the count; it takes 3 more failures to pause again. */
	cr_assert_eq(tw_resume(e, id), TW_OK); /* t0 + 23: next due t0 + 24 */
	info = info_of(e, id);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.paused_by_failures, false);
	cr_assert_eq(info.consecutive_failures, 0);
	cr_assert_eq(info.failures, 3, "resume keeps the failure total");
	cr_assert_eq(info.next_due_ns, t0 + 24 * NS_PER_MS);
	step(e, 1);
	step(e, 1);
	info = info_of(e, id);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.consecutive_failures, 2);
	step(e, 1);
	info = info_of(e, id);
	cr_assert_eq(info.state, TW_PAUSED);
	cr_assert_eq(info.paused_by_failures, true);
	cr_assert_eq(info.failures, 6);
	cr_assert_eq(stats_of(e).failures, 6);
	cr_assert_eq(stats_of(e).tasks_paused, 1);
	/* A paused-by-failures task can still be cancelled. */
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	info = info_of(e, id);
	cr_assert_eq(info.state, TW_STOPPED);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&f.runs), 6);
	assert_no_leaks();
}

/* Any nonzero return is a failure, negative ones included. */
Test(callbacks, negative_return_is_a_failure)
{
	tw_engine *e = failing_engine(2);
	struct failing f = { .pattern = 0xffffffffu, .value = -5 };
	tw_id id = add_task(e, 1, 1, failing_callback, &f);
	for (int i = 0; i < 5; i++)
		step(e, 1);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.failures, 2);
	cr_assert_eq(info.paused_by_failures, true);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* Failures that are not in a row never pause; a success resets the row. */
Test(callbacks, failures_not_in_a_row_do_not_pause)
{
	tw_engine *e = failing_engine(3);
	struct failing f = { .pattern = 0x33333333, .value = 1 }; /* fail, fail, ok, ok */
	tw_id id = add_task(e, 1, 1, failing_callback, &f);
	for (int i = 1; i <= 64; i++) {
		step(e, 1);
		tw_task_info info = info_of(e, id);
		cr_assert_eq(info.state, TW_WAITING, "paused after run %d", i);
		uint64_t want_row = (i % 4 == 1) ? 1 : (i % 4 == 2) ? 2 : 0;
		cr_assert_eq(info.consecutive_failures, want_row, "after run %d", i);
	}
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.runs, 64);
	cr_assert_eq(info.failures, 32);
	cr_assert_eq(info.paused_by_failures, false);
	tw_engine_destroy(e);
	assert_no_leaks();
}

Test(callbacks, max_failures_zero_never_pauses)
{
	tw_engine *e = failing_engine(0);
	struct failing f = { .pattern = 0xffffffffu, .value = 1 };
	tw_id id = add_task(e, 1, 1, failing_callback, &f);
	for (int i = 0; i < 50; i++)
		step(e, 1);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.runs, 50);
	cr_assert_eq(info.failures, 50);
	cr_assert_eq(info.consecutive_failures, 50);
	cr_assert_eq(info.paused_by_failures, false);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* The default is 10 failures in a row. */
Test(callbacks, default_max_failures_is_ten)
{
	tw_engine *e = manual_engine(1);
	struct failing f = { .pattern = 0xffffffffu, .value = 1 };
	tw_id id = add_task(e, 1, 1, failing_callback, &f);
	for (int i = 0; i < 9; i++)
		step(e, 1);
	cr_assert_eq(info_of(e, id).state, TW_WAITING);
	step(e, 1);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_PAUSED);
	cr_assert_eq(info.paused_by_failures, true);
	cr_assert_eq(info.failures, 10);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* A user pause clears paused_by_failures' meaning: the flag says why. */
Test(callbacks, user_pause_is_not_a_pause_by_failures)
{
	tw_engine *e = failing_engine(5);
	struct failing f = { .pattern = 0xffffffffu, .value = 1 };
	tw_id id = add_task(e, 1, 1, failing_callback, &f);
	for (int i = 0; i < 3; i++)
		step(e, 1);
	cr_assert_eq(tw_pause(e, id), TW_OK);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_PAUSED);
	cr_assert_eq(info.paused_by_failures, false);
	cr_assert_eq(info.consecutive_failures, 3);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* Run durations are measured; a run longer than slow_run_ms counts as slow. */
static int sleepy_callback(const tw_fire *fire, void *arg)
{
	(void)fire;
	sleep_ms(*(unsigned *)arg);
	return 0;
}

Test(callbacks, slow_runs_are_counted_and_timed)
{
	tw_config cfg = manual_config(1);
	cfg.slow_run_ms = 5;
	tw_engine *e = engine_new(&cfg);
	unsigned long_ms = 20, short_ms = 0;
	tw_id slow = add_task(e, 1, 0, sleepy_callback, &long_ms);
	tw_id fast = add_task(e, 1, 0, sleepy_callback, &short_ms);
	step(e, 1);
	tw_task_info is = info_of(e, slow), ifa = info_of(e, fast);
	cr_assert_eq(is.slow_runs, 1);
	cr_assert(is.last_run_ns >= 20 * NS_PER_MS, "last_run_ns %" PRIu64, is.last_run_ns);
	cr_assert_eq(is.longest_run_ns, is.last_run_ns);
	cr_assert(ifa.longest_run_ns >= ifa.last_run_ns);
	cr_assert_eq(stats_of(e).slow_runs, is.slow_runs + ifa.slow_runs);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* A run of a few ns shows 1 us: "ran" is never confused with "never ran" (0). */
Test(callbacks, a_run_shows_at_least_one_microsecond)
{
	tw_engine *e = manual_engine(1);
	unsigned none = 0;
	tw_id id = add_task(e, 1, 0, sleepy_callback, &none);
	step(e, 1);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.runs, 1);
	cr_assert_geq(info.last_run_ns, 1000, "last_run_ns %" PRIu64, info.last_run_ns);
	cr_assert_eq(info.last_run_ns % 1000, 0, "kept to the microsecond");
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* How late a task's runs start: on the manual clock, exactly the manual time at the start
 * minus the due. A blocked executor holds a periodic task's first run 3 ms past its due;
 * its second run starts on time: last 0, max 3 ms, in tw_get and tw_list alike. */
static int list_one(tw_id id, const tw_task_info *info, void *arg)
{
	(void)id;
	*(tw_task_info *)arg = *info;
	return 0;
}

Test(callbacks, per_task_lateness_last_and_max)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	struct counts c = { 0 };
	add_recorded(e, r, 1, 0, 0);
	tw_id late = add_counted(e, &c, 2, 10);
	cr_assert_eq(info_of(e, late).max_lateness_ns, 0, "no run yet");
	start_blocked_run(e, r);
	advance(e, 1); /* due at 2: queued behind the blocked run */
	advance(e, 3); /* it starts at 5 */
	atomic_store(&r->block, false);
	gate_open(&r->gate, 1);
	quiesce(e);
	tw_task_info info = info_of(e, late);
	cr_assert_eq(info.runs, 1);
	cr_assert_eq(info.last_lateness_ns, 3 * NS_PER_MS);
	cr_assert_eq(info.max_lateness_ns, 3 * NS_PER_MS);
	step(e, 7); /* its next due, 12, on time */
	info = info_of(e, late);
	cr_assert_eq(info.runs, 2);
	cr_assert_eq(info.last_lateness_ns, 0);
	cr_assert_eq(info.max_lateness_ns, 3 * NS_PER_MS);
	tw_task_info listed = { 0 };
	cr_assert_eq(tw_list(e, 0, list_one, &listed), TW_OK); /* the one live task */
	cr_assert_eq(listed.max_lateness_ns, 3 * NS_PER_MS, "tw_list shows it too");
	cr_assert_eq(listed.last_lateness_ns, 0);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), 1);
	recorder_free(r);
	assert_no_leaks();
}

/* A slow_run_ms too large to count in ns means "never slow", not a wrapped
 * limit (this one would wrap to 448 us) that makes every run slow. */
Test(callbacks, huge_slow_run_limit_counts_no_run_as_slow)
{
	tw_config cfg = manual_config(1);
	cfg.slow_run_ms = UINT64_MAX / NS_PER_MS + 1;
	tw_engine *e = engine_new(&cfg);
	unsigned run_ms = 2;
	tw_id id = add_task(e, 1, 0, sleepy_callback, &run_ms);
	step(e, 1);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.runs, 1);
	cr_assert_eq(info.slow_runs, 0);
	tw_engine_destroy(e);
	assert_no_leaks();
}
