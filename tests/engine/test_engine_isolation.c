/*
 * No task held up by another: firings queued behind a long run are taken by a
 * free executor; stuck runs are reported and routed around, with spare
 * executors when every executor is stuck; stop, destroy and quiesce inside a
 * callback; destroy with a run that never returns; an engine after fork().
 */
#include "engine_test_support.h"

#include <sys/wait.h>
#include <unistd.h>

/* The case: a one-shot whose callback blocks; once it runs, 100 serial periodic
 * tasks are added: with two executors they all run while it blocks, and none of their
 * firings counts as an overlap. Real clock. */
Test(isolation, a_blocked_run_holds_up_no_other_task)
{
	enum { N = 100 };
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 2;
	tw_engine *e = engine_new(&cfg);
	struct recorder *blocker = recorder_new(e);
	atomic_store(&blocker->block, true); /* before its add: on the real clock it runs 1 ms on */
	add_recorded(e, blocker, 1, 0, 0);
	wait_started(blocker);
	struct counts c[N];
	memset(c, 0, sizeof c);
	tw_id id[N];
	for (int i = 0; i < N; i++)
		id[i] = add_counted(e, &c[i], 1 + (uint64_t)i % 10, 10);
	/* All of them run while it blocks; the bound is generous for a slow sanitizer build. */
	uint64_t ran = 0, overlaps = 0;
	for (uint64_t deadline = test_now_ns() + 5000 * NS_PER_MS; test_now_ns() < deadline;) {
		ran = 0;
		for (int i = 0; i < N; i++)
			ran += atomic_load(&c[i].runs) > 0;
		if (ran == N)
			break;
		sleep_ms(10);
	}
	for (int i = 0; i < N; i++)
		overlaps += info_of(e, id[i]).skipped_overlap;
	tw_engine_stats s = stats_of(e);
	cr_assert_eq(ran, N, "%" PRIu64 " of %d tasks ran while a run was blocked", ran, N);
	cr_assert_eq(overlaps, 0, "no task's own run overlapped");
	/* tasks_running was 101 before: every one held up. How many are in flight at one
	 * instant now depends on the machine; that each ran is the proof above. */
	cr_assert_geq(s.tasks_running, 1, "the blocked one is running");
	gate_open(&blocker->gate, 1);
	tw_engine_destroy(e);
	for (int i = 0; i < N; i++)
		cr_assert_eq(atomic_load(&c[i].releases), 1);
	assert_recorder_sane(blocker);
	recorder_free(blocker);
	assert_no_leaks();
}

/* The same on the manual clock: firings handed to the blocked executor's ring are taken
 * by the other one once the run has lasted a millisecond of real time. */
Test(isolation, firings_queued_behind_a_blocked_run_are_taken_manual_clock)
{
	enum { N = 20 };
	tw_engine *e = manual_engine(2);
	struct recorder *blocker = recorder_new(e);
	run_blocked_one_shot(e, blocker);
	sleep_ms(5); /* the run has lasted HOLD_NS */
	struct counts c[N];
	memset(c, 0, sizeof c);
	for (int i = 0; i < N; i++)
		add_counted(e, &c[i], 1, 0);
	advance(e, 1);
	for (int i = 0; i < N; i++)
		cr_assert(wait_eq(&c[i].runs, 1), "task %d did not run behind the blocked run", i);
	gate_open(&blocker->gate, 1);
	quiesce(e);
	tw_engine_destroy(e);
	assert_recorder_sane(blocker);
	recorder_free(blocker);
	assert_no_leaks();
}

enum { REPORTS_KEPT = 8 };

struct logged {
	_Atomic uint64_t warnings, errors;
	_Atomic tw_id reported[REPORTS_KEPT]; /* the task each error names, the first ones */
};

/* The engine's report of a stuck run names the task first: "task <id>: its run ...". */
static void count_log(int level, const char *message, void *arg)
{
	struct logged *l = arg;
	if (level != TW_LOG_ERROR) {
		atomic_fetch_add(&l->warnings, 1);
		return;
	}
	uint64_t n = atomic_fetch_add(&l->errors, 1);
	unsigned long long id = 0;
	if (n < REPORTS_KEPT && sscanf(message, "task %llu:", &id) == 1)
		atomic_store(&l->reported[n], (tw_id)id);
}

