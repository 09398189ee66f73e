/*
 * test_snapshot.c - tw_snapshot and tw_restore between two manual engines: what a task keeps
 * across the restart (schedules, dues on the wall clock, pauses, counters, flags, the misfire
 * policy, a calendar task's expression), what is left out (unnamed tasks), and what a due
 * that passed while "the process was down" does under each misfire policy: the restoring
 * engine's manual wall clock is set later than the writer's by the down time.
 */
#include "snapshot_test.h"

#include <fcntl.h>
#include <sys/file.h>

static tw_restore_result restore_at(tw_engine *e, const char *path, struct app *app, int line)
{
	tw_restore_result res;
	memset(&res, 0xa5, sizeof res);
	int rc = tw_restore(e, path, app_resolve, app, &res);
	cr_assert_eq(rc, TW_OK, "line %d: tw_restore: %s", line, tw_strerror(rc));
	return res;
}
#define restore(e, path, app) restore_at(e, path, app, __LINE__)

#define APP_NAMES                                                     \
	{                                                             \
		"beat", "once", "cron", "paused", "fail-job", "never" \
	}

Test(snapshot, round_trip_keeps_schedules_dues_pauses_counters_and_flags)
{
	struct tmpdir t = tmpdir_make();
	uint64_t s1, s2;
	tw_engine *a = engine_at(WALL0, 0, &s1);
	struct app app = { .names = APP_NAMES };
	add_named(a, &app, "beat", 100, 1000, NULL, TW_RUN_LATE, TW_MISFIRE_RUN_ONCE);
	add_named(a, &app, "once", 5000, 0, NULL, 0, TW_MISFIRE_SKIP);
	add_named(a, &app, "cron", 0, 0, "CRON_TZ=UTC */10 * * * * *", TW_CONCURRENT,
		  TW_MISFIRE_SKIP);
	tw_id paused = add_named(a, &app, "paused", 300, 500, NULL, 0, 0);
	add_named(a, &app, "fail-job", 50, 100, NULL, 0, 0);
	add_named(a, &app, "never", TW_NEVER, 0, NULL, 0, 0);
	struct counts unnamed = { 0 };
	add_counted(a, &unnamed, 10, 10);
	for (int ms = 0; ms < 2100; ms += 50)
		step(a, 50); /* one run at a time: no overlap skips */
	cr_assert_eq(tw_pause(a, paused), TW_OK);
	cr_assert_eq(snapshot(a, t.path), 6, "the unnamed task is left out");
	cr_assert_eq(tmpdir_files(&t), 1, "no temporary file left");
	tw_engine_destroy(a);

	/* No down time: the restoring engine's wall clock reads what the writer's did. */
	tw_engine *b = engine_at(WALL0 + S(2) + 100 * (int64_t)MSNS, 0, &s2);
	struct app app2 = { .names = APP_NAMES };
	tw_restore_result res = restore(b, t.path, &app2);
	cr_assert_eq(res.records, 6);
	cr_assert_eq(res.restored, 6);
	cr_assert_eq(res.declined + res.expired + res.misfired_run + res.misfired_skipped +
			     res.skipped_missed + res.duplicates,
		     0);
	cr_assert_eq(res.written_wall_ns, WALL0 + S(2) + 100 * (int64_t)MSNS);
	cr_assert_eq(stats_of(b).tasks_live, 6);

	tw_task_info beat = info_of(b, find(b, "beat"));
	cr_assert_eq(beat.state, TW_WAITING);
	cr_assert_eq(beat.period_ms, 1000);
	cr_assert_eq(beat.runs, 3);
	cr_assert_eq(beat.next_due_ns, s2 + 1000 * MSNS, "due at 3.1 s on the wall clock");
	cr_assert_eq(beat.misfire, TW_MISFIRE_RUN_ONCE);
	cr_assert_eq(app2.seen[0].flags, TW_RUN_LATE);
	cr_assert_eq(app2.seen[0].next_due_wall_ns, WALL0 + S(3) + 100 * (int64_t)MSNS);

	tw_task_info once = info_of(b, find(b, "once"));
	cr_assert_eq(once.period_ms, 0);
	cr_assert_eq(once.next_due_ns, s2 + 2900 * MSNS);
	cr_assert_eq(once.misfire, TW_MISFIRE_SKIP);

	tw_task_info cron = info_of(b, find(b, "cron"));
	cr_assert(cron.calendar);
	cr_assert(cron.concurrent);
	cr_assert_eq(cron.next_due_wall_ns, WALL0 + S(10));
	cr_assert_eq(cron.next_due_ns, s2 + 7900 * MSNS);
	cr_assert_str_eq(app2.seen[2].cron, "CRON_TZ=UTC */10 * * * * *");

	tw_task_info p = info_of(b, find(b, "paused"));
	cr_assert_eq(p.state, TW_PAUSED);
	cr_assert_eq(p.runs, 4);
	cr_assert_eq(p.next_due_ns, 0);
	cr_assert(!p.paused_by_failures);

	tw_task_info f = info_of(b, find(b, "fail-job"));
	cr_assert_eq(f.state, TW_PAUSED);
	cr_assert(f.paused_by_failures);
	cr_assert_eq(f.runs, 2);
	cr_assert_eq(f.failures, 2);
	cr_assert_eq(f.consecutive_failures, 2);

	tw_task_info never = info_of(b, find(b, "never"));
	cr_assert_eq(never.state, TW_WAITING);
	cr_assert_eq(never.next_due_ns, 0);

	/* They go on from there: beat at 3.1 s, once at 5 s, cron at 10 s, paused on resume. */
	step(b, 999);
	cr_assert_eq(atomic_load(&app2.counts[0].runs), 0);
	step(b, 1);
	cr_assert_eq(atomic_load(&app2.counts[0].runs), 1);
	cr_assert_eq(info_of(b, find(b, "beat")).runs, 4);
	cr_assert_eq(tw_resume(b, find(b, "paused")), TW_OK);
	cr_assert_eq(info_of(b, find(b, "paused")).next_due_ns, s2 + 1500 * MSNS);
	step(b, 1900);
	cr_assert_eq(atomic_load(&app2.counts[1].runs), 1, "the one-shot ran at 5 s");
	step(b, 5000);
	cr_assert_eq(atomic_load(&app2.counts[2].runs), 1, "the calendar task ran at 10 s");
	tw_engine_destroy(b);
	for (int i = 0; i < 6; i++) {
		cr_assert_eq(atomic_load(&app.counts[i].releases), 1, "%s", app.names[i]);
		cr_assert_eq(atomic_load(&app2.counts[i].releases), 1, "%s", app2.names[i]);
	}
	cr_assert_eq(atomic_load(&unnamed.releases), 1);
	tmpdir_remove(&t);
}

