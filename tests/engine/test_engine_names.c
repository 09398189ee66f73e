/*
 * test_engine_names.c - named tasks: unique among live tasks, found by name, shown by tw_get
 * and tw_list, free again once their task ends, refused when too long or unprintable, and
 * freed (ASan's leak check) at reaping and destroy.
 */
#include "engine_test_support.h"

#include <stdio.h>

static tw_id add_named(tw_engine *e, struct counts *c, const char *name, uint64_t delay_ms)
{
	tw_task_spec spec = spec_of(delay_ms, 0, count_callback, c);
	spec.release = count_release;
	spec.name = name;
	return add_spec(e, &spec);
}

static int add_named_rc(tw_engine *e, struct counts *c, const char *name, tw_id *id)
{
	tw_task_spec spec = spec_of(100, 0, count_callback, c);
	spec.release = count_release;
	spec.name = name;
	return tw_add(e, &spec, id);
}

Test(names, a_live_name_is_refused_and_nothing_is_added)
{
	tw_engine *e = manual_engine(1);
	struct counts a = { 0 }, b = { 0 };
	tw_id id = add_named(e, &a, "billing/heartbeat", 100);
	tw_id other = 0;
	cr_assert_eq(add_named_rc(e, &b, "billing/heartbeat", &other), -TW_EEXIST);
	cr_assert_eq(other, 0, "out untouched");
	cr_assert_eq(stats_of(e).tasks_live, 1);
	cr_assert_eq(tw_pause(e, id), TW_OK);
	cr_assert_eq(add_named_rc(e, &b, "billing/heartbeat", &other), -TW_EEXIST, "paused");
	cr_assert_str_eq(tw_strerror(-TW_EEXIST), "a live task has that name already");
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&a.releases), 1);
	cr_assert_eq(atomic_load(&b.releases), 0, "a refused add never calls release");
	assert_no_leaks();
}

Test(names, find_gives_the_live_task)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id a = add_named(e, &c, "a", 100);
	tw_id b = add_named(e, &c, "b b", 100);
	add_named(e, &c, NULL, 100);
	add_named(e, &c, "", 100); /* "" is no name: two of them are fine */
	add_named(e, &c, "", 100);
	tw_id found = 0;
	cr_assert_eq(tw_find(e, "a", &found), TW_OK);
	cr_assert_eq(found, a);
	cr_assert_eq(tw_find(e, "b b", &found), TW_OK);
	cr_assert_eq(found, b);
	found = 0;
	cr_assert_eq(tw_find(e, "c", &found), -TW_ENOTFOUND);
	cr_assert_eq(tw_find(e, "", &found), -TW_EINVAL);
	cr_assert_eq(tw_find(e, NULL, &found), -TW_EINVAL);
	cr_assert_eq(tw_find(e, "a", NULL), -TW_EINVAL);
	cr_assert_eq(tw_find(NULL, "a", &found), -TW_EINVAL);
	cr_assert_eq(found, 0);
	destroy_expecting_releases(e, &c, 5);
}

Test(names, a_name_is_free_once_its_task_ends)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id first = add_named(e, &c, "job", 10);
	cr_assert_eq(tw_cancel(e, first), TW_OK);
	tw_id found;
	cr_assert_eq(tw_find(e, "job", &found), -TW_ENOTFOUND, "a stopped task is not found");
	tw_id second = add_named(e, &c, "job", 10);
	cr_assert_neq(second, first);
	cr_assert_eq(tw_find(e, "job", &found), TW_OK);
	cr_assert_eq(found, second);
	cr_assert_str_eq(info_of(e, first).name, "job", "the ended task keeps showing it");
	step(e, 10); /* the second completes */
	cr_assert_eq(info_of(e, second).state, TW_COMPLETED);
	tw_id third = add_named(e, &c, "job", 10);
	cr_assert_eq(tw_find(e, "job", &found), TW_OK);
	cr_assert_eq(found, third);
	step(e, 6000); /* past retain_ms: the ended ones are forgotten, their names freed */
	cr_assert_eq(tw_get(e, first, &(tw_task_info){ 0 }), -TW_ENOTFOUND);
	tw_id fourth = add_named(e, &c, "job", 10);
	cr_assert_eq(tw_find(e, "job", &found), TW_OK);
	cr_assert_eq(found, fourth);
	destroy_expecting_releases(e, &c, 4);
}

static int collect(tw_id id, const tw_task_info *info, void *ctx)
{
	char(*names)[TW_NAME_MAX + 1] = ctx;
	memcpy(names[id & 7], info->name, sizeof info->name);
	return 0;
}