static uint64_t reports_of(struct logged *l, tw_id id)
{
	uint64_t n = 0;
	for (int i = 0; i < REPORTS_KEPT; i++)
		n += atomic_load(&l->reported[i]) == id;
	return n;
}

/* run_limit_ms: a run past it is stuck: counted once, logged, shown by tw_get; with every
 * executor stuck a spare executor runs the other tasks. A run is stuck by the wall clock,
 * so on a loaded machine the spare's own short run can be descheduled past the limit too
 * (a second report, a second spare): the limit is long enough to make that rare, and the
 * exact counts are asserted for the blocked task only. */
Test(isolation, stuck_run_is_reported_and_a_spare_executor_takes_over)
{
	struct logged logged = { 0 };
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	cfg.run_limit_ms = 100;
	cfg.log = count_log;
	cfg.log_arg = &logged;
	tw_engine *e = engine_new(&cfg);
	struct recorder *blocker = recorder_new(e);
	atomic_store(&blocker->block, true); /* before its add: on the real clock it runs 1 ms on */
	tw_id stuck = add_recorded(e, blocker, 1, 0, 0);
	wait_started(blocker);
	struct counts c = { 0 };
	tw_id other = add_counted(e, &c, 5, 5);
	cr_assert(wait_ge(&c.runs, 10), "the other task ran %" PRIu64 " times",
		  atomic_load(&c.runs));
	tw_engine_stats s = stats_of(e);
	cr_assert_geq(s.stuck_runs, 1);
	cr_assert_eq(reports_of(&logged, stuck), 1, "one report for the blocked run");
	cr_assert_geq(s.spare_executors, 1);
	cr_assert_geq(atomic_load(&logged.warnings), 1, "a spare's start is logged");
	cr_assert_eq(threads_named("tw-exec-1"), 1, "the spare goes on from executor 0's name");
	cr_assert(info_of(e, stuck).stuck);
	if (!reports_of(&logged, other))
		cr_assert(!info_of(e, other).stuck);
	else
		cr_log_warn("the other task's run was descheduled past run_limit_ms too");
	gate_open(&blocker->gate, 1);
	cr_assert(wait_eq(&blocker->releases, 1));
	cr_assert(!info_of(e, stuck).stuck, "its run returned");
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), 1);
	assert_recorder_sane(blocker);
	recorder_free(blocker);
	assert_no_leaks();
}

/* destroy with a run that never returns (until the test lets it, after destroy): destroy
 * returns, and the run's task is released when the run returns. */
static struct gate forever;
static _Atomic uint64_t forever_started, forever_released;

static int block_forever(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	atomic_fetch_add(&forever_started, 1);
	gate_pass(&forever, 60000);
	return 0;
}

static void forever_release(void *arg)
{
	(void)arg;
	atomic_fetch_add(&forever_released, 1);
}

Test(isolation, destroy_leaves_a_stuck_run_and_its_release_to_its_executor)
{
	gate_init(&forever);
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	cfg.run_limit_ms = 10;
	tw_engine *e = engine_new(&cfg);
	tw_task_spec spec = spec_of(1, 0, block_forever, NULL);
	spec.release = forever_release;
	add_spec(e, &spec);
	cr_assert(wait_eq(&forever_started, 1));
	sleep_ms(30);
	uint64_t before = test_now_ns();
	tw_engine_destroy(e);
	cr_assert_lt(test_now_ns() - before, 5000 * NS_PER_MS, "destroy waited for the stuck run");
	cr_assert_eq(atomic_load(&forever_released), 0, "its run goes on");
	gate_open(&forever, 1);
	cr_assert(wait_eq(&forever_released, 1), "released when the run returned");
	sleep_ms(20); /* the executor frees the engine on its way out */
	gate_destroy(&forever);
	assert_no_leaks();
}

