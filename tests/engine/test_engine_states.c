/*
 * test_engine_states.c - the state x operation table of tickwheel.h, and what
 * each allowed operation does to the task afterwards.
 *
 *   state        pause resume cancel set_delay set_period get
 *   TW_WAITING     x           x        x         x       x
 *   TW_RUNNING     x           x        x         x       x   (acts on the next firing)
 *   TW_PAUSED            x     x        x         x       x   (delay, period apply on resume)
 *   TW_COMPLETED                                          x
 *   TW_STOPPED                                            x
 *
 * Everything else answers -TW_ESTATE and leaves the task as it was.
 */
#include "engine_test_support.h"

enum op { OP_PAUSE, OP_RESUME, OP_CANCEL, OP_SET_DELAY, OP_SET_PERIOD, OP_GET, OP_COUNT };

static const char *const op_names[OP_COUNT] = { "pause",     "resume",     "cancel",
						"set_delay", "set_period", "get" };

static int apply(tw_engine *e, tw_id id, enum op op)
{
	tw_task_info info;
	switch (op) {
	case OP_PAUSE:
		return tw_pause(e, id);
	case OP_RESUME:
		return tw_resume(e, id);
	case OP_CANCEL:
		return tw_cancel(e, id);
	case OP_SET_DELAY:
		return tw_set_delay(e, id, 50);
	case OP_SET_PERIOD:
		return tw_set_period(e, id, 7);
	case OP_GET:
		return tw_get(e, id, &info);
	default:
		return -1000;
	}
}

/* One row of the table: the answer to each operation and the state after it. */
struct row {
	tw_state state;
	int rc[OP_COUNT];
	tw_state after[OP_COUNT];
};

static const struct row rows[] = {
	{ TW_WAITING,
	  { TW_OK, -TW_ESTATE, TW_OK, TW_OK, TW_OK, TW_OK },
	  { TW_PAUSED, TW_WAITING, TW_STOPPED, TW_WAITING, TW_WAITING, TW_WAITING } },
	{ TW_RUNNING,
	  { TW_OK, -TW_ESTATE, TW_OK, TW_OK, TW_OK, TW_OK },
	  { TW_PAUSED, TW_RUNNING, TW_STOPPED, TW_RUNNING, TW_RUNNING, TW_RUNNING } },
	{ TW_PAUSED,
	  { -TW_ESTATE, TW_OK, TW_OK, TW_OK, TW_OK, TW_OK },
	  { TW_PAUSED, TW_WAITING, TW_STOPPED, TW_PAUSED, TW_PAUSED, TW_PAUSED } },
	{ TW_COMPLETED,
	  { -TW_ESTATE, -TW_ESTATE, -TW_ESTATE, -TW_ESTATE, -TW_ESTATE, TW_OK },
	  { TW_COMPLETED, TW_COMPLETED, TW_COMPLETED, TW_COMPLETED, TW_COMPLETED, TW_COMPLETED } },
	{ TW_STOPPED,
	  { -TW_ESTATE, -TW_ESTATE, -TW_ESTATE, -TW_ESTATE, -TW_ESTATE, TW_OK },
	  { TW_STOPPED, TW_STOPPED, TW_STOPPED, TW_STOPPED, TW_STOPPED, TW_STOPPED } },
};

/* A fresh engine with one recorded task brought into `state`. A running
 * task is a periodic one whose run is blocked on the recorder's gate. */
static tw_id task_in_state(tw_engine *e, struct recorder *r, tw_state state)
{
	tw_id id;
	switch (state) {
	case TW_WAITING:
		id = add_recorded(e, r, 10, 10, 0);
		break;
	case TW_RUNNING:
		id = add_recorded(e, r, 10, 10, 0);
		atomic_store(&r->block, true);
		advance(e, 10);
		wait_started(r);
		break;
	case TW_PAUSED:
		id = add_recorded(e, r, 10, 10, 0);
		cr_assert_eq(tw_pause(e, id), TW_OK);
		break;
	case TW_COMPLETED:
		id = add_recorded(e, r, 10, 0, 0);
		step(e, 10);
		cr_assert_eq(atomic_load(&r->runs), 1);
		break;
	case TW_STOPPED:
		id = add_recorded(e, r, 10, 10, 0);
		cr_assert_eq(tw_cancel(e, id), TW_OK);
		break;
	default:
		cr_assert_fail("no such state %d", (int)state);
	}
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, state, "set-up: state %d, wanted %d", (int)info.state, (int)state);
	return id;
}

