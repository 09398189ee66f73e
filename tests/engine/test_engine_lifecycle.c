/*
 * test_engine_lifecycle.c - how tasks and engines end.
 *
 * release(arg) is called exactly once for every task that was added, after
 * its last run returned: on cancel, on completion of a one-shot, at engine
 * stop and at destroy. Ended tasks stay queryable for retain_ms, then their
 * id answers -TW_ENOTFOUND; ids are never reused. tw_engine_stop stops
 * firing, refuses new operations, waits up to its drain limit for runs in
 * progress (-TW_ETIMEDOUT if some are still going) and releases every task;
 * destroy never frees what a running callback still uses.
 */
#include "engine_test_support.h"

/* ---- release exactly once, for every ending ---- */

Test(lifecycle, cancel_releases_once)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, 10, 10);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	cr_assert(wait_eq(&c.releases, 1), "cancel did not release");
	cr_assert_eq(tw_cancel(e, id), -TW_ESTATE);
	step(e, 100);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), 1);
	cr_assert_eq(atomic_load(&c.runs), 0);
	assert_no_leaks();
}

Test(lifecycle, one_shot_completion_releases_once)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	add_recorded(e, r, 10, 0, 0);
	step(e, 9);
	cr_assert_eq(atomic_load(&r->releases), 0, "released before its run");
	step(e, 1);
	cr_assert(wait_eq(&r->releases, 1), "completion did not release");
	step(e, 100);
	destroy_expecting_one_release(e, r);
}

/* tw_engine_stop releases every task before it returns: waiting, paused,
 * and those whose run it waited for. */
Test(lifecycle, engine_stop_releases_every_task_once)
{
	enum { N = 30 };
	tw_engine *e = manual_engine(2);
	struct counts c[N];
	memset(c, 0, sizeof c);
	for (int i = 0; i < N; i++) {
		tw_id id = add_counted(e, &c[i], (uint64_t)i + 1, i % 3 ? 5 : 0);
		if (i % 4 == 0)
			cr_assert_eq(tw_pause(e, id), TW_OK);
	}
	step(e, 7);
	cr_assert_eq(tw_engine_stop(e, WAIT_LIMIT_MS), TW_OK);
	for (int i = 0; i < N; i++)
		cr_assert_eq(atomic_load(&c[i].releases), 1, "task %d: %" PRIu64 " releases", i,
			     atomic_load(&c[i].releases));
	tw_engine_destroy(e);
	for (int i = 0; i < N; i++)
		cr_assert_eq(atomic_load(&c[i].releases), 1);
	assert_no_leaks();
}

/* Destroy without stop releases everything too, and what ended earlier is
 * not released again. Thousands of tasks, in every state. */
Test(lifecycle, destroy_releases_every_task_once_in_every_state)
{
	enum { N = 3000 };
	tw_engine *e = manual_engine(2);
	struct counts *c = calloc(N, sizeof *c);
	cr_assert_not_null(c);
	tw_id *id = calloc(N, sizeof *id);
	cr_assert_not_null(id);
	for (int i = 0; i < N; i++)
		id[i] = add_counted(e, &c[i], (uint64_t)(i % 50) + 1,
				    i % 5 == 0 ? 0 : (uint64_t)(i % 7) + 1);
	for (int i = 0; i < N; i++) {
		if (i % 3 == 0)
			cr_assert_eq(tw_cancel(e, id[i]), TW_OK);
		else if (i % 3 == 1 && i % 2)
			cr_assert_eq(tw_pause(e, id[i]), TW_OK);
	}
	step(e, 25); /* one-shots with small delays completed */
	uint64_t completed = 0;
	for (int i = 0; i < N; i++)
		completed += info_of(e, id[i]).state == TW_COMPLETED;
	cr_assert_gt(completed, 0);
	tw_engine_destroy(e);
	for (int i = 0; i < N; i++)
		cr_assert_eq(atomic_load(&c[i].releases), 1, "task %d: %" PRIu64 " releases", i,
			     atomic_load(&c[i].releases));
	free(c);
	free(id);
	assert_no_leaks();
}

/* Cancel while the task runs: tw_cancel answers at once, the run finishes,
 * no new run starts, and release comes after the run returned. */
Test(lifecycle, cancel_during_a_run_releases_after_the_run)
{
	tw_engine *e = manual_engine(2);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 1, 1, 0);
	start_blocked_run(e, r);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_STOPPED);
	cr_assert_eq(info.running, 1);
	for (int i = 0; i < 10; i++)
		advance(e, 1);
	sleep_ms(20);
	cr_assert_eq(atomic_load(&r->releases), 0, "released while its run was going");
	cr_assert_eq(atomic_load(&r->returned), 0);
	atomic_store(&r->block, false);
	gate_open(&r->gate, 1);
	quiesce(e);
	cr_assert(wait_eq(&r->releases, 1));
	for (int i = 0; i < 10; i++)
		step(e, 1);
	cr_assert_eq(atomic_load(&r->runs), 1, "a run started after tw_cancel returned");
	destroy_expecting_one_release(e, r);
}

