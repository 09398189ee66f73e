/*
 * tests/cluster/test_defer.c - deferred tasks (api/tickwheel_cluster.h, "Deferred tasks")
 * against a real etcd, through the header only. This file: the calls' checks and codes, and
 * cancel and move before and after the claim; test_defer_runs.c: a task's runs (once, never
 * early, with its key, kind, payload, attempt and due; retries, dead letters, kinds with no
 * handler, the counters); test_defer_owners.c: the owner of a task's group, hand-over on
 * leave, the takeover of an owner killed in its handler. One suite, one etcd per test.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "cluster_test_support.h"
#include "defer_test_support.h"

TestSuite(defer, .init = start_etcd, .fini = stop_etcd, .timeout = 60);

Test(defer, defer_refuses_bad_arguments_and_stores_nothing)
{
	struct replica a = replica_join("a", "/d1/", 4);
	tw_cluster *c = a.c;
	char kind64[TW_CLUSTER_KIND_MAX + 2], kind63[TW_CLUSTER_KIND_MAX + 1];
	char key201[TW_CLUSTER_KEY_MAX + 2], key200[TW_CLUSTER_KEY_MAX + 1];
	memset(kind64, 'k', sizeof kind64 - 1);
	kind64[sizeof kind64 - 1] = '\0';
	memcpy(kind63, "Az09._:-", 8);
	memset(kind63 + 8, 'k', TW_CLUSTER_KIND_MAX - 8);
	kind63[TW_CLUSTER_KIND_MAX] = '\0';
	memset(key201, 'x', sizeof key201 - 1);
	key201[sizeof key201 - 1] = '\0';
	for (int i = 0; i < TW_CLUSTER_KEY_MAX; i++)
		key200[i] = (char)(0x21 + i % (0x7f - 0x21));
	key200[TW_CLUSTER_KEY_MAX] = '\0';
	static unsigned char big[TW_CLUSTER_PAYLOAD_MAX + 1];

	tw_cluster_defer_spec s = task_spec("k", "refused", 0, HOUR_MS);
	cr_expect_eq(tw_cluster_defer(NULL, &s), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer(c, NULL), -TW_EINVAL);
#define REFUSED(code, change)                                                    \
	do {                                                                     \
		tw_cluster_defer_spec x = task_spec("k", "refused", 0, HOUR_MS); \
		change;                                                          \
		cr_expect_eq(tw_cluster_defer(c, &x), code, "%s", #change);      \
	} while (0)
	REFUSED(-TW_EINVAL, x.kind = NULL);
	REFUSED(-TW_EINVAL, x.kind = "");
	REFUSED(-TW_EINVAL, x.kind = "a b");
	REFUSED(-TW_EINVAL, x.kind = "a/b");
	REFUSED(-TW_EINVAL, x.kind = "\xc3\xa9t\xc3\xa9");
	REFUSED(-TW_EINVAL, x.kind = kind64);
	REFUSED(-TW_EINVAL, x.key = NULL);
	REFUSED(-TW_EINVAL, x.key = "");
	REFUSED(-TW_EINVAL, x.key = "a b");
	REFUSED(-TW_EINVAL, x.key = "tab\there");
	REFUSED(-TW_EINVAL, x.key = "del\x7f");
	REFUSED(-TW_EINVAL, x.key = "\xc3\xa9");
	REFUSED(-TW_EINVAL, x.key = key201);
	REFUSED(-TW_EINVAL, (x.payload = big, x.payload_len = sizeof big));
	REFUSED(-TW_EINVAL, (x.payload = NULL, x.payload_len = 1));
	REFUSED(-TW_EINVAL, x.due_ms = -1);
	REFUSED(-TW_EINVAL, x.due_ms = INT64_MIN);
	REFUSED(-TW_EINVAL, x.max_attempts = TW_CLUSTER_ATTEMPTS_MAX + 1);
	REFUSED(-TW_ERANGE, x.delay_ms = TWO_40 + 1);
	REFUSED(-TW_ERANGE, x.delay_ms = UINT64_MAX);
#undef REFUSED
	/* Each limit itself is taken: the task is stored (cancel finds it). */
	tw_cluster_defer_spec ok[] = {
		task_spec(kind63, "kind63", 0, HOUR_MS),
		task_spec("k", key200, 0, HOUR_MS),
		task_spec("k", "payload-max", 0, HOUR_MS),
		task_spec("k", "attempts-max", 0, HOUR_MS),
		task_spec("k", "delay-max", 0, TWO_40),
		task_spec("k", "absolute", wall_ms() + HOUR_MS, 0),
	};
	ok[2].payload = big;
	ok[2].payload_len = TW_CLUSTER_PAYLOAD_MAX;
	ok[3].max_attempts = TW_CLUSTER_ATTEMPTS_MAX;
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		cr_expect_eq(tw_cluster_defer(c, &ok[i]), TW_OK, "%s", ok[i].key);
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		cr_expect_eq(tw_cluster_defer_cancel(c, ok[i].key), TW_OK, "%s", ok[i].key);
	cr_expect_eq(tw_cluster_defer_cancel(c, "refused"), -TW_ENOTFOUND,
		     "a refused defer stored its task");

	/* defer_many: the batch's own limits, and one bad spec refuses them all. */
	static tw_cluster_defer_spec many[TW_CLUSTER_DEFER_BATCH_MAX + 1];
	static char keys[TW_CLUSTER_DEFER_BATCH_MAX + 1][16];
	for (int i = 0; i <= TW_CLUSTER_DEFER_BATCH_MAX; i++) {
		snprintf(keys[i], sizeof keys[i], "m%02d", i);
		many[i] = task_spec("k", keys[i], 0, HOUR_MS);
	}
	int results[TW_CLUSTER_DEFER_BATCH_MAX + 1];
	cr_expect_eq(tw_cluster_defer_many(NULL, many, 2, results), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_many(c, NULL, 2, results), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_many(c, many, 0, results), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_many(c, many, TW_CLUSTER_DEFER_BATCH_MAX + 1, results),
		     -TW_EINVAL);
	many[3].key = keys[1];
	cr_expect_eq(tw_cluster_defer_many(c, many, 5, results), -TW_EINVAL, "a key given twice");
	many[3].key = keys[3];
	many[4].kind = "a b";
	cr_expect_eq(tw_cluster_defer_many(c, many, 5, NULL), -TW_EINVAL);
	many[4].kind = "k";
	many[2].delay_ms = TWO_40 + 1;
	cr_expect_eq(tw_cluster_defer_many(c, many, 5, NULL), -TW_ERANGE);
	many[2].delay_ms = HOUR_MS;
	for (int i = 0; i <= TW_CLUSTER_DEFER_BATCH_MAX; i++)
		cr_expect_eq(tw_cluster_defer_cancel(c, keys[i]), -TW_ENOTFOUND,
			     "a refused defer_many stored %s", keys[i]);
	for (int i = 0; i < TW_CLUSTER_DEFER_BATCH_MAX; i++)
		results[i] = 12345;
	cr_expect_eq(tw_cluster_defer_many(c, many, TW_CLUSTER_DEFER_BATCH_MAX, results), TW_OK);
	for (int i = 0; i < TW_CLUSTER_DEFER_BATCH_MAX; i++) {
		cr_expect_eq(results[i], TW_OK, "results[%d]", i);
		cr_expect_eq(tw_cluster_defer_cancel(c, keys[i]), TW_OK, "%s", keys[i]);
	}
	replica_leave(&a);
}

