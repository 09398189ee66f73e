/*
 * tests/cluster/test_cluster.c - libtickwheel-cluster against a real etcd (tests/cluster/
 * etcd_harness.h), through api/tickwheel_cluster.h only: joining, conflicts, each fire time
 * run once by one replica, hand-over on leave, takeover after a replica is killed.
 *
 * Replicas of one test share a process (two engines, two members) except where a replica must
 * die: that one is a forked child that writes its runs to a file.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster_test_support.h"

TestSuite(cluster, .init = start_etcd, .fini = stop_etcd, .timeout = 60);

/* Every run of the test's replicas in one process. */
struct run {
	char job[32];
	int64_t fire_ms;
	uint64_t token;
	int replica;
};
static struct {
	pthread_mutex_t lock;
	struct run runs[20000];
	size_t n;
} record = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int note_run(const tw_cluster_fire *f, void *arg)
{
	pthread_mutex_lock(&record.lock);
	if (record.n < sizeof record.runs / sizeof record.runs[0]) {
		struct run *r = &record.runs[record.n++];
		snprintf(r->job, sizeof r->job, "%s", f->job);
		r->fire_ms = f->fire_time_ms;
		r->token = f->token;
		r->replica = (int)(intptr_t)arg;
	}
	pthread_mutex_unlock(&record.lock);
	/* Never early, on this replica's wall clock. */
	cr_expect_geq(wall_ms(), f->fire_time_ms, "%s ran before its fire time", f->job);
	return 0;
}

static int add_job(tw_cluster *c, const char *name, uint64_t period_ms, int replica)
{
	tw_cluster_job_spec s = { .name = name,
				  .period_ms = period_ms,
				  .callback = note_run,
				  .arg = (void *)(intptr_t)replica };
	return tw_cluster_add(c, &s);
}

static int cmp_run(const void *a, const void *b)
{
	const struct run *x = a, *y = b;
	int k = strcmp(x->job, y->job);
	if (k)
		return k;
	return x->fire_ms < y->fire_ms ? -1 : x->fire_ms > y->fire_ms;
}

/* No (job, fire time) twice; returns the runs sorted. */
static void assert_each_fire_time_once(struct run *runs, size_t n)
{
	qsort(runs, n, sizeof *runs, cmp_run);
	for (size_t i = 1; i < n; i++)
		cr_assert(strcmp(runs[i].job, runs[i - 1].job) != 0 ||
				  runs[i].fire_ms != runs[i - 1].fire_ms,
			  "%s at %" PRId64 " ran twice (replicas %d and %d)", runs[i].job,
			  runs[i].fire_ms, runs[i - 1].replica, runs[i].replica);
}

/* Fire times of job missing between from_ms and to_ms (period_ms apart). */
static unsigned gaps(const struct run *runs, size_t n, const char *job, uint64_t period_ms,
		     int64_t from_ms, int64_t to_ms)
{
	unsigned missing = 0;
	int64_t p = (int64_t)period_ms;
	for (int64_t t = (from_ms / p + 1) * p; t <= to_ms; t += p) {
		bool seen = false;
		for (size_t i = 0; i < n && !seen; i++)
			seen = runs[i].fire_ms == t && strcmp(runs[i].job, job) == 0;
		missing += !seen;
	}
	return missing;
}

