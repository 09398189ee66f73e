/*
 * test_engine_absolute.c - dues given as times: tw_task_spec.first_due_ns and tw_set_due.
 *
 * On the manual clock, whose time is exact: tasks added at different moments for one time
 * share one due to the nanosecond and fire in one tw_advance; a time off the grid is rounded
 * up, a past one is due at the next tick; tw_set_due follows tw_set_delay's states and codes.
 */
#include "engine_test_support.h"

/* A task due at the time at_ns, recorded in r. */
static tw_id add_at(tw_engine *e, struct recorder *r, uint64_t at_ns, uint64_t period_ms)
{
	tw_task_spec spec = spec_of(0, period_ms, record_callback, r);
	spec.release = record_release;
	spec.first_due_ns = at_ns;
	tw_id id = add_spec(e, &spec);
	atomic_store(&r->id, id);
	return id;
}

Test(absolute, tasks_added_at_different_moments_share_one_grid)
{
	enum { TASKS = 8, PERIOD_MS = 100 };
	tw_engine *e = manual_engine(2);
	uint64_t t0 = manual_now(e);
	uint64_t grid = t0 + 500 * NS_PER_MS; /* the program's own grid point */
	struct recorder *r[TASKS];
	tw_id ids[TASKS];
	for (int k = 0; k < TASKS; k++) {
		r[k] = recorder_new(e);
		ids[k] = add_at(e, r[k], grid, PERIOD_MS);
		cr_assert_eq(info_of(e, ids[k]).next_due_ns, grid);
		step(e, 37); /* each added at its own moment, all before the grid point */
	}
	step(e, 500 - 37 * TASKS - 1);
	for (int k = 0; k < TASKS; k++)
		cr_assert_eq(atomic_load(&r[k]->runs), 0, "task %d ran before its time", k);
	advance(e, 1); /* one tw_advance fires them all */
	quiesce(e);
	for (int ms = 0; ms < 3 * PERIOD_MS; ms++) /* one jump would skip periods */
		step(e, 1);
	for (int k = 0; k < TASKS; k++) {
		cr_assert_eq(atomic_load(&r[k]->runs), 4, "task %d", k);
		for (int run = 0; run < 4; run++)
			cr_assert_eq(r[k]->due[run], grid + (uint64_t)run * PERIOD_MS * NS_PER_MS,
				     "task %d run %d", k, run);
	}
	tw_engine_destroy(e);
	for (int k = 0; k < TASKS; k++) {
		cr_assert_eq(atomic_load(&r[k]->releases), 1);
		assert_recorder_sane(r[k]);
		recorder_free(r[k]);
	}
	assert_no_leaks();
}

Test(absolute, a_time_off_the_grid_is_rounded_up)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_at(fx.e, fx.r, fx.t0 + 10 * NS_PER_MS + 1, 0);
	cr_assert_eq(info_of(fx.e, id).next_due_ns, fx.t0 + 11 * NS_PER_MS);
	step(fx.e, 10);
	cr_assert_eq(atomic_load(&fx.r->runs), 0, "ran before the time asked");
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(fx.r->due[0], fx.t0 + 11 * NS_PER_MS);
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(absolute, a_past_time_is_due_at_the_next_tick)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	step(e, 50);
	uint64_t now = manual_now(e);
	tw_id id = add_at(e, r, now - 20 * NS_PER_MS, 0);
	cr_assert_eq(info_of(e, id).next_due_ns, now, "due as a delay of 0 would be");
	step(e, 0);
	cr_assert_eq(atomic_load(&r->runs), 1, "a past time runs at the next tw_advance");
	cr_assert_eq(r->due[0], now);
	destroy_expecting_one_release(e, r);
}

Test(absolute, add_refuses_bad_times)
{
	tw_engine *e = manual_engine(1);
	uint64_t now = manual_now(e);
	tw_task_spec spec = spec_of(5, 0, probe_callback, NULL);
	spec.first_due_ns = now + NS_PER_MS;
	tw_id id = 0;
	cr_assert_eq(tw_add(e, &spec, &id), -TW_EINVAL, "a delay and a time both");
	spec.delay_ms = 0;
	spec.first_due_ns = now + (TW_MAX_DELAY_MS + 1) * NS_PER_MS;
	cr_assert_eq(tw_add(e, &spec, &id), -TW_ERANGE);
	spec.first_due_ns = now + TW_MAX_DELAY_MS * NS_PER_MS;
	cr_assert_eq(tw_add(e, &spec, &id), TW_OK, "the longest delay's time is accepted");
	cr_assert_eq(info_of(e, id).next_due_ns, spec.first_due_ns);
	tw_engine_destroy(e);
	assert_no_leaks();
}

