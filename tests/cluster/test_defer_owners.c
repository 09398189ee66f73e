/*
 * tests/cluster/test_defer_owners.c - deferred tasks and the owners of their groups: a task
 * runs on its group's owner wherever it was deferred; a leaving owner hands its tasks over;
 * tasks wait for a replica when none is left; an owner killed in its handler is taken over
 * with the next attempt. Part of test_defer.c's suite. The owner that must die is a forked
 * child that reports its handler's run through a pipe.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_test_support.h"
#include "defer_test_support.h"

Test(defer, a_task_deferred_anywhere_runs_on_the_owner_of_its_group)
{
	struct two p;
	two_replicas(&p, "/d5/");
	char on_b[32], on_a[32];
	key_owned_by(&p, 1, "x", 0, on_b, sizeof on_b);
	key_owned_by(&p, 0, "x", 0, on_a, sizeof on_a);
	cr_assert_eq(defer_at(p.a.c, "ok", on_b, wall_ms() + 800), TW_OK);
	cr_assert_eq(defer_at(p.b.c, "ok", on_a, wall_ms() + 800), TW_OK);
	wait_runs(on_b, 1, 10000);
	wait_runs(on_a, 1, 10000);
	struct task_run r = the_run(on_b, 0);
	cr_expect_eq(r.replica, 1, "%s (group %u, b's) ran on a", on_b, r.group);
	cr_expect_eq(r.group, tw_cluster_group_of(on_b, 4));
	cr_expect_eq(r.token, p.token[r.group], "not the owner's token");
	r = the_run(on_a, 0);
	cr_expect_eq(r.replica, 0, "%s (group %u, a's) ran on b", on_a, r.group);
	cr_expect_eq(r.token, p.token[r.group], "not the owner's token");
	/* Cancel and move from the replica that does not own the group. */
	char other[32];
	key_owned_by(&p, 1, "x", 1, other, sizeof other);
	cr_assert_eq(defer_at(p.b.c, "ok", other, wall_ms() + HOUR_MS), TW_OK);
	int64_t moved = wall_ms() + 2 * HOUR_MS;
	cr_expect_eq(tw_cluster_defer_move(p.a.c, other, moved, 0), TW_OK);
	cr_expect_eq(tw_cluster_defer_cancel(p.a.c, other), TW_OK);
	cr_expect_eq(tw_cluster_defer_cancel(p.b.c, other), -TW_ENOTFOUND);
	sleep_ms(1000);
	cr_expect_eq(runs_of(NULL), 2);
	tw_cluster_counters sa = stats(p.a.c), sb = stats(p.b.c);
	cr_expect_eq(sa.defers, 1);
	cr_expect_eq(sb.defers, 2);
	cr_expect_eq(sa.defer_runs, 1);
	cr_expect_eq(sb.defer_runs, 1);
	expect_never_early();
	replica_leave(&p.a);
	replica_leave(&p.b);
}

