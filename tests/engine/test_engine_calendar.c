/*
 * test_engine_calendar.c - calendar tasks (tw_task_spec.cron): fire times on
 * the manual clock's wall time (exact, in UTC and across daylight-saving
 * changes in Europe/Berlin), the periodic task's rules (stalls, overlaps,
 * pause and resume, failures, release), tw_set_delay, and re-planning when
 * the wall clock is set, through the internal hook on the manual clock
 * (test_engine_calendar_wall.c sets the real clock).
 */
#include "engine_test_support.h"

#define S(x) ((int64_t)(x)*1000000000)
#define MS   UINT64_C(1000000)

/* A manual engine whose wall clock reads wall_s now; *start gets its manual time. */
static tw_engine *engine_at_wall(unsigned max_failures, int64_t wall_s, uint64_t *start)
{
	tw_config cfg = manual_config(1);
	if (max_failures)
		cfg.max_failures = max_failures;
	tw_engine *e = engine_new(&cfg);
	set_manual_wall(e, S(wall_s));
	*start = manual_now_at(e, __LINE__);
	return e;
}

static tw_id add_cron(tw_engine *e, struct recorder *r, const char *cron, unsigned flags)
{
	tw_task_spec spec = spec_of(0, 0, record_callback, r);
	spec.release = record_release;
	spec.flags = flags;
	spec.cron = cron;
	tw_id id = add_spec(e, &spec);
	atomic_store(&r->id, id);
	return id;
}

/* What most of this suite starts from: an engine from engine_at_wall(max_failures, wall_s)
 * with one recorded calendar task, add_cron(cron, flags). */
struct cron_task {
	tw_engine *e;
	struct recorder *r;
	uint64_t start; /* the manual time when the wall read wall_s */
	tw_id id;
};

static struct cron_task cron_task_begin(unsigned max_failures, int64_t wall_s, const char *cron,
					unsigned flags)
{
	struct cron_task t;
	t.e = engine_at_wall(max_failures, wall_s, &t.start);
	t.r = recorder_new(t.e);
	t.id = add_cron(t.e, t.r, cron, flags);
	return t;
}

/* The wall time of a due on an engine whose wall read wall_s at manual time start. */
static int64_t wall_of(uint64_t due, int64_t wall_s, uint64_t start)
{
	return S(wall_s) + (int64_t)(due - start);
}