Test(snapshot, an_engine_without_named_tasks_writes_an_empty_snapshot)
{
	struct tmpdir t = tmpdir_make();
	uint64_t s;
	tw_engine *a = engine_at(WALL0, 0, &s);
	struct counts c = { 0 };
	add_counted(a, &c, 10, 10);
	cr_assert_eq(snapshot(a, t.path), 0);
	tw_engine *b = engine_at(WALL0, 0, &s);
	struct app app = { .names = APP_NAMES };
	tw_restore_result res = restore(b, t.path, &app);
	cr_assert_eq(res.records, 0);
	cr_assert_eq(res.restored, 0);
	cr_assert_eq(app.calls, 0);
	cr_assert_eq(stats_of(b).tasks_live, 0);
	tw_engine_destroy(a);
	tw_engine_destroy(b);
	tmpdir_remove(&t);
}

/* A writer at WALL0 with one named task; a restoring engine down_ms later. */
static tw_engine *restart(struct tmpdir *t, struct app *app, const char *name, uint64_t delay,
			  uint64_t period, const char *cron, unsigned misfire, int64_t down_ns,
			  uint64_t *start, tw_restore_result *res)
{
	uint64_t s1;
	tw_engine *a = engine_at(WALL0, 0, &s1);
	struct app writer = { .names = APP_NAMES };
	add_named(a, &writer, name, delay, period, cron, 0, misfire);
	cr_assert_eq(snapshot(a, t->path), 1);
	tw_engine_destroy(a);
	tw_engine *b = engine_at(WALL0 + down_ns, 0, start);
	*res = restore(b, t->path, app);
	return b;
}