Test(defer, cancel_move_and_handle_refuse_bad_arguments)
{
	struct replica a = replica_join("a", "/d2/", 4);
	tw_cluster *c = a.c;
	char key201[TW_CLUSTER_KEY_MAX + 2], kind64[TW_CLUSTER_KIND_MAX + 2];
	memset(key201, 'x', sizeof key201 - 1);
	key201[sizeof key201 - 1] = '\0';
	memset(kind64, 'k', sizeof kind64 - 1);
	kind64[sizeof kind64 - 1] = '\0';
	cr_assert_eq(defer_at(c, "k", "there", wall_ms() + HOUR_MS), TW_OK);

	cr_expect_eq(tw_cluster_defer_cancel(NULL, "there"), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_cancel(c, NULL), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_cancel(c, ""), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_cancel(c, "a b"), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_cancel(c, key201), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_cancel(c, "never-deferred"), -TW_ENOTFOUND);

	int64_t later = wall_ms() + 2 * HOUR_MS;
	cr_expect_eq(tw_cluster_defer_move(NULL, "there", later, 0), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_move(c, NULL, later, 0), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_move(c, "a b", later, 0), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_move(c, key201, later, 0), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_move(c, "there", -1, 0), -TW_EINVAL);
	cr_expect_eq(tw_cluster_defer_move(c, "there", 0, TWO_40 + 1), -TW_ERANGE);
	cr_expect_eq(tw_cluster_defer_move(c, "never-deferred", later, 0), -TW_ENOTFOUND);
	cr_expect_eq(tw_cluster_defer_move(c, "there", 0, TWO_40), TW_OK);
	cr_expect_eq(tw_cluster_defer_move(c, "there", later, 0), TW_OK);

	cr_expect_eq(tw_cluster_handle(NULL, "k", note_task, &succeeds), -TW_EINVAL);
	cr_expect_eq(tw_cluster_handle(c, "k", NULL, &succeeds), -TW_EINVAL);
	cr_expect_eq(tw_cluster_handle(c, NULL, note_task, &succeeds), -TW_EINVAL);
	cr_expect_eq(tw_cluster_handle(c, "", note_task, &succeeds), -TW_EINVAL);
	cr_expect_eq(tw_cluster_handle(c, "a b", note_task, &succeeds), -TW_EINVAL);
	cr_expect_eq(tw_cluster_handle(c, kind64, note_task, &succeeds), -TW_EINVAL);
	cr_expect_eq(tw_cluster_handle(c, "k", note_task, &succeeds), TW_OK);
	cr_expect_eq(tw_cluster_handle(c, "k", note_task, &succeeds), -TW_EEXIST);
	cr_expect_eq(tw_cluster_defer_cancel(c, "there"), TW_OK);
	cr_expect_eq(runs_of(NULL), 0);
	replica_leave(&a);
}