Test(defer, a_leaving_owner_hands_its_tasks_over_and_each_runs_once)
{
	struct two p;
	two_replicas(&p, "/d13/");
	enum { N = 4 };
	char keys[N][32], claimed[32], only_b[32];
	/* A kind only b handles: it waits on a, then b takes the group and runs it. */
	key_owned_by(&p, 0, "o", 0, only_b, sizeof only_b);
	cr_assert_eq(tw_cluster_handle(p.b.c, "only-b", note_task, &succeeds_b), TW_OK);
	cr_assert_eq(defer_at(p.b.c, "only-b", only_b, wall_ms() + 100), TW_OK);
	int64_t due = wall_ms() + 3000;
	for (int i = 0; i < N; i++) {
		key_owned_by(&p, 0, "h", i, keys[i], sizeof keys[i]);
		cr_assert_eq(defer_at(p.b.c, "ok", keys[i], due), TW_OK);
	}
	bool ok;
	WAIT_UNTIL(ok, stats(p.a.c).defer_pending == N + 1 && stats(p.a.c).defer_unhandled == 1,
		   2000);
	tw_cluster_counters s = stats(p.a.c);
	cr_assert(ok, "a holds %" PRIu64 " of its %d tasks, %" PRIu64 " with no handler",
		  s.defer_pending, N + 1, s.defer_unhandled);
	/* Due soon: a has it claimed, or about to, when it leaves. */
	key_owned_by(&p, 0, "c", 0, claimed, sizeof claimed);
	cr_assert_eq(defer_at(p.b.c, "ok", claimed, wall_ms() + 600), TW_OK);
	sleep_ms(250);
	tw_cluster_leave(p.a.c);
	for (int i = 0; i < N; i++) {
		wait_runs(keys[i], 1, 10000);
		cr_expect_eq(the_run(keys[i], 0).replica, 1, "%s ran on a after it left", keys[i]);
	}
	wait_runs(claimed, 1, 10000);
	wait_runs(only_b, 1, 10000);
	cr_expect_eq(the_run(only_b, 0).replica, 1);
	sleep_ms(1000);
	for (int i = 0; i < N; i++)
		cr_expect_eq(runs_of(keys[i]), 1);
	cr_expect_eq(runs_of(claimed), 1, "a task claimed at the leave ran twice");
	/* No handler starts on a once its leave began; a claim it made is given back unrun,
	 * and the taker runs the task with the same attempt. */
	struct task_run r = the_run(claimed, 0);
	cr_expect_eq(r.replica, 1, "%s ran on a after it left", claimed);
	cr_expect_eq(r.attempt, 1);
	cr_expect_eq(stats(p.b.c).groups_owned, 4);
	expect_never_early();
	tw_engine_destroy(p.a.e);
	replica_leave(&p.b);
}

Test(defer, tasks_left_with_no_replica_run_when_one_joins)
{
	struct replica a = replica_join("a", "/d14/", 4);
	enum { N = 35 };
	tw_cluster_defer_spec specs[N];
	char keys[N][8];
	int64_t due = wall_ms() + 1200;
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof keys[i], "n%02d", i);
		specs[i] = task_spec("ok", keys[i], due, 0);
	}
	cr_assert_eq(tw_cluster_defer_many(a.c, specs, 30, NULL), TW_OK);
	for (int i = 30; i < N; i++)
		cr_assert_eq(tw_cluster_defer(a.c, &specs[i]), TW_OK);
	replica_leave(&a);
	while (wall_ms() < due + 500)
		sleep_ms(10);
	/* The view's task counts come with the task views. */
	{
		tw_cluster_view *v;
		cr_assert_eq(tw_cluster_view_read(etcd_harness_endpoints(etcd), "/d14/", 0, &v),
			     TW_OK);
		cr_expect_eq(v->tasks, N, "live tasks in etcd with no replica");
		cr_expect_eq(v->tasks_claimed, 0);
		tw_cluster_view_free(v);
	}
	struct replica c = replica_join("c", "/d14/", 4);
	cr_assert_eq(tw_cluster_handle(c.c, "ok", note_task, &succeeds), TW_OK);
	wait_runs(NULL, N, 10000);
	sleep_ms(1000);
	for (int i = 0; i < N; i++) {
		cr_expect_eq(runs_of(keys[i]), 1, "%s", keys[i]);
		cr_expect_eq(the_run(keys[i], 0).attempt, 1);
	}
	tw_cluster_counters s = stats(c.c);
	cr_expect_geq(s.defer_loaded, N);
	cr_expect_geq(s.defer_overdue, N, "every task was due when c read it");
	cr_expect_eq(s.defer_runs, N);
	expect_never_early();
	replica_leave(&c);
}

/* tw_cluster_leave in a thread of its own, saying when it returned. */
struct leaver {
	tw_cluster *c;
	atomic_int *left;
};

static void *leave_and_say(void *arg)
{
	struct leaver *l = arg;
	tw_cluster_leave(l->c);
	atomic_store(l->left, 1);
	return NULL;
}

