/*
 * perf/cluster/defer_perf_capacity.c - `defer_perf capacity`: what pending tasks cost etcd
 * and the replicas, and how long an owner takes to load them.
 *
 * 1. --tasks tasks (--payload bytes each) deferred a day ahead, 60 per call from --threads
 *    threads, into 64 groups owned by --replicas replicas: etcd's dbSize and dbSizeInUse
 *    before and after (every member's /v3/maintenance/status) per task, beside the record's
 *    own size (its key and value as cluster/defer.h lays them out); the members' RSS; this
 *    process's RSS per task held (the replicas hold every task as a local one-shot).
 * 2. All replicas but the first leave: the time until the first holds every task, its
 *    defer_loaded and defer_load_ms_last.
 * 3. One group of --group-tasks tasks (its own prefix, groups = 1) held by replica "a";
 *    replica "b" joins, "a" leaves: b's time to hold them all, defer_loaded and
 *    defer_load_ms_last.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defer_perf.h"

#define CAP_GROUPS 64
#define BATCH      TW_CLUSTER_DEFER_BATCH_MAX

struct loader {
	pthread_t thread;
	tw_cluster *c;
	const char *tag;
	unsigned first, end, step; /* batches first, first + step, ... below end */
	unsigned tasks, payload;
	int64_t due_ms;
	atomic_uint *failed;
};

static int key_of(char *buf, size_t cap, const char *tag, unsigned i)
{
	return snprintf(buf, cap, "%s-%08u", tag, i);
}

static void *load_loop(void *arg)
{
	struct loader *l = arg;
	tw_cluster_defer_spec s[BATCH];
	char keys[BATCH][32];
	char payload[TW_CLUSTER_PAYLOAD_MAX];
	memset(payload, 'p', l->payload);
	for (unsigned b = l->first; b < l->end; b += l->step) {
		unsigned first = b * BATCH, m = l->tasks - first < BATCH ? l->tasks - first : BATCH;
		for (unsigned k = 0; k < m; k++) {
			key_of(keys[k], sizeof keys[k], l->tag, first + k);
			s[k] = (tw_cluster_defer_spec){ .kind = "cap",
							.key = keys[k],
							.due_ms = l->due_ms,
							.payload = payload,
							.payload_len = l->payload };
		}
		int rc;
		for (int tries = 0; (rc = tw_cluster_defer_many(l->c, s, m, NULL)) != TW_OK &&
				    rc != -TW_EEXIST && tries < 5;
		     tries++)
			dp_sleep_ms(100);
		if (rc != TW_OK && rc != -TW_EEXIST) {
			fprintf(stderr, "defer_perf: defer_many: %s\n", tw_cluster_strerror(rc));
			atomic_fetch_add(l->failed, 1);
		}
	}
	return NULL;
}

/* Defers tasks "<tag>-%08u", 0 to tasks - 1, through the replicas' handles; the seconds it
 * took, or -1. */
static double load(struct dp_replica *r, unsigned nr, unsigned threads, const char *tag,
		   unsigned tasks, unsigned payload)
{
	struct loader l[256];
	atomic_uint failed = 0;
	unsigned batches = (tasks + BATCH - 1) / BATCH, started = 0;
	int64_t t0 = dp_mono_ns(), due = dp_wall_ns() / 1000000 + 86400 * 1000;
	for (; started < threads; started++) {
		l[started] = (struct loader){ .c = r[started % nr].c,
					      .tag = tag,
					      .first = started,
					      .end = batches,
					      .step = threads,
					      .tasks = tasks,
					      .payload = payload,
					      .due_ms = due,
					      .failed = &failed };
		if (pthread_create(&l[started].thread, NULL, load_loop, &l[started]))
			break;
	}
	for (unsigned k = 0; k < started; k++)
		pthread_join(l[k].thread, NULL);
	if (started < threads || atomic_load(&failed))
		return -1;
	return (double)(dp_mono_ns() - t0) / 1e9;
}