Test(absolute, set_due_moves_earlier_and_later)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 100, 0, 0);
	cr_assert_eq(tw_set_due(fx.e, id, fx.t0 + 30 * NS_PER_MS), TW_OK);
	cr_assert_eq(info_of(fx.e, id).next_due_ns, fx.t0 + 30 * NS_PER_MS);
	step(fx.e, 29);
	cr_assert_eq(atomic_load(&fx.r->runs), 0);
	cr_assert_eq(tw_set_due(fx.e, id, fx.t0 + 200 * NS_PER_MS - 5), TW_OK);
	cr_assert_eq(info_of(fx.e, id).next_due_ns, fx.t0 + 200 * NS_PER_MS);
	step(fx.e, 170);
	cr_assert_eq(atomic_load(&fx.r->runs), 0, "moved later: not at its old times");
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(fx.r->due[0], fx.t0 + 200 * NS_PER_MS);
	cr_assert_eq(tw_set_due(fx.e, id, fx.t0 + 300 * NS_PER_MS), -TW_ESTATE, "completed");
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(absolute, set_due_keeps_a_periodic_task_on_its_new_phase)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 10, 0);
	cr_assert_eq(tw_set_due(fx.e, id, fx.t0 + 25 * NS_PER_MS), TW_OK);
	for (int ms = 0; ms < 45; ms++) /* a millisecond at a time: one jump would skip periods */
		step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 3);
	for (int run = 0; run < 3; run++)
		cr_assert_eq(fx.r->due[run], fx.t0 + (25 + 10 * (uint64_t)run) * NS_PER_MS);
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(absolute, set_due_while_paused_applies_on_resume)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 0, 0);
	cr_assert_eq(tw_pause(fx.e, id), TW_OK);
	cr_assert_eq(tw_set_due(fx.e, id, fx.t0 + 50 * NS_PER_MS), TW_OK);
	cr_assert_eq(info_of(fx.e, id).next_due_ns, 0, "a paused task has no due");
	step(fx.e, 20);
	cr_assert_eq(tw_resume(fx.e, id), TW_OK);
	cr_assert_eq(info_of(fx.e, id).next_due_ns, fx.t0 + 50 * NS_PER_MS,
		     "the time, not now + delay");
	step(fx.e, 29);
	cr_assert_eq(atomic_load(&fx.r->runs), 0);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(fx.r->due[0], fx.t0 + 50 * NS_PER_MS);
	destroy_expecting_one_release(fx.e, fx.r);
}

/*
 * A one-shot given a time resumes with the delay that time stood for when it was given
 * (issue 24): given while paused too, not the shorter one left when its first resume placed
 * it. The same steps on a task that was not paused when given the time answer the same.
 */
static uint64_t due_after_second_resume(bool paused_when_given)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	uint64_t t0 = manual_now(e);
	tw_id id = add_recorded(e, r, 100, 0, 0);
	if (paused_when_given)
		cr_assert_eq(tw_pause(e, id), TW_OK);
	cr_assert_eq(tw_set_due(e, id, t0 + 200 * NS_PER_MS), TW_OK); /* 200 ms from now */
	step(e, 50);
	if (!paused_when_given)
		cr_assert_eq(tw_pause(e, id), TW_OK);
	cr_assert_eq(tw_resume(e, id), TW_OK);
	if (paused_when_given)
		cr_assert_eq(info_of(e, id).next_due_ns, t0 + 200 * NS_PER_MS, "the time given");
	else
		cr_assert_eq(info_of(e, id).next_due_ns, t0 + 250 * NS_PER_MS);
	cr_assert_eq(tw_pause(e, id), TW_OK);
	cr_assert_eq(tw_resume(e, id), TW_OK);
	uint64_t due = info_of(e, id).next_due_ns;
	cr_assert_eq(atomic_load(&r->runs), 0);
	destroy_expecting_one_release(e, r);
	return due - t0;
}

Test(absolute, set_due_while_paused_keeps_the_delay_the_time_stood_for)
{
	cr_assert_eq(due_after_second_resume(false), 250 * NS_PER_MS, "now + 200 ms");
	cr_assert_eq(due_after_second_resume(true), 250 * NS_PER_MS, "now + 200 ms, as unpaused");
}

Test(absolute, set_due_while_paused_past_by_resume_is_due_at_once)
{
	struct one_task fx = one_task_begin(1);
	tw_id id = add_recorded(fx.e, fx.r, 10, 0, 0);
	cr_assert_eq(tw_pause(fx.e, id), TW_OK);
	cr_assert_eq(tw_set_due(fx.e, id, fx.t0 + 5 * NS_PER_MS), TW_OK);
	step(fx.e, 20);
	cr_assert_eq(atomic_load(&fx.r->runs), 0, "paused");
	cr_assert_eq(tw_resume(fx.e, id), TW_OK);
	cr_assert_eq(info_of(fx.e, id).next_due_ns, fx.t0 + 20 * NS_PER_MS);
	step(fx.e, 0);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(fx.r->due[0], fx.t0 + 20 * NS_PER_MS);
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(absolute, set_due_codes)
{
	tw_engine *e = manual_engine(1);
	uint64_t now = manual_now(e);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, 10, 0);
	cr_assert_eq(tw_set_due(NULL, id, now), -TW_EINVAL);
	cr_assert_eq(tw_set_due(e, id, 0), -TW_EINVAL);
	cr_assert_eq(tw_set_due(e, id, now + (TW_MAX_DELAY_MS + 1) * NS_PER_MS), -TW_ERANGE);
	cr_assert_eq(tw_set_due(e, id + 1, now + NS_PER_MS), -TW_ENOTFOUND);
	cr_assert_eq(tw_set_due(e, 0, now + NS_PER_MS), -TW_ENOTFOUND);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	cr_assert_eq(tw_set_due(e, id, now + NS_PER_MS), -TW_ESTATE, "stopped");
	cr_assert_eq(tw_engine_stop(e, 1000), TW_OK);
	cr_assert_eq(tw_set_due(e, id, now + NS_PER_MS), -TW_ESHUTDOWN);
	destroy_expecting_releases(e, &c, 1);
}

Test(absolute, real_clock_time_is_not_run_early)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	tw_engine *e = engine_new(&cfg);
	struct recorder *r = recorder_new(e);
	uint64_t at = test_now_ns() + 200 * NS_PER_MS;
	add_at(e, r, at, 0);
	bool added_before_at = test_now_ns() < at; /* not if this thread was held up that long */
	cr_assert(wait_eq(&r->returned, 1));
	cr_assert_geq(r->due[0], at);
	if (added_before_at)
		cr_assert_lt(r->due[0], at + NS_PER_MS);
	destroy_expecting_one_release(e, r);
}