/* Cancel a task whose firing was handed out but has not started (it waits
 * in the queue of an executor busy with another callback): after tw_cancel
 * returns, that run must not start. */
Test(lifecycle, cancel_before_a_queued_run_starts_prevents_it)
{
	tw_engine *e = manual_engine(1);
	struct recorder *blocker = recorder_new(e), *r = recorder_new(e);
	run_blocked_one_shot(e, blocker);
	tw_id id = add_recorded(e, r, 1, 0, 0);
	advance(e, 1); /* r's firing is handed out, behind the blocker */
	cr_assert_eq(atomic_load(&r->runs), 0);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	gate_open(&blocker->gate, 1);
	quiesce(e);
	cr_assert_eq(atomic_load(&r->runs), 0, "the callback ran after tw_cancel returned");
	cr_assert(wait_eq(&r->releases, 1));
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&r->releases), 1);
	cr_assert_eq(atomic_load(&blocker->releases), 1);
	assert_recorder_sane(r);
	assert_recorder_sane(blocker);
	recorder_free(blocker);
	recorder_free(r);
	assert_no_leaks();
}

/* Record the thread a release ran in. */
struct release_thread {
	_Atomic uint64_t releases;
	pthread_t thread;
};

static void note_release_thread(void *arg)
{
	struct release_thread *t = arg;
	t->thread = pthread_self();
	atomic_fetch_add(&t->releases, 1);
}

/*
 * A firing queued and not started counts as no run (issue 24): tw_cancel of a task whose only
 * firing waits behind another task's run releases it itself, in the calling thread, before it
 * returns. The task is kept until the executor takes the dropped firing out (a short
 * retain_ms passes meanwhile), then forgotten; it never runs, and is released once.
 */
Test(lifecycle, cancel_of_a_task_whose_only_firing_is_queued_releases_at_once)
{
	tw_config cfg = manual_config(1);
	cfg.retain_ms = 1;
	tw_engine *e = engine_new(&cfg);
	struct recorder *blocker = recorder_new(e);
	struct counts c = { 0 };
	struct release_thread rel = { 0 };
	run_blocked_one_shot(e, blocker);
	tw_task_spec spec = spec_of(1, 0, count_callback, &c);
	spec.release = note_release_thread;
	spec.arg = &rel;
	tw_id id = add_spec(e, &spec);
	advance(e, 1); /* its firing is handed out, behind the blocker */
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_RUNNING);
	cr_assert_eq(info.runs, 0);
	cr_assert_eq(info.running, 1);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	cr_assert_eq(atomic_load(&rel.releases), 1, "released by tw_cancel itself");
	cr_assert(pthread_equal(rel.thread, pthread_self()), "in the calling thread");
	info = info_of(e, id);
	cr_assert_eq(info.state, TW_STOPPED);
	cr_assert_eq(info.skipped_missed, 1);
	for (int i = 0; i < 5; i++)
		advance(e, 1); /* past retain_ms while the dropped firing is still queued */
	/* Not reaped meanwhile: the queued firing points to it, and its slot may not be reused. */
	cr_assert_eq(tw_get(e, id, &info), TW_OK, "kept while its firing is queued");
	gate_open(&blocker->gate, 1);
	quiesce(e);
	step(e, 2);
	cr_assert_eq(tw_get(e, id, &info), -TW_ENOTFOUND, "forgotten once taken out");
	cr_assert_eq(atomic_load(&c.runs), 0, "it never ran");
	cr_assert_eq(atomic_load(&rel.releases), 1);
	struct counts later = { 0 };
	add_counted(e, &later, 1, 0); /* may take the slot again */
	step(e, 1);
	cr_assert_eq(atomic_load(&later.runs), 1);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&rel.releases), 1);
	cr_assert_eq(atomic_load(&later.releases), 1);
	cr_assert_eq(atomic_load(&blocker->releases), 1);
	assert_recorder_sane(blocker);
	recorder_free(blocker);
	assert_no_leaks();
}

/* Pause a task whose firing was handed out but has not started: the run
 * does not start, and the firing counts as skipped, not lost. */