static void check_row(const struct row *row)
{
	for (int op = 0; op < OP_COUNT; op++) {
		tw_engine *e = manual_engine(1);
		struct recorder *r = recorder_new(e);
		tw_id id = task_in_state(e, r, row->state);
		int rc = apply(e, id, (enum op)op);
		cr_assert_eq(rc, row->rc[op], "state %d, %s: got %d (%s), wanted %d",
			     (int)row->state, op_names[op], rc, tw_strerror(rc), row->rc[op]);
		tw_task_info info = info_of(e, id);
		cr_assert_eq(info.state, row->after[op], "state %d, %s: state after %d, wanted %d",
			     (int)row->state, op_names[op], (int)info.state, (int)row->after[op]);
		/* An operation refused must not have changed the task either. */
		if (rc != TW_OK) {
			cr_assert_eq(info.period_ms, row->state == TW_COMPLETED ? 0 : 10);
			cr_assert_eq(info.paused_by_failures, false);
		}
		gate_open(&r->gate, 1000);
		quiesce(e);
		tw_engine_destroy(e);
		cr_assert_eq(atomic_load(&r->releases), 1, "state %d, %s: %" PRIu64 " releases",
			     (int)row->state, op_names[op], atomic_load(&r->releases));
		assert_recorder_sane(r);
		recorder_free(r);
	}
	assert_no_leaks();
}

Test(states, waiting_row)
{
	check_row(&rows[0]);
}

Test(states, running_row)
{
	check_row(&rows[1]);
}

Test(states, paused_row)
{
	check_row(&rows[2]);
}

Test(states, completed_row)
{
	check_row(&rows[3]);
}

Test(states, stopped_row)
{
	check_row(&rows[4]);
}

/* Refused operations leave the task's timing alone: a waiting task still
 * fires when it was due after a refused resume. */
Test(states, refused_resume_leaves_a_waiting_task_on_time)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 0, 0);
	step(fx.e, 5);
	cr_assert_eq(tw_resume(fx.e, id), -TW_ESTATE);
	step(fx.e, 4);
	cr_assert_eq(atomic_load(&fx.r->runs), 0);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(fx.r->due[0], fx.t0 + 10 * NS_PER_MS);
	cr_assert_eq(info_of(fx.e, id).state, TW_COMPLETED);
	destroy_checking_recorder(fx.e, fx.r);
}

Test(states, pausing_twice_and_resuming_twice_are_errors)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 10, 10, 0);
	cr_assert_eq(tw_resume(e, id), -TW_ESTATE);
	cr_assert_eq(tw_pause(e, id), TW_OK);
	cr_assert_eq(tw_pause(e, id), -TW_ESTATE);
	cr_assert_eq(info_of(e, id).state, TW_PAUSED);
	cr_assert_eq(tw_resume(e, id), TW_OK);
	cr_assert_eq(tw_resume(e, id), -TW_ESTATE);
	cr_assert_eq(info_of(e, id).state, TW_WAITING);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	cr_assert_eq(tw_cancel(e, id), -TW_ESTATE);
	cr_assert_eq(info_of(e, id).state, TW_STOPPED);
	destroy_expecting_one_release(e, r);
}

/* ---- WAITING ---- */

Test(states, new_task_waits_with_its_first_due_and_period)
{
	struct one_task fx = one_task_begin(1);
	tw_id periodic = add_recorded(fx.e, fx.r, 25, 40, 0);
	struct counts c = { 0 };
	tw_task_spec spec = spec_of(3, 0, count_callback, &c);
	spec.flags = TW_CONCURRENT;
	tw_id oneshot = add_spec(fx.e, &spec);
	cr_assert_neq(periodic, oneshot);

	tw_task_info info = info_of(fx.e, periodic);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.period_ms, 40);
	cr_assert_eq(info.next_due_ns, fx.t0 + 25 * NS_PER_MS);
	cr_assert_eq(info.runs, 0);
	cr_assert_eq(info.failures, 0);
	cr_assert_eq(info.consecutive_failures, 0);
	cr_assert_eq(info.slow_runs, 0);
	cr_assert_eq(info_skips(&info), 0);
	cr_assert_eq(info.last_run_ns, 0);
	cr_assert_eq(info.longest_run_ns, 0);
	cr_assert_eq(info.paused_by_failures, false);
	cr_assert_eq(info.concurrent, false);
	cr_assert_eq(info.running, 0);

	info = info_of(fx.e, oneshot);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.period_ms, 0);
	cr_assert_eq(info.next_due_ns, fx.t0 + 3 * NS_PER_MS);
	cr_assert_eq(info.concurrent, true);
	tw_engine_destroy(fx.e);
	cr_assert_eq(atomic_load(&fx.r->releases), 1);
	recorder_free(fx.r);
	assert_no_leaks();
}