Test(names, get_and_list_show_names)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	char longest[TW_NAME_MAX + 1];
	memset(longest, '~', TW_NAME_MAX);
	longest[TW_NAME_MAX] = '\0';
	tw_id a = add_named(e, &c, longest, 100);
	tw_id b = add_named(e, &c, NULL, 100);
	cr_assert_str_eq(info_of(e, a).name, longest);
	cr_assert_str_eq(info_of(e, b).name, "");
	char names[8][TW_NAME_MAX + 1];
	memset(names, 'x', sizeof names);
	cr_assert_eq(tw_list(e, 0, collect, names), 0);
	cr_assert_str_eq(names[a & 7], longest);
	cr_assert_str_eq(names[b & 7], "");
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* tw_get sets every field of out, the name's bytes past its end too, whatever out held:
 * into a struct of 0xa5 bytes it answers what it answers into a zeroed one. */
Test(names, get_sets_every_field_whatever_out_held)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id ids[] = { add_named(e, &c, "short", 100), add_named(e, &c, NULL, 100) };
	step(e, 100); /* one run each: counts, durations and lateness are set */
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		tw_task_info zeroed, filled;
		memset(&zeroed, 0, sizeof zeroed);
		memset(&filled, 0xa5, sizeof filled);
		cr_assert_eq(tw_get(e, ids[i], &zeroed), TW_OK);
		cr_assert_eq(tw_get(e, ids[i], &filled), TW_OK);
		cr_assert_eq(zeroed.runs, 1);
		assert_same_info(&zeroed, &filled);
	}
	tw_engine_destroy(e);
	assert_no_leaks();
}

Test(names, bad_names_are_refused)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	char too_long[TW_NAME_MAX + 2];
	memset(too_long, 'a', TW_NAME_MAX + 1);
	too_long[TW_NAME_MAX + 1] = '\0';
	const char *bad[] = { too_long, "tab\there", "new\nline", "\x7f", "caf\xc3\xa9" };
	tw_id id = 0, found;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(add_named_rc(e, &c, bad[i], &id), -TW_EINVAL, "name %zu", i);
		cr_assert_eq(tw_find(e, bad[i], &found), -TW_EINVAL, "name %zu", i);
	}
	cr_assert_eq(id, 0);
	cr_assert_eq(stats_of(e).tasks_live, 0);
	destroy_expecting_releases(e, &c, 0);
}

enum { RACERS = 8, ROUNDS = 200 };

struct race {
	tw_engine *e;
	struct counts c;
	pthread_barrier_t start;
	_Atomic unsigned won, lost, other;
	int round;
};

static void *racer(void *arg)
{
	struct race *r = arg;
	char name[32];
	for (int round = 0; round < ROUNDS; round++) {
		snprintf(name, sizeof name, "race-%d", round);
		pthread_barrier_wait(&r->start);
		tw_id id;
		int rc = add_named_rc(r->e, &r->c, name, &id);
		atomic_fetch_add(rc == TW_OK      ? &r->won :
				 rc == -TW_EEXIST ? &r->lost :
						    &r->other,
				 1);
	}
	return NULL;
}

Test(names, of_many_threads_adding_one_name_exactly_one_wins)
{
	struct race r = { .e = manual_engine(1) };
	pthread_barrier_init(&r.start, NULL, RACERS);
	pthread_t threads[RACERS];
	for (int i = 0; i < RACERS; i++)
		cr_assert_eq(pthread_create(&threads[i], NULL, racer, &r), 0);
	for (int i = 0; i < RACERS; i++)
		pthread_join(threads[i], NULL);
	cr_assert_eq(atomic_load(&r.other), 0);
	cr_assert_eq(atomic_load(&r.won), ROUNDS, "one winner per name");
	cr_assert_eq(atomic_load(&r.lost), ROUNDS * (RACERS - 1));
	cr_assert_eq(stats_of(r.e).tasks_live, ROUNDS);
	tw_engine_destroy(r.e);
	cr_assert_eq(atomic_load(&r.c.releases), ROUNDS);
	pthread_barrier_destroy(&r.start);
	assert_no_leaks();
}

/* Heartbeats named by peer, all on one 100 ms grid, looked up by name to be moved. */
Test(names, named_heartbeats_on_a_common_grid)
{
	tw_engine *e = manual_engine(2);
	struct counts c = { 0 };
	uint64_t grid = manual_now(e) + 100 * NS_PER_MS;
	char name[16];
	for (int peer = 0; peer < 10; peer++) {
		snprintf(name, sizeof name, "peer-%d", peer);
		tw_task_spec spec = spec_of(0, 100, count_callback, &c);
		spec.release = count_release;
		spec.first_due_ns = grid;
		spec.name = name;
		add_spec(e, &spec);
		step(e, 3);
	}
	tw_id id;
	cr_assert_eq(tw_find(e, "peer-7", &id), TW_OK);
	cr_assert_eq(info_of(e, id).next_due_ns, grid);
	cr_assert_eq(tw_set_due(e, id, grid + 50 * NS_PER_MS), TW_OK); /* half a beat behind */
	step(e, 100 - 30);
	cr_assert_eq(atomic_load(&c.runs), 9, "the nine left on the grid fire together");
	step(e, 50);
	cr_assert_eq(atomic_load(&c.runs), 10);
	destroy_expecting_releases(e, &c, 10);
}