Test(snapshot, run_once_runs_a_periodic_task_at_restore_and_counts_the_rest_missed)
{
	struct tmpdir t = tmpdir_make();
	struct app app = { .names = APP_NAMES };
	uint64_t s;
	tw_restore_result res;
	/* Due at 1 s, 2 s, ... 10 s while down until 10.5 s: ten fire times passed. */
	tw_engine *b = restart(&t, &app, "beat", 1000, 1000, NULL, TW_MISFIRE_RUN_ONCE,
			       S(10) + 500 * (int64_t)MSNS, &s, &res);
	cr_assert_eq(res.restored, 1);
	cr_assert_eq(res.misfired_run, 1);
	cr_assert_eq(res.misfired_skipped, 0);
	cr_assert_eq(res.skipped_missed, 9);
	cr_assert(app.seen[0].misfired);
	cr_assert_eq(app.seen[0].missed, 9);
	tw_id id = find(b, "beat");
	cr_assert_eq(info_of(b, id).next_due_ns, s, "due at once");
	cr_assert_eq(info_of(b, id).skipped_missed, 9);
	step(b, 0);
	cr_assert_eq(atomic_load(&app.counts[0].runs), 1);
	cr_assert_eq(atomic_load(&app.fire_skipped[0]), 9, "the run reports the missed ones");
	cr_assert_eq(info_of(b, id).next_due_ns, s + 1000 * MSNS, "periods from the restore");
	cr_assert_eq(stats_of(b).skipped_missed, 9);
	tw_engine_destroy(b);
	cr_assert_eq(atomic_load(&app.counts[0].releases), 1);
	tmpdir_remove(&t);
}

Test(snapshot, skip_moves_a_periodic_task_to_its_next_due_on_its_phase)
{
	struct tmpdir t = tmpdir_make();
	struct app app = { .names = APP_NAMES };
	uint64_t s;
	tw_restore_result res;
	tw_engine *b = restart(&t, &app, "beat", 1000, 1000, NULL, TW_MISFIRE_SKIP,
			       S(10) + 500 * (int64_t)MSNS, &s, &res);
	cr_assert_eq(res.misfired_run, 0);
	cr_assert_eq(res.misfired_skipped, 1);
	cr_assert_eq(res.skipped_missed, 10);
	cr_assert(!app.seen[0].misfired);
	tw_id id = find(b, "beat");
	tw_task_info info = info_of(b, id);
	cr_assert_eq(info.next_due_ns, s + 500 * MSNS, "11 s on the wall clock");
	cr_assert_eq(info.skipped_missed, 10);
	step(b, 499);
	cr_assert_eq(atomic_load(&app.counts[0].runs), 0);
	step(b, 1);
	cr_assert_eq(atomic_load(&app.counts[0].runs), 1);
	/* SKIP passed over them: its first run is an ordinary one, reporting no skip */
	cr_assert_eq(atomic_load(&app.fire_skipped[0]), 0);
	cr_assert_eq(info_of(b, id).skipped_missed, 10);
	tw_engine_destroy(b);
	tmpdir_remove(&t);
}

