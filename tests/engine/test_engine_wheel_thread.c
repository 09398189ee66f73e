/*
 * TW_ON_WHEEL_THREAD tasks: their callbacks run on the wheel thread, not on an
 * executor; the budget guard moves a task that overruns to the executors; and
 * what such a callback may call (tickwheel.h, "Tasks on the wheel thread").
 */
#include "engine_test_support.h"

#include <dirent.h>

/* What a callback saw of its thread and of the calls it made. */
struct seen {
	tw_engine *engine;
	_Atomic uint64_t runs;
	pthread_t thread[64]; /* by run number - 1 */
	_Atomic int sleep_us; /* each run lasts this long at least */
	_Atomic int quiesce_rc, advance_rc, get_rc, add_rc;
	_Atomic uint64_t releases;
};

static void busy_for_us(int us)
{
	uint64_t end = test_now_ns() + (uint64_t)us * 1000;
	while (test_now_ns() < end) {
	}
}

static int seen_callback(const tw_fire *fire, void *arg)
{
	struct seen *s = arg;
	uint64_t n = atomic_fetch_add(&s->runs, 1);
	if (n < 64)
		s->thread[n] = pthread_self();
	busy_for_us(atomic_load(&s->sleep_us));
	(void)fire;
	return 0;
}

static void seen_release(void *arg)
{
	atomic_fetch_add(&((struct seen *)arg)->releases, 1);
}

/* A task whose callback is cb(fire, s) and whose release counts in s. */
static tw_id add_seen_at(tw_engine *e, struct seen *s, tw_callback cb, uint64_t delay_ms,
			 uint64_t period_ms, unsigned flags, int line)
{
	tw_task_spec spec = spec_of(delay_ms, period_ms, cb, s);
	spec.release = seen_release;
	spec.flags = flags;
	return add_spec_at(e, &spec, line);
}
#define add_seen(e, s, delay_ms, period_ms, flags) \
	add_seen_at(e, s, seen_callback, delay_ms, period_ms, flags, __LINE__)
#define add_on_wheel(e, s, cb, delay_ms, period_ms) \
	add_seen_at(e, s, cb, delay_ms, period_ms, TW_ON_WHEEL_THREAD, __LINE__)

Test(wheel_thread, runs_on_neither_an_executor_nor_the_caller)
{
	tw_config cfg = manual_config(1);
	cfg.wheel_run_budget_us = 1000000; /* a run preempted on a busy machine is not over it */
	tw_engine *e = engine_new(&cfg);
	struct seen on_wheel = { .engine = e }, on_executor = { .engine = e };
	tw_id w = add_seen(e, &on_wheel, 1, 1, TW_ON_WHEEL_THREAD);
	tw_id x = add_seen(e, &on_executor, 1, 1, 0);
	cr_assert(info_of(e, w).on_wheel_thread);
	cr_assert_not(info_of(e, x).on_wheel_thread);
	for (int i = 0; i < 3; i++)
		step(e, 1); /* one by one: a step of 3 would skip two periods as missed */
	cr_assert_eq(atomic_load(&on_wheel.runs), 3);
	cr_assert_eq(atomic_load(&on_executor.runs), 3);
	for (int i = 0; i < 3; i++) {
		cr_assert(pthread_equal(on_wheel.thread[i], on_wheel.thread[0]));
		cr_assert(pthread_equal(on_executor.thread[i], on_executor.thread[0]));
		cr_assert_not(pthread_equal(on_wheel.thread[i], on_executor.thread[0]),
			      "run %d of the wheel-thread task ran on the executor", i + 1);
		cr_assert_not(pthread_equal(on_wheel.thread[i], pthread_self()));
	}
	tw_engine_stats st = stats_of(e);
	cr_assert_eq(st.runs, 6);
	cr_assert_eq(st.wheel_thread_runs, 3);
	cr_assert_eq(st.lateness_count, 6);
	cr_assert_eq(st.over_budget_runs, 0);
	cr_assert_eq(st.tasks_moved_off_wheel_thread, 0);
	tw_task_info info = info_of(e, w);
	cr_assert_eq(info.runs, 3);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.running, 0);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&on_wheel.releases), 1);
	cr_assert_eq(atomic_load(&on_executor.releases), 1);
	assert_no_leaks();
}