Test(calendar, every_five_seconds_exact)
{
	int64_t w0 = 1767225601; /* 2026-01-01 00:00:01 UTC */
	struct cron_task fx = cron_task_begin(0, w0, "CRON_TZ=UTC */5 * * * * *", 0);
	tw_task_info info = info_of(fx.e, fx.id);
	cr_assert(info.calendar);
	cr_assert_eq(info.period_ms, 0);
	cr_assert_eq(info.next_due_wall_ns, S(1767225605));
	cr_assert_eq(info.next_due_ns, fx.start + 4000 * MS);
	step(fx.e, 3999);
	cr_assert_eq(atomic_load(&fx.r->runs), 0);
	step(fx.e, 1);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	for (int i = 0; i < 3; i++)
		step(fx.e, 5000);
	cr_assert_eq(atomic_load(&fx.r->runs), 4);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(wall_of(fx.r->due[i], w0, fx.start), S(1767225605 + 5 * i), "run %d",
			     i + 1);
	info = info_of(fx.e, fx.id);
	cr_assert_eq(info.next_due_wall_ns, S(1767225625));
	cr_assert_eq(info_skips(&info), 0);
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(calendar, berlin_spring_forward_and_fall_back)
{
	int64_t w0 = 1774699200; /* 2026-03-28 12:00 UTC; Berlin springs forward the 29th */
	struct cron_task fx = cron_task_begin(0, w0, "CRON_TZ=Europe/Berlin 0 30 2 * * *", 0);
	/* 02:30 does not exist that day: it fires when the clock jumps, 03:00 CEST */
	cr_assert_eq(info_of(fx.e, fx.id).next_due_wall_ns, S(1774746000));
	step(fx.e, (uint64_t)(1774746000 - w0) * 1000);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(wall_of(fx.r->due[0], w0, fx.start), S(1774746000));
	/* 02:30 CEST the 30th */
	cr_assert_eq(info_of(fx.e, fx.id).next_due_wall_ns, S(1774830600));
	destroy_expecting_one_release(fx.e, fx.r);

	w0 = 1792843200; /* 2026-10-24 12:00 UTC; Berlin falls back the 25th */
	fx = cron_task_begin(0, w0, "CRON_TZ=Europe/Berlin 0 30 2 * * *", 0);
	cr_assert_eq(info_of(fx.e, fx.id).next_due_wall_ns, S(1792888200)); /* the first 02:30 */
	step(fx.e, (uint64_t)(1792888200 - w0) * 1000);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	/* the second 02:30, an hour later, does not fire: the next is the 26th, 02:30 CET */
	cr_assert_eq(info_of(fx.e, fx.id).next_due_wall_ns, S(1792978200));
	step(fx.e, 3600 * 1000);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(calendar, stall_runs_once_for_the_latest)
{
	int64_t w0 = 1767225600;
	struct cron_task fx = cron_task_begin(0, w0, "CRON_TZ=UTC * * * * * *", 0);
	step(fx.e, 10000); /* fire times w0 + 1 ... w0 + 10 all passed */
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(wall_of(fx.r->due[0], w0, fx.start), S(w0 + 10));
	cr_assert_eq(fx.r->skipped[0], 9);
	tw_task_info info = info_of(fx.e, fx.id);
	cr_assert_eq(info.skipped_missed, 9);
	cr_assert_eq(info.next_due_wall_ns, S(w0 + 11));
	destroy_expecting_one_release(fx.e, fx.r);
}

/*
 * Past the 100 000 missed fire times counted one by one (issue 24): the run still stands for
 * the latest fire time, as after a shorter stall, not for the tick the stall ended at; its
 * lateness shows how far that was. The stall ends half a second past a fire time.
 */
Test(calendar, long_stall_runs_for_the_latest_fire_time)
{
	int64_t w0 = 1767225600;
	struct cron_task fx = cron_task_begin(0, w0, "CRON_TZ=UTC * * * * * *", 0);
	step(fx.e, 150000 * UINT64_C(1000) + 500); /* fire times w0 + 1 ... w0 + 150 000 passed */
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(wall_of(fx.r->due[0], w0, fx.start), S(w0 + 150000));
	cr_assert_eq(fx.r->skipped[0], 100000, "counted up to 100 000");
	tw_task_info info = info_of(fx.e, fx.id);
	cr_assert_eq(info.last_lateness_ns, 500 * MS);
	cr_assert_eq(info.next_due_wall_ns, S(w0 + 150001));
	step(fx.e, 500);
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	cr_assert_eq(wall_of(fx.r->due[1], w0, fx.start), S(w0 + 150001));
	destroy_expecting_one_release(fx.e, fx.r);
}

static void overlap(unsigned flags)
{
	int64_t w0 = 1767225600;
	struct cron_task fx = cron_task_begin(0, w0, "CRON_TZ=UTC * * * * * *", flags);
	atomic_store(&fx.r->block, true);
	advance(fx.e, 1000);
	wait_started(fx.r);
	advance(fx.e, 1000); /* the next fire time comes during the run */
	atomic_store(&fx.r->block, false);
	gate_open(&fx.r->gate, 1);
	quiesce(fx.e);
	tw_task_info info = info_of(fx.e, fx.id);
	if (flags & TW_RUN_LATE) {
		cr_assert_eq(atomic_load(&fx.r->runs), 2);
		cr_assert_eq(wall_of(fx.r->due[1], w0, fx.start), S(w0 + 2));
		cr_assert_eq(info.skipped_overlap, 0);
	} else {
		cr_assert_eq(atomic_load(&fx.r->runs), 1);
		cr_assert_eq(info.skipped_overlap, 1);
	}
	cr_assert_eq(info.next_due_wall_ns, S(w0 + 3));
	step(fx.e, 1000);
	cr_assert_eq(atomic_load(&fx.r->runs), flags & TW_RUN_LATE ? 3 : 2);
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(calendar, overlap_is_skipped)
{
	overlap(0);
}

Test(calendar, overlap_runs_late)
{
	overlap(TW_RUN_LATE);
}

Test(calendar, pause_resume_plans_after_now)
{
	int64_t w0 = 1767225601;
	struct cron_task fx = cron_task_begin(0, w0, "CRON_TZ=UTC */10 * * * * *", 0);
	cr_assert_eq(tw_pause(fx.e, fx.id), TW_OK);
	step(fx.e, 30000);
	cr_assert_eq(atomic_load(&fx.r->runs), 0);
	cr_assert_eq(info_of(fx.e, fx.id).next_due_wall_ns, 0);
	cr_assert_eq(tw_resume(fx.e, fx.id), TW_OK);
	tw_task_info info = info_of(fx.e, fx.id);
	cr_assert_eq(info.next_due_wall_ns, S(w0 + 39)); /* now is w0 + 30 = :31 */
	cr_assert_eq(info.next_due_ns, fx.start + 39000 * MS);
	cr_assert_eq(info_skips(&info), 0);
	step(fx.e, 9000);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(calendar, failures_pause_it)
{
	int64_t w0 = 1767225600;
	struct cron_task fx = cron_task_begin(2, w0, "CRON_TZ=UTC * * * * * *", 0);
	atomic_store(&fx.r->fail, 1);
	step(fx.e, 1000);
	step(fx.e, 1000);
	tw_task_info info = info_of(fx.e, fx.id);
	cr_assert_eq(info.state, TW_PAUSED);
	cr_assert(info.paused_by_failures);
	cr_assert_eq(info.failures, 2);
	atomic_store(&fx.r->fail, 0);
	step(fx.e, 500);
	cr_assert_eq(tw_resume(fx.e, fx.id), TW_OK);
	cr_assert_eq(info_of(fx.e, fx.id).next_due_wall_ns, S(w0 + 3));
	step(fx.e, 500);
	cr_assert_eq(atomic_load(&fx.r->runs), 3);
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(calendar, set_delay_moves_the_next_firing_only)
{
	int64_t w0 = 1767225601;
	struct cron_task fx = cron_task_begin(0, w0, "CRON_TZ=UTC 0 * * * * *", 0);
	cr_assert_eq(info_of(fx.e, fx.id).next_due_wall_ns, S(w0 + 59));
	cr_assert_eq(tw_set_delay(fx.e, fx.id, 2000), TW_OK);
	cr_assert_eq(info_of(fx.e, fx.id).next_due_wall_ns, S(w0 + 2));
	step(fx.e, 2000);
	cr_assert_eq(atomic_load(&fx.r->runs), 1);
	cr_assert_eq(info_of(fx.e, fx.id).next_due_wall_ns, S(w0 + 59)); /* the calendar resumes */
	step(fx.e, 57000);
	cr_assert_eq(atomic_load(&fx.r->runs), 2);
	cr_assert_eq(wall_of(fx.r->due[1], w0, fx.start), S(w0 + 59));
	cr_assert_eq(info_of(fx.e, fx.id).next_due_wall_ns, S(w0 + 119));
	cr_assert_eq(tw_set_period(fx.e, fx.id, 1000), -TW_ESTATE);
	destroy_expecting_one_release(fx.e, fx.r);
}

Test(calendar, cancel_releases_once)
{
	uint64_t start;
	tw_engine *e = engine_at_wall(0, 1767225600, &start);
	struct recorder *r = recorder_new(e);
	tw_id id = add_cron(e, r, "CRON_TZ=UTC * * * * * *", 0);
	step(e, 1000);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	cr_assert_eq(atomic_load(&r->releases), 1);
	tw_task_info info = info_of(e, id);
	cr_assert(info.calendar);
	cr_assert_eq(info.state, TW_STOPPED);
	cr_assert_eq(info.next_due_wall_ns, 0);
	step(e, 5000);
	cr_assert_eq(atomic_load(&r->runs), 1);
	destroy_expecting_one_release(e, r);
}

Test(calendar, refused_expressions_add_nothing)
{
	uint64_t start;
	tw_engine *e = engine_at_wall(0, 1767225600, &start);
	struct counts c = { 0 };
	tw_task_spec spec = spec_of(0, 0, count_callback, &c);
	spec.release = count_release;
	tw_id id = 0;
	spec.cron = "61 * * * * *";
	cr_assert_eq(tw_add(e, &spec, &id), -TW_ESYNTAX);
	spec.cron = "CRON_TZ=Nowhere/Atlantis * * * * * *";
	cr_assert_eq(tw_add(e, &spec, &id), -TW_ENOZONE);
	spec.cron = "CRON_TZ=UTC 0 0 0 30 2 *";
	cr_assert_eq(tw_add(e, &spec, &id), -TW_ENOMATCH);
	spec.cron = "CRON_TZ=UTC * * * * * *";
	spec.period_ms = 1000;
	cr_assert_eq(tw_add(e, &spec, &id), -TW_EINVAL);
	cr_assert_eq(id, 0);
	tw_engine_stats stats = stats_of(e);
	cr_assert_eq(stats.tasks_live, 0);
	destroy_expecting_releases(e, &c, 0);
}

Test(calendar, every_is_a_fixed_period)
{
	uint64_t start;
	tw_engine *e = engine_at_wall(0, 1767225600, &start);
	struct recorder *r = recorder_new(e);
	tw_id id = add_cron(e, r, "@every 1.5s", 0);
	tw_task_info info = info_of(e, id);
	cr_assert(!info.calendar);
	cr_assert_eq(info.period_ms, 1500);
	cr_assert_eq(info.next_due_ns, start + 1500 * MS);
	cr_assert_eq(info.next_due_wall_ns, 0);
	step(e, 1500);
	step(e, 1500);
	cr_assert_eq(atomic_load(&r->runs), 2);
	destroy_expecting_one_release(e, r);
}

Test(calendar, wall_clock_set_replans_calendar_tasks_only)
{
	int64_t w0 = 1767225600; /* 00:00 UTC */
	uint64_t start;
	tw_engine *e = engine_at_wall(0, w0, &start);
	struct recorder *r = recorder_new(e);
	tw_id cal = add_cron(e, r, "CRON_TZ=UTC 0 0 12 * * *", 0);
	struct counts c = { 0 };
	tw_id mono = add_counted(e, &c, 3600 * 1000, 3600 * 1000);
	cr_assert_eq(info_of(e, cal).next_due_ns, start + 12 * 3600000 * MS);
	set_manual_wall(e, S(w0 + 3600)); /* the clock set an hour forward */
	tw_task_info info = info_of(e, cal);
	cr_assert_eq(info.next_due_ns, start + 11 * 3600000 * MS);
	cr_assert_eq(info.next_due_wall_ns, S(w0 + 12 * 3600));
	cr_assert_eq(info_of(e, mono).next_due_ns, start + 3600000 * MS);
	set_manual_wall(e, S(w0)); /* and back */
	cr_assert_eq(info_of(e, cal).next_due_ns, start + 12 * 3600000 * MS);
	cr_assert_eq(info_of(e, mono).next_due_ns, start + 3600000 * MS);
	step(e, 12 * 3600 * 1000 - 1);
	cr_assert_eq(atomic_load(&r->runs), 0);
	step(e, 1);
	cr_assert_eq(atomic_load(&r->runs), 1);
	/* set forward past a fire time: it fires at once, as after a stall */
	set_manual_wall(e, S(w0 + 36 * 3600 + 60));
	step(e, 0);
	cr_assert_eq(atomic_load(&r->runs), 2);
	cr_assert_eq(info_of(e, cal).next_due_wall_ns, S(w0 + 60 * 3600));
	cr_assert_eq(tw_cancel(e, mono), TW_OK);
	destroy_expecting_one_release(e, r);
}

/* The three additions of issue 15 together: a named calendar task whose first due is an
 * absolute time fires once then, then by the calendar; its name finds it and frees with it. */
Test(calendar, named_with_a_first_due_then_the_calendar)
{
	int64_t w0 = 1767225601; /* 2026-01-01 00:00:01 UTC */
	uint64_t start;
	tw_engine *e = engine_at_wall(0, w0, &start);
	struct recorder *r = recorder_new(e);
	tw_task_spec spec = spec_of(0, 0, record_callback, r);
	spec.release = record_release;
	spec.cron = "CRON_TZ=UTC */5 * * * * *";
	spec.name = "nightly-report";
	spec.first_due_ns = start + 1000 * MS;
	tw_id id = add_spec(e, &spec);
	atomic_store(&r->id, id);
	tw_id found = 0;
	cr_assert_eq(tw_find(e, "nightly-report", &found), TW_OK);
	cr_assert_eq(found, id);
	tw_task_info info = info_of(e, id);
	cr_assert(info.calendar);
	cr_assert_str_eq(info.name, "nightly-report");
	cr_assert_eq(info.next_due_ns, start + 1000 * MS);
	tw_id again;
	cr_assert_eq(tw_add(e, &spec, &again), -TW_EEXIST);
	step(e, 1000);
	cr_assert_eq(atomic_load(&r->runs), 1);
	cr_assert_eq(r->due[0], start + 1000 * MS);
	step(e, 3000); /* the calendar's next fire time: 00:00:05 */
	cr_assert_eq(atomic_load(&r->runs), 2);
	cr_assert_eq(wall_of(r->due[1], w0, start), S(1767225605));
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	cr_assert_eq(tw_find(e, "nightly-report", &found), -TW_ENOTFOUND);
	destroy_expecting_one_release(e, r);
}