/* Inside a callback: tw_quiesce answers -TW_ECALLBACK; tw_engine_stop stops and waits for
 * the other runs only; tw_engine_destroy is completed once the callback returned. */
struct inside {
	tw_engine *engine;
	_Atomic int stop_rc, stops;
	_Atomic uint64_t destroys, released;
	uint64_t other_blocked_ms;
};

static int stop_inside(const tw_fire *fire, void *arg)
{
	(void)fire;
	struct inside *in = arg;
	atomic_store(&in->stop_rc, tw_engine_stop(in->engine, 50));
	atomic_fetch_add(&in->stops, 1);
	return 0;
}

static int destroy_inside(const tw_fire *fire, void *arg)
{
	(void)fire;
	struct inside *in = arg;
	tw_engine_destroy(in->engine);
	atomic_fetch_add(&in->destroys, 1);
	return 0;
}

static void inside_release(void *arg)
{
	atomic_fetch_add(&((struct inside *)arg)->released, 1);
}

Test(isolation, stop_and_destroy_inside_a_callback)
{
	/* stop: another run blocks past the drain limit, so the stop times out; the caller's
	 * own run does not count. */
	tw_engine *e = manual_engine(2);
	struct recorder *other = recorder_new(e);
	add_recorded(e, other, 1, 0, 0);
	atomic_store(&other->block, true);
	advance(e, 1);
	wait_started(other);
	struct inside in = { .engine = e };
	tw_task_spec spec = spec_of(1, 0, stop_inside, &in);
	spec.release = inside_release;
	add_spec(e, &spec);
	advance(e, 1);
	cr_assert(wait_ge((_Atomic uint64_t *)&in.released, 1), "the stopper's task released");
	cr_assert_eq(atomic_load(&in.stop_rc), -TW_ETIMEDOUT);
	gate_open(&other->gate, 1);
	tw_engine_destroy(e);
	assert_recorder_sane(other);
	recorder_free(other);

	/* destroy: completed by the executor once the callback returned; the task is
	 * released, the engine freed (no leak). */
	e = manual_engine(1);
	struct inside d = { .engine = e };
	spec = spec_of(1, 0, destroy_inside, &d);
	spec.release = inside_release;
	struct counts c = { 0 };
	add_counted(e, &c, 1000, 0);
	add_spec(e, &spec);
	tw_advance(e, 1); /* the engine may be gone once the callback returned */
	cr_assert(wait_eq(&d.released, 1));
	cr_assert(wait_eq(&c.releases, 1), "the other task released by the stop");
	cr_assert_eq(atomic_load(&d.destroys), 1);
	sleep_ms(20);
	assert_no_leaks();
}

/* fork(): in the child every call answers -TW_EFORKED and destroy touches nothing; the
 * parent's engine goes on. */
Test(isolation, a_forked_child_refuses_the_parents_engine)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, 1, 1);
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		int bad = 0;
		tw_task_info info;
		tw_task_spec spec = spec_of(1, 0, count_callback, &c);
		tw_id out;
		tw_engine_stats s;
		bad += tw_add(e, &spec, &out) != -TW_EFORKED;
		bad += tw_set_delay(e, id, 1) != -TW_EFORKED;
		bad += tw_get(e, id, &info) != -TW_EFORKED;
		bad += tw_stats(e, &s) != -TW_EFORKED;
		bad += tw_advance(e, 1) != -TW_EFORKED;
		bad += tw_quiesce(e) != -TW_EFORKED;
		bad += tw_engine_stop(e, 10) != -TW_EFORKED;
		tw_engine_destroy(e);
		_exit(bad);
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "the child crashed");
	cr_assert_eq(WEXITSTATUS(status), 0, "%d calls in the child answered wrong",
		     WEXITSTATUS(status));
	for (int i = 0; i < 3; i++)
		step(e, 1);
	cr_assert_eq(atomic_load(&c.runs), 3, "the parent's engine goes on: %" PRIu64 " runs",
		     atomic_load(&c.runs));
	tw_engine_destroy(e);
	assert_no_leaks();
}