Test(wheel_thread, runs_while_every_executor_is_held)
{
	tw_config cfg = manual_config(1);
	cfg.wheel_run_budget_us = 1000000; /* preempted runs must not move it to the executor */
	tw_engine *e = engine_new(&cfg);
	struct recorder *blocker = recorder_new(e);
	add_recorded(e, blocker, 1, 0, 0);
	start_blocked_run(e, blocker);
	struct seen s = { .engine = e };
	add_seen(e, &s, 1, 1, TW_ON_WHEEL_THREAD);
	for (int i = 0; i < 5; i++)
		advance(e, 1); /* returns once handed out: the wheel thread's runs are done then */
	cr_assert_eq(atomic_load(&s.runs), 5, "the executor's run held up a wheel-thread task");
	gate_open(&blocker->gate, 1);
	quiesce(e);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&blocker->releases), 1);
	assert_recorder_sane(blocker);
	recorder_free(blocker);
	assert_no_leaks();
}

Test(wheel_thread, keeps_its_dues_and_order)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	uint64_t start = manual_now(e);
	add_recorded(e, r, 10, 10, TW_ON_WHEEL_THREAD);
	for (int i = 0; i < 10; i++)
		step(e, 10);
	cr_assert_eq(atomic_load(&r->runs), 10);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(r->due[i], start + (uint64_t)(i + 1) * 10 * NS_PER_MS, "run %d",
			     i + 1);
	destroy_expecting_one_release(e, r);
}

Test(wheel_thread, a_one_shot_completes_and_is_released_once)
{
	tw_engine *e = manual_engine(1);
	struct seen s = { .engine = e };
	tw_id id = add_seen(e, &s, 2, 0, TW_ON_WHEEL_THREAD);
	step(e, 2);
	cr_assert_eq(atomic_load(&s.runs), 1);
	cr_assert_eq(info_of(e, id).state, TW_COMPLETED);
	cr_assert_eq(atomic_load(&s.releases), 1);
	cr_assert_eq(stats_of(e).tasks_completed, 1);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&s.releases), 1);
	assert_no_leaks();
}

Test(wheel_thread, not_with_concurrent)
{
	tw_engine *e = manual_engine(1);
	struct seen s = { .engine = e };
	tw_task_spec spec = spec_of(1, 1, seen_callback, &s);
	spec.flags = TW_ON_WHEEL_THREAD | TW_CONCURRENT;
	tw_id id = 0;
	cr_assert_eq(tw_add(e, &spec, &id), -TW_EINVAL);
	cr_assert_eq(id, 0);
	spec.flags = TW_ON_WHEEL_THREAD | TW_RUN_LATE;
	cr_assert_eq(tw_add(e, &spec, &id), TW_OK);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* The log hook sees the move. */
static _Atomic int moved_logged;
static void note_log(int level, const char *message, void *arg)
{
	(void)arg;
	if (level == TW_LOG_WARNING && strstr(message, "moved to the executors"))
		atomic_fetch_add(&moved_logged, 1);
}

Test(wheel_thread, the_budget_guard_moves_a_slow_task_to_the_executors)
{
	tw_config cfg = manual_config(1);
	cfg.wheel_run_budget_us = 200;
	cfg.log = note_log;
	tw_engine *e = engine_new(&cfg);
	struct seen slow = { .engine = e }, fast = { .engine = e };
	atomic_store(&slow.sleep_us, 2000);
	tw_id id = add_seen(e, &slow, 1, 1, TW_ON_WHEEL_THREAD);
	/* Also a fast task whose thread tells the executor's apart. */
	add_seen(e, &fast, 1, 1, 0);
	for (int i = 1; i < TW_WHEEL_RUN_STRIKES; i++) {
		step(e, 1);
		cr_assert(info_of(e, id).on_wheel_thread, "moved after %d runs", i);
		cr_assert_eq(stats_of(e).over_budget_runs, (uint64_t)i);
	}
	step(e, 1);
	tw_task_info info = info_of(e, id);
	cr_assert_not(info.on_wheel_thread);
	cr_assert_geq(info.longest_run_ns, 2000000);
	tw_engine_stats st = stats_of(e);
	cr_assert_eq(st.over_budget_runs, TW_WHEEL_RUN_STRIKES);
	cr_assert_eq(st.tasks_moved_off_wheel_thread, 1);
	cr_assert_eq(st.wheel_thread_runs, TW_WHEEL_RUN_STRIKES);
	cr_assert_eq(atomic_load(&moved_logged), 1);
	/* From now on its runs are an executor's, and no longer counted against a budget. */
	step(e, 1);
	step(e, 1);
	uint64_t n = atomic_load(&slow.runs);
	cr_assert_eq(n, TW_WHEEL_RUN_STRIKES + 2);
	cr_assert(pthread_equal(slow.thread[n - 1], fast.thread[0]));
	cr_assert_not(pthread_equal(slow.thread[0], fast.thread[0]));
	st = stats_of(e);
	cr_assert_eq(st.wheel_thread_runs, TW_WHEEL_RUN_STRIKES);
	cr_assert_eq(st.over_budget_runs, TW_WHEEL_RUN_STRIKES);
	cr_assert_eq(info_of(e, id).runs, n);
	char text[8192];
	cr_assert_eq(tw_metrics_format(e, NULL, text, sizeof text, NULL), TW_OK);
	cr_assert(strstr(text, "\ntickwheel_wheel_thread_runs_total 3\n"), "%s", text);
	cr_assert(strstr(text, "\ntickwheel_over_budget_runs_total 3\n"), "%s", text);
	cr_assert(strstr(text, "\ntickwheel_tasks_moved_off_wheel_thread_total 1\n"), "%s", text);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&slow.releases), 1);
	assert_no_leaks();
}