Test(defer, a_live_key_is_refused_and_defer_many_is_all_or_nothing)
{
	struct replica a = replica_join("a", "/d6/", 4);
	cr_assert_eq(tw_cluster_handle(a.c, "ok", note_task, &succeeds), TW_OK);
	int64_t far = wall_ms() + HOUR_MS;
	cr_assert_eq(defer_at(a.c, "ok", "taken1", far), TW_OK);
	cr_assert_eq(defer_at(a.c, "ok", "taken2", far), TW_OK);
	cr_expect_eq(defer_at(a.c, "ok", "taken1", far), -TW_EEXIST, "the same defer again");
	cr_expect_eq(defer_at(a.c, "other", "taken1", far + 5), -TW_EEXIST, "another kind and due");
	int64_t soon = wall_ms() + 300;
	tw_cluster_defer_spec specs[] = {
		task_spec("ok", "free0", soon, 0),
		task_spec("ok", "taken1", soon, 0),
		task_spec("ok", "free1", soon, 0),
		task_spec("ok", "taken2", soon, 0),
	};
	int results[4] = { 99, 99, 99, 99 };
	cr_expect_eq(tw_cluster_defer_many(a.c, specs, 4, results), -TW_EEXIST);
	cr_expect_eq(results[0], TW_OK);
	cr_expect_eq(results[1], -TW_EEXIST);
	cr_expect_eq(results[2], TW_OK);
	cr_expect_eq(results[3], -TW_EEXIST);
	cr_expect_eq(tw_cluster_defer_cancel(a.c, "free0"), -TW_ENOTFOUND, "stored from a refusal");
	cr_expect_eq(tw_cluster_defer_cancel(a.c, "free1"), -TW_ENOTFOUND, "stored from a refusal");
	sleep_ms(800);
	cr_expect_eq(runs_of(NULL), 0, "a task of a refused batch ran");
	/* The taken ones kept their due (an hour away). */
	soon = wall_ms() + 300;
	specs[0].due_ms = specs[2].due_ms = soon;
	tw_cluster_defer_spec free_ones[] = { specs[0], specs[2] };
	cr_expect_eq(tw_cluster_defer_many(a.c, free_ones, 2, results), TW_OK);
	cr_expect_eq(results[0], TW_OK);
	cr_expect_eq(results[1], TW_OK);
	wait_runs("free0", 1, 5000);
	wait_runs("free1", 1, 5000);
	cr_expect_eq(runs_of("taken1") + runs_of("taken2"), 0);
	expect_never_early();
	replica_leave(&a);
}

