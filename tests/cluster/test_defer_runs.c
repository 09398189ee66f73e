/*
 * tests/cluster/test_defer_runs.c - a deferred task's runs on its owner (one replica): once,
 * never early, with its key, kind, payload, attempt and due; retries after their backoff and
 * the dead letters; a kind with no handler; the counters. Part of test_defer.c's suite.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_test_support.h"
#include "defer_test_support.h"

Test(defer, a_task_runs_once_with_its_key_kind_payload_attempt_and_due)
{
	struct replica a = replica_join("a", "/d3/", 4);
	cr_assert_eq(tw_cluster_handle(a.c, "ok", note_task, &succeeds), TW_OK);
	unsigned char bin[300];
	for (size_t i = 0; i < sizeof bin; i++)
		bin[i] = (unsigned char)(i * 7); /* 0x00 and 0xff among them */
	static unsigned char max[TW_CLUSTER_PAYLOAD_MAX];
	for (size_t i = 0; i < sizeof max; i++)
		max[i] = (unsigned char)(i ^ (i >> 8));
	char key200[TW_CLUSTER_KEY_MAX + 1];
	for (int i = 0; i < TW_CLUSTER_KEY_MAX; i++)
		key200[i] = (char)(0x21 + i % (0x7f - 0x21));
	key200[TW_CLUSTER_KEY_MAX] = '\0';

	int64_t due1 = wall_ms() + 800;
	tw_cluster_defer_spec t1 = task_spec("ok", "order/42:x!~", due1, 0);
	t1.payload = bin;
	t1.payload_len = sizeof bin;
	t1.max_attempts = 7;
	tw_cluster_defer_spec t2 = task_spec("ok", key200, 0, 600);
	t2.payload = max;
	t2.payload_len = sizeof max;
	t2.max_attempts = 3;
	/* Due long ago: runs as soon as the owner has it. */
	tw_cluster_defer_spec t3 = task_spec("ok", "past", 1, 0);
	int64_t before = wall_ms();
	cr_assert_eq(tw_cluster_defer(a.c, &t2), TW_OK);
	int64_t after = wall_ms();
	cr_assert_eq(tw_cluster_defer(a.c, &t1), TW_OK);
	cr_assert_eq(tw_cluster_defer(a.c, &t3), TW_OK);
	wait_runs(NULL, 3, 10000);
	sleep_ms(1500);
	cr_expect_eq(runs_of(t1.key), 1);
	cr_expect_eq(runs_of(t2.key), 1);
	cr_expect_eq(runs_of(t3.key), 1);

	struct task_run r = the_run(t1.key, 0);
	cr_expect_str_eq(r.kind, "ok");
	cr_expect_eq(r.payload_len, sizeof bin);
	cr_expect_arr_eq(r.payload, bin, sizeof bin);
	cr_expect_eq(r.attempt, 1);
	cr_expect_eq(r.max_attempts, 7);
	cr_expect_eq(r.due_ms, due1);
	cr_expect_eq(r.group, tw_cluster_group_of(t1.key, 4));
	cr_expect_gt(r.token, 0);
	/* due_ns is due_ms on the monotonic clock (within the clocks' reading apart);
	 * start_lateness_ns was taken before the handler began. */
	int64_t mono_due = r.start_mono_ns - (r.start_ms - r.due_ms) * 1000000;
	cr_expect(llabs((long long)r.due_ns - mono_due) < 1000000000,
		  "due_ns %" PRIu64 " is not due_ms on CLOCK_MONOTONIC (%" PRId64 ")", r.due_ns,
		  mono_due);
	cr_expect_leq(r.start_lateness_ns, r.start_mono_ns - (int64_t)r.due_ns);
	r = the_run(key200, 0);
	cr_expect_eq(r.payload_len, sizeof max);
	cr_expect_arr_eq(r.payload, max, sizeof max);
	cr_expect_eq(r.attempt, 1);
	cr_expect_eq(r.max_attempts, 3);
	cr_expect(r.due_ms >= before + 600 && r.due_ms <= after + 600,
		  "a delay of 600 ms gave due %" PRId64 ", deferred in [%" PRId64 ", %" PRId64 "]",
		  r.due_ms, before, after);
	cr_expect_eq(r.group, tw_cluster_group_of(key200, 4));
	r = the_run("past", 0);
	cr_expect_eq(r.due_ms, 1);
	cr_expect_eq(r.payload_len, 0);
	cr_expect_eq(r.attempt, 1);
	expect_never_early();

	/* Done: gone from etcd, the key free again. */
	bool ok;
	WAIT_UNTIL(ok, stats(a.c).defer_pending == 0, 5000);
	cr_expect(ok, "defer_pending stayed %" PRIu64, stats(a.c).defer_pending);
	cr_expect_eq(tw_cluster_defer_cancel(a.c, t1.key), -TW_ENOTFOUND);
	cr_expect_eq(tw_cluster_defer_move(a.c, "past", 0, HOUR_MS), -TW_ENOTFOUND);
	tw_cluster_task_list *l = task_read("/d3/", key200);
	if (l)
		cr_expect_eq(l->count, 0, "a task done is still in etcd");
	task_list_free(l);
	/* A success leaves a tombstone: the key is taken for a minute, so that a late copy
	 * of its defer makes no second task. */
	t1.due_ms = wall_ms() + HOUR_MS;
	cr_expect_eq(tw_cluster_defer(a.c, &t1), -TW_EEXIST, "the key of a task just done is free");
	replica_leave(&a);
}