static void etcd_figures(etcd_harness *h, const char *when, int64_t *size, int64_t *in_use)
{
	char name[64];
	*size = *in_use = 0;
	for (int i = 0; i < etcd_harness_count(h); i++) {
		int64_t s, u;
		if (dp_etcd_status(etcd_harness_endpoints(h)[i], &s, &u))
			continue;
		/* The members' files differ a little (compaction and defrag are their own). */
		if (s > *size)
			*size = s, *in_use = u;
		snprintf(name, sizeof name, "etcd_m%d_rss_mib_%s", i, when);
		dp_fig(name, (double)dp_rss_kib(etcd_harness_pid(h, i)) / 1024);
	}
	snprintf(name, sizeof name, "etcd_db_size_mib_%s", when);
	dp_fig(name, (double)*size / 1048576);
	snprintf(name, sizeof name, "etcd_db_in_use_mib_%s", when);
	dp_fig(name, (double)*in_use / 1048576);
}

/* The bytes etcd is given for one task: its key and value as cluster/defer.h lays them out. */
static size_t record_bytes(const char *prefix, unsigned payload, unsigned i)
{
	char key[64], value[128];
	key_of(key, sizeof key, "cap", i);
	int k = snprintf(NULL, 0, "%sdefer/t/%04u/%s", prefix, 0u, key);
	int v = snprintf(value, sizeof value, "tw1 cap %lld 0 5 1000\n",
			 (long long)(dp_wall_ns() / 1000000 + 86400 * 1000));
	return (size_t)k + (size_t)v + payload;
}

/* A task is held as soon as its page is read; defer_loaded and defer_load_ms_last follow
 * when the group's load ends (its claims read too). Waits up to 120 s for r's defer_loaded to
 * reach want; the ms since t0 it took, or -1. */
static int64_t wait_loaded(struct dp_replica *r, uint64_t want, int64_t t0)
{
	for (int64_t end = dp_mono_ns() + 120000000000; dp_mono_ns() < end; dp_sleep_ms(2)) {
		tw_cluster_counters s;
		if (tw_cluster_stats(r->c, &s) == TW_OK && s.defer_loaded >= want)
			return (dp_mono_ns() - t0) / 1000000;
	}
	return -1;
}

static int takeover_group(const struct dp_opts *o, etcd_harness *h)
{
	struct dp_replica a = { 0 }, b = { 0 };
	int rc = -1;
	unsigned n = o->group_tasks;
	if (dp_join(&a, h, "/defer-perf-group/", "a", 1))
		return -1;
	printf("# one group of %u tasks: a holds it, b joins, a leaves\n", n);
	if (load(&a, 1, o->threads, "grp", n, o->payload) < 0 ||
	    dp_wait_pending(&a, 1, n, 120000) < 0)
		goto out;
	if (dp_join(&b, h, "/defer-perf-group/", "b", 1))
		goto out;
	dp_sleep_ms(1000);
	long rss0 = dp_rss_kib(0);
	int64_t t0 = dp_mono_ns();
	dp_leave(&a);
	dp_fig("group_leave_ms", (double)((dp_mono_ns() - t0) / 1000000));
	int64_t waited = dp_wait_pending(&b, 1, n, 300000);
	dp_fig("group_takeover_held_ms", waited < 0 ? -1 : (double)((dp_mono_ns() - t0) / 1000000));
	dp_fig("group_takeover_loaded_ms", (double)wait_loaded(&b, n, t0));
	/* For `perf record -k CLOCK_MONOTONIC` and `perf report --time`: the load's window. */
	if (getenv("DEFER_PERF_LOG"))
		fprintf(stderr, "defer_perf: takeover window %.6f,%.6f (CLOCK_MONOTONIC s)\n",
			(double)t0 / 1e9, (double)dp_mono_ns() / 1e9);
	tw_cluster_counters s;
	tw_cluster_stats(b.c, &s);
	dp_fig("group_defer_loaded", (double)s.defer_loaded);
	dp_fig("group_defer_load_ms_last", (double)s.defer_load_ms_last);
	dp_fig("group_taker_pending", (double)s.defer_pending);
	dp_fig("group_rss_change_mib", (double)(dp_rss_kib(0) - rss0) / 1024);
	rc = waited < 0 ? -1 : 0;
out:
	dp_leave(&b);
	dp_leave(&a);
	return rc;
}