Test(defer, a_task_cancelled_before_its_claim_never_runs)
{
	struct replica a = replica_join("a", "/d7/", 4);
	cr_assert_eq(tw_cluster_handle(a.c, "ok", note_task, &succeeds), TW_OK);
	cr_assert_eq(defer_at(a.c, "ok", "gone", wall_ms() + 1500), TW_OK);
	cr_expect_eq(tw_cluster_defer_cancel(a.c, "gone"), TW_OK);
	cr_expect_eq(tw_cluster_defer_cancel(a.c, "gone"), -TW_ENOTFOUND);
	cr_expect_eq(tw_cluster_defer_move(a.c, "gone", 0, 100), -TW_ENOTFOUND);

	/* Cancels racing the claims (500 ms ahead of the dues): each answer says what happens
	 * to its task. A cancel answered before the claims could begin finds the task pending;
	 * one made before the due cannot find it done (it never runs early). */
	enum { N = 20 };
	char keys[N][8];
	int64_t t0 = wall_ms();
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof keys[i], "r%02d", i);
		cr_assert_eq(defer_at(a.c, "ok", keys[i], t0 + 800 + 40 * i), TW_OK);
	}
	int rc[N];
	int64_t at[N];
	for (int i = 0; i < N; i++) {
		int64_t when = t0 + 60 * i;
		while (wall_ms() < when)
			sleep_ms(2);
		rc[i] = tw_cluster_defer_cancel(a.c, keys[i]);
		at[i] = wall_ms();
	}
	sleep_ms(1500);
	cr_expect_eq(runs_of("gone"), 0, "a task cancelled before its claim ran");
	int cancelled = 0;
	for (int i = 0; i < N; i++) {
		int64_t due = t0 + 800 + 40 * i;
		if (at[i] < due - 600)
			cr_expect_eq(rc[i], TW_OK, "%s cancelled %" PRId64 " ms before its due: %s",
				     keys[i], due - at[i], tw_cluster_strerror(rc[i]));
		if (rc[i] == TW_OK) {
			cancelled++;
			cr_expect_eq(runs_of(keys[i]), 0, "%s ran after its cancel succeeded",
				     keys[i]);
		} else if (rc[i] == -TW_ESTATE) {
			wait_runs(keys[i], 1, 5000);
		} else {
			cr_expect_eq(rc[i], -TW_ENOTFOUND, "cancel of %s: %s", keys[i],
				     tw_cluster_strerror(rc[i]));
			cr_expect_geq(at[i], due, "%s was done before its due (cancel: not found)",
				      keys[i]);
			cr_expect_eq(runs_of(keys[i]), 1);
		}
	}
	cr_expect_gt(cancelled, 0, "no cancel made 800 ms ahead of a due succeeded");
	/* A cancel leaves a tombstone: a late copy of the defer cannot bring the task back. */
	cr_expect_eq(defer_at(a.c, "ok", "gone", wall_ms() + 200), -TW_EEXIST,
		     "a key cancelled a moment ago is free");
	expect_never_early();
	replica_leave(&a);
}