Test(states, waiting_pause_drops_every_firing_until_resumed)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 10, 0);
	step(fx.e, 10);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(tw_pause(fx.e, id), TW_OK);
	for (int i = 0; i < 100; i++)
		step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 1, "a paused task ran");
	tw_task_info info = info_of(fx.e, id);
	cr_assert_eq(info.state, TW_PAUSED);
	cr_assert_eq(info.runs, 1);
	cr_assert_eq(info.paused_by_failures, false);
	/* Paused firings are not due firings: nothing is counted as skipped. */
	cr_assert_eq(info_skips(&info), 0);

	/* Resume at t0 + 110: next due = now + period, then on that phase. */
	cr_assert_eq(tw_resume(fx.e, id), TW_OK);
	info = info_of(fx.e, id);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.next_due_ns, fx.t0 + 120 * NS_PER_MS);
	step(fx.e, 9);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	step(fx.e, 10);
	cr_assert_eq(atomic_load(&fx.r->runs), 3);
	cr_assert_eq(fx.r->due[1], fx.t0 + 120 * NS_PER_MS);
	cr_assert_eq(fx.r->due[2], fx.t0 + 130 * NS_PER_MS);
	cr_assert_eq(fx.r->skipped[1], 0, "resume does not catch up");
	destroy_expecting_one_release(fx.e, fx.r);
}

/* tickwheel.h: next_due_ns is 0 when nothing is due, and nothing is due
 * while a task is paused. */
Test(states, paused_task_has_nothing_due)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 10, 10, 0);
	cr_assert_neq(info_of(e, id).next_due_ns, 0);
	cr_assert_eq(tw_pause(e, id), TW_OK);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_PAUSED);
	cr_assert_eq(info.next_due_ns, 0, "paused task reports a next due of %" PRIu64,
		     info.next_due_ns);
	tw_engine_destroy(e);
	recorder_free(r);
	assert_no_leaks();
}

Test(states, waiting_set_delay_postpones_and_brings_forward)
{
	tw_engine *e = manual_engine(1);
	struct recorder *later = recorder_new(e), *sooner = recorder_new(e);
	uint64_t t0 = manual_now(e);
	tw_id a = add_recorded(e, later, 10, 0, 0);
	tw_id b = add_recorded(e, sooner, 100, 0, 0);
	step(e, 5);
	cr_assert_eq(tw_set_delay(e, a, 20), TW_OK); /* due t0 + 25 */
	cr_assert_eq(tw_set_delay(e, b, 3), TW_OK);  /* due t0 + 8 */
	cr_assert_eq(info_of(e, a).next_due_ns, t0 + 25 * NS_PER_MS);
	cr_assert_eq(info_of(e, b).next_due_ns, t0 + 8 * NS_PER_MS);
	step(e, 2); /* t0 + 7 */
	cr_assert_eq(atomic_load(&sooner->runs), 0);
	step(e, 1); /* t0 + 8 */
	cr_assert_eq(atomic_load(&sooner->runs), 1);
	cr_assert_eq(sooner->due[0], t0 + 8 * NS_PER_MS);
	step(e, 16); /* t0 + 24: past a's old due */
	cr_assert_eq(atomic_load(&later->runs), 0, "postponed task fired at its old due");
	step(e, 1); /* t0 + 25 */
	cr_assert_eq(atomic_load(&later->runs), 1);
	cr_assert_eq(later->due[0], t0 + 25 * NS_PER_MS);
	step(e, 200);
	cr_assert_eq(atomic_load(&later->runs), 1);
	cr_assert_eq(atomic_load(&sooner->runs), 1);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&later->releases), 1);
	cr_assert_eq(atomic_load(&sooner->releases), 1);
	assert_recorder_sane(later);
	assert_recorder_sane(sooner);
	recorder_free(later);
	recorder_free(sooner);
	assert_no_leaks();
}