Test(defer, tasks_due_across_the_claim_window_run_once_never_early_and_are_counted)
{
	struct replica a = replica_join("a", "/d4/", 4);
	cr_assert_eq(tw_cluster_handle(a.c, "ok", note_task, &succeeds), TW_OK);
	enum { N = 30 };
	tw_cluster_defer_spec specs[N];
	char keys[N][8];
	int64_t t0 = wall_ms();
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof keys[i], "w%02d", i);
		/* Even ones at an absolute due, odd ones after a delay; 40 ms apart from 2.5 s on:
		 * some claimed as soon as the owner learns of them, most ahead of it. */
		if (i % 2)
			specs[i] = task_spec("ok", keys[i], 0, 2500 + 40 * (uint64_t)i);
		else
			specs[i] = task_spec("ok", keys[i], t0 + 2500 + 40 * i, 0);
	}
	int results[N / 2];
	for (int i = 0; i < N / 2; i++)
		results[i] = 12345;
	cr_assert_eq(tw_cluster_defer_many(a.c, specs, N / 2, results), TW_OK);
	for (int i = 0; i < N / 2; i++)
		cr_expect_eq(results[i], TW_OK);
	cr_assert_eq(tw_cluster_defer_many(a.c, specs + N / 2, N / 2, NULL), TW_OK);
	tw_cluster_counters s = stats(a.c);
	cr_expect_eq(s.defers, N);
	bool ok;
	WAIT_UNTIL(ok, stats(a.c).defer_pending == N, 2000);
	cr_expect(ok, "the owner holds %" PRIu64 " of %d tasks", stats(a.c).defer_pending, N);
	s = stats(a.c);
	cr_expect_eq(s.defer_runs, 0, "a run before any due");
	cr_expect_eq(s.defer_inflight, 0);
	cr_expect_eq(s.defer_unhandled, 0);
	wait_runs(NULL, N, 15000);
	for (int i = 0; i < N; i++) {
		struct task_run r = the_run(keys[i], 0);
		cr_expect_eq(r.attempt, 1);
		if (i % 2 == 0)
			cr_expect_eq(r.due_ms, t0 + 2500 + 40 * i);
	}
	expect_never_early();
	WAIT_UNTIL(ok, stats(a.c).defer_pending == 0, 5000);
	s = stats(a.c);
	cr_expect_eq(s.defer_pending, 0);
	cr_expect_eq(s.defer_runs, N);
	cr_expect_eq(s.defer_failures, 0);
	cr_expect_eq(s.defer_retries, 0);
	cr_expect_eq(s.defer_dead, 0);
	cr_expect_eq(s.defer_inflight, 0);
	cr_expect_eq(s.defer_reclaims, 0);
	cr_expect_gt(s.defer_claim_requests, 0);
	sleep_ms(1000);
	cr_expect_eq(runs_of(NULL), N, "a task ran twice");
	replica_leave(&a);
}