Test(lifecycle, pause_before_a_queued_run_starts_prevents_it)
{
	tw_engine *e = manual_engine(1);
	struct recorder *blocker = recorder_new(e), *r = recorder_new(e);
	run_blocked_one_shot(e, blocker);
	tw_id id = add_recorded(e, r, 1, 10, 0);
	advance(e, 1); /* r's firing is handed out, behind the blocker */
	cr_assert_eq(tw_pause(e, id), TW_OK);
	gate_open(&blocker->gate, 1);
	quiesce(e);
	cr_assert_eq(atomic_load(&r->runs), 0, "the callback ran after tw_pause returned");
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_PAUSED);
	cr_assert_eq(info.runs + info_skips(&info), 1, "the firing was neither run nor skipped");
	cr_assert_eq(tw_resume(e, id), TW_OK);
	step(e, 10);
	cr_assert_eq(atomic_load(&r->runs), 1);
	cr_assert_eq(r->skipped[0], 1, "the run after resume reports the dropped firing");
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&r->releases), 1);
	assert_recorder_sane(r);
	assert_recorder_sane(blocker);
	recorder_free(blocker);
	recorder_free(r);
	assert_no_leaks();
}

/* A one-shot whose firing finds every queue full is not dropped: it waits,
 * runs once room frees, and is released once. */
Test(lifecycle, one_shot_without_room_waits_runs_and_is_released_once)
{
	tw_engine *e = queue_limited_engine(1, 1);
	struct recorder *blocker = recorder_new(e), *filler = recorder_new(e), *r = recorder_new(e);
	run_blocked_one_shot(e, blocker);
	add_recorded(e, filler, 1, 0, 0);
	advance(e, 1); /* the filler takes the only place */
	tw_id id = add_recorded(e, r, 1, 0, 0);
	advance(e, 1); /* no room: it waits */
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.skipped_overload, 0);
	cr_assert_eq(info.running, 0);
	cr_assert_eq(info.runs, 0);
	cr_assert_neq(info.next_due_ns, 0, "still due");
	uint64_t due = info.next_due_ns;
	gate_open(&blocker->gate, 1);
	quiesce(e); /* waits for the waiting one-shot too */
	cr_assert_eq(atomic_load(&r->runs), 1);
	cr_assert_eq(r->due[0], due, "it runs for its own due, late");
	cr_assert_eq(info_of(e, id).state, TW_COMPLETED);
	cr_assert(wait_eq(&r->releases, 1));
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&r->runs), 1);
	cr_assert_eq(atomic_load(&r->releases), 1);
	cr_assert_eq(atomic_load(&filler->runs), 1);
	cr_assert_eq(atomic_load(&filler->releases), 1);
	cr_assert_eq(atomic_load(&blocker->releases), 1);
	assert_recorder_sane(blocker);
	assert_recorder_sane(filler);
	assert_recorder_sane(r);
	recorder_free(blocker);
	recorder_free(filler);
	recorder_free(r);
	assert_no_leaks();
}

/* A concurrent task cancelled with runs going is released after the last. */
Test(lifecycle, concurrent_task_released_after_its_last_run)
{
	tw_engine *e = manual_engine(2);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 1, 1, TW_CONCURRENT);
	start_blocked_run(e, r);
	advance(e, 1);
	advance(e, 1);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	gate_open(&r->gate, 1000);
	quiesce(e);
	cr_assert(wait_eq(&r->releases, 1));
	destroy_expecting_one_release(e, r);
}

/* ---- retention and ids ---- */

Test(lifecycle, ended_tasks_answer_until_retain_ms_then_not_found)
{
	tw_config cfg = manual_config(1);
	cfg.retain_ms = 100;
	tw_engine *e = engine_new(&cfg);
	struct counts a = { 0 }, b = { 0 };
	tw_id done = add_counted(e, &a, 10, 0);
	tw_id gone = add_counted(e, &b, 1000, 0);
	step(e, 10);                             /* t0 + 10: done completes */
	cr_assert_eq(tw_cancel(e, gone), TW_OK); /* and gone is cancelled */
	step(e, 100);                            /* t0 + 110: retain_ms whole */
	tw_task_info info = info_of(e, done);
	cr_assert_eq(info.state, TW_COMPLETED);
	cr_assert_eq(info.runs, 1);
	cr_assert_eq(info_of(e, gone).state, TW_STOPPED);
	cr_assert_eq(tw_pause(e, done), -TW_ESTATE);
	cr_assert_eq(tw_set_delay(e, done, 1), -TW_ESTATE, "a completed one-shot is not re-armed");
	step(e, 1); /* t0 + 111: retention over */
	cr_assert_eq(tw_get(e, done, &info), -TW_ENOTFOUND);
	cr_assert_eq(tw_get(e, gone, &info), -TW_ENOTFOUND);
	cr_assert_eq(tw_pause(e, done), -TW_ENOTFOUND);
	cr_assert_eq(tw_resume(e, done), -TW_ENOTFOUND);
	cr_assert_eq(tw_cancel(e, gone), -TW_ENOTFOUND);
	cr_assert_eq(tw_set_delay(e, gone, 1), -TW_ENOTFOUND);
	cr_assert_eq(tw_set_period(e, gone, 1), -TW_ENOTFOUND);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&a.releases), 1);
	cr_assert_eq(atomic_load(&b.releases), 1);
	assert_no_leaks();
}