/* set_delay on a periodic task moves its phase: later dues follow the new one. */
Test(states, waiting_set_delay_moves_a_periodic_phase)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 10, 0);
	step(fx.e, 10); /* runs at t0 + 10 */
	step(fx.e, 3);
	cr_assert_eq(tw_set_delay(fx.e, id, 4), TW_OK); /* due t0 + 17 */
	for (int i = 0; i < 40; i++)
		step(fx.e, 1); /* t0 + 53 */
	cr_assert_eq(atomic_load(&fx.r->runs), 5);
	const uint64_t want[] = { 10, 17, 27, 37, 47 };
	for (int i = 0; i < 5; i++)
		cr_assert_eq(fx.r->due[i], fx.t0 + want[i] * NS_PER_MS, "run %d", i + 1);
	cr_assert_eq(info_of(fx.e, id).skipped_missed, 0);
	destroy_checking_recorder(fx.e, fx.r);
}

/* set_period acts from the next firing on: the due already set stays. */
Test(states, waiting_set_period_applies_after_the_next_firing)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 10, 0);
	step(fx.e, 3);
	cr_assert_eq(tw_set_period(fx.e, id, 25), TW_OK);
	tw_task_info info = info_of(fx.e, id);
	cr_assert_eq(info.period_ms, 25);
	cr_assert_eq(info.next_due_ns, fx.t0 + 10 * NS_PER_MS);
	for (int i = 0; i < 60; i++)
		step(fx.e, 1); /* t0 + 63 */
	cr_assert_eq(atomic_load(&fx.r->runs), 3);
	cr_assert_eq(fx.r->due[0], fx.t0 + 10 * NS_PER_MS);
	cr_assert_eq(fx.r->due[1], fx.t0 + 35 * NS_PER_MS);
	cr_assert_eq(fx.r->due[2], fx.t0 + 60 * NS_PER_MS);
	destroy_checking_recorder(fx.e, fx.r);
}

Test(states, set_period_zero_turns_a_periodic_task_into_a_one_shot)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 10, 10, 0);
	step(e, 10);
	cr_assert_eq(tw_set_period(e, id, 0), TW_OK);
	step(e, 10);
	cr_assert_eq(atomic_load(&r->runs), 2);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_COMPLETED);
	cr_assert_eq(info.next_due_ns, 0);
	cr_assert(wait_eq(&r->releases, 1));
	step(e, 100);
	cr_assert_eq(atomic_load(&r->runs), 2);
	destroy_expecting_one_release(e, r);
}

Test(states, set_period_turns_a_one_shot_into_a_periodic_task)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 0, 0);
	cr_assert_eq(tw_set_period(fx.e, id, 5), TW_OK);
	for (int i = 0; i < 30; i++)
		step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 5);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(fx.r->due[i], fx.t0 + (10 + 5 * (uint64_t)i) * NS_PER_MS);
	cr_assert_eq(info_of(fx.e, id).state, TW_WAITING);
	destroy_checking_recorder(fx.e, fx.r);
}

/* ---- RUNNING ---- */

Test(states, running_is_what_tw_get_says_during_a_run)
{
	tw_engine *e = manual_engine(2);
	struct recorder *r = recorder_new(e);
	tw_id id = task_in_state(e, r, TW_RUNNING);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.running, 1);
	cr_assert_eq(info.runs, 1);
	tw_engine_stats stats = stats_of(e);
	cr_assert_eq(stats.tasks_running, 1);
	cr_assert_eq(stats.tasks_live, 1);
	gate_open(&r->gate, 1);
	quiesce(e);
	info = info_of(e, id);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.running, 0);
	destroy_checking_recorder(e, r);
}

/*
 * tw_task_info.running counts firings handed to executors, not one that waits for the task's
 * own run (issue 24: decided and written): that one is handed to the run's executor only when
 * the run returns. The task is TW_RUNNING, and shows that firing's due as its next.
 */