Test(defer, a_leave_waits_for_the_handler_going_on_and_writes_its_result)
{
	struct two p;
	two_replicas(&p, "/d19/");
	cr_assert_eq(tw_cluster_handle(p.a.c, "hold", note_task, &blocks), TW_OK);
	cr_assert_eq(tw_cluster_handle(p.b.c, "hold", note_task, &succeeds_b), TW_OK);
	char key[32];
	key_owned_by(&p, 0, "l", 0, key, sizeof key);
	cr_assert_eq(defer_at(p.b.c, "hold", key, wall_ms() + 200), TW_OK);
	bool ok;
	WAIT_UNTIL(ok, blocked_entered() == 1, 5000);
	cr_assert(ok, "a's handler did not start");
	pthread_t t;
	atomic_int left = 0;
	struct leaver l = { p.a.c, &left };
	cr_assert_eq(pthread_create(&t, NULL, leave_and_say, &l), 0);
	sleep_ms(700);
	cr_expect_eq(atomic_load(&left), 0, "leave returned while a handler was going on");
	gate_open();
	cr_assert_eq(pthread_join(t, NULL), 0);
	tw_engine_destroy(p.a.e);
	/* Its result (0: done) was written: b, which takes the group, does not run it again. */
	sleep_ms(1500);
	cr_expect_eq(runs_of(key), 1, "the task ran again after a leave that waited for it");
	cr_expect_eq(tw_cluster_defer_cancel(p.b.c, key), -TW_ENOTFOUND);
	cr_expect_eq(stats(p.b.c).defer_pending, 0);
	cr_expect_eq(stats(p.b.c).defer_reclaims, 0);
	replica_leave(&p.b);
}

/* The child's handler: reports "key attempt token due" and never returns. */
static int child_handler(const tw_cluster_task *t, void *arg)
{
	char line[TW_CLUSTER_KEY_MAX + 80];
	int n = snprintf(line, sizeof line, "%s %u %" PRIu64 " %" PRId64 "\n", t->key, t->attempt,
			 t->token, t->due_ms);
	if (write((int)(intptr_t)arg, line, (size_t)n) != n)
		_exit(5);
	for (;;)
		pause();
}

/* The owner that dies: the first member by name, so it owns the one group. Defers three
 * tasks: two due at due1 (one of a single attempt) that block its two executors in their
 * handlers until it is killed, one at due2. No Criterion calls here. */
static void child_owner(int fd, const char *prefix, int64_t due1, int64_t due2)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
		_exit(2);
	tw_config ecfg;
	tw_config_init(&ecfg);
	ecfg.executors = 2;
	tw_engine *e;
	tw_cluster *c;
	if (tw_engine_create(&ecfg, &e) != TW_OK || join(e, "a-child", prefix, 1, &c) != TW_OK)
		_exit(3);
	if (tw_cluster_handle(c, "work", child_handler, (void *)(intptr_t)fd) != TW_OK ||
	    tw_cluster_handle(c, "fragile", child_handler, (void *)(intptr_t)fd) != TW_OK)
		_exit(4);
	tw_cluster_defer_spec s1 = task_spec("work", "in-handler", due1, 0);
	s1.payload = "p1";
	s1.payload_len = 2;
	tw_cluster_defer_spec s2 = task_spec("fragile", "one-attempt", due1, 0);
	s2.max_attempts = 1;
	tw_cluster_defer_spec s3 = task_spec("work", "pending", due2, 0);
	if (tw_cluster_defer(c, &s1) != TW_OK || tw_cluster_defer(c, &s2) != TW_OK ||
	    tw_cluster_defer(c, &s3) != TW_OK)
		_exit(6);
	for (;;)
		pause();
}

/* The child's first n handler lines ("key attempt token due"), read within ms. */
static void read_child_lines(int fd, char *buf, size_t cap, int n, int ms)
{
	size_t len = 0;
	int64_t until = mono_ms() + ms;
	buf[0] = '\0';
	for (int lines = 0; lines < n;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)(until - mono_ms());
		cr_assert(left > 0 && poll(&pfd, 1, left) == 1,
			  "the child's handlers did not start: \"%s\"", buf);
		ssize_t got = read(fd, buf + len, cap - 1 - len);
		cr_assert_gt(got, 0, "the child ended before its handlers ran: \"%s\"", buf);
		for (ssize_t i = 0; i < got; i++)
			lines += buf[len + (size_t)i] == '\n';
		len += (size_t)got;
		buf[len] = '\0';
	}
}