/* Cancels its own task, then moves the manual clock while its run still goes. */
struct self_cancel {
	tw_engine *engine;
	_Atomic tw_id id;
	_Atomic uint64_t runs, releases, failed_calls;
	_Atomic int state_after_cancel;
};

static int self_cancel_callback(const tw_fire *fire, void *arg)
{
	struct self_cancel *c = arg;
	atomic_fetch_add(&c->runs, 1);
	tw_task_info info;
	if (tw_cancel(c->engine, fire->id) != TW_OK || tw_get(c->engine, fire->id, &info) != TW_OK)
		atomic_fetch_add(&c->failed_calls, 1);
	atomic_store(&c->state_after_cancel, (int)info.state);
	if (tw_advance(c->engine, 8) != TW_OK)
		atomic_fetch_add(&c->failed_calls, 1);
	return 0;
}

static void self_cancel_release(void *arg)
{
	atomic_fetch_add(&((struct self_cancel *)arg)->releases, 1);
}

/*
 * A task cancelled during its own run (issue 24: decided and written) is TW_STOPPED at once,
 * but ends when that run returns: it is released then, and retain_ms counts from then, not
 * from the cancel. Here the run lasts 8 ms of the manual clock after its cancel.
 */
Test(lifecycle, task_cancelled_in_its_own_run_is_kept_retain_ms_from_the_run_s_end)
{
	tw_config cfg = manual_config(1);
	cfg.retain_ms = 10;
	tw_engine *e = engine_new(&cfg);
	struct self_cancel c = { .engine = e };
	tw_task_spec spec = spec_of(1, 1, self_cancel_callback, &c);
	spec.release = self_cancel_release;
	tw_id id = add_spec(e, &spec);
	atomic_store(&c.id, id);
	step(e, 1); /* the run: cancel at t0 + 1, returns at t0 + 9 */
	cr_assert_eq(atomic_load(&c.failed_calls), 0);
	cr_assert_eq(atomic_load(&c.state_after_cancel), TW_STOPPED, "stopped at once");
	cr_assert_eq(atomic_load(&c.releases), 1, "released once its run returned");
	tw_task_info info;
	step(e, 10); /* t0 + 19: 18 ms from the cancel, 10 from the run's end */
	cr_assert_eq(tw_get(e, id, &info), TW_OK, "kept retain_ms whole from the run's end");
	cr_assert_eq(info.state, TW_STOPPED);
	cr_assert_eq(info.runs, 1);
	step(e, 1);
	cr_assert_eq(tw_get(e, id, &info), -TW_ENOTFOUND);
	cr_assert_eq(atomic_load(&c.runs), 1);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), 1);
}

/* The manual clock forgets every task that ended in one millisecond at once, past the 1024
 * a ms the real clock's wheel thread takes (retain_ms's doc): kept retain_ms whole, gone at
 * the tw_advance that reaches retain_ms + 1. */
Test(lifecycle, many_ended_at_once_are_forgotten_together_on_the_manual_clock)
{
	enum { N = 3000 };
	tw_config cfg = manual_config(1);
	cfg.retain_ms = 100;
	tw_engine *e = engine_new(&cfg);
	struct counts c = { 0 };
	static tw_id ids[N];
	for (int i = 0; i < N; i++)
		ids[i] = add_counted(e, &c, 1000, 0);
	for (int i = 0; i < N; i++)
		cr_assert_eq(tw_cancel(e, ids[i]), TW_OK);
	step(e, 100);
	tw_task_info info;
	for (int i = 0; i < N; i++)
		cr_assert_eq(tw_get(e, ids[i], &info), TW_OK, "task %d kept retain_ms whole", i);
	step(e, 1);
	for (int i = 0; i < N; i++)
		cr_assert_eq(tw_get(e, ids[i], &info), -TW_ENOTFOUND, "task %d forgotten", i);
	destroy_expecting_releases(e, &c, N);
}

Test(lifecycle, default_retention_is_five_seconds)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, 1000, 0);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	step(e, 5000);
	cr_assert_eq(info_of(e, id).state, TW_STOPPED);
	step(e, 1);
	tw_task_info info;
	cr_assert_eq(tw_get(e, id, &info), -TW_ENOTFOUND);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* Ids are never reused, even when the engine reuses the memory of ended
 * tasks, and an old id never reaches a new task. */