Test(snapshot, run_once_and_skip_on_a_calendar_task)
{
	struct tmpdir t = tmpdir_make();
	const char *every10 = "CRON_TZ=UTC */10 * * * * *";
	struct app app = { .names = APP_NAMES };
	uint64_t s;
	tw_restore_result res;
	/* Fire times 10 s ... 60 s passed while down until 65 s: six. */
	tw_engine *b =
		restart(&t, &app, "cron", 0, 0, every10, TW_MISFIRE_RUN_ONCE, S(65), &s, &res);
	cr_assert_eq(res.misfired_run, 1);
	cr_assert_eq(res.skipped_missed, 5);
	tw_id id = find(b, "cron");
	cr_assert_eq(info_of(b, id).next_due_ns, s);
	step(b, 0);
	cr_assert_eq(atomic_load(&app.counts[2].runs), 1);
	cr_assert_eq(atomic_load(&app.fire_skipped[2]), 5);
	tw_task_info info = info_of(b, id);
	cr_assert_eq(info.next_due_wall_ns, WALL0 + S(70), "the calendar goes on after now");
	cr_assert_eq(info.next_due_ns, s + 5000 * MSNS);
	tw_engine_destroy(b);

	struct app app2 = { .names = APP_NAMES };
	b = restart(&t, &app2, "cron", 0, 0, every10, TW_MISFIRE_SKIP, S(65), &s, &res);
	cr_assert_eq(res.misfired_skipped, 1);
	cr_assert_eq(res.skipped_missed, 6);
	info = info_of(b, find(b, "cron"));
	cr_assert_eq(info.next_due_wall_ns, WALL0 + S(70));
	cr_assert_eq(info.skipped_missed, 6);
	step(b, 4999);
	cr_assert_eq(atomic_load(&app2.counts[2].runs), 0);
	step(b, 1);
	cr_assert_eq(atomic_load(&app2.counts[2].runs), 1);
	cr_assert_eq(atomic_load(&app2.fire_skipped[2]), 0);
	tw_engine_destroy(b);
	tmpdir_remove(&t);
}

Test(snapshot, calendar_missed_fire_times_are_counted_up_to_the_bound)
{
	struct tmpdir t = tmpdir_make();
	struct app app = { .names = APP_NAMES };
	uint64_t s;
	tw_restore_result res;
	/* Every second, down for a day: 86 400 fire times passed, counted to the bound. */
	tw_engine *b = restart(&t, &app, "cron", 0, 0, "CRON_TZ=UTC * * * * * *", TW_MISFIRE_SKIP,
			       S(86400), &s, &res);
	cr_assert_eq(res.skipped_missed, TW_RESTORE_MISSED_MAX);
	cr_assert_eq(info_of(b, find(b, "cron")).next_due_wall_ns, WALL0 + S(86401));
	tw_engine_destroy(b);
	/* RUN_ONCE: the bound is on the missed ones, as at run time; the run's own fire time is
	 * not one of them */
	struct app app2 = { .names = APP_NAMES };
	b = restart(&t, &app2, "cron", 0, 0, "CRON_TZ=UTC * * * * * *", TW_MISFIRE_RUN_ONCE,
		    S(86400), &s, &res);
	cr_assert_eq(res.misfired_run, 1);
	cr_assert_eq(res.skipped_missed, TW_RESTORE_MISSED_MAX);
	cr_assert_eq(app2.seen[2].missed, TW_RESTORE_MISSED_MAX);
	step(b, 0);
	cr_assert_eq(atomic_load(&app2.fire_skipped[2]), TW_RESTORE_MISSED_MAX);
	tw_engine_destroy(b);
	tmpdir_remove(&t);
}