Test(cluster, join_records_the_member_and_leave_lets_it_go)
{
	tw_engine *e = new_engine();
	tw_cluster *a, *again;
	cr_assert_eq(join(e, "a", "/t1/", 4, &a), TW_OK);
	tw_cluster_counters s;
	sleep_ms(400);
	cr_assert_eq(tw_cluster_stats(a, &s), TW_OK);
	cr_expect_eq(s.members, 1);
	cr_expect_eq(s.groups_owned, 4, "a lone member owns every group: %" PRIu64, s.groups_owned);
	tw_cluster_leave(a);
	/* The lease was revoked: the name is free at once, not a TTL later. */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(join(e, "a", "/t1/", 4, &again), TW_OK);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_expect_lt((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000, 1000);
	tw_cluster_leave(again);
	tw_engine_destroy(e);
}

Test(cluster, a_live_member_name_is_refused)
{
	tw_engine *e = new_engine();
	tw_cluster *a, *b = NULL;
	cr_assert_eq(join(e, "same", "/t2/", 4, &a), TW_OK);
	cr_expect_eq(join(e, "same", "/t2/", 4, &b), -TW_EEXIST);
	cr_expect_null(b);
	tw_cluster_leave(a);
	tw_engine_destroy(e);
}

Test(cluster, another_number_of_groups_is_a_conflict)
{
	tw_engine *e = new_engine();
	tw_cluster *a, *b = NULL;
	cr_assert_eq(join(e, "a", "/t3/", 8, &a), TW_OK);
	cr_expect_eq(join(e, "b", "/t3/", 16, &b), -TW_CLUSTER_ECONFLICT);
	tw_cluster_leave(a);
	tw_engine_destroy(e);
}

Test(cluster, another_schedule_under_a_name_is_a_conflict)
{
	tw_engine *e1 = new_engine(), *e2 = new_engine();
	tw_cluster *a, *b;
	cr_assert_eq(join(e1, "a", "/t4/", 4, &a), TW_OK);
	cr_assert_eq(join(e2, "b", "/t4/", 4, &b), TW_OK);
	cr_expect_eq(add_job(a, "poll", 100, 0), TW_OK);
	cr_expect_eq(add_job(b, "poll", 200, 1), -TW_CLUSTER_ECONFLICT);
	cr_expect_eq(add_job(b, "poll", 100, 1), TW_OK);
	cr_expect_eq(add_job(b, "poll", 100, 1), -TW_EEXIST);
	tw_cluster_job_spec cron = { .name = "nightly",
				     .cron = "0 0 3 * * *",
				     .callback = note_run };
	cr_expect_eq(tw_cluster_add(a, &cron), TW_OK);
	cron.cron = "0 0 4 * * *";
	cr_expect_eq(tw_cluster_add(b, &cron), -TW_CLUSTER_ECONFLICT);
	tw_cluster_leave(a);
	tw_cluster_leave(b);
	tw_engine_destroy(e1);
	tw_engine_destroy(e2);
}

Test(cluster, bad_arguments_are_refused)
{
	tw_engine *e = new_engine();
	tw_cluster *a;
	cr_assert_eq(join(e, "a", "/t5/", 4, &a), TW_OK);
	tw_cluster_job_spec s = { .name = "x", .period_ms = 100, .callback = note_run };
	s.name = "has space";
	cr_expect_eq(tw_cluster_add(a, &s), -TW_EINVAL);
	s.name = "x";
	s.cron = "* * * * * *";
	cr_expect_eq(tw_cluster_add(a, &s), -TW_EINVAL, "both a period and a cron");
	s.period_ms = 0;
	s.cron = "@every 1s";
	cr_expect_eq(tw_cluster_add(a, &s), -TW_EINVAL);
	s.cron = "not cron";
	cr_expect_eq(tw_cluster_add(a, &s), -TW_ESYNTAX);
	s.cron = NULL;
	s.period_ms = 100;
	s.phase_ms = 100;
	cr_expect_eq(tw_cluster_add(a, &s), -TW_EINVAL);
	cr_expect_eq(tw_cluster_cancel(a, "nothing"), -TW_ENOTFOUND);
	tw_cluster_leave(a);
	tw_engine_destroy(e);
}

Test(cluster, unreachable_etcd_answers_unavailable)
{
	tw_engine *e = new_engine();
	/* A port nobody listens on: bound by nobody once its socket is closed. */
	const char *const nowhere[] = { "http://127.0.0.1:1", NULL };
	tw_cluster_config cfg;
	tw_cluster_config_init(&cfg);
	cfg.engine = e;
	cfg.endpoints = nowhere;
	cfg.member = "a";
	cfg.request_timeout_ms = 500;
	tw_cluster *c = NULL;
	cr_expect_eq(tw_cluster_join(&cfg, &c), -TW_CLUSTER_EUNAVAILABLE);
	cr_expect_null(c);
	tw_engine_destroy(e);
}

/* Two replicas a and b (each an engine of its own) under prefix, both defining the six jobs
 * j0..j5 of 100 ms; the runs recorded from empty. */
static const char *const six_jobs[] = { "j0", "j1", "j2", "j3", "j4", "j5" };

struct pair {
	tw_engine *e1, *e2;
	tw_cluster *a, *b;
};

/* The pair, a joined with attach_later as given (then not attached yet). */
static struct pair replicas_a_attaching(const char *prefix, bool a_attaches_later)
{
	record.n = 0;
	struct pair p = { new_engine(), new_engine(), NULL, NULL };
	cr_assert_eq(join_attaching(p.e1, "a", prefix, 4, a_attaches_later, &p.a), TW_OK);
	cr_assert_eq(join(p.e2, "b", prefix, 4, &p.b), TW_OK);
	for (int i = 0; i < 6; i++) {
		cr_assert_eq(add_job(p.a, six_jobs[i], 100, 0), TW_OK);
		cr_assert_eq(add_job(p.b, six_jobs[i], 100, 1), TW_OK);
	}
	return p;
}

static struct pair two_replicas(const char *prefix)
{
	return replicas_a_attaching(prefix, false);
}

Test(cluster, two_replicas_run_each_fire_time_once_and_share_the_groups)
{
	struct pair p = two_replicas("/t6/");
	tw_cluster *a = p.a, *b = p.b;
	const char *const *jobs = six_jobs;
	sleep_ms(1000);
	int64_t settled = wall_ms();
	sleep_ms(2000);
	int64_t end = wall_ms() - 300;
	tw_cluster_counters sa, sb;
	tw_cluster_stats(a, &sa);
	tw_cluster_stats(b, &sb);
	cr_expect_eq(sa.groups_owned, 2, "a owns %" PRIu64, sa.groups_owned);
	cr_expect_eq(sb.groups_owned, 2, "b owns %" PRIu64, sb.groups_owned);
	cr_expect_gt(sa.claims_ahead + sb.claims_ahead, 0);
	tw_cluster_leave(a);
	tw_cluster_leave(b);
	pthread_mutex_lock(&record.lock);
	assert_each_fire_time_once(record.runs, record.n);
	for (int i = 0; i < 6; i++)
		cr_expect_eq(gaps(record.runs, record.n, jobs[i], 100, settled, end), 0,
			     "%s missed fire times once the groups settled", jobs[i]);
	pthread_mutex_unlock(&record.lock);
	tw_engine_destroy(p.e1);
	tw_engine_destroy(p.e2);
}

/* A replica that joins with attach_later owns nothing and counts its jobs' fire times as
 * not_owner while the other runs them all; attached, it takes its share, and each fire time
 * still runs once, without a gap. */
Test(cluster, attach_later_takes_groups_only_once_attached)
{
	struct pair p = replicas_a_attaching("/t10/", true);
	tw_cluster *a = p.a, *b = p.b;
	cr_assert_eq(tw_cluster_attach(b), -TW_ESTATE, "b joined as a member");
	cr_assert_eq(tw_cluster_attach(NULL), -TW_EINVAL);
	sleep_ms(1000);
	tw_cluster_counters sa, sb;
	tw_cluster_stats(a, &sa);
	tw_cluster_stats(b, &sb);
	cr_expect_eq(sa.groups_owned, 0, "a owns %" PRIu64 " before it attached", sa.groups_owned);
	cr_expect_eq(sa.runs, 0);
	cr_expect_gt(sa.not_owner, 0, "a's jobs came due and were not its to run");
	cr_expect_eq(sb.members, 1, "a is no member yet: b sees %" PRIu64, sb.members);
	cr_expect_eq(sb.groups_owned, 4);

	cr_assert_eq(tw_cluster_attach(a), TW_OK);
	cr_assert_eq(tw_cluster_attach(a), -TW_ESTATE, "attached already");
	sleep_ms(1000);
	int64_t settled = wall_ms();
	sleep_ms(1500);
	int64_t end = wall_ms() - 300;
	tw_cluster_stats(a, &sa);
	tw_cluster_stats(b, &sb);
	cr_expect_eq(sa.groups_owned, 2, "a owns %" PRIu64 " once attached", sa.groups_owned);
	cr_expect_eq(sb.groups_owned, 2);
	cr_expect_eq(sa.members, 2);
	cr_expect_gt(sa.runs, 0);
	tw_cluster_leave(a);
	tw_cluster_leave(b);
	pthread_mutex_lock(&record.lock);
	assert_each_fire_time_once(record.runs, record.n);
	for (int i = 0; i < 6; i++)
		cr_expect_eq(gaps(record.runs, record.n, six_jobs[i], 100, settled, end), 0,
			     "%s missed fire times once a attached", six_jobs[i]);
	pthread_mutex_unlock(&record.lock);
	tw_engine_destroy(p.e1);
	tw_engine_destroy(p.e2);
}

/* The name is checked at the attach: a live member of the name makes it fail -TW_EEXIST
 * (after waiting the TTL and a second for it), and once that member left, the same replica
 * attaches. */
Test(cluster, an_attach_that_failed_can_be_tried_again)
{
	tw_engine *e1 = new_engine(), *e2 = new_engine();
	tw_cluster *first, *second;
	cr_assert_eq(join(e1, "x", "/t12/", 4, &first), TW_OK);
	cr_assert_eq(join_attaching(e2, "x", "/t12/", 4, true, &second), TW_OK,
		     "joining without attaching takes no name");
	int64_t t0 = mono_ms();
	cr_assert_eq(tw_cluster_attach(second), -TW_EEXIST);
	cr_expect_geq(mono_ms() - t0, 2000, "the live member was waited for, the TTL at least");
	tw_cluster_counters s;
	tw_cluster_stats(second, &s);
	cr_expect_eq(s.groups_owned, 0);
	tw_cluster_leave(first);
	cr_assert_eq(tw_cluster_attach(second), TW_OK, "the failed attach left it as before");
	sleep_ms(500);
	tw_cluster_stats(second, &s);
	cr_expect_eq(s.groups_owned, 4, "alone, it owns every group: %" PRIu64, s.groups_owned);
	tw_cluster_leave(second);
	tw_engine_destroy(e1);
	tw_engine_destroy(e2);
}

/* A replica that never attaches leaves as any other: its jobs are released, and its name
 * was never taken (a member of the same name joins at once). */
Test(cluster, a_replica_that_never_attached_leaves_cleanly)
{
	record.n = 0;
	tw_engine *e = new_engine();
	tw_cluster *a, *again;
	cr_assert_eq(join_attaching(e, "a", "/t11/", 4, true, &a), TW_OK);
	cr_assert_eq(add_job(a, "lonely", 100, 0), TW_OK);
	sleep_ms(300);
	tw_cluster_leave(a);
	cr_assert_eq(join(e, "a", "/t11/", 4, &again), TW_OK);
	tw_cluster_leave(again);
	tw_engine_stats st;
	cr_assert_eq(tw_stats(e, &st), TW_OK);
	cr_expect_eq(st.tasks_live, 0, "the job's local task is gone");
	cr_expect_eq(record.n, 0, "nothing ran: a never owned a group");
	tw_engine_destroy(e);
}

Test(cluster, a_leaving_replica_hands_its_groups_over)
{
	struct pair p = two_replicas("/t7/");
	tw_cluster *a = p.a, *b = p.b;
	const char *const *jobs = six_jobs;
	sleep_ms(1500);
	tw_cluster_leave(a);
	int64_t left = wall_ms();
	sleep_ms(1500);
	tw_cluster_counters sb;
	tw_cluster_stats(b, &sb);
	cr_expect_eq(sb.groups_owned, 4);
	cr_expect_eq(sb.takeovers, 0, "a hand-over is no takeover");
	int64_t end = wall_ms() - 300;
	tw_cluster_leave(b);
	pthread_mutex_lock(&record.lock);
	assert_each_fire_time_once(record.runs, record.n);
	/* The taker runs each job again within a round or two of the leave. */
	for (int i = 0; i < 6; i++)
		cr_expect_eq(gaps(record.runs, record.n, jobs[i], 100, left + 500, end), 0);
	pthread_mutex_unlock(&record.lock);
	tw_engine_destroy(p.e1);
	tw_engine_destroy(p.e2);
}

static int child_note(const tw_cluster_fire *f, void *arg)
{
	char line[96];
	int n = snprintf(line, sizeof line, "%s %" PRId64 " %" PRIu64 "\n", f->job, f->fire_time_ms,
			 f->token);
	if (write((int)(intptr_t)arg, line, (size_t)n) != n)
		_exit(5);
	return 0;
}

/* A replica in a child process: joins as "child", defines the jobs, appends each run as
 * "job fire token\n" to fd, and lives until killed. */
static void child_replica(int fd, const char *prefix, const char *const *jobs, int njobs)
{
	tw_engine *e = new_engine();
	tw_cluster *c;
	if (join(e, "child", prefix, 4, &c) != TW_OK)
		_exit(3);
	for (int i = 0; i < njobs; i++) {
		tw_cluster_job_spec s = { .name = jobs[i],
					  .period_ms = 100,
					  .callback = child_note,
					  .arg = (void *)(intptr_t)fd };
		if (tw_cluster_add(c, &s) != TW_OK)
			_exit(4);
	}
	for (;;)
		pause();
}

static size_t read_child_runs(const char *path, struct run *out, size_t cap)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	size_t n = 0;
	while (n < cap && fscanf(f, "%31s %" SCNd64 " %" SCNu64, out[n].job, &out[n].fire_ms,
				 &out[n].token) == 3)
		out[n++].replica = 9;
	fclose(f);
	return n;
}