Test(defer, a_claimed_task_cannot_be_cancelled_moved_or_deferred_again)
{
	struct replica a = replica_join("a", "/d8/", 4);
	cr_assert_eq(tw_cluster_handle(a.c, "hold", note_task, &blocks), TW_OK);
	tw_cluster_defer_spec s = task_spec("hold", "held", wall_ms() + 300, 0);
	s.payload = "p";
	s.payload_len = 1;
	cr_assert_eq(tw_cluster_defer(a.c, &s), TW_OK);
	bool ok;
	WAIT_UNTIL(ok, blocked_entered() == 1, 10000);
	cr_assert(ok, "the handler did not start");
	cr_expect_eq(tw_cluster_defer_cancel(a.c, "held"), -TW_ESTATE);
	cr_expect_eq(tw_cluster_defer_move(a.c, "held", wall_ms() + HOUR_MS, 0), -TW_ESTATE);
	cr_expect_eq(tw_cluster_defer_move(a.c, "held", 0, 10), -TW_ESTATE);
	cr_expect_eq(tw_cluster_defer(a.c, &s), -TW_EEXIST);
	tw_cluster_defer_spec batch[] = { task_spec("hold", "beside", 0, HOUR_MS), s };
	int results[2] = { 99, 99 };
	cr_expect_eq(tw_cluster_defer_many(a.c, batch, 2, results), -TW_EEXIST);
	cr_expect_eq(results[0], TW_OK);
	cr_expect_eq(results[1], -TW_EEXIST);
	cr_expect_eq(tw_cluster_defer_cancel(a.c, "beside"), -TW_ENOTFOUND);
	tw_cluster_counters c = stats(a.c);
	cr_expect_eq(c.defer_inflight, 1);
	cr_expect_eq(c.defer_pending, 1, "a claimed task counts as held");
	cr_expect_eq(c.defer_runs, 1);
	struct task_run r = the_run("held", 0);
	tw_cluster_task_list *l = task_read("/d8/", "held");
	if (l)
		cr_expect_eq(l->count, 1);
	if (l && l->count >= 1) {
		cr_expect_eq(l->tasks[0].state, TW_CLUSTER_TASK_CLAIMED);
		cr_expect_str_eq(l->tasks[0].claimed_by ? l->tasks[0].claimed_by : "", "a");
		cr_expect_eq(l->tasks[0].attempt, 1, "a claimed task's attempt is the claim's");
		cr_expect_eq(l->tasks[0].token, r.token);
	}
	task_list_free(l);
	gate_open();
	WAIT_UNTIL(ok, stats(a.c).defer_pending == 0, 5000);
	cr_expect(ok, "the task was not deleted after its handler returned 0");
	c = stats(a.c);
	cr_expect_eq(c.defer_inflight, 0);
	cr_expect_eq(tw_cluster_defer_cancel(a.c, "held"), -TW_ENOTFOUND);
	cr_expect_eq(runs_of("held"), 1);
	expect_never_early();
	replica_leave(&a);
}

