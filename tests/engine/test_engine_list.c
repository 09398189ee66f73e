/*
 * test_engine_list.c - tw_list: which tasks it visits and with what, stopping
 * early, visitors that change tasks, a walk while another thread adds and
 * cancels on the real clock, after a stop, bad arguments, the caller's struct
 * size.
 */
#include "engine_test_support.h"

#include <stddef.h>

/* ---- what a walk saw ---- */

struct seen {
	size_t n, cap;
	tw_id *id;
	tw_task_info *info;
};

static struct seen *seen_new(void)
{
	struct seen *s = calloc(1, sizeof *s);
	cr_assert_not_null(s);
	return s;
}

static void seen_free(struct seen *s)
{
	free(s->id);
	free(s->info);
	free(s);
}

/* Runs on the thread that called tw_list: it may allocate (and assert). */
static int record_visit(tw_id id, const tw_task_info *info, void *ctx)
{
	struct seen *s = ctx;
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->id = realloc(s->id, s->cap * sizeof *s->id);
		s->info = realloc(s->info, s->cap * sizeof *s->info);
		cr_assert(s->id && s->info);
	}
	s->id[s->n] = id;
	s->info[s->n] = *info;
	s->n++;
	return 0;
}

static struct seen *list_at(tw_engine *e, unsigned flags, int line)
{
	struct seen *s = seen_new();
	int rc = tw_list(e, flags, record_visit, s);
	cr_assert_eq(rc, 0, "line %d: tw_list: %d", line, rc);
	return s;
}
#define list(e, flags) list_at(e, flags, __LINE__)

/* Where id was visited, or -1; fails the test if it was visited twice. */
static long seen_at(const struct seen *s, tw_id id)
{
	long at = -1;
	for (size_t i = 0; i < s->n; i++)
		if (s->id[i] == id) {
			cr_assert_eq(at, -1, "id %" PRIu64 " visited twice", id);
			at = (long)i;
		}
	return at;
}

static int compare_ids(const void *a, const void *b)
{
	tw_id x = *(const tw_id *)a, y = *(const tw_id *)b;
	return x < y ? -1 : x > y;
}

static bool has_id(const tw_id *sorted, size_t n, tw_id id)
{
	return bsearch(&id, sorted, n, sizeof *sorted, compare_ids) != NULL;
}

/* ms steps of 1 ms, each quiesced: every due runs (one long step would skip periods). */
static void steps(tw_engine *e, int ms)
{
	for (int i = 0; i < ms; i++)
		step(e, 1);
}

static int failing_callback(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 1;
}

/* ---- which tasks, with what ---- */

Test(list, visits_the_live_tasks_with_what_tw_get_answers)
{
	tw_engine *e = manual_engine(2);
	struct counts c = { 0 };
	tw_id waiting = add_counted(e, &c, 100, 0);
	tw_id periodic = add_counted(e, &c, 10, 10);
	tw_id paused = add_counted(e, &c, 5, 7);
	tw_task_spec spec = spec_of(1, 3, failing_callback, NULL);
	spec.flags = TW_CONCURRENT;
	tw_id failing = add_spec(e, &spec);
	tw_id completed = add_counted(e, &c, 1, 0);
	tw_id cancelled = add_counted(e, &c, 50, 0);
	tw_id never = add_counted(e, &c, TW_NEVER, 0);
	steps(e, 35);
	cr_assert_eq(tw_pause(e, paused), TW_OK);
	cr_assert_eq(tw_cancel(e, cancelled), TW_OK);

	tw_id live[] = { waiting, periodic, paused, failing, never };
	struct seen *s = list(e, 0);
	cr_assert_eq(s->n, 5, "visited %zu", s->n);
	for (size_t i = 0; i < 5; i++) {
		long at = seen_at(s, live[i]);
		cr_assert_geq(at, 0, "live task %zu not visited", i);
		tw_task_info want = info_of(e, live[i]);
		assert_same_info(&s->info[at], &want);
	}
	cr_assert_eq(s->info[seen_at(s, periodic)].runs, 3);
	cr_assert_eq(s->info[seen_at(s, paused)].state, TW_PAUSED);
	cr_assert_eq(s->info[seen_at(s, never)].next_due_ns, 0);
	cr_assert(s->info[seen_at(s, failing)].failures > 0);
	cr_assert(s->info[seen_at(s, failing)].concurrent);
	cr_assert_eq(seen_at(s, completed), -1);
	cr_assert_eq(seen_at(s, cancelled), -1);
	seen_free(s);

	s = list(e, TW_LIST_ENDED);
	cr_assert_eq(s->n, 7, "visited %zu", s->n);
	cr_assert_eq(s->info[seen_at(s, completed)].state, TW_COMPLETED);
	cr_assert_eq(s->info[seen_at(s, completed)].runs, 1);
	cr_assert_eq(s->info[seen_at(s, cancelled)].state, TW_STOPPED);
	for (size_t i = 0; i < 5; i++)
		cr_assert_geq(seen_at(s, live[i]), 0);
	seen_free(s);
	destroy_expecting_releases(e, &c, 6);
}