/* l (tw_cluster_task_read of "doomed") holds its dead letter, as its last run left it. */
static void expect_dead_letter(const tw_cluster_task_list *l, const struct task_run *last)
{
	cr_assert_eq(l->count, 1);
	const tw_cluster_task_view *v = &l->tasks[0];
	cr_expect_eq(v->state, TW_CLUSTER_TASK_DEAD);
	cr_expect_str_eq(v->key, "doomed");
	cr_expect_str_eq(v->kind, "fails");
	cr_expect_eq(v->attempt, 3);
	cr_expect_eq(v->max_attempts, 3);
	cr_expect_eq(v->backoff_ms, 200);
	cr_expect_eq(v->last_code, 7);
	cr_expect_eq(v->due_ms, last->due_ms, "a dead letter's due is its last attempt's");
	cr_expect_eq(v->group, tw_cluster_group_of("doomed", 4));
	cr_expect_null(v->claimed_by);
	cr_expect_eq(v->token, 0);
	cr_expect_eq(v->payload_len, 4);
	cr_expect_arr_eq(v->payload, "dead", 4);
}

Test(defer, a_failing_task_is_retried_after_its_backoff_then_dead_lettered)
{
	struct replica a = replica_join("a", "/d10/", 4);
	cr_assert_eq(tw_cluster_handle(a.c, "fails", note_task, &always_fails), TW_OK);
	cr_assert_eq(tw_cluster_handle(a.c, "flaky", note_task, &fails_once), TW_OK);
	tw_cluster_defer_spec d = task_spec("fails", "doomed", wall_ms() + 200, 0);
	d.payload = "dead";
	d.payload_len = 4;
	d.max_attempts = 3;
	d.backoff_ms = 200;
	cr_assert_eq(tw_cluster_defer(a.c, &d), TW_OK);
	tw_cluster_defer_spec f = task_spec("flaky", "recovers", wall_ms() + 200, 0);
	f.backoff_ms = 100;
	cr_assert_eq(tw_cluster_defer(a.c, &f), TW_OK);
	bool ok;
	WAIT_UNTIL(ok, stats(a.c).defer_dead == 1, 15000);
	cr_assert(ok, "not dead-lettered");
	wait_runs("recovers", 2, 5000);
	sleep_ms(1500);
	cr_expect_eq(runs_of("doomed"), 3, "attempts after the last");
	cr_expect_eq(runs_of("recovers"), 2, "ran again after it succeeded");
	for (unsigned n = 1; n <= 3; n++) {
		struct task_run r = the_run("doomed", n - 1);
		cr_expect_eq(r.attempt, n);
		cr_expect_eq(r.max_attempts, 3);
		cr_expect_arr_eq(r.payload, "dead", 4);
		if (n == 1)
			continue;
		struct task_run prev = the_run("doomed", n - 2);
		int64_t wait = (int64_t)200 << (n - 2);
		cr_expect_geq(r.due_ms, prev.end_ms + wait,
			      "attempt %u due %" PRId64
			      " ms after attempt %u ended; backoff %" PRId64,
			      n, r.due_ms - prev.end_ms, n - 1, wait);
		cr_expect_geq(r.start_ms, prev.end_ms + wait, "attempt %u started early", n);
	}
	struct task_run r1 = the_run("recovers", 0), r2 = the_run("recovers", 1);
	cr_expect_eq(r2.attempt, 2);
	cr_expect_geq(r2.start_ms, r1.end_ms + 100);
	expect_never_early();
	WAIT_UNTIL(ok, stats(a.c).defer_pending == 0, 5000);
	tw_cluster_counters s = stats(a.c);
	cr_expect_eq(s.defer_runs, 5);
	cr_expect_eq(s.defer_failures, 4);
	cr_expect_eq(s.defer_retries, 3);
	cr_expect_eq(s.defer_dead, 1);
	cr_expect_eq(s.defer_pending, 0);
	cr_expect_eq(s.defer_inflight, 0);

	struct task_run last = the_run("doomed", 2);
	tw_cluster_task_list *l = task_read("/d10/", "doomed");
	if (l)
		expect_dead_letter(l, &last);
	task_list_free(l);
	l = dead_read("/d10/");
	if (l) {
		cr_expect_eq(l->count, 1);
		cr_expect(l->count == 1 && !strcmp(l->tasks[0].key, "doomed"));
		cr_expect(!l->more);
	}
	task_list_free(l);

	cr_expect_eq(tw_cluster_defer_cancel(a.c, "doomed"), -TW_ENOTFOUND);
	cr_expect_eq(tw_cluster_defer_move(a.c, "doomed", 0, 10), -TW_ENOTFOUND);
	d.due_ms = wall_ms() + HOUR_MS;
	cr_expect_eq(tw_cluster_defer(a.c, &d), TW_OK, "a key only in the dead letters is free");
	l = task_read("/d10/", "doomed");
	if (l)
		cr_expect_eq(l->count, 2);
	if (l && l->count == 2) {
		cr_expect_eq(l->tasks[0].state, TW_CLUSTER_TASK_PENDING, "live task first");
		cr_expect_eq(l->tasks[0].attempt, 0);
		cr_expect_eq(l->tasks[1].state, TW_CLUSTER_TASK_DEAD);
	}
	task_list_free(l);
	cr_expect_eq(tw_cluster_defer(a.c, &d), -TW_EEXIST);
	{
		/* Requeued: a pending task again with no attempts made; the dead letter goes. */
		cr_expect_eq(requeue("/d10/", "doomed", 0), -TW_EEXIST, "a live task has the key");
		cr_expect_eq(requeue("/d10/", "nothing", 0), -TW_ENOTFOUND);
		cr_expect_eq(tw_cluster_defer_cancel(a.c, "doomed"), TW_OK);
		int64_t due = wall_ms() + 200;
		cr_expect_eq(requeue("/d10/", "doomed", due), TW_OK);
		wait_runs("doomed", 4, 5000);
		struct task_run again = the_run("doomed", 3);
		cr_expect_eq(again.attempt, 1, "a requeued task starts its attempts again");
		cr_expect_eq(again.due_ms, due);
		cr_expect_arr_eq(again.payload, "dead", 4);
		WAIT_UNTIL(ok, stats(a.c).defer_dead == 2, 10000);
		cr_expect(ok, "the requeued task did not go back to the dead letters");
	}
	replica_leave(&a);
}