Test(cluster, a_killed_owner_is_taken_over_within_its_ttl)
{
	record.n = 0;
	const char *jobs[] = { "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7" };
	char path[] = "/tmp/tw-cluster-runs-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		child_replica(fd, "/t8/", jobs, 8);
	/* The child takes every group first; then the parent joins and gets its share. */
	sleep_ms(1000);
	tw_engine *e = new_engine();
	tw_cluster *b;
	cr_assert_eq(join(e, "parent", "/t8/", 4, &b), TW_OK);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(add_job(b, jobs[i], 100, 1), TW_OK);
	sleep_ms(1500);
	tw_cluster_counters before;
	tw_cluster_stats(b, &before);
	cr_expect_eq(before.groups_owned, 2);
	cr_assert_eq(kill(pid, SIGKILL), 0);
	int64_t killed = wall_ms();
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	/* TTL 2 s, etcd's expiry scan, a worker round: the groups are back within TTL + 1 s. */
	int64_t owned_all = 0;
	while (wall_ms() - killed < 5000) {
		tw_cluster_counters s;
		tw_cluster_stats(b, &s);
		if (s.groups_owned == 4) {
			owned_all = wall_ms();
			break;
		}
		sleep_ms(20);
	}
	cr_assert_neq(owned_all, 0, "the groups were not taken over within 5 s");
	cr_expect_leq(owned_all - killed, 3000, "takeover took %" PRId64 " ms", owned_all - killed);
	sleep_ms(800);
	tw_cluster_counters after;
	tw_cluster_stats(b, &after);
	cr_expect_geq(after.takeovers, 2);
	cr_expect_gt(after.missed, 0, "fire times passed during the takeover count as missed");
	tw_cluster_leave(b);
	tw_engine_destroy(e);
	close(fd);
	pthread_mutex_lock(&record.lock);
	record.n += read_child_runs(path, record.runs + record.n,
				    sizeof record.runs / sizeof record.runs[0] - record.n);
	unlink(path);
	/* Tokens only grow: every run after the takeover carries a token above the child's. */
	uint64_t child_max = 0;
	for (size_t i = 0; i < record.n; i++)
		if (record.runs[i].replica == 9 && record.runs[i].token > child_max)
			child_max = record.runs[i].token;
	for (size_t i = 0; i < record.n; i++)
		if (record.runs[i].replica == 1 && record.runs[i].fire_ms > owned_all)
			cr_expect_gt(record.runs[i].token, child_max);
	assert_each_fire_time_once(record.runs, record.n);
	pthread_mutex_unlock(&record.lock);
}