Test(lifecycle, ids_are_never_reused)
{
	enum { ROUNDS = 300, PER_ROUND = 10 };
	tw_config cfg = manual_config(1);
	cfg.retain_ms = 0;
	tw_engine *e = engine_new(&cfg);
	struct counts c = { 0 };
	tw_id *ids = calloc(ROUNDS * PER_ROUND, sizeof *ids);
	cr_assert_not_null(ids);
	size_t n = 0;
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < PER_ROUND; i++) {
			ids[n] = add_counted(e, &c, 1000, 0);
			cr_assert_eq(tw_cancel(e, ids[n]), TW_OK);
			n++;
		}
		step(e, 2); /* retention over: the ids stop answering */
		if (round % 50 == 0)
			sleep_ms(5); /* let reclaimed slots come back for reuse */
	}
	for (size_t i = 0; i < n; i++) {
		tw_task_info info;
		cr_assert_eq(tw_get(e, ids[i], &info), -TW_ENOTFOUND);
		cr_assert_eq(tw_cancel(e, ids[i]), -TW_ENOTFOUND);
	}
	/* Distinct: sort and compare neighbours. */
	for (size_t i = 1; i < n; i++) {
		tw_id v = ids[i];
		size_t j = i;
		while (j > 0 && ids[j - 1] > v) {
			ids[j] = ids[j - 1];
			j--;
		}
		ids[j] = v;
	}
	for (size_t i = 1; i < n; i++)
		cr_assert_neq(ids[i], ids[i - 1], "id %" PRIu64 " given twice", ids[i]);
	cr_assert_neq(ids[0], 0);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), n);
	free(ids);
	assert_no_leaks();
}

/* Tens of thousands of tasks: every id stays reachable while the engine
 * makes room, including for a thread reading them meanwhile. */
struct reader {
	tw_engine *engine;
	tw_id *ids;
	_Atomic size_t published;
	_Atomic bool done;
	_Atomic uint64_t reads, misses;
};

static void *read_ids(void *arg)
{
	struct reader *r = arg;
	unsigned seed = 7;
	while (!atomic_load(&r->done)) {
		size_t n = atomic_load(&r->published);
		if (!n)
			continue;
		tw_task_info info;
		tw_id id = r->ids[(size_t)rand_r(&seed) % n];
		if (tw_get(r->engine, id, &info) != TW_OK || info.state != TW_WAITING)
			atomic_fetch_add(&r->misses, 1);
		atomic_fetch_add(&r->reads, 1);
	}
	return NULL;
}

Test(lifecycle, many_tasks_stay_reachable_while_the_engine_grows)
{
	enum { N = 40000 };
	tw_engine *e = manual_engine(2);
	struct counts c = { 0 };
	struct reader r = { .engine = e };
	r.ids = calloc(N, sizeof *r.ids);
	cr_assert_not_null(r.ids);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, read_ids, &r), 0);
	for (size_t i = 0; i < N; i++) {
		r.ids[i] = add_counted(e, &c, 1000000, 0);
		atomic_store(&r.published, i + 1);
		/* The adds take a few ms: the reader must be reading before the table grows
		 * much, or a loaded machine may not run it before they are over. */
		if (i == 1000)
			cr_assert(wait_ge(&r.reads, 1), "the reader never ran");
	}
	atomic_store(&r.done, true);
	pthread_join(t, NULL);
	cr_assert_gt(atomic_load(&r.reads), 0);
	cr_assert_eq(atomic_load(&r.misses), 0, "a published id did not answer");
	cr_assert_eq(stats_of(e).tasks_live, N);
	for (size_t i = 0; i < N; i++) {
		if (i % 2)
			cr_assert_eq(tw_cancel(e, r.ids[i]), TW_OK);
		else
			cr_assert_eq(info_of(e, r.ids[i]).state, TW_WAITING);
	}
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), N);
	cr_assert_eq(atomic_load(&c.runs), 0);
	free(r.ids);
	assert_no_leaks();
}

/* ---- stop and destroy while callbacks run ---- */

Test(lifecycle, stop_times_out_while_a_callback_outlives_the_drain)
{
	tw_engine *e = manual_engine(2);
	struct recorder *r = recorder_new(e);
	struct counts idle = { 0 };
	add_recorded(e, r, 1, 1, 0);
	add_counted(e, &idle, 1000, 0);
	start_blocked_run(e, r);
	cr_assert_eq(tw_engine_stop(e, 50), -TW_ETIMEDOUT);
	cr_assert_eq(atomic_load(&idle.releases), 1, "the idle task was not released at stop");
	cr_assert_eq(atomic_load(&r->releases), 0, "released while its run was going");
	cr_assert_eq(atomic_load(&r->returned), 0);
	atomic_store(&r->block, false);
	gate_open(&r->gate, 1);
	cr_assert(wait_eq(&r->releases, 1), "not released after its run returned");
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&r->releases), 1);
	cr_assert_eq(atomic_load(&r->runs), 1);
	assert_recorder_sane(r);
	recorder_free(r);
	assert_no_leaks();
}

/* Opens a gate once the engine is seen stopping (tw_get then shows the task
 * stopped); the engine cannot be freed before, as a callback waits on that
 * gate. */
struct opener {
	tw_engine *engine;
	tw_id id;
	struct gate *gate;
	unsigned delay_ms;
	bool saw_shutdown;
};