Test(snapshot, a_one_shot_runs_at_restore_or_expires)
{
	struct tmpdir t = tmpdir_make();
	struct app app = { .names = APP_NAMES };
	uint64_t s;
	tw_restore_result res;
	tw_engine *b =
		restart(&t, &app, "once", 1000, 0, NULL, TW_MISFIRE_RUN_ONCE, S(5), &s, &res);
	cr_assert_eq(res.restored, 1);
	cr_assert_eq(res.misfired_run, 1);
	cr_assert_eq(res.skipped_missed, 0);
	step(b, 0);
	cr_assert_eq(atomic_load(&app.counts[1].runs), 1);
	cr_assert_eq(atomic_load(&app.counts[1].releases), 1, "it completed");
	tw_engine_destroy(b);

	struct app app2 = { .names = APP_NAMES };
	b = restart(&t, &app2, "once", 1000, 0, NULL, TW_MISFIRE_SKIP, S(5), &s, &res);
	cr_assert_eq(res.records, 1);
	cr_assert_eq(res.restored, 0);
	cr_assert_eq(res.expired, 1);
	cr_assert_eq(app2.calls, 0, "an expired one-shot is not shown to the resolver");
	cr_assert_eq(tw_find(b, "once", &(tw_id){ 0 }), -TW_ENOTFOUND);
	tw_engine_destroy(b);
	cr_assert_eq(atomic_load(&app2.counts[1].releases), 0);
	tmpdir_remove(&t);
}

Test(snapshot, a_due_still_ahead_is_kept_whatever_the_policy)
{
	struct tmpdir t = tmpdir_make();
	struct app app = { .names = APP_NAMES };
	uint64_t s;
	tw_restore_result res;
	tw_engine *b = restart(&t, &app, "once", 60000, 0, NULL, TW_MISFIRE_SKIP, S(20), &s, &res);
	cr_assert_eq(res.restored, 1);
	cr_assert_eq(res.misfired_run + res.misfired_skipped + res.expired, 0);
	cr_assert_eq(info_of(b, find(b, "once")).next_due_ns, s + 40000 * MSNS);
	tw_engine_destroy(b);
	tmpdir_remove(&t);
}

Test(snapshot, the_resolver_may_decline_a_task)
{
	struct tmpdir t = tmpdir_make();
	uint64_t s;
	tw_engine *a = engine_at(WALL0, 0, &s);
	struct app app = { .names = APP_NAMES };
	add_named(a, &app, "beat", 100, 1000, NULL, 0, 0);
	add_named(a, &app, "never", TW_NEVER, 0, NULL, 0, 0);
	cr_assert_eq(snapshot(a, t.path), 2);
	tw_engine *b = engine_at(WALL0, 0, &s);
	struct app app2 = { .names = APP_NAMES, .decline = "never" };
	tw_restore_result res = restore(b, t.path, &app2);
	cr_assert_eq(res.records, 2);
	cr_assert_eq(res.restored, 1);
	cr_assert_eq(res.declined, 1);
	find(b, "beat");
	cr_assert_eq(tw_find(b, "never", &(tw_id){ 0 }), -TW_ENOTFOUND);
	tw_engine_destroy(a);
	tw_engine_destroy(b);
	cr_assert_eq(atomic_load(&app2.counts[5].releases), 0, "a declined task is not ours");
	cr_assert_eq(atomic_load(&app2.counts[0].releases), 1);
	tmpdir_remove(&t);
}

Test(snapshot, a_snapshot_replaces_the_previous_one_whole)
{
	struct tmpdir t = tmpdir_make();
	uint64_t s;
	tw_engine *a = engine_at(WALL0, 0, &s);
	struct app app = { .names = APP_NAMES };
	tw_id beat = add_named(a, &app, "beat", 100, 1000, NULL, 0, 0);
	cr_assert_eq(snapshot(a, t.path), 1);
	add_named(a, &app, "once", 100, 0, NULL, 0, 0);
	cr_assert_eq(tw_cancel(a, beat), TW_OK);
	cr_assert_eq(snapshot(a, t.path), 1);
	cr_assert_eq(tmpdir_files(&t), 1);
	tw_engine *b = engine_at(WALL0, 0, &s);
	struct app app2 = { .names = APP_NAMES };
	tw_restore_result res = restore(b, t.path, &app2);
	cr_assert_eq(res.restored, 1);
	find(b, "once");
	cr_assert_eq(tw_find(b, "beat", &(tw_id){ 0 }), -TW_ENOTFOUND);
	tw_engine_destroy(a);
	tw_engine_destroy(b);
	tmpdir_remove(&t);
}