Test(defer, a_pending_task_runs_at_its_moved_due_with_its_kind_payload_and_attempts)
{
	struct replica a = replica_join("a", "/d9/", 4);
	cr_assert_eq(tw_cluster_handle(a.c, "ok", note_task, &succeeds), TW_OK);
	cr_assert_eq(tw_cluster_handle(a.c, "flaky", note_task, &fails_once), TW_OK);
	int64_t t0 = wall_ms();
	cr_assert_eq(defer_at(a.c, "ok", "earlier", t0 + 5000), TW_OK);
	cr_expect_eq(tw_cluster_defer_move(a.c, "earlier", t0 + 800, 0), TW_OK);
	cr_assert_eq(defer_at(a.c, "ok", "later", t0 + 1500), TW_OK);
	int64_t before = wall_ms();
	cr_expect_eq(tw_cluster_defer_move(a.c, "later", 0, 3000), TW_OK);
	int64_t after = wall_ms();
	/* A failed attempt puts the task back an hour away; moved, it keeps its attempts. */
	tw_cluster_defer_spec f = task_spec("flaky", "flaky", t0 + 300, 0);
	f.payload = "fp";
	f.payload_len = 2;
	f.backoff_ms = HOUR_MS;
	f.max_attempts = 4;
	cr_assert_eq(tw_cluster_defer(a.c, &f), TW_OK);

	wait_runs("earlier", 1, 4000);
	struct task_run r = the_run("earlier", 0);
	cr_expect_eq(r.due_ms, t0 + 800);
	cr_expect_lt(r.start_ms, t0 + 5000, "ran at its old due");

	wait_runs("flaky", 1, 5000);
	/* -TW_ESTATE until the failure's write put it back. */
	int rc;
	int64_t moved;
	for (;;) {
		moved = wall_ms();
		rc = tw_cluster_defer_move(a.c, "flaky", 0, 200);
		if (rc != -TW_ESTATE || wall_ms() - t0 > 8000)
			break;
		sleep_ms(20);
	}
	cr_assert_eq(rc, TW_OK, "the failed task was not put back: %s", tw_cluster_strerror(rc));
	int64_t moved_end = wall_ms();
	wait_runs("flaky", 2, 5000);
	r = the_run("flaky", 1);
	cr_expect_eq(r.attempt, 2, "a move lost the attempts");
	cr_expect_str_eq(r.kind, "flaky");
	cr_expect_eq(r.payload_len, 2);
	cr_expect_arr_eq(r.payload, "fp", 2);
	cr_expect_eq(r.max_attempts, 4);
	cr_expect(r.due_ms >= moved + 200 && r.due_ms <= moved_end + 200, "due %" PRId64, r.due_ms);

	while (wall_ms() < t0 + 2200)
		sleep_ms(10);
	cr_expect_eq(runs_of("later"), 0, "ran at its old due");
	wait_runs("later", 1, 6000);
	r = the_run("later", 0);
	cr_expect(r.due_ms >= before + 3000 && r.due_ms <= after + 3000, "due %" PRId64, r.due_ms);
	expect_never_early();
	tw_cluster_counters s = stats(a.c);
	cr_expect_eq(s.defer_runs, 4);
	cr_expect_eq(s.defer_failures, 1);
	cr_expect_eq(s.defer_retries, 1);
	cr_expect_eq(s.defer_dead, 0);
	replica_leave(&a);
}

/* Calls from inside a handler ("any thread, a handler too"). */
static struct {
	tw_cluster *c;
	int defer_rc, cancel_rc, move_rc, handle_rc;
	int64_t moved_due;
	atomic_int done;
} inside;

static int chain_handler(const tw_cluster_task *t, void *arg)
{
	note_task(t, arg);
	tw_cluster_defer_spec s = task_spec("ok", "chained", 0, 100);
	inside.defer_rc = tw_cluster_defer(inside.c, &s);
	inside.cancel_rc = tw_cluster_defer_cancel(inside.c, "to-cancel");
	inside.moved_due = wall_ms() + 300;
	inside.move_rc = tw_cluster_defer_move(inside.c, "to-move", inside.moved_due, 0);
	inside.handle_rc = tw_cluster_handle(inside.c, "late", note_task, &succeeds);
	atomic_store(&inside.done, 1);
	return 0;
}