Test(states, a_firing_waiting_for_its_own_run_is_not_counted_running)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 1, 0, 0);
	start_blocked_run(fx.e, fx.r);
	cr_assert_eq(tw_set_delay(fx.e, id, 1), TW_OK); /* re-armed during its run */
	advance(fx.e, 1);                               /* due at t0 + 2: waits for the run */
	tw_task_info info = info_of(fx.e, id);
	cr_assert_eq(info.state, TW_RUNNING);
	cr_assert_eq(info.running, 1, "the run going; not the firing that waits for it");
	cr_assert_eq(info.next_due_ns, fx.t0 + 2 * NS_PER_MS);
	atomic_store(&fx.r->block, false);
	gate_open(&fx.r->gate, 1);
	quiesce(fx.e);
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	info = info_of(fx.e, id);
	cr_assert_eq(info.state, TW_COMPLETED);
	cr_assert_eq(info.running, 0);
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(states, running_pause_lets_the_run_finish_then_nothing_more)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	tw_id id = task_in_state(e, r, TW_RUNNING);
	cr_assert_eq(tw_pause(e, id), TW_OK);
	advance(e, 30); /* due firings while paused are dropped */
	cr_assert_eq(atomic_load(&r->returned), 0);
	gate_open(&r->gate, 1);
	quiesce(e);
	cr_assert_eq(atomic_load(&r->returned), 1, "the run in progress finishes");
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_PAUSED);
	cr_assert_eq(info.running, 0);
	step(e, 100);
	cr_assert_eq(atomic_load(&r->runs), 1);
	destroy_expecting_one_release(e, r);
}

Test(states, running_set_delay_moves_the_next_firing)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = task_in_state(fx.e, fx.r, TW_RUNNING); /* run 1 at t0 + 10, period 10 */
	cr_assert_eq(tw_set_delay(fx.e, id, 3), TW_OK);   /* next due t0 + 13 */
	cr_assert_eq(info_of(fx.e, id).next_due_ns, fx.t0 + 13 * NS_PER_MS);
	gate_open(&fx.r->gate, 1);
	quiesce(fx.e);
	atomic_store(&fx.r->block, false);
	cr_assert_eq(info_of(fx.e, id).state, TW_WAITING);
	step(fx.e, 2);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	step(fx.e, 10);
	cr_assert_eq(atomic_load(&fx.r->runs), 3);
	cr_assert_eq(fx.r->due[1], fx.t0 + 13 * NS_PER_MS);
	cr_assert_eq(fx.r->due[2], fx.t0 + 23 * NS_PER_MS);
	destroy_checking_recorder(fx.e, fx.r);
}

Test(states, running_set_period_applies_from_the_next_firing_on)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = task_in_state(fx.e, fx.r, TW_RUNNING); /* run 1 at t0 + 10, next due t0 + 20 */
	cr_assert_eq(tw_set_period(fx.e, id, 4), TW_OK);
	cr_assert_eq(info_of(fx.e, id).period_ms, 4);
	gate_open(&fx.r->gate, 1);
	quiesce(fx.e);
	atomic_store(&fx.r->block, false);
	for (int i = 0; i < 20; i++)
		step(fx.e, 1); /* t0 + 30 */
	cr_assert_eq(atomic_load(&fx.r->runs), 4);
	cr_assert_eq(fx.r->due[1], fx.t0 + 20 * NS_PER_MS);
	cr_assert_eq(fx.r->due[2], fx.t0 + 24 * NS_PER_MS);
	cr_assert_eq(fx.r->due[3], fx.t0 + 28 * NS_PER_MS);
	destroy_checking_recorder(fx.e, fx.r);
}

/* A one-shot in its run has nothing more due; set_delay gives it a second
 * firing, so it waits again instead of completing. */