static char *metrics_text(tw_engine *e, const tw_metrics_options *opt)
{
	size_t len = 0;
	int rc = tw_metrics_format(e, opt, NULL, 0, &len);
	cr_assert(rc == -TW_ENOSPACE || rc == TW_OK, "%s", tw_strerror(rc));
	char *buf = malloc(len + 4096);
	cr_assert_not_null(buf);
	cr_assert_eq(tw_metrics_format(e, opt, buf, len + 4096, NULL), TW_OK);
	return buf;
}

static int fail_callback(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 1;
}

Test(names, metrics_show_named_tasks_only_when_asked)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_task_spec spec = spec_of(1, 1, count_callback, &c);
	spec.name = "beat \"eu\"";
	add_spec(e, &spec);
	spec = spec_of(1, 1, fail_callback, NULL);
	spec.name = "flaky";
	add_spec(e, &spec);
	add_counted(e, &c, 1, 1); /* unnamed: never a series */
	for (int ms = 0; ms < 3; ms++)
		step(e, 1);
	char *plain = metrics_text(e, NULL);
	cr_assert_null(strstr(plain, "task=\""), "no per-task series unless asked");
	free(plain);
	const char *const labels[] = { "engine", "gw1", NULL };
	tw_metrics_options opt = { .labels = labels, .per_task = true };
	char *text = metrics_text(e, &opt);
	cr_assert_not_null(strstr(text, "# TYPE tickwheel_task_runs_total counter\n"));
	cr_assert_not_null(
		strstr(text,
		       "tickwheel_task_runs_total{engine=\"gw1\",task=\"beat \\\"eu\\\"\"} 3\n"),
		"%s", text);
	cr_assert_not_null(
		strstr(text, "tickwheel_task_failures_total{engine=\"gw1\",task=\"flaky\"} 3\n"));
	cr_assert_not_null(strstr(
		text,
		"tickwheel_task_skipped_total{engine=\"gw1\",reason=\"missed\",task=\"flaky\"} 0\n"));
	/* two named tasks: 2 runs + 2 failures + 6 skip series */
	size_t series = 0;
	for (const char *p = text; (p = strstr(p, ",task=\"")); p++)
		series++;
	cr_assert_eq(series, 10);
	free(text);
	const char *const clash[] = { "task", "x", NULL };
	tw_metrics_options bad = { .labels = clash, .per_task = true };
	cr_assert_eq(tw_metrics_format(e, &bad, NULL, 0, NULL), -TW_EINVAL);
	bad.per_task = false;
	cr_assert_eq(tw_metrics_format(e, &bad, NULL, 0, NULL), -TW_ENOSPACE, "a label of yours");
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* Past 1024 names the tables grow (names.c): every name still found, all freed. */
Test(names, many_names_grow_the_tables)
{
	enum { N = 5000 };
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	static tw_id ids[N];
	char name[32];
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "session-%d", i);
		ids[i] = add_named(e, &c, name, 100000); /* waits through the test */
	}
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "session-%d", i);
		tw_id found = 0;
		cr_assert_eq(tw_find(e, name, &found), TW_OK, "%s", name);
		cr_assert_eq(found, ids[i]);
		if (i % 2)
			cr_assert_eq(tw_cancel(e, ids[i]), TW_OK);
	}
	step(e, 6000); /* the cancelled ones are reaped: their names go */
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "session-%d", i);
		tw_id found = 0;
		cr_assert_eq(tw_find(e, name, &found), i % 2 ? -TW_ENOTFOUND : TW_OK, "%s", name);
	}
	destroy_expecting_releases(e, &c, N);
}

/* One thread adds and cancels a name in a loop while another finds it and reads it: a task
 * found by its name is shown with its name (tw_get shows it as long as it shows the task). */
struct find_race {
	tw_engine *e;
	_Atomic bool done;
	_Atomic unsigned hits, nameless;
};

static void *find_and_get(void *arg)
{
	struct find_race *r = arg;
	while (!atomic_load(&r->done)) {
		tw_id id;
		tw_task_info info;
		if (tw_find(r->e, "nm", &id) != TW_OK || tw_get(r->e, id, &info) != TW_OK)
			continue;
		atomic_fetch_add(&r->hits, 1);
		if (strcmp(info.name, "nm"))
			atomic_fetch_add(&r->nameless, 1);
	}
	return NULL;
}