Test(defer, a_handler_may_defer_cancel_move_and_register)
{
	struct replica a = replica_join("a", "/d16/", 4);
	inside.c = a.c;
	cr_assert_eq(tw_cluster_handle(a.c, "ok", note_task, &succeeds), TW_OK);
	cr_assert_eq(tw_cluster_handle(a.c, "chain", chain_handler, &succeeds), TW_OK);
	int64_t far = wall_ms() + HOUR_MS;
	cr_assert_eq(defer_at(a.c, "ok", "to-cancel", far), TW_OK);
	cr_assert_eq(defer_at(a.c, "ok", "to-move", far), TW_OK);
	cr_assert_eq(defer_at(a.c, "late", "waits", 1), TW_OK);
	cr_assert_eq(defer_at(a.c, "chain", "first", wall_ms() + 200), TW_OK);
	bool ok;
	WAIT_UNTIL(ok, atomic_load(&inside.done) == 1, 5000);
	cr_assert(ok, "the chain's handler did not run");
	cr_expect_eq(inside.defer_rc, TW_OK);
	cr_expect_eq(inside.cancel_rc, TW_OK);
	cr_expect_eq(inside.move_rc, TW_OK);
	cr_expect_eq(inside.handle_rc, TW_OK);
	wait_runs("chained", 1, 5000);
	wait_runs("to-move", 1, 5000);
	cr_expect_eq(the_run("to-move", 0).due_ms, inside.moved_due);
	wait_runs("waits", 1, 5000);
	cr_expect_eq(tw_cluster_defer_cancel(a.c, "to-cancel"), -TW_ENOTFOUND);
	cr_expect_eq(runs_of("to-cancel"), 0);
	expect_never_early();
	replica_leave(&a);
}

/* A job's run that holds tw_cluster_leave up, and calls the deferred-task API meanwhile. */
static struct {
	tw_cluster *c;
	atomic_int stage; /* 1: the run waits; 2: leave began, go on; 3: calls made */
	int defer_rc, many_rc, cancel_rc, move_rc, handle_rc;
} during;

static int job_during_leave(const tw_cluster_fire *f, void *arg)
{
	(void)f;
	(void)arg;
	int expected = 0;
	if (!atomic_compare_exchange_strong(&during.stage, &expected, 1))
		return 0;
	while (atomic_load(&during.stage) != 2)
		sleep_ms(5);
	tw_cluster_defer_spec s = task_spec("ok", "after-leave", 0, 1000);
	during.defer_rc = tw_cluster_defer(during.c, &s);
	during.many_rc = tw_cluster_defer_many(during.c, &s, 1, NULL);
	during.cancel_rc = tw_cluster_defer_cancel(during.c, "before-leave");
	during.move_rc = tw_cluster_defer_move(during.c, "before-leave", 0, 5000);
	during.handle_rc = tw_cluster_handle(during.c, "new-kind", note_task, &succeeds);
	atomic_store(&during.stage, 3);
	return 0;
}

static void *leave_thread(void *c)
{
	tw_cluster_leave(c);
	return NULL;
}

Test(defer, calls_after_leave_began_are_refused)
{
	struct replica a = replica_join("a", "/d17/", 4);
	during.c = a.c;
	cr_assert_eq(defer_at(a.c, "ok", "before-leave", wall_ms() + HOUR_MS), TW_OK);
	tw_cluster_job_spec job = { .name = "hold",
				    .period_ms = 100,
				    .callback = job_during_leave };
	cr_assert_eq(tw_cluster_add(a.c, &job), TW_OK);
	bool ok;
	WAIT_UNTIL(ok, atomic_load(&during.stage) == 1, 5000);
	cr_assert(ok, "the job did not run");
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, leave_thread, a.c), 0);
	/* tw_cluster_leave waits for the run; by now it has begun. */
	sleep_ms(500);
	atomic_store(&during.stage, 2);
	WAIT_UNTIL(ok, atomic_load(&during.stage) == 3, 10000);
	cr_assert(ok, "the run's calls did not return");
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_expect_eq(during.defer_rc, -TW_ESHUTDOWN);
	cr_expect_eq(during.many_rc, -TW_ESHUTDOWN);
	cr_expect_eq(during.cancel_rc, -TW_ESHUTDOWN);
	cr_expect_eq(during.move_rc, -TW_ESHUTDOWN);
	cr_expect_eq(during.handle_rc, -TW_ESHUTDOWN);
	tw_engine_destroy(a.e);
	/* Refused, so nothing changed in etcd: "before-leave" is still there, as it was. */
	tw_cluster_task_list *l = task_read("/d17/", "before-leave");
	if (l)
		cr_expect_eq(l->count, 1);
	task_list_free(l);
	l = task_read("/d17/", "after-leave");
	if (l)
		cr_expect_eq(l->count, 0);
	task_list_free(l);
}