static void *open_when_stopping(void *arg)
{
	struct opener *o = arg;
	uint64_t deadline = test_now_ns() + WAIT_LIMIT_MS * NS_PER_MS;
	tw_task_info info;
	while (test_now_ns() < deadline) {
		if (tw_get(o->engine, o->id, &info) == TW_OK && info.state == TW_STOPPED) {
			o->saw_shutdown = true;
			break;
		}
		sleep_ms(1);
	}
	sleep_ms(o->delay_ms);
	gate_open(o->gate, 1);
	return NULL;
}

Test(lifecycle, stop_waits_for_runs_within_the_drain_limit)
{
	tw_engine *e = manual_engine(2);
	struct recorder *r = recorder_new(e);
	struct counts idle = { 0 };
	tw_id id = add_recorded(e, r, 1, 1, 0);
	add_counted(e, &idle, 1000, 1000);
	start_blocked_run(e, r);
	struct opener o = { .engine = e, .id = id, .gate = &r->gate, .delay_ms = 30 };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, open_when_stopping, &o), 0);
	cr_assert_eq(tw_engine_stop(e, 30000), TW_OK);
	/* Returned after the run: its release is done as well. */
	cr_assert_eq(atomic_load(&r->returned), 1);
	cr_assert_eq(atomic_load(&r->releases), 1);
	cr_assert_eq(atomic_load(&idle.releases), 1);
	pthread_join(t, NULL);
	cr_assert(o.saw_shutdown);
	destroy_expecting_one_release(e, r);
}

/* A callback that still uses the engine after destroy began: destroy waits
 * for it (AddressSanitizer would see a use after free otherwise). */
struct late_user {
	tw_engine *engine;
	struct gate gate;
	_Atomic uint64_t runs, get_rc, get_state, add_rc, returned, releases;
};

static int late_user_callback(const tw_fire *fire, void *arg)
{
	struct late_user *u = arg;
	atomic_fetch_add(&u->runs, 1);
	if (fire->run == 1) {
		gate_pass(&u->gate, 30000);
		tw_task_info info;
		atomic_store(&u->get_rc, (uint64_t)(int64_t)tw_get(u->engine, fire->id, &info));
		atomic_store(&u->get_state, info.state);
		tw_task_spec spec = spec_of(1, 0, late_user_callback, u);
		tw_id id;
		atomic_store(&u->add_rc, (uint64_t)(int64_t)tw_add(u->engine, &spec, &id));
		sleep_ms(20);
	}
	atomic_fetch_add(&u->returned, 1);
	return 0;
}

static void late_user_release(void *arg)
{
	struct late_user *u = arg;
	atomic_fetch_add(&u->releases, 1);
}

static void count_warnings(int level, const char *message, void *arg)
{
	(void)message;
	if (level <= TW_LOG_WARNING)
		atomic_fetch_add((_Atomic uint64_t *)arg, 1);
}

Test(lifecycle, destroy_waits_for_a_running_callback)
{
	_Atomic uint64_t warnings = 0;
	tw_config cfg = manual_config(2);
	cfg.log = count_warnings;
	cfg.log_arg = &warnings;
	tw_engine *e = engine_new_at(&cfg, __LINE__);
	struct late_user u = { .engine = e };
	gate_init(&u.gate);
	tw_task_spec spec = spec_of(1, 1, late_user_callback, &u);
	spec.release = late_user_release;
	tw_id id = add_spec(e, &spec);
	advance(e, 1);
	cr_assert(wait_eq(&u.runs, 1));
	struct opener o = { .engine = e, .id = id, .gate = &u.gate, .delay_ms = 10 };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, open_when_stopping, &o), 0);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&u.returned), 1, "destroy returned before the callback did");
	/* Waiting is what destroy does: nothing to warn about (stop(0) did). */
	cr_assert_eq(atomic_load(&warnings), 0, "destroy logged a warning or an error");
	cr_assert_eq(atomic_load(&u.releases), 1);
	/* A stopped engine still answers tw_get, with the task stopped. */
	cr_assert_eq((int)(int64_t)atomic_load(&u.get_rc), TW_OK);
	cr_assert_eq(atomic_load(&u.get_state), TW_STOPPED);
	cr_assert_eq((int)(int64_t)atomic_load(&u.add_rc), -TW_ESHUTDOWN);
	pthread_join(t, NULL);
	cr_assert(o.saw_shutdown);
	gate_destroy(&u.gate);
	assert_no_leaks();
}

/* Stop with a firing handed out but not started: it never runs, and its
 * task is released once. */