int dp_capacity(const struct dp_opts *o, etcd_harness *h)
{
	unsigned nr = o->replicas, n = o->tasks;
	struct dp_replica r[8] = { { 0 } };
	int rc = -1;
	char name[64];
	for (unsigned k = 0; k < nr; k++) {
		snprintf(name, sizeof name, "r%u", k);
		if (dp_join(&r[k], h, "/defer-perf/", name, CAP_GROUPS))
			goto out;
	}
	dp_sleep_ms(3000);
	int64_t size0, use0, size1, use1;
	etcd_figures(h, "before", &size0, &use0);
	long etcd_rss0 = dp_rss_kib(etcd_harness_pid(h, etcd_harness_count(h) - 1));
	long rss0 = dp_rss_kib(0);
	dp_fig("rss_mib_before", (double)rss0 / 1024);
	printf("# %u tasks, %u-byte payloads, due a day ahead, 60 per call from %u threads\n", n,
	       o->payload, o->threads);
	double took = load(r, nr, o->threads, "cap", n, o->payload);
	if (took < 0)
		goto out;
	dp_fig("load_s", took);
	dp_fig("load_tasks_per_s", (double)(int64_t)(n / took));
	int64_t waited = dp_wait_pending(r, nr, n, 300000);
	dp_fig("held_after_load_ms", (double)waited);
	if (waited < 0)
		goto out;
	dp_sleep_ms(2000); /* etcd's backend commits every 100 ms; its status lags a little */
	etcd_figures(h, "after", &size1, &use1);
	dp_fig("record_bytes", (double)record_bytes("/defer-perf/", o->payload, n - 1));
	dp_fig("etcd_db_size_bytes_per_task", (double)(size1 - size0) / n);
	dp_fig("etcd_db_in_use_bytes_per_task", (double)(use1 - use0) / n);
	long rss1 = dp_rss_kib(0);
	dp_fig("rss_mib_after", (double)rss1 / 1024);
	dp_fig("rss_bytes_per_task_held", (double)(rss1 - rss0) * 1024 / n);
	for (unsigned k = 0; k < nr; k++) {
		tw_cluster_counters s;
		tw_cluster_stats(r[k].c, &s);
		snprintf(name, sizeof name, "r%u_defer_pending", k);
		dp_fig(name, (double)s.defer_pending);
		snprintf(name, sizeof name, "r%u_groups_owned", k);
		dp_fig(name, (double)s.groups_owned);
	}
	/* A member's memory right after the load may hold garbage its runtime has not given
	 * back; started again (its index rebuilt from the database, its log since the last
	 * snapshot replayed) it holds what it keeps for the tasks. */
	int last = etcd_harness_count(h) - 1;
	if (etcd_harness_restart(h, last) == 0 && etcd_harness_wait_healthy(h, last, 60000) == 0) {
		dp_sleep_ms(2000);
		snprintf(name, sizeof name, "etcd_m%d_rss_mib_restarted", last);
		dp_fig(name, (double)dp_rss_kib(etcd_harness_pid(h, last)) / 1024);
		snprintf(name, sizeof name, "etcd_m%d_rss_bytes_per_task_restarted", last);
		dp_fig(name,
		       (double)(dp_rss_kib(etcd_harness_pid(h, last)) - etcd_rss0) * 1024 / n);
	}
	/* 2: the others leave; the first takes every group and loads what it did not hold. */
	tw_cluster_counters before;
	tw_cluster_stats(r[0].c, &before);
	int64_t t0 = dp_mono_ns();
	for (unsigned k = 1; k < nr; k++)
		dp_leave(&r[k]);
	dp_fig("leave_ms", (double)((dp_mono_ns() - t0) / 1000000));
	waited = dp_wait_pending(r, 1, n, 600000);
	dp_fig("one_replica_holds_all_ms",
	       waited < 0 ? -1 : (double)((dp_mono_ns() - t0) / 1000000));
	dp_fig("one_replica_loaded_ms",
	       (double)wait_loaded(&r[0], before.defer_loaded + n - before.defer_pending, t0));
	tw_cluster_counters after;
	tw_cluster_stats(r[0].c, &after);
	dp_fig("one_replica_defer_pending", (double)after.defer_pending);
	dp_fig("one_replica_defer_loaded", (double)(after.defer_loaded - before.defer_loaded));
	dp_fig("one_replica_defer_load_ms_last", (double)after.defer_load_ms_last);
	dp_fig("one_replica_rss_mib", (double)dp_rss_kib(0) / 1024);
	if (waited < 0)
		goto out;
	dp_leave(&r[0]);
	/* 3: one group's takeover. */
	rc = takeover_group(o, h);
out:
	for (unsigned k = 0; k < nr; k++)
		dp_leave(&r[k]);
	return rc;
}