struct buf {
	char text[65536];
	size_t len;
};

static int to_buf(void *ctx, const char *data, size_t len)
{
	struct buf *b = ctx;
	if (b->len + len >= sizeof b->text)
		return 1;
	memcpy(b->text + b->len, data, len);
	b->len += len;
	b->text[b->len] = '\0';
	return 0;
}

static int metrics_handler(const tw_cluster_task *task, void *arg)
{
	(void)task;
	(void)arg;
	return 0;
}

static int refuse(void *ctx, const char *data, size_t len)
{
	(void)ctx;
	(void)data;
	(void)len;
	return 1;
}

Test(cluster, metrics_are_prometheus_text_that_promtool_accepts)
{
	tw_engine *e = new_engine();
	tw_cluster *a;
	cr_assert_eq(join(e, "a", "/t9/", 4, &a), TW_OK);
	cr_assert_eq(add_job(a, "m0", 100, 0), TW_OK);
	cr_assert_eq(tw_cluster_handle(a, "k", metrics_handler, NULL), TW_OK);
	tw_cluster_defer_spec d = { .kind = "k", .key = "m-task", .delay_ms = 0 };
	cr_assert_eq(tw_cluster_defer(a, &d), TW_OK);
	sleep_ms(700);
	static struct buf b;
	b.len = 0;
	const char *const labels[] = { "replica", "a \"1\"", NULL };
	tw_metrics_options opt = { .prefix = "gw_", .labels = labels };
	cr_assert_eq(tw_cluster_metrics_write(a, &opt, to_buf, &b), TW_OK);
	cr_expect(strstr(b.text, "gw_groups_owned{replica=\"a \\\"1\\\"\"} 4\n"), "%s", b.text);
	cr_expect(strstr(b.text, "# TYPE gw_claim_latency_seconds histogram\n"));
	cr_expect(strstr(b.text,
			 "gw_etcd_errors_total{replica=\"a \\\"1\\\"\",kind=\"timeout\"} 0\n"));
	cr_expect(strstr(b.text,
			 "gw_claim_latency_seconds_bucket{replica=\"a \\\"1\\\"\",le=\"+Inf\"}"));
	cr_expect(strstr(b.text, "gw_defer_runs_total{replica=\"a \\\"1\\\"\"} 1\n"), "%s", b.text);
	cr_expect(strstr(b.text, "# TYPE gw_defer_pending gauge\n"));
	cr_expect(strstr(b.text, "gw_defers_total{replica=\"a \\\"1\\\"\"} 1\n"));
	tw_cluster_counters s;
	tw_cluster_stats(a, &s);
	cr_expect_gt(s.claim_requests, 0);
	/* Prometheus's own checker, when it is installed (tools/run.sh installs it). */
	FILE *p = popen("command -v promtool >/dev/null && promtool check metrics", "w");
	if (p) {
		fwrite(b.text, 1, b.len, p);
		int rc = pclose(p);
		cr_expect(rc == 0 || WEXITSTATUS(rc) == 127, "promtool refused the text:\n%s",
			  b.text);
	}
	const char *const bad[] = { "le", "x", NULL };
	opt.labels = bad;
	cr_expect_eq(tw_cluster_metrics_write(a, &opt, to_buf, &b), -TW_EINVAL);
	cr_expect_eq(tw_cluster_metrics_write(a, NULL, refuse, NULL), -TW_EWRITE);
	tw_cluster_leave(a);
	tw_engine_destroy(e);
}