/* Slow, slow, fast, slow, slow: never three in a row, the task stays; then three slow ones. */
static const int pattern_us[] = { 40000, 40000, 0, 40000, 40000, 0, 40000, 40000, 40000 };

static int patterned_callback(const tw_fire *fire, void *arg)
{
	struct seen *s = arg;
	uint64_t n = atomic_fetch_add(&s->runs, 1);
	if (n < sizeof pattern_us / sizeof pattern_us[0])
		busy_for_us(pattern_us[n]);
	(void)fire;
	return 0;
}

Test(wheel_thread, only_strikes_in_a_row_move_a_task)
{
	tw_config cfg = manual_config(1);
	cfg.wheel_run_budget_us = 20000; /* far above a preempted fast run */
	tw_engine *e = engine_new(&cfg);
	struct seen s = { .engine = e };
	tw_id id = add_on_wheel(e, &s, patterned_callback, 1, 1);
	for (int i = 0; i < 8; i++)
		step(e, 1);
	cr_assert(info_of(e, id).on_wheel_thread, "moved without three slow runs in a row");
	cr_assert_eq(stats_of(e).over_budget_runs, 6);
	step(e, 1);
	cr_assert_not(info_of(e, id).on_wheel_thread);
	tw_engine_stats st = stats_of(e);
	cr_assert_eq(st.over_budget_runs, 7);
	cr_assert_eq(st.tasks_moved_off_wheel_thread, 1);
	cr_assert_eq(st.wheel_thread_runs, 9);
	tw_engine_destroy(e);
	assert_no_leaks();
}

Test(wheel_thread, runs_within_budget_are_not_counted)
{
	tw_config cfg = manual_config(1);
	cfg.wheel_run_budget_us = 1000000; /* a second: a preempted run stays under it */
	tw_engine *e = engine_new(&cfg);
	struct seen s = { .engine = e };
	atomic_store(&s.sleep_us, 100);
	tw_id id = add_seen(e, &s, 1, 1, TW_ON_WHEEL_THREAD);
	for (int i = 0; i < 20; i++)
		step(e, 1);
	cr_assert_eq(atomic_load(&s.runs), 20);
	cr_assert_eq(stats_of(e).over_budget_runs, 0);
	cr_assert(info_of(e, id).on_wheel_thread);
	tw_engine_destroy(e);
	assert_no_leaks();
}

Test(wheel_thread, the_default_budget_is_50_us)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cr_assert_eq(cfg.wheel_run_budget_us, 50);
}