Test(snapshot, snapshot_refusals_leave_no_file)
{
	struct tmpdir t = tmpdir_make();
	uint64_t s;
	tw_engine *a = engine_at(WALL0, 0, &s);
	struct app app = { .names = APP_NAMES };
	add_named(a, &app, "beat", 100, 1000, NULL, 0, 0);
	char missing[200];
	snprintf(missing, sizeof missing, "%s/no/such/dir/snap", t.dir);
	errno = 0;
	cr_assert_eq(tw_snapshot(a, missing, NULL), -TW_EIO);
	cr_assert_eq(errno, ENOENT);
	cr_assert_eq(tw_snapshot(a, "", NULL), -TW_EINVAL);
	cr_assert_eq(tw_snapshot(NULL, t.path, NULL), -TW_EINVAL);
	/* A directory where the file should be: the rename fails, the temporary file goes. */
	cr_assert_eq(mkdir(t.path, 0700), 0);
	char inside[200];
	snprintf(inside, sizeof inside, "%s/x", t.path);
	cr_assert_eq(mkdir(inside, 0700), 0);
	errno = 0;
	cr_assert_eq(tw_snapshot(a, t.path, NULL), -TW_EIO);
	cr_assert(errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST, "errno %d", errno);
	cr_assert_eq(tmpdir_files(&t), 1, "only the directory: no temporary file");
	cr_assert_eq(tw_engine_stop(a, 1000), TW_OK);
	cr_assert_eq(tw_snapshot(a, t.path, NULL), -TW_ESHUTDOWN);
	tw_engine_destroy(a);
	tmpdir_remove(&t);
}

struct in_callback {
	tw_engine *e;
	const char *path;
	_Atomic int rc;
	_Atomic uint64_t written;
};

static int snapshot_callback(const tw_fire *fire, void *arg)
{
	(void)fire;
	struct in_callback *c = arg;
	uint64_t n = 0;
	atomic_store(&c->rc, tw_snapshot(c->e, c->path, &n));
	atomic_store(&c->written, n);
	return 0;
}

Test(snapshot, a_callback_may_snapshot_its_own_engine)
{
	struct tmpdir t = tmpdir_make();
	uint64_t s;
	tw_engine *a = engine_at(WALL0, 0, &s);
	struct in_callback c = { .e = a, .path = t.path, .rc = 1 };
	tw_task_spec spec = spec_of(10, 0, snapshot_callback, &c);
	spec.name = "saver";
	add_spec(a, &spec);
	struct app app = { .names = APP_NAMES };
	add_named(a, &app, "beat", 100, 1000, NULL, 0, 0);
	step(a, 10);
	cr_assert_eq(atomic_load(&c.rc), TW_OK);
	cr_assert_eq(atomic_load(&c.written), 1, "beat; the saver's last run goes: left out");
	tw_engine *b = engine_at(WALL0, 0, &s);
	struct app app2 = { .names = APP_NAMES };
	tw_restore_result res = restore(b, t.path, &app2);
	cr_assert_eq(res.restored, 1);
	find(b, "beat");
	tw_engine_destroy(a);
	tw_engine_destroy(b);
	tmpdir_remove(&t);
}

Test(snapshot, a_misfire_policy_is_checked_and_kept_with_the_name)
{
	uint64_t s;
	tw_engine *e = engine_at(WALL0, 0, &s);
	struct counts c = { 0 };
	tw_task_spec spec = spec_of(100, 0, count_callback, &c);
	spec.name = "job";
	spec.misfire = TW_MISFIRE_SKIP + 1;
	tw_id id = 0;
	cr_assert_eq(tw_add(e, &spec, &id), -TW_EINVAL);
	spec.misfire = TW_MISFIRE_SKIP;
	id = add_spec(e, &spec);
	cr_assert_eq(info_of(e, id).misfire, TW_MISFIRE_SKIP);
	/* Without a name it is not read: nothing restores the task. */
	spec.name = NULL;
	spec.misfire = 7;
	id = add_spec(e, &spec);
	cr_assert_eq(info_of(e, id).misfire, 0);
	tw_engine_destroy(e);
}