Test(list, an_empty_engine_visits_nothing)
{
	tw_engine *e = manual_engine(1);
	struct seen *s = list(e, TW_LIST_ENDED);
	cr_assert_eq(s->n, 0);
	seen_free(s);
	tw_engine_destroy(e);
}

/* Several chunks of the slot table, holes left by reaped tasks, slots reused. */
Test(list, visits_each_task_once_across_chunks_and_reused_slots)
{
	tw_config cfg = manual_config(1);
	cfg.retain_ms = 1;
	tw_engine *e = engine_new(&cfg);
	enum { N = 5000 };
	struct counts c = { 0 };
	tw_id *ids = calloc(N, sizeof *ids);
	cr_assert_not_null(ids);
	for (size_t i = 0; i < N; i++)
		ids[i] = add_counted(e, &c, 1000 + i, 0);
	for (size_t i = 0; i < N; i += 3)
		cr_assert_eq(tw_cancel(e, ids[i]), TW_OK);
	step(e, 5); /* the cancelled ones are reaped: their slots are reused */
	for (size_t i = 0; i < N; i += 3)
		ids[i] = add_counted(e, &c, 1000, 0);
	for (size_t i = 1; i < N; i += 3)
		cr_assert_eq(tw_cancel(e, ids[i]), TW_OK);

	struct seen *s = list(e, 0);
	cr_assert_eq(s->n, N - (N + 1) / 3);
	qsort(s->id, s->n, sizeof s->id[0], compare_ids);
	for (size_t i = 1; i < s->n; i++)
		cr_assert_neq(s->id[i - 1], s->id[i], "an id visited twice");
	for (size_t i = 0; i < N; i++)
		cr_assert_eq(has_id(s->id, s->n, ids[i]), i % 3 != 1, "task %zu", i);
	seen_free(s);
	free(ids);
	destroy_expecting_releases(e, &c, N + (N + 2) / 3);
}

/* ---- the visitor's answer ---- */

struct stopper {
	size_t visits, stop_at;
};

static int stop_visit(tw_id id, const tw_task_info *info, void *ctx)
{
	(void)id, (void)info;
	struct stopper *s = ctx;
	return ++s->visits == s->stop_at ? 42 : 0;
}

Test(list, a_nonzero_answer_stops_the_walk_and_is_returned)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	for (int i = 0; i < 100; i++)
		add_counted(e, &c, 10, 0);
	struct stopper st = { .stop_at = 10 };
	cr_assert_eq(tw_list(e, 0, stop_visit, &st), 42);
	cr_assert_eq(st.visits, 10);
	st = (struct stopper){ .stop_at = 1000 };
	cr_assert_eq(tw_list(e, 0, stop_visit, &st), 0);
	cr_assert_eq(st.visits, 100);
	tw_engine_destroy(e);
}

/* ---- visitors that change tasks ---- */

struct changer {
	tw_engine *e;
	struct counts *c;
	size_t visits, adds;
	tw_id added[400];
	struct seen *seen;
	int bad;
};

static int change_visit(tw_id id, const tw_task_info *info, void *ctx)
{
	struct changer *ch = ctx;
	record_visit(id, info, ch->seen);
	size_t k = ch->visits++;
	/* The visited task, cancelled or paused, and a new task now and then (from the
	 * 4th on: fresh slots, the table grows past its first chunk). */
	int rc = k % 2 ? tw_cancel(ch->e, id) : tw_pause(ch->e, id);
	if (rc != TW_OK)
		ch->bad++;
	tw_task_info now;
	if (tw_get(ch->e, id, &now) != TW_OK || now.state != (k % 2 ? TW_STOPPED : TW_PAUSED))
		ch->bad++;
	if (k % 4 == 3 && ch->adds < 400) {
		tw_task_spec spec = spec_of(10, 0, count_callback, ch->c);
		spec.release = count_release;
		if (tw_add(ch->e, &spec, &ch->added[ch->adds]) != TW_OK)
			ch->bad++;
		ch->adds++;
	}
	/* A walk inside the walk. */
	struct stopper st = { .stop_at = 3 };
	if (k % 97 == 0 && tw_list(ch->e, TW_LIST_ENDED, stop_visit, &st) != 42)
		ch->bad++;
	return 0;
}