Test(defer, the_defaults_are_five_attempts_and_a_first_backoff_of_a_second)
{
	struct replica a = replica_join("a", "/d11/", 4);
	cr_assert_eq(tw_cluster_handle(a.c, "fails", note_task, &always_fails), TW_OK);
	tw_cluster_defer_spec five = task_spec("fails", "five", wall_ms() + 100, 0);
	five.backoff_ms = 1; /* 1, 2, 4, 8 ms between the five */
	tw_cluster_defer_spec second = task_spec("fails", "second", wall_ms() + 100, 0);
	second.max_attempts = 2;
	cr_assert_eq(tw_cluster_defer(a.c, &five), TW_OK);
	cr_assert_eq(tw_cluster_defer(a.c, &second), TW_OK);
	bool ok;
	WAIT_UNTIL(ok, stats(a.c).defer_dead == 2, 10000);
	cr_assert(ok, "dead letters: %" PRIu64, stats(a.c).defer_dead);
	sleep_ms(500);
	cr_expect_eq(runs_of("five"), 5);
	for (unsigned n = 1; n <= 5 && n <= runs_of("five"); n++)
		cr_expect_eq(the_run("five", n - 1).attempt, n);
	cr_expect_eq(runs_of("second"), 2);
	struct task_run r1 = the_run("second", 0), r2 = the_run("second", 1);
	cr_expect_geq(r2.start_ms, r1.end_ms + 1000, "retried %" PRId64 " ms after the failure",
		      r2.start_ms - r1.end_ms);
	expect_never_early();
	replica_leave(&a);
}

Test(defer, a_kind_with_no_handler_waits_until_one_is_registered)
{
	struct replica a = replica_join("a", "/d12/", 4);
	cr_assert_eq(tw_cluster_handle(a.c, "ok", note_task, &succeeds), TW_OK);
	int64_t due = wall_ms() + 200;
	cr_assert_eq(defer_at(a.c, "nobody", "u1", due), TW_OK);
	cr_assert_eq(defer_at(a.c, "nobody", "u2", 1), TW_OK);
	/* Held, far from its due: counted already ("tasks held here now whose kind has no
	 * handler here"). */
	cr_assert_eq(defer_at(a.c, "nobody", "u3", wall_ms() + HOUR_MS), TW_OK);
	bool ok;
	WAIT_UNTIL(ok, stats(a.c).defer_unhandled == 3, 5000);
	cr_expect(ok, "defer_unhandled: %" PRIu64, stats(a.c).defer_unhandled);
	while (wall_ms() < due + 1200)
		sleep_ms(10);
	tw_cluster_counters s = stats(a.c);
	cr_expect_eq(s.defer_unhandled, 3);
	cr_expect_eq(s.defer_pending, 3);
	cr_expect_eq(s.defer_runs, 0);
	cr_expect_eq(s.defer_dead, 0);
	cr_expect_eq(runs_of(NULL), 0);
	cr_expect_eq(defer_at(a.c, "nobody", "u1", due), -TW_EEXIST, "a waiting task was dropped");
	tw_cluster_task_list *l = task_read("/d12/", "u1");
	if (l)
		cr_expect_eq(l->count, 1, "a waiting task was dropped or dead-lettered");
	if (l && l->count >= 1) {
		cr_expect_eq(l->tasks[0].state, TW_CLUSTER_TASK_PENDING);
		cr_expect_eq(l->tasks[0].attempt, 0);
	}
	task_list_free(l);
	cr_assert_eq(tw_cluster_handle(a.c, "nobody", note_task, &succeeds), TW_OK);
	wait_runs(NULL, 2, 5000);
	cr_expect_eq(the_run("u1", 0).attempt, 1);
	cr_expect_eq(the_run("u2", 0).attempt, 1);
	WAIT_UNTIL(ok, stats(a.c).defer_pending == 1, 5000);
	s = stats(a.c);
	cr_expect_eq(s.defer_unhandled, 0, "u3 has a handler now");
	cr_expect_eq(s.defer_pending, 1, "u3 waits for its due");
	expect_never_early();
	replica_leave(&a);
}