Test(states, running_one_shot_given_a_delay_waits_again)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 0, 0);
	atomic_store(&fx.r->block, true);
	advance(fx.e, 10);
	wait_started(fx.r);
	tw_task_info info = info_of(fx.e, id);
	cr_assert_eq(info.state, TW_RUNNING);
	cr_assert_eq(info.next_due_ns, 0);
	cr_assert_eq(tw_set_delay(fx.e, id, 5), TW_OK);
	gate_open(&fx.r->gate, 1);
	quiesce(fx.e);
	atomic_store(&fx.r->block, false);
	cr_assert_eq(info_of(fx.e, id).state, TW_WAITING);
	cr_assert_eq(atomic_load(&fx.r->releases), 0);
	step(fx.e, 5);
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	cr_assert_eq(fx.r->due[1], fx.t0 + 15 * NS_PER_MS);
	cr_assert_eq(info_of(fx.e, id).state, TW_COMPLETED);
	cr_assert(wait_eq(&fx.r->releases, 1));
	destroy_expecting_one_release(fx.e, fx.r);
}

/* A task paused during its run and resumed before the run ends is running
 * again, and waits once the run returns. */
Test(states, running_pause_then_resume_during_the_run)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = task_in_state(fx.e, fx.r, TW_RUNNING);
	cr_assert_eq(tw_pause(fx.e, id), TW_OK);
	cr_assert_eq(info_of(fx.e, id).state, TW_PAUSED);
	advance(fx.e, 2);                         /* t0 + 12 */
	cr_assert_eq(tw_resume(fx.e, id), TW_OK); /* next due t0 + 22 */
	tw_task_info info = info_of(fx.e, id);
	cr_assert_eq(info.state, TW_RUNNING);
	cr_assert_eq(info.next_due_ns, fx.t0 + 22 * NS_PER_MS);
	gate_open(&fx.r->gate, 1);
	quiesce(fx.e);
	atomic_store(&fx.r->block, false);
	cr_assert_eq(info_of(fx.e, id).state, TW_WAITING);
	step(fx.e, 9);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	cr_assert_eq(fx.r->due[1], fx.t0 + 22 * NS_PER_MS);
	destroy_checking_recorder(fx.e, fx.r);
}

/* ---- PAUSED ---- */

Test(states, paused_set_delay_applies_on_resume)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 10, 0);
	cr_assert_eq(tw_pause(fx.e, id), TW_OK);
	cr_assert_eq(tw_set_delay(fx.e, id, 3), TW_OK);
	cr_assert_eq(info_of(fx.e, id).state, TW_PAUSED);
	step(fx.e, 50);
	cr_assert_eq(atomic_load(&fx.r->runs), 0, "set_delay woke a paused task");
	cr_assert_eq(tw_resume(fx.e, id), TW_OK); /* t0 + 50: due t0 + 53, then every 10 */
	cr_assert_eq(info_of(fx.e, id).next_due_ns, fx.t0 + 53 * NS_PER_MS);
	step(fx.e, 2);
	cr_assert_eq(atomic_load(&fx.r->runs), 0);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	step(fx.e, 10);
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	cr_assert_eq(fx.r->due[0], fx.t0 + 53 * NS_PER_MS);
	cr_assert_eq(fx.r->due[1], fx.t0 + 63 * NS_PER_MS);
	destroy_checking_recorder(fx.e, fx.r);
}

Test(states, paused_set_period_applies_on_resume)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 10, 0);
	cr_assert_eq(tw_pause(fx.e, id), TW_OK);
	cr_assert_eq(tw_set_period(fx.e, id, 4), TW_OK);
	cr_assert_eq(info_of(fx.e, id).period_ms, 4);
	step(fx.e, 20);
	cr_assert_eq(atomic_load(&fx.r->runs), 0);
	cr_assert_eq(tw_resume(fx.e, id), TW_OK); /* t0 + 20: due t0 + 24, 28, ... */
	for (int i = 0; i < 9; i++)
		step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	cr_assert_eq(fx.r->due[0], fx.t0 + 24 * NS_PER_MS);
	cr_assert_eq(fx.r->due[1], fx.t0 + 28 * NS_PER_MS);
	destroy_checking_recorder(fx.e, fx.r);
}