Test(defer, an_owner_killed_in_its_handler_is_taken_over_with_the_next_attempt)
{
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	int64_t due1 = wall_ms() + 1000, due2 = wall_ms() + 6000;
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		child_owner(fds[1], "/d15/", due1, due2);
	}
	close(fds[1]);
	char text[2 * (TW_CLUSTER_KEY_MAX + 80)];
	read_child_lines(fds[0], text, sizeof text, 2, 10000);
	char *in = strstr(text, "in-handler ");
	cr_assert_not_null(in, "%s", text);
	unsigned attempt;
	uint64_t token;
	int64_t due;
	cr_assert_eq(sscanf(in, "in-handler %u %" SCNu64 " %" SCNd64, &attempt, &token, &due), 3,
		     "%s", text);
	cr_expect_eq(attempt, 1);
	cr_expect_eq(due, due1);
	cr_assert_not_null(strstr(text, "one-attempt 1 "), "%s", text);

	/* Second by name: with one group it owns nothing while the child lives. */
	struct replica b = replica_join("b-parent", "/d15/", 1);
	cr_assert_eq(tw_cluster_handle(b.c, "work", note_task, &succeeds_b), TW_OK);
	cr_assert_eq(tw_cluster_handle(b.c, "fragile", note_task, &fails_b), TW_OK);
	sleep_ms(300);
	cr_assert_eq(stats(b.c).groups_owned, 0);
	cr_assert_eq(kill(pid, SIGKILL), 0);
	int64_t killed = wall_ms();
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	close(fds[0]);

	wait_runs("in-handler", 1, 10000);
	struct task_run r = the_run("in-handler", 0);
	cr_expect_eq(r.attempt, 2, "a claimed task taken over runs with attempt + 1");
	cr_expect_gt(r.token, token, "the taker's token is not above the dead owner's");
	cr_expect_eq(r.due_ms, due1);
	cr_expect_eq(r.payload_len, 2);
	cr_expect_arr_eq(r.payload, "p1", 2);
	/* Its one attempt was the dead owner's: it still runs once more, and its failure then
	 * dead-letters it. */
	wait_runs("one-attempt", 1, 10000);
	r = the_run("one-attempt", 0);
	cr_expect_eq(r.attempt, 2);
	cr_expect_eq(r.max_attempts, 1);
	bool ok;
	WAIT_UNTIL(ok, stats(b.c).defer_dead == 1, 5000);
	cr_expect(ok, "a failure after a takeover past max_attempts was not dead-lettered");
	tw_cluster_counters s = stats(b.c);
	cr_expect_eq(s.defer_retries, 0);
	cr_expect_geq(s.takeovers, 1);
	cr_expect_geq(s.defer_overdue, 2, "both claimed tasks were due when the taker read them");

	wait_runs("pending", 1, (unsigned)(due2 - wall_ms() + 8000));
	r = the_run("pending", 0);
	/* The child claims it 500 ms before its due; killed well before that, it never did. */
	if (killed < due2 - 1000)
		cr_expect_eq(r.attempt, 1, "a task the dead owner never claimed lost an attempt");
	cr_expect_eq(r.due_ms, due2);
	/* Each task the dead owner had claimed is reclaimed: the two in its handlers, and the
	 * pending one too when the kill came after its claim (a loaded machine: the child
	 * killed more than 5 s in), which then runs with attempt 2. */
	uint64_t reclaims = stats(b.c).defer_reclaims;
	cr_expect_eq(reclaims, 2u + (r.attempt == 2),
		     "%" PRIu64 " reclaims; killed %" PRId64
		     " ms before the pending task's due, which ran with attempt %u",
		     reclaims, due2 - killed, r.attempt);
	sleep_ms(500);
	cr_expect_eq(runs_of("in-handler"), 1);
	cr_expect_eq(runs_of("pending"), 1);
	cr_expect_eq(runs_of("one-attempt"), 1);
	expect_never_early();
	replica_leave(&b);
}