/* dir/name with the bytes given (len 0: empty); the file's fd, still open. */
static int put_file(const char *dir, const char *name, const void *bytes, size_t len)
{
	char p[256];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	int fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(write(fd, bytes, len), (ssize_t)len);
	return fd;
}

static bool exists(const char *dir, const char *name)
{
	char p[256];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return !lstat(p, &st);
}

/* A snapshot removes the temporary files that killed snapshots to the same path left, and
 * nothing else: not a live writer's (locked), not a file that is no snapshot's start, not
 * another path's, not a name mkstemp does not make, not a link. */
Test(snapshot, stale_temporary_files_of_the_path_are_removed)
{
	struct tmpdir t = tmpdir_make();
	static const char magic[] = "\x89TWSNAP\n and then whatever a killed writer left";
	int fds[] = {
		put_file(t.dir, "snap.tmp-AbC123", "", 0),               /* killed at once */
		put_file(t.dir, "snap.tmp-Zz9999", magic, sizeof magic), /* killed mid-way */
		put_file(t.dir, "snap.tmp-000000", magic, 3),            /* in the header */
		put_file(t.dir, "snap.tmp-LOCKED", magic, sizeof magic), /* a live writer's */
		put_file(t.dir, "snap.tmp-abcdef", "hello", 5),          /* not a snapshot */
		put_file(t.dir, "other.tmp-abc123", "", 0),              /* another path's */
		put_file(t.dir, "snap.tmp-abc12", "", 0),                /* not mkstemp's */
		put_file(t.dir, "snap.tmp-abc1234", "", 0),              /* not mkstemp's */
		put_file(t.dir, "snap.tmp-ab.123", "", 0),               /* not mkstemp's */
	};
	cr_assert_eq(flock(fds[3], LOCK_EX), 0);
	char link[200];
	snprintf(link, sizeof link, "%s/snap.tmp-Link01", t.dir);
	cr_assert_eq(symlink("snap.tmp-abc12", link), 0);
	uint64_t s;
	tw_engine *a = engine_at(WALL0, 0, &s);
	struct app app = { .names = APP_NAMES };
	add_named(a, &app, "beat", 100, 1000, NULL, 0, 0);
	cr_assert_eq(snapshot(a, t.path), 1);
	cr_assert(!exists(t.dir, "snap.tmp-AbC123"));
	cr_assert(!exists(t.dir, "snap.tmp-Zz9999"));
	cr_assert(!exists(t.dir, "snap.tmp-000000"));
	const char *kept[] = { "snap.tmp-LOCKED",  "snap.tmp-abcdef",
			       "other.tmp-abc123", "snap.tmp-abc12",
			       "snap.tmp-abc1234", "snap.tmp-ab.123",
			       "snap.tmp-Link01",  "snap" };
	for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
		cr_assert(exists(t.dir, kept[i]), "%s was removed", kept[i]);
	cr_assert_eq(tmpdir_files(&t), 8);
	/* the writer is gone: its file is stale now */
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		cr_assert_eq(close(fds[i]), 0);
	cr_assert_eq(snapshot(a, t.path), 1);
	cr_assert(!exists(t.dir, "snap.tmp-LOCKED"));
	cr_assert_eq(tmpdir_files(&t), 7);
	tw_engine_destroy(a);
	tmpdir_remove(&t);
}

/* A path that is a symbolic link keeps it: the file it points to (through every link, and
 * whether it exists yet or not) is replaced, by a temporary file in that file's directory. */