Test(states, paused_one_shot_resumes_with_its_delay)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 20, 0, 0);
	step(fx.e, 5);
	cr_assert_eq(tw_pause(fx.e, id), TW_OK);
	step(fx.e, 5);
	cr_assert_eq(tw_resume(fx.e, id), TW_OK); /* t0 + 10: due t0 + 30 */
	cr_assert_eq(info_of(fx.e, id).next_due_ns, fx.t0 + 30 * NS_PER_MS);
	step(fx.e, 19);
	cr_assert_eq(atomic_load(&fx.r->runs), 0);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(fx.r->due[0], fx.t0 + 30 * NS_PER_MS);
	cr_assert_eq(info_of(fx.e, id).state, TW_COMPLETED);
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(states, paused_cancel_stops_and_releases)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 10, 10, 0);
	cr_assert_eq(tw_pause(e, id), TW_OK);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_STOPPED);
	cr_assert_eq(info.next_due_ns, 0);
	cr_assert(wait_eq(&r->releases, 1));
	step(e, 100);
	cr_assert_eq(atomic_load(&r->runs), 0);
	destroy_expecting_one_release(e, r);
}

/* ---- COMPLETED and STOPPED ---- */

Test(states, one_shot_completes_after_its_run_and_keeps_its_counters)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 10, 0, 0);
	step(e, 10);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_COMPLETED);
	cr_assert_eq(info.runs, 1);
	cr_assert_eq(info.next_due_ns, 0);
	cr_assert_eq(info.running, 0);
	cr_assert_eq(info_skips(&info), 0);
	tw_engine_stats stats = stats_of(e);
	cr_assert_eq(stats.tasks_completed, 1);
	cr_assert_eq(stats.tasks_live, 0);
	step(e, 1000);
	cr_assert_eq(atomic_load(&r->runs), 1);
	destroy_expecting_one_release(e, r);
}

Test(states, cancelled_task_is_stopped_and_never_runs)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	tw_id id = add_recorded(e, r, 10, 10, 0);
	step(e, 10);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_STOPPED);
	cr_assert_eq(info.runs, 1);
	cr_assert_eq(info.next_due_ns, 0);
	step(e, 1000);
	cr_assert_eq(atomic_load(&r->runs), 1);
	tw_engine_stats stats = stats_of(e);
	cr_assert_eq(stats.tasks_stopped, 1);
	cr_assert_eq(stats.tasks_live, 0);
	destroy_expecting_one_release(e, r);
}

/* tw_stats counts tasks by state: live ones now, ended ones ever. */
Test(states, stats_count_tasks_by_state)
{
	tw_engine *e = manual_engine(1);
	struct recorder *running = recorder_new(e);
	struct counts c = { 0 };
	tw_id waiting[3], paused[2], done[4], stopped[5];
	for (int i = 0; i < 3; i++)
		waiting[i] = add_counted(e, &c, 1000, 1000);
	for (int i = 0; i < 2; i++) {
		paused[i] = add_counted(e, &c, 1000, 1000);
		cr_assert_eq(tw_pause(e, paused[i]), TW_OK);
	}
	for (int i = 0; i < 4; i++)
		done[i] = add_counted(e, &c, 5, 0);
	for (int i = 0; i < 5; i++) {
		stopped[i] = add_counted(e, &c, 1000, 0);
		cr_assert_eq(tw_cancel(e, stopped[i]), TW_OK);
	}
	step(e, 5);
	tw_id r = add_recorded(e, running, 1, 1000, 0);
	atomic_store(&running->block, true);
	advance(e, 1);
	wait_started(running);

	tw_engine_stats s = stats_of(e);
	cr_assert_eq(s.tasks_waiting, 3);
	cr_assert_eq(s.tasks_paused, 2);
	cr_assert_eq(s.tasks_running, 1);
	cr_assert_eq(s.tasks_live, 6);
	cr_assert_eq(s.tasks_completed, 4);
	cr_assert_eq(s.tasks_stopped, 5);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(info_of(e, done[i]).state, TW_COMPLETED);
	cr_assert_eq(info_of(e, waiting[0]).state, TW_WAITING);
	cr_assert_eq(info_of(e, paused[0]).state, TW_PAUSED);
	cr_assert_eq(info_of(e, r).state, TW_RUNNING);

	gate_open(&running->gate, 1);
	quiesce(e);
	s = stats_of(e);
	cr_assert_eq(s.tasks_waiting, 4);
	cr_assert_eq(s.tasks_running, 0);
	cr_assert_eq(s.tasks_live, 6);
	cr_assert_eq(atomic_load(&c.runs), 4);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), 14);
	cr_assert_eq(atomic_load(&running->releases), 1);
	assert_recorder_sane(running);
	recorder_free(running);
	assert_no_leaks();
}