Test(list, the_visitor_may_cancel_pause_and_add)
{
	tw_engine *e = manual_engine(2);
	/* Adds from the visitor grow the table past 16 chunks: a new directory, published after a
	 * grace period, which no read-side section of the walk may hold up. */
	enum { N = 1724 * 16 - 50 };
	struct counts c = { 0 };
	tw_id *ids = calloc(N, sizeof *ids);
	cr_assert_not_null(ids);
	for (size_t i = 0; i < N; i++)
		ids[i] = add_counted(e, &c, 10 + i % 7, i % 3 ? 5 : 0);
	struct changer *ch = calloc(1, sizeof *ch);
	cr_assert_not_null(ch);
	ch->e = e;
	ch->c = &c;
	ch->seen = seen_new();
	cr_assert_eq(tw_list(e, 0, change_visit, ch), 0);
	cr_assert_eq(ch->bad, 0);
	/* Visited: the N tasks, and some of those added meanwhile, once each. */
	tw_id *known = calloc(N + ch->adds, sizeof *known);
	cr_assert_not_null(known);
	memcpy(known, ids, N * sizeof *ids);
	memcpy(known + N, ch->added, ch->adds * sizeof *ids);
	qsort(known, N + ch->adds, sizeof *known, compare_ids);
	qsort(ch->seen->id, ch->seen->n, sizeof ch->seen->id[0], compare_ids);
	for (size_t i = 0; i < ch->seen->n; i++) {
		cr_assert(has_id(known, N + ch->adds, ch->seen->id[i]));
		cr_assert(i == 0 || ch->seen->id[i - 1] != ch->seen->id[i], "visited twice");
	}
	for (size_t i = 0; i < N; i++)
		cr_assert(has_id(ch->seen->id, ch->seen->n, ids[i]), "task %zu not visited", i);
	cr_assert_geq(ch->seen->n, N);
	cr_assert_leq(ch->seen->n, N + ch->adds);
	cr_assert_gt(ch->adds, 300);

	/* Every task the walk visited is paused or cancelled now; what it added is live. */
	tw_engine_stats st = stats_of(e);
	cr_assert_eq(st.tasks_live, st.tasks_paused + st.tasks_waiting);
	cr_assert_eq(st.tasks_stopped, ch->seen->n / 2);
	free(known);
	seen_free(ch->seen);
	free(ch);
	free(ids);
	destroy_expecting_releases(e, &c, N + 400);
}

/* ---- while other threads add and cancel ---- */

enum { STABLE = 10000, CHURN_MAX = 400000, WALKS = 12 };

struct churn {
	tw_engine *e;
	struct counts *c;
	const tw_id *stable;
	_Atomic bool quit;
	size_t n;
	_Atomic size_t added; /* n, for the test thread to read meanwhile */
	tw_id id[CHURN_MAX];
	int bad;
};

static void *churn_main(void *arg)
{
	struct churn *ch = arg;
	uint64_t rng = 12345;
	while (!atomic_load(&ch->quit) && ch->n < CHURN_MAX) {
		rng = rng * 6364136223846793005u + 1442695040888963407u;
		tw_task_spec spec = spec_of(rng >> 60, rng >> 63 ? 3 : 0, count_callback, ch->c);
		spec.release = count_release;
		if (tw_add(ch->e, &spec, &ch->id[ch->n]) != TW_OK)
			ch->bad++;
		ch->n++;
		atomic_store(&ch->added, ch->n);
		/* a task added a little earlier goes, if it did not complete */
		if (ch->n > 50) {
			int rc = tw_cancel(ch->e, ch->id[ch->n - 50]);
			if (rc != TW_OK && rc != -TW_ESTATE && rc != -TW_ENOTFOUND)
				ch->bad++;
		}
		/* a stable task is moved */
		if (tw_set_delay(ch->e, ch->stable[(rng >> 20) % STABLE], 1 + (rng >> 59)) != TW_OK)
			ch->bad++;
	}
	return NULL;
}