Test(defer, tasks_the_engine_refuses_wait_in_etcd_and_all_run)
{
	tw_config ecfg;
	tw_config_init(&ecfg);
	ecfg.executors = 2;
	ecfg.max_tasks = 8;
	struct replica a = { NULL, NULL };
	cr_assert_eq(tw_engine_create(&ecfg, &a.e), TW_OK);
	cr_assert_eq(join(a.e, "a", "/d20/", 4, &a.c), TW_OK);
	cr_assert_eq(tw_cluster_handle(a.c, "ok", note_task, &succeeds), TW_OK);
	enum { N = 24 };
	tw_cluster_defer_spec specs[N];
	char keys[N][8];
	int64_t due = wall_ms() + 1000;
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof keys[i], "e%02d", i);
		specs[i] = task_spec("ok", keys[i], due, 0);
	}
	cr_assert_eq(tw_cluster_defer_many(a.c, specs, N, NULL), TW_OK);
	bool ok;
	WAIT_UNTIL(ok, stats(a.c).defer_pending > 0, 3000);
	cr_expect_leq(stats(a.c).defer_pending, 8, "more held than the engine takes");
	/* The rest wait in etcd and are read again as room is made: none is dropped. */
	wait_runs(NULL, N, 20000);
	sleep_ms(1000);
	for (int i = 0; i < N; i++)
		cr_expect_eq(runs_of(keys[i]), 1, "%s", keys[i]);
	expect_never_early();
	replica_leave(&a);
}

/* A due_ms is at most 2^40 ms ahead: one past it is refused, also by a move; one at the bound
 * is held and never run early. */
Test(defer, a_due_far_in_the_future_is_held_and_never_runs_early)
{
	struct replica a = replica_join("a", "/d21/", 4);
	cr_assert_eq(tw_cluster_handle(a.c, "ok", note_task, &succeeds), TW_OK);
	int64_t far = wall_ms() + (INT64_C(1) << 40) - HOUR_MS;
	cr_expect_eq(defer_at(a.c, "ok", "end-of-time", INT64_MAX), -TW_ERANGE);
	cr_expect_eq(defer_at(a.c, "ok", "year-2286", INT64_C(10000000000000)), -TW_ERANGE);
	cr_assert_eq(defer_at(a.c, "ok", "far", far), TW_OK);
	cr_assert_eq(defer_at(a.c, "ok", "moved", wall_ms() + HOUR_MS), TW_OK);
	cr_expect_eq(tw_cluster_defer_move(a.c, "moved", INT64_MAX - 1, 0), -TW_ERANGE);
	cr_assert_eq(tw_cluster_defer_move(a.c, "moved", far, 0), TW_OK);
	bool ok;
	WAIT_UNTIL(ok, stats(a.c).defer_pending == 2, 3000);
	cr_expect(ok, "held: %" PRIu64, stats(a.c).defer_pending);
	sleep_ms(1500);
	cr_expect_eq(runs_of(NULL), 0, "a task due decades ahead ran");
	expect_never_early();
	const char *keys[] = { "far", "moved" };
	for (int i = 0; i < 2; i++) {
		int rc = tw_cluster_defer_cancel(a.c, keys[i]);
		cr_expect_eq(rc, TW_OK, "cancel of %s: %s", keys[i], tw_cluster_strerror(rc));
	}
	replica_leave(&a);
}