/* Calls with a limit of its own: quick answers while etcd is stopped. */
static int join_quick(tw_engine *e, const char *prefix, tw_cluster **out)
{
	tw_cluster_config cfg;
	tw_cluster_config_init(&cfg);
	cfg.engine = e;
	cfg.endpoints = etcd_harness_endpoints(etcd);
	cfg.member = "a";
	cfg.prefix = prefix;
	cfg.groups = 4;
	cfg.lease_ttl_s = 2;
	cfg.request_timeout_ms = 300;
	return tw_cluster_join(&cfg, out);
}

/* Calls again while the answer is -TW_CLUSTER_EUNAVAILABLE (etcd electing after it resumed). */
#define AGAIN(rc, call)                                                                   \
	do {                                                                              \
		int64_t until_ = mono_ms() + 10000;                                       \
		while (((rc) = (call)) == -TW_CLUSTER_EUNAVAILABLE && mono_ms() < until_) \
			sleep_ms(100);                                                    \
	} while (0)

Test(defer, calls_while_etcd_is_unreachable_answer_unavailable)
{
	struct replica a = { new_engine(), NULL };
	cr_assert_eq(join_quick(a.e, "/d18/", &a.c), TW_OK);
	cr_assert_eq(defer_at(a.c, "k", "stored", wall_ms() + HOUR_MS), TW_OK);
	for (int i = 0; i < etcd_harness_count(etcd); i++)
		cr_assert_eq(etcd_harness_signal(etcd, i, SIGSTOP), 0);
	tw_cluster_defer_spec s = task_spec("k", "maybe", wall_ms() + HOUR_MS, 0);
	int defer_rc = tw_cluster_defer(a.c, &s);
	int many_rc = tw_cluster_defer_many(a.c, &s, 1, NULL);
	int cancel_rc = tw_cluster_defer_cancel(a.c, "stored");
	int move_rc = tw_cluster_defer_move(a.c, "stored", 0, HOUR_MS);
	int handle_rc = tw_cluster_handle(a.c, "k", note_task, &succeeds);
	for (int i = 0; i < etcd_harness_count(etcd); i++)
		cr_assert_eq(etcd_harness_signal(etcd, i, SIGCONT), 0);
	cr_expect_eq(defer_rc, -TW_CLUSTER_EUNAVAILABLE, "%s", tw_cluster_strerror(defer_rc));
	cr_expect_eq(many_rc, -TW_CLUSTER_EUNAVAILABLE, "%s", tw_cluster_strerror(many_rc));
	cr_expect_eq(cancel_rc, -TW_CLUSTER_EUNAVAILABLE, "%s", tw_cluster_strerror(cancel_rc));
	cr_expect_eq(move_rc, -TW_CLUSTER_EUNAVAILABLE, "%s", tw_cluster_strerror(move_rc));
	cr_expect_eq(handle_rc, TW_OK, "tw_cluster_handle does not need etcd");
	cr_assert_geq(etcd_harness_wait_leader(etcd, 10000), 0);
	/* The calls may have been applied, once etcd resumed: calling again settles each. */
	int rc;
	AGAIN(rc, tw_cluster_defer(a.c, &s));
	cr_expect(rc == TW_OK || rc == -TW_EEXIST, "%s", tw_cluster_strerror(rc));
	AGAIN(rc, tw_cluster_defer_cancel(a.c, "maybe"));
	cr_expect_eq(rc, TW_OK, "one task under the key: %s", tw_cluster_strerror(rc));
	AGAIN(rc, tw_cluster_defer_cancel(a.c, "stored"));
	cr_expect(rc == TW_OK || rc == -TW_ENOTFOUND, "%s", tw_cluster_strerror(rc));
	replica_leave(&a);
}