/* A callback that makes the calls the header lists, on its own task and others. */
static int calling_callback(const tw_fire *fire, void *arg)
{
	struct seen *s = arg;
	atomic_fetch_add(&s->runs, 1);
	atomic_store(&s->quiesce_rc, tw_quiesce(s->engine));
	atomic_store(&s->advance_rc, tw_advance(s->engine, 1));
	tw_task_info info;
	atomic_store(&s->get_rc, tw_get(s->engine, fire->id, &info));
	tw_task_spec spec = spec_of(5, 0, seen_callback, s);
	spec.release = seen_release;
	tw_id other;
	atomic_store(&s->add_rc, tw_add(s->engine, &spec, &other));
	tw_set_delay(s->engine, fire->id, 3); /* re-armed from its own run */
	return 0;
}

Test(wheel_thread, a_callback_may_call_all_but_quiesce_and_advance)
{
	tw_engine *e = manual_engine(1);
	struct seen s = { .engine = e };
	tw_id id = add_on_wheel(e, &s, calling_callback, 1, 0);
	step(e, 1);
	cr_assert_eq(atomic_load(&s.runs), 1);
	cr_assert_eq(atomic_load(&s.quiesce_rc), -TW_ECALLBACK);
	cr_assert_eq(atomic_load(&s.advance_rc), -TW_ECALLBACK);
	cr_assert_eq(atomic_load(&s.get_rc), TW_OK);
	cr_assert_eq(atomic_load(&s.add_rc), TW_OK);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_WAITING, "re-armed from its callback");
	step(e, 3); /* its second run (adds another one-shot) */
	cr_assert_eq(atomic_load(&s.runs), 2);
	cr_assert_eq(tw_cancel(e, id), TW_OK);
	step(e, 5); /* the two one-shots it added */
	cr_assert_eq(atomic_load(&s.runs), 4);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&s.releases), 3);
	assert_no_leaks();
}

static int cancel_self_callback(const tw_fire *fire, void *arg)
{
	struct seen *s = arg;
	atomic_fetch_add(&s->runs, 1);
	tw_cancel(s->engine, fire->id);
	/* Released after this run returns, not during it. */
	if (atomic_load(&s->releases))
		atomic_store(&s->get_rc, -1);
	return 0;
}

Test(wheel_thread, a_callback_cancels_its_own_task)
{
	tw_engine *e = manual_engine(1);
	struct seen s = { .engine = e };
	tw_id id = add_on_wheel(e, &s, cancel_self_callback, 1, 1);
	step(e, 5);
	cr_assert_eq(atomic_load(&s.runs), 1);
	cr_assert_eq(atomic_load(&s.get_rc), 0, "released while its run was going");
	cr_assert_eq(atomic_load(&s.releases), 1);
	cr_assert_eq(info_of(e, id).state, TW_STOPPED);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&s.releases), 1);
	assert_no_leaks();
}

static int failing_callback(const tw_fire *fire, void *arg)
{
	(void)fire;
	atomic_fetch_add(&((struct seen *)arg)->runs, 1);
	return -1;
}

Test(wheel_thread, failures_pause_it_as_any_task)
{
	tw_config cfg = manual_config(1);
	cfg.max_failures = 3;
	tw_engine *e = engine_new(&cfg);
	struct seen s = { .engine = e };
	tw_id id = add_on_wheel(e, &s, failing_callback, 1, 1);
	for (int i = 0; i < 10; i++)
		step(e, 1);
	cr_assert_eq(atomic_load(&s.runs), 3);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_PAUSED);
	cr_assert(info.paused_by_failures);
	cr_assert_eq(info.failures, 3);
	cr_assert_eq(stats_of(e).failures, 3);
	tw_engine_destroy(e);
	assert_no_leaks();
}

static tw_config real_config(unsigned executors)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = executors;
	return cfg;
}

/* The threads of this process now. */
static unsigned thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	cr_assert_not_null(d);
	unsigned n = 0;
	struct dirent *entry;
	while ((entry = readdir(d)))
		n += entry->d_name[0] != '.';
	closedir(d);
	return n;
}

/* tickwheel.h: the wheel thread is "tw-wheel", executor N "tw-exec-N", and callbacks run
 * on the threads of those names. */