Test(snapshot, a_symlink_is_written_through)
{
	struct tmpdir t = tmpdir_make();
	char sub[128], p[256];
	snprintf(sub, sizeof sub, "%s/sub", t.dir);
	cr_assert_eq(mkdir(sub, 0700), 0);
	/* snap -> link2 -> sub/real, relative links; sub/real does not exist yet */
	snprintf(p, sizeof p, "%s/link2", t.dir);
	cr_assert_eq(symlink("sub/real", p), 0);
	cr_assert_eq(symlink("link2", t.path), 0);
	uint64_t s;
	tw_engine *a = engine_at(WALL0, 0, &s);
	struct app app = { .names = APP_NAMES };
	tw_id beat = add_named(a, &app, "beat", 100, 1000, NULL, 0, 0);
	for (int round = 0; round < 2; round++) {
		cr_assert_eq(snapshot(a, t.path), 1);
		struct stat st;
		cr_assert_eq(lstat(t.path, &st), 0);
		cr_assert(S_ISLNK(st.st_mode), "the link was replaced");
		snprintf(p, sizeof p, "%s/link2", t.dir);
		cr_assert_eq(lstat(p, &st), 0);
		cr_assert(S_ISLNK(st.st_mode), "the second link was replaced");
		snprintf(p, sizeof p, "%s/real", sub);
		cr_assert_eq(lstat(p, &st), 0);
		cr_assert(S_ISREG(st.st_mode));
		cr_assert_eq(tmpdir_files(&t), 3, "snap, link2, sub: no temporary file");
		cr_assert_eq(tw_cancel(a, beat), TW_OK);
		beat = add_named(a, &app, "once", 100, 0, NULL, 0, 0);
	}
	tw_engine *b = engine_at(WALL0, 0, &s);
	struct app app2 = { .names = APP_NAMES };
	tw_restore_result res = restore(b, t.path, &app2);
	cr_assert_eq(res.restored, 1);
	find(b, "once");
	/* an absolute link to a file beside it */
	cr_assert_eq(unlink(t.path), 0);
	snprintf(p, sizeof p, "%s/abs", t.dir);
	cr_assert_eq(symlink(p, t.path), 0);
	cr_assert_eq(snapshot(a, t.path), 1);
	struct stat st;
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert(S_ISREG(st.st_mode));
	/* a loop: refused, as open() refuses it */
	cr_assert_eq(unlink(p), 0);
	cr_assert_eq(symlink("snap", p), 0);
	errno = 0;
	cr_assert_eq(tw_snapshot(a, t.path, NULL), -TW_EIO);
	cr_assert_eq(errno, ELOOP);
	tw_engine_destroy(a);
	tw_engine_destroy(b);
	tmpdir_remove(&t);
}

/* tw_add takes a cron expression of any length (blanks, leading zeros), and so does the round
 * trip: the same text comes back, and the same schedule. */
Test(snapshot, a_long_cron_text_round_trips)
{
	struct tmpdir t = tmpdir_make();
	enum { LEN = 100000 };
	char *text = malloc(LEN + 1);
	memset(text, ' ', LEN);
	memcpy(text, "CRON_TZ=UTC 0 0 3", 17);
	memset(text + LEN / 2, '0', LEN / 2 - 6);
	memcpy(text + LEN - 6, "1 * *", 5);
	text[LEN] = '\0';
	uint64_t s;
	tw_engine *a = engine_at(WALL0, 0, &s);
	struct app app = { .names = APP_NAMES };
	add_named(a, &app, "cron", 0, 0, text, 0, 0);
	cr_assert_eq(snapshot(a, t.path), 1);
	tw_engine_destroy(a);
	tw_engine *b = engine_at(WALL0, 0, &s);
	struct app app2 = { .names = APP_NAMES };
	tw_restore_result res = restore(b, t.path, &app2);
	cr_assert_eq(res.restored, 1);
	cr_assert_eq(strncmp(app2.seen_cron[2], text, sizeof app2.seen_cron[2] - 1), 0);
	cr_assert_eq(info_of(b, find(b, "cron")).next_due_wall_ns, WALL0 + S(3 * 3600));
	tw_engine_destroy(b);
	free(text);
	tmpdir_remove(&t);
}
