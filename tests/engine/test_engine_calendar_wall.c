/*
 * test_engine_calendar_wall.c - a calendar task follows the system clock when
 * it is set: clock_settime moves the wall clock STEP forward and back (and the
 * teardown puts it back whatever happens), and the task's monotonic due must
 * move with it within milliseconds, a periodic task's not at all. Needs
 * CAP_SYS_TIME (skipped, as skipped, without it). Every process on the
 * machine sees the step, so it is small - an NTP step's size, harmless to
 * builds and timeouts beside it, and to the machine if the test is killed
 * between its two steps - and meson runs this test alone (is_parallel: false).
 */
#include "engine_test_support.h"

#include <stdio.h>

#define MS   UINT64_C(1000000)
#define STEP ((int64_t)(50 * MS)) /* TFD_TIMER_CANCEL_ON_SET fires for any step */

static tw_id add_cron(tw_engine *e, struct recorder *r, const char *cron)
{
	tw_task_spec spec = spec_of(0, 0, record_callback, r);
	spec.release = record_release;
	spec.cron = cron;
	tw_id id = add_spec(e, &spec);
	atomic_store(&r->id, id);
	return id;
}

static int64_t stepped_ns; /* how far the tests moved the wall clock: put back at teardown */

static int64_t ns_of(clockid_t clock)
{
	struct timespec t;
	cr_assert_eq(clock_gettime(clock, &t), 0);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The wall clock less the monotonic one, from reads close together (a thread held up
 * between them would skew it). */
static int64_t wall_offset(void)
{
	int64_t best = 0, spread = INT64_MAX;
	for (int i = 0; i < 100 && spread > 20000; i++) {
		int64_t before = ns_of(CLOCK_MONOTONIC), wall = ns_of(CLOCK_REALTIME);
		int64_t after = ns_of(CLOCK_MONOTONIC);
		if (after - before < spread) {
			spread = after - before;
			best = wall - (before + after) / 2;
		}
	}
	return best;
}

/* Moves the wall clock by about ns; *made: by how much it moved. A thread held up between
 * the read and the set makes the step shorter than asked, so the tests compare with what
 * was made. */
static int step_wall(int64_t ns, int64_t *made)
{
	int64_t offset = wall_offset();
	struct timespec to;
	int64_t t = ns_of(CLOCK_REALTIME) + ns;
	to.tv_sec = t / 1000000000;
	to.tv_nsec = t % 1000000000;
	if (clock_settime(CLOCK_REALTIME, &to))
		return -1;
	*made = wall_offset() - offset;
	stepped_ns += *made;
	return 0;
}

static void restore_wall(void)
{
	int64_t made;
	if (stepped_ns && step_wall(-stepped_ns, &made))
		fprintf(stderr,
			"test_engine_calendar: could not set the clock back by %" PRId64
			" ns: %s\n",
			stepped_ns, strerror(errno));
}

/* Waits until the task's next due differs from was. */
static uint64_t due_moved(tw_engine *e, tw_id id, uint64_t was)
{
	for (int waited = 0; waited < WAIT_LIMIT_MS; waited++) {
		uint64_t due = info_of(e, id).next_due_ns;
		if (due != was)
			return due;
		sleep_ms(1);
	}
	return was;
}

Test(calendar_wall, set_forward_and_back, .fini = restore_wall)
{
	struct timespec now;
	cr_assert_eq(clock_gettime(CLOCK_REALTIME, &now), 0);
	if (clock_settime(CLOCK_REALTIME, &now)) {
		cr_assert_eq(errno, EPERM, "clock_settime: %s", strerror(errno));
		cr_skip_test("setting the clock needs CAP_SYS_TIME; the manual clock's test "
			     "covers the re-planning");
	}
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	tw_engine *e = engine_new(&cfg);
	/* daily, twelve hours from now: no step passes it */
	char expr[64];
	snprintf(expr, sizeof expr, "CRON_TZ=UTC 0 0 %d * * *",
		 (int)((now.tv_sec / 3600 + 12) % 24));
	struct recorder *r = recorder_new(e);
	tw_id cal = add_cron(e, r, expr);
	struct counts c = { 0 };
	tw_id mono = add_counted(e, &c, 3600 * 1000, 3600 * 1000);
	tw_task_info before = info_of(e, cal);
	uint64_t mono_due = info_of(e, mono).next_due_ns;

	int64_t made;
	cr_assert_eq(step_wall(STEP, &made), 0, "clock_settime: %s", strerror(errno));
	uint64_t moved = due_moved(e, cal, before.next_due_ns);
	int64_t delta = (int64_t)(before.next_due_ns - moved);
	cr_assert(delta > made - 5 * (int64_t)MS && delta < made + 5 * (int64_t)MS,
		  "moved by %" PRId64 " ns for a step of %" PRId64, delta, made);
	cr_assert_eq(info_of(e, cal).next_due_wall_ns, before.next_due_wall_ns);
	cr_assert_eq(info_of(e, mono).next_due_ns, mono_due);

	int64_t made_back;
	cr_assert_eq(step_wall(-STEP, &made_back), 0, "clock_settime: %s", strerror(errno));
	uint64_t back = due_moved(e, cal, moved);
	/* both steps together moved the wall clock by made + made_back */
	delta = (int64_t)(back - before.next_due_ns) + (made + made_back);
	cr_assert(delta > -5 * (int64_t)MS && delta < 5 * (int64_t)MS,
		  "back by %" PRId64 " ns beyond the steps made", delta);
	cr_assert_eq(info_of(e, mono).next_due_ns, mono_due);
	cr_assert_eq(atomic_load(&r->runs), 0);
	destroy_expecting_one_release(e, r);
	cr_assert_eq(atomic_load(&c.releases), 1);
}