Test(wheel_thread, threads_are_named)
{
	tw_engine *e = manual_engine(2);
	cr_assert_eq(threads_named("tw-wheel"), 1, "not named when tw_engine_create returned");
	cr_assert_eq(threads_named("tw-exec-0"), 1);
	cr_assert_eq(threads_named("tw-exec-1"), 1);
	cr_assert_eq(threads_named("tw-exec-2"), 0);
	struct seen on_wheel = { .engine = e }, on_executor = { .engine = e };
	add_seen(e, &on_wheel, 1, 0, TW_ON_WHEEL_THREAD);
	add_seen(e, &on_executor, 1, 0, 0);
	step(e, 1);
	cr_assert_eq(atomic_load(&on_wheel.runs), 1);
	cr_assert_eq(atomic_load(&on_executor.runs), 1);
	char name[16];
	cr_assert_eq(pthread_getname_np(on_wheel.thread[0], name, sizeof name), 0);
	cr_assert_str_eq(name, "tw-wheel");
	cr_assert_eq(pthread_getname_np(on_executor.thread[0], name, sizeof name), 0);
	cr_assert(strcmp(name, "tw-exec-0") == 0 || strcmp(name, "tw-exec-1") == 0,
		  "an executor task ran on a thread named '%s'", name);
	tw_engine_destroy(e);
	cr_assert_eq(threads_named("tw-wheel"), 0, "the wheel thread outlived its engine");
	assert_no_leaks();
}

static int stop_callback(const tw_fire *fire, void *arg)
{
	struct seen *s = arg;
	(void)fire;
	atomic_fetch_add(&s->runs, 1);
	atomic_store(&s->quiesce_rc, tw_engine_stop(s->engine, 1000));
	return 0;
}

Test(wheel_thread, a_callback_stops_the_engine)
{
	tw_config cfg = real_config(1);
	tw_engine *e = engine_new(&cfg);
	struct seen s = { .engine = e }, other = { .engine = e };
	/* the other first: the stopper runs 1 ms after its add, real time */
	tw_id later = add_seen(e, &other, 60000, 0, 0);
	tw_id id = add_on_wheel(e, &s, stop_callback, 1, 0);
	cr_assert(wait_eq(&s.releases, 1), "the stopping task was not released");
	cr_assert_eq(atomic_load(&s.quiesce_rc), TW_OK);
	cr_assert_eq(atomic_load(&other.releases), 1);
	cr_assert_eq(info_of(e, id).state, TW_STOPPED, "stopped during its own run");
	cr_assert_eq(info_of(e, later).state, TW_STOPPED);
	tw_task_spec spec = spec_of(1, 0, stop_callback, &s);
	tw_id no;
	cr_assert_eq(tw_add(e, &spec, &no), -TW_ESHUTDOWN);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&s.runs), 1);
	cr_assert_eq(atomic_load(&s.releases), 1);
	assert_no_leaks();
}

static int destroy_callback(const tw_fire *fire, void *arg)
{
	struct seen *s = arg;
	(void)fire;
	atomic_fetch_add(&s->runs, 1);
	tw_engine_destroy(s->engine);
	return 0;
}

Test(wheel_thread, a_callback_destroys_the_engine)
{
	tw_config cfg = real_config(2);
	tw_engine_destroy(engine_new(&cfg)); /* liburcu's own threads start with the first */
	unsigned before = thread_count();
	tw_engine *e = engine_new(&cfg);
	struct seen s = { .engine = e }, other = { .engine = e };
	/* the other first: once the destroyer has run (1 ms on), e is gone */
	add_seen(e, &other, 60000, 0, 0);
	add_on_wheel(e, &s, destroy_callback, 1, 0);
	/* The engine is gone once its threads are: the wheel thread frees it last. */
	uint64_t deadline = test_now_ns() + WAIT_LIMIT_MS * NS_PER_MS;
	while (thread_count() > before && test_now_ns() < deadline)
		sleep_ms(1);
	cr_assert_eq(thread_count(), before, "the engine's threads did not end");
	cr_assert_eq(atomic_load(&s.runs), 1);
	cr_assert_eq(atomic_load(&s.releases), 1);
	cr_assert_eq(atomic_load(&other.releases), 1);
	assert_no_leaks();
}