Test(list, walks_while_another_thread_adds_and_cancels, .timeout = 120)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 2;
	cfg.retain_ms = 2; /* slots are reaped and reused during the walks */
	tw_engine *e = engine_new(&cfg);
	struct counts c = { 0 };
	tw_id *stable = calloc(STABLE, sizeof *stable);
	cr_assert_not_null(stable);
	for (size_t i = 0; i < STABLE; i++)
		stable[i] = add_counted(e, &c, 1 + i % 20, 500 + i % 500);
	struct churn *ch = calloc(1, sizeof *ch);
	cr_assert_not_null(ch);
	ch->e = e;
	ch->c = &c;
	ch->stable = stable;
	pthread_t thread;
	cr_assert_eq(pthread_create(&thread, NULL, churn_main, ch), 0);

	struct seen **walks = calloc(WALKS, sizeof *walks);
	cr_assert_not_null(walks);
	for (int w = 0; w < WALKS; w++) {
		walks[w] = list(e, w % 2 ? TW_LIST_ENDED : 0);
		sleep_ms(5);
	}
	/* a churn thread held up during the walks still has to have churned */
	for (int waited = 0; atomic_load(&ch->added) <= 100 && waited < 5000; waited++)
		sleep_ms(1);
	atomic_store(&ch->quit, true);
	cr_assert_eq(pthread_join(thread, NULL), 0);
	cr_assert_eq(ch->bad, 0);
	cr_assert_gt(ch->n, 100, "the other thread hardly ran (%zu adds)", ch->n);

	tw_id *known = calloc(STABLE + ch->n, sizeof *known);
	cr_assert_not_null(known);
	memcpy(known, stable, STABLE * sizeof *known);
	memcpy(known + STABLE, ch->id, ch->n * sizeof *known);
	qsort(known, STABLE + ch->n, sizeof *known, compare_ids);
	for (int w = 0; w < WALKS; w++) {
		struct seen *s = walks[w];
		for (size_t i = 0; i < s->n; i++) {
			cr_assert(has_id(known, STABLE + ch->n, s->id[i]), "walk %d: unknown id",
				  w);
			tw_state state = s->info[i].state;
			cr_assert(w % 2 || state <= TW_PAUSED, "walk %d: an ended task", w);
		}
		qsort(s->id, s->n, sizeof s->id[0], compare_ids);
		for (size_t i = 1; i < s->n; i++)
			cr_assert_neq(s->id[i - 1], s->id[i], "walk %d: an id visited twice", w);
		for (size_t i = 0; i < STABLE; i++)
			cr_assert(has_id(s->id, s->n, stable[i]), "walk %d: stable task %zu missed",
				  w, i);
		seen_free(s);
	}
	free(walks);
	free(known);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), STABLE + ch->n);
	free(ch);
	free(stable);
	assert_no_leaks();
}

/* ---- from a callback ---- */

struct from_callback {
	tw_engine *_Atomic e;
	_Atomic uint64_t visited, self_running, rc;
	_Atomic tw_id self;
};

static int count_visit(tw_id id, const tw_task_info *info, void *ctx)
{
	struct from_callback *f = ctx;
	atomic_fetch_add(&f->visited, 1);
	if (id == atomic_load(&f->self) && info->state == TW_RUNNING && info->running == 1)
		atomic_fetch_add(&f->self_running, 1);
	return 0;
}

static int list_callback(const tw_fire *fire, void *arg)
{
	(void)fire;
	struct from_callback *f = arg;
	atomic_store(&f->rc, (uint64_t)tw_list(atomic_load(&f->e), 0, count_visit, f));
	return 0;
}

Test(list, may_be_called_from_a_callback)
{
	tw_engine *e = manual_engine(2);
	struct from_callback f = { .e = e };
	struct counts c = { 0 };
	for (int i = 0; i < 9; i++)
		add_counted(e, &c, 100, 0);
	tw_id id = add_task(e, 1, 0, list_callback, &f);
	atomic_store(&f.self, id);
	step(e, 1);
	cr_assert_eq(atomic_load(&f.rc), 0);
	cr_assert_eq(atomic_load(&f.visited), 10);
	cr_assert_eq(atomic_load(&f.self_running), 1);
	tw_engine_destroy(e);
}

/* ---- after a stop ---- */

struct stopping {
	tw_engine *e;
	size_t visits;
	int stop_rc;
};

static int stopping_visit(tw_id id, const tw_task_info *info, void *ctx)
{
	(void)id, (void)info;
	struct stopping *s = ctx;
	if (s->visits++ == 0)
		s->stop_rc = tw_engine_stop(s->e, 1000);
	return 0;
}