Test(lifecycle, stop_drops_firings_that_have_not_started)
{
	tw_engine *e = manual_engine(1);
	struct recorder *blocker = recorder_new(e), *r = recorder_new(e);
	tw_id b = run_blocked_one_shot(e, blocker);
	add_recorded(e, r, 1, 5, 0);
	advance(e, 1); /* r's firing waits behind the blocker */
	struct opener o = { .engine = e, .id = b, .gate = &blocker->gate, .delay_ms = 10 };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, open_when_stopping, &o), 0);
	cr_assert_eq(tw_engine_stop(e, 30000), TW_OK);
	pthread_join(t, NULL);
	cr_assert_eq(atomic_load(&r->runs), 0, "a firing started after stop");
	cr_assert_eq(atomic_load(&r->releases), 1);
	cr_assert_eq(atomic_load(&blocker->releases), 1);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&r->releases), 1);
	assert_recorder_sane(blocker);
	assert_recorder_sane(r);
	recorder_free(blocker);
	recorder_free(r);
	assert_no_leaks();
}

/* Stop releases at once every task with no run going, whatever run is stuck: a
 * firing queued behind the stuck run is dropped (counted missed), a one-shot
 * waiting for room is ended; the stuck run's task is released when it returns. */
Test(lifecycle, stop_releases_every_task_without_a_run_at_once)
{
	tw_engine *e = queue_limited_engine(1, 1);
	struct recorder *blocker = recorder_new(e);
	struct counts filler = { 0 }, waiting = { 0 };
	run_blocked_one_shot(e, blocker);
	tw_id queued = add_counted(e, &filler, 1, 0);
	advance(e, 1); /* the filler takes the only place in the queue */
	tw_id id = add_counted(e, &waiting, 1, 0);
	advance(e, 1); /* no room: it waits */
	cr_assert_eq(info_of(e, id).state, TW_WAITING);
	cr_assert_eq(tw_engine_stop(e, 50), -TW_ETIMEDOUT, "the blocker still runs");
	cr_assert_eq(atomic_load(&filler.releases), 1, "queued, never started: released");
	cr_assert_eq(atomic_load(&waiting.releases), 1, "waiting for room: released");
	cr_assert_eq(atomic_load(&filler.runs), 0);
	cr_assert_eq(atomic_load(&waiting.runs), 0);
	cr_assert_eq(atomic_load(&blocker->releases), 0, "its run goes on");
	tw_engine_stats s = stats_of(e);
	cr_assert_eq(s.skipped_missed, 1, "the dropped firing of the filler");
	(void)queued;
	gate_open(&blocker->gate, 1);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&blocker->releases), 1);
	assert_recorder_sane(blocker);
	recorder_free(blocker);
	assert_no_leaks();
}

/* Nothing fires after stop, on the real clock either. */
Test(lifecycle, nothing_runs_after_stop_returns)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 2;
	tw_engine *e = engine_new(&cfg);
	struct counts c[8];
	memset(c, 0, sizeof c);
	for (int i = 0; i < 8; i++)
		add_counted(e, &c[i], 1, 1);
	cr_assert(wait_ge(&c[0].runs, 3));
	cr_assert_eq(tw_engine_stop(e, WAIT_LIMIT_MS), TW_OK);
	uint64_t runs[8];
	for (int i = 0; i < 8; i++) {
		runs[i] = atomic_load(&c[i].runs);
		cr_assert_eq(atomic_load(&c[i].releases), 1);
	}
	sleep_ms(30);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(atomic_load(&c[i].runs), runs[i], "task %d ran after stop", i);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* Every operation after stop answers -TW_ESHUTDOWN. */
Test(lifecycle, calls_after_stop_answer_shutdown)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, 10, 10);
	tw_id paused = add_counted(e, &c, 10, 10);
	cr_assert_eq(tw_pause(e, paused), TW_OK);
	cr_assert_eq(tw_engine_stop(e, 1000), TW_OK);
	tw_task_spec spec = spec_of(1, 0, count_callback, &c);
	tw_id out = 0;
	tw_task_info info;
	cr_assert_eq(tw_add(e, &spec, &out), -TW_ESHUTDOWN);
	cr_assert_eq(tw_pause(e, id), -TW_ESHUTDOWN);
	cr_assert_eq(tw_resume(e, paused), -TW_ESHUTDOWN);
	cr_assert_eq(tw_cancel(e, id), -TW_ESHUTDOWN);
	cr_assert_eq(tw_set_delay(e, id, 5), -TW_ESHUTDOWN);
	cr_assert_eq(tw_set_period(e, id, 5), -TW_ESHUTDOWN);
	cr_assert_eq(tw_advance(e, 1), -TW_ESHUTDOWN);
	/* Until destroy, each task's final state and counts stay readable. */
	cr_assert_eq(tw_get(e, id, &info), TW_OK);
	cr_assert_eq(info.state, TW_STOPPED);
	cr_assert_eq(info.runs, 0, "it never ran");
	cr_assert_eq(tw_get(e, paused, &info), TW_OK);
	cr_assert_eq(info.state, TW_STOPPED);
	cr_assert_eq(tw_get(e, id + 1000, &info), -TW_ENOTFOUND);
	cr_assert_eq(tw_engine_stop(e, 1000), -TW_ESHUTDOWN);
	/* Statistics stay readable or answer -TW_ESHUTDOWN; never anything else. */
	tw_engine_stats s;
	int rc = tw_stats(e, &s);
	cr_assert(rc == TW_OK || rc == -TW_ESHUTDOWN, "tw_stats: %d", rc);
	if (rc == TW_OK)
		cr_assert_eq(s.tasks_stopped, 2);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), 2);
	cr_assert_eq(atomic_load(&c.runs), 0);
	assert_no_leaks();
}