static atomic_int failing_runs;

static int always_fails(const tw_cluster_fire *f, void *arg)
{
	(void)f;
	(void)arg;
	atomic_fetch_add(&failing_runs, 1);
	return 1;
}

/* The engine pauses a task after max_failures failures in a row; a cluster job must not be
 * paused on its owner, where no other replica could run it. */
Test(cluster, a_failing_job_is_never_paused)
{
	tw_config ecfg;
	tw_config_init(&ecfg);
	ecfg.executors = 2;
	ecfg.max_failures = 3;
	tw_engine *e;
	cr_assert_eq(tw_engine_create(&ecfg, &e), TW_OK);
	tw_cluster *a;
	cr_assert_eq(join(e, "a", "/t10/", 4, &a), TW_OK);
	tw_cluster_job_spec s = { .name = "fails", .period_ms = 100, .callback = always_fails };
	cr_assert_eq(tw_cluster_add(a, &s), TW_OK);
	sleep_ms(1500);
	tw_cluster_counters c;
	tw_cluster_stats(a, &c);
	cr_expect_geq(atomic_load(&failing_runs), 8, "ran %d times", atomic_load(&failing_runs));
	cr_expect_eq(c.failures, c.runs);
	tw_id id;
	tw_task_info info;
	cr_assert_eq(tw_find(e, "cluster:fails", &id), TW_OK);
	cr_assert_eq(tw_get(e, id, &info), TW_OK);
	cr_expect_neq(info.state, TW_PAUSED);
	cr_expect_eq(info.failures, 0);
	tw_cluster_leave(a);
	tw_engine_destroy(e);
}