Test(names, a_task_found_by_its_name_is_shown_with_it)
{
	/* On the real clock: each cancel wakes the wheel thread, which takes a core from the
	 * adder now and then, as it would in a program. */
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	cfg.retain_ms = 10; /* the cancelled ones do not pile up */
	struct find_race r = { .e = engine_new(&cfg) };
	struct counts c = { 0 };
	pthread_t finder;
	cr_assert_eq(pthread_create(&finder, NULL, find_and_get, &r), 0);
	uint64_t deadline = test_now_ns() + 10000 * NS_PER_MS;
	unsigned adds = 0;
	while ((adds < 100000 || atomic_load(&r.hits) < 10000) && !atomic_load(&r.nameless) &&
	       test_now_ns() < deadline) {
		tw_id id = add_named(r.e, &c, "nm", 60000);
		cr_assert_eq(tw_cancel(r.e, id), TW_OK);
		adds++;
	}
	atomic_store(&r.done, true);
	pthread_join(finder, NULL);
	cr_assert_gt(atomic_load(&r.hits), 0, "the finder found the task at least once");
	cr_assert_eq(atomic_load(&r.nameless), 0, "%u of %u tasks found by name shown without it",
		     atomic_load(&r.nameless), atomic_load(&r.hits));
	tw_engine_destroy(r.e);
	cr_assert_eq(atomic_load(&c.releases), adds);
	assert_no_leaks();
}

/* max_tasks reached and the name taken: -TW_EEXIST (the header's "When several codes apply");
 * a name refused for the count is not held afterwards. */
Test(names, a_taken_name_is_refused_before_the_count)
{
	tw_config cfg = manual_config(1);
	cfg.max_tasks = 1;
	tw_engine *e = engine_new(&cfg);
	struct counts c = { 0 };
	tw_id a = add_named(e, &c, "a", 100), id = 0;
	cr_assert_eq(add_named_rc(e, &c, "a", &id), -TW_EEXIST, "both apply");
	cr_assert_eq(add_named_rc(e, &c, "b", &id), -TW_ELIMIT);
	cr_assert_eq(id, 0);
	tw_id found;
	cr_assert_eq(tw_find(e, "b", &found), -TW_ENOTFOUND);
	cr_assert_eq(tw_cancel(e, a), TW_OK);
	tw_id b = add_named(e, &c, "b", 100);
	cr_assert_eq(tw_find(e, "b", &found), TW_OK);
	cr_assert_eq(found, b);
	cr_assert_eq(stats_of(e).tasks_live, 1);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), 2, "the refused adds never call release");
	assert_no_leaks();
}

/* The other end of a task's life: tasks added, cancelled and forgotten a ms later, read by
 * another thread as they go. One that tw_get still shows has its name (it used to lose it
 * for a moment while the wheel thread forgot it). */
struct reap_race {
	tw_engine *e;
	_Atomic tw_id recent[64];
	_Atomic unsigned long added;
	_Atomic bool done;
	_Atomic unsigned long shown, nameless;
};

static void *get_recent(void *arg)
{
	struct reap_race *r = arg;
	tw_task_info info;
	while (!atomic_load(&r->done))
		for (unsigned i = 0; i < 64; i++) {
			tw_id id = atomic_load(&r->recent[i]);
			if (!id || tw_get(r->e, id, &info) != TW_OK)
				continue;
			atomic_fetch_add(&r->shown, 1);
			if (!info.name[0])
				atomic_fetch_add(&r->nameless, 1);
		}
	return NULL;
}

Test(names, a_task_keeps_its_name_until_it_is_forgotten)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	cfg.retain_ms = 1;
	struct reap_race r = { .e = engine_new(&cfg) };
	struct counts c = { 0 };
	pthread_t getter;
	cr_assert_eq(pthread_create(&getter, NULL, get_recent, &r), 0);
	uint64_t deadline = test_now_ns() + 10000 * NS_PER_MS;
	char name[16];
	unsigned long adds = 0;
	while (adds < 1000000 && !atomic_load(&r.nameless) && test_now_ns() < deadline) {
		snprintf(name, sizeof name, "r%lu", adds % 1000);
		tw_id id = add_named(r.e, &c, name, 60000);
		cr_assert_eq(tw_cancel(r.e, id), TW_OK);
		atomic_store(&r.recent[adds % 64], id);
		adds++;
	}
	atomic_store(&r.done, true);
	pthread_join(getter, NULL);
	cr_assert_gt(atomic_load(&r.shown), 0);
	cr_assert_eq(atomic_load(&r.nameless), 0, "%lu of %lu shown without their name",
		     atomic_load(&r.nameless), atomic_load(&r.shown));
	tw_engine_destroy(r.e);
	cr_assert_eq(atomic_load(&c.releases), adds);
	assert_no_leaks();
}