/* A callback may stop the engine (it cannot wait for its own run). */
struct stopper {
	tw_engine *engine;
	_Atomic uint64_t runs, done;
	_Atomic int rc;
	struct counts other;
};

static int stop_callback(const tw_fire *fire, void *arg)
{
	(void)fire;
	struct stopper *s = arg;
	atomic_fetch_add(&s->runs, 1);
	atomic_store(&s->rc, tw_engine_stop(s->engine, 100));
	atomic_store(&s->done, 1);
	return 0;
}

Test(lifecycle, callback_stops_the_engine)
{
	tw_engine *e = manual_engine(2);
	struct stopper s = { .engine = e, .rc = 12345 };
	tw_task_spec spec = spec_of(1, 0, stop_callback, &s);
	add_spec(e, &spec);
	tw_task_spec other = spec_of(1000, 1000, count_callback, &s.other);
	other.release = count_release;
	add_spec(e, &other);
	int rc = tw_advance(e, 1);
	cr_assert(rc == TW_OK || rc == -TW_ESHUTDOWN);
	cr_assert(wait_eq(&s.done, 1), "tw_engine_stop from a callback did not return");
	int stop_rc = atomic_load(&s.rc);
	cr_assert(stop_rc == TW_OK || stop_rc == -TW_ETIMEDOUT, "stop from a callback: %d",
		  stop_rc);
	cr_assert_eq(tw_advance(e, 1), -TW_ESHUTDOWN);
	cr_assert(wait_eq(&s.other.releases, 1));
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&s.runs), 1);
	cr_assert_eq(atomic_load(&s.other.releases), 1);
	assert_no_leaks();
}

/* A release is user code and may call any function: here the releases that
 * tw_engine_stop makes destroy another engine, whose ended tasks are still
 * being reclaimed. That engine must be gone cleanly (under AddressSanitizer
 * a reclamation that outlives it is a use after free). */
static void destroy_engine_release(void *arg)
{
	tw_engine_destroy(arg);
}

Test(lifecycle, release_made_by_stop_may_destroy_another_engine)
{
	for (int round = 0; round < 10; round++) {
		tw_config cfg = manual_config(1);
		cfg.retain_ms = 0;
		tw_engine *a = manual_engine(1), *b = engine_new(&cfg);
		struct counts c = { 0 }, ca = { 0 };
		for (int i = 0; i < 200; i++)
			cr_assert_eq(tw_cancel(b, add_counted(b, &c, 1000, 0)), TW_OK);
		step(b, 2); /* retention over: b reclaims the 200 ended tasks */
		tw_task_spec spec = spec_of(1000, 0, count_callback, &ca);
		spec.release = destroy_engine_release;
		spec.arg = b;
		add_spec(a, &spec);
		cr_assert_eq(tw_engine_stop(a, 1000), TW_OK);
		tw_engine_destroy(a);
		cr_assert_eq(atomic_load(&c.releases), 200);
		cr_assert_eq(atomic_load(&ca.runs), 0);
	}
	sleep_ms(50); /* a reclamation an engine left behind would run by now */
	assert_no_leaks();
}

/* Several engines live side by side, each with its own tasks and threads. */
Test(lifecycle, engines_are_independent)
{
	tw_engine *a = manual_engine(1), *b = manual_engine(1);
	struct counts ca = { 0 }, cb = { 0 };
	tw_id ia = add_counted(a, &ca, 5, 5);
	add_counted(b, &cb, 5, 5);
	for (int i = 0; i < 20; i++)
		step(a, 1);
	cr_assert_eq(atomic_load(&ca.runs), 4);
	cr_assert_eq(atomic_load(&cb.runs), 0);
	cr_assert_eq(info_of(a, ia).runs, 4);
	cr_assert_eq(tw_engine_stop(a, 1000), TW_OK);
	step(b, 5);
	cr_assert_eq(atomic_load(&cb.runs), 1);
	tw_engine_destroy(a);
	step(b, 5);
	cr_assert_eq(atomic_load(&cb.runs), 2);
	tw_engine_destroy(b);
	cr_assert_eq(atomic_load(&ca.releases), 1);
	cr_assert_eq(atomic_load(&cb.releases), 1);
	assert_no_leaks();
}