Test(list, after_a_stop_it_lists_the_final_states)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id periodic = add_counted(e, &c, 1, 1);
	tw_id waiting = add_counted(e, &c, 100, 0);
	tw_id completed = add_counted(e, &c, 2, 0);
	steps(e, 4);
	cr_assert_eq(tw_engine_stop(e, 1000), TW_OK);
	tw_task_info info;
	cr_assert_eq(tw_get(e, periodic, &info), TW_OK, "tw_get answers after a stop too");
	cr_assert_eq(info.state, TW_STOPPED);

	struct seen *s = list(e, 0);
	cr_assert_eq(s->n, 0, "no task is live after a stop");
	seen_free(s);
	s = list(e, TW_LIST_ENDED);
	cr_assert_eq(s->n, 3);
	cr_assert_eq(s->info[seen_at(s, periodic)].state, TW_STOPPED);
	cr_assert_eq(s->info[seen_at(s, periodic)].runs, 4);
	cr_assert_eq(s->info[seen_at(s, periodic)].next_due_ns, 0);
	cr_assert_eq(s->info[seen_at(s, waiting)].state, TW_STOPPED);
	cr_assert_eq(s->info[seen_at(s, waiting)].runs, 0);
	cr_assert_eq(s->info[seen_at(s, completed)].state, TW_COMPLETED);
	cr_assert_eq(s->info[seen_at(s, completed)].runs, 1);
	seen_free(s);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), 3);
}

Test(list, a_visitor_that_stops_the_engine_ends_the_walk_over_live_tasks)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	for (int i = 0; i < 20; i++)
		add_counted(e, &c, 100, 0);
	struct stopping v = { .e = e, .stop_rc = -1 };
	cr_assert_eq(tw_list(e, 0, stopping_visit, &v), 0);
	cr_assert_eq(v.visits, 1, "visited %zu", v.visits);
	cr_assert_eq(v.stop_rc, TW_OK);
	struct seen *s = list(e, TW_LIST_ENDED);
	cr_assert_eq(s->n, 20);
	seen_free(s);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), 20);
}

/* ---- arguments ---- */

Test(list, null_engine_null_visitor_unknown_flags)
{
	tw_engine *e = manual_engine(1);
	struct seen *s = seen_new();
	cr_assert_eq(tw_list(NULL, 0, record_visit, s), -TW_EINVAL);
	cr_assert_eq(tw_list(e, 0, NULL, s), -TW_EINVAL);
	cr_assert_eq(tw_list(e, 1u << 5, record_visit, s), -TW_EINVAL);
	cr_assert_eq(tw_list(e, ~0u, record_visit, s), -TW_EINVAL);
	cr_assert_eq(tw_list(e, 0, record_visit, NULL), 0, "ctx may be NULL (no task here)");
	cr_assert_eq(s->n, 0);
	seen_free(s);
	tw_engine_destroy(e);
}

/* ---- the caller's tw_task_info size ---- */

struct sized {
	size_t size, visits;
	tw_task_info last;
	int bad;
};

static int sized_visit(tw_id id, const tw_task_info *info, void *ctx)
{
	(void)id;
	struct sized *z = ctx;
	z->visits++;
	size_t n = z->size < sizeof z->last ? z->size : sizeof z->last;
	memcpy(&z->last, info, n);
	const unsigned char *bytes = (const unsigned char *)info;
	for (size_t i = sizeof(tw_task_info); i < z->size; i++)
		z->bad += bytes[i] != 0;
	return 0;
}

Test(list, fills_the_callers_size_of_task_info)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, 1, 5);
	steps(e, 11);
	tw_task_info want = info_of(e, id);
	size_t sizes[] = { offsetof(tw_task_info, runs) + sizeof want.runs, sizeof want,
			   sizeof want + 24 };
	for (size_t k = 0; k < 3; k++) {
		struct sized z = { .size = sizes[k] };
		memset(&z.last, 0, sizeof z.last);
		cr_assert_eq(tw_list_sized(e, 0, sized_visit, &z, sizes[k]), 0);
		cr_assert_eq(z.visits, 1);
		cr_assert_eq(z.bad, 0, "bytes past the library's struct are zeroed");
		cr_assert_eq(z.last.state, want.state);
		cr_assert_eq(z.last.period_ms, 5);
		cr_assert_eq(z.last.next_due_ns, want.next_due_ns);
		cr_assert_eq(z.last.runs, 3);
		if (sizes[k] >= sizeof want)
			assert_same_info(&z.last, &want);
	}
	tw_engine_destroy(e);
}
