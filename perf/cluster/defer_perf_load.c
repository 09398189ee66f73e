/*
 * perf/cluster/defer_perf_load.c - `defer_perf rate` and `defer_perf requests`.
 *
 * rate: for --seconds each, 1 and then --threads producer threads (spread over the replicas'
 * handles) call tw_cluster_defer, then tw_cluster_defer_many with 60 tasks, as fast as etcd
 * answers; every task is due an hour ahead, so the owners load them (the watch) and run none.
 * Prints tasks and calls per second and the call's latency.
 *
 * requests: the replicas' etcd requests per second idle (membership, leases) over --seconds,
 * then --tasks tasks deferred (60 per call) with dues spread over --seconds, starting once
 * they are surely held; from the moment the owners hold them all, the requests until the last
 * is run and deleted, minus the idle rate over the same span, per run; and the claim
 * transactions per run; and what etcd's database grew by per run (the history, uncompacted).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defer_perf.h"

#define RATE_GROUPS 64
#define BATCH       TW_CLUSTER_DEFER_BATCH_MAX
#define MAX_CALLS   4000000

struct rater {
	pthread_t thread;
	tw_cluster *c;
	unsigned id, threads, batch;
	int first_error;
	int64_t end_ns;
	uint64_t tasks, calls, failed;
	int64_t *lat; /* call latencies, at most cap of them */
	size_t nlat, cap;
};

static void *rate_loop(void *arg)
{
	struct rater *t = arg;
	tw_cluster_defer_spec s[BATCH];
	char keys[BATCH][40];
	static const char payload[32] = "0123456789abcdef0123456789abcdef";
	while (dp_mono_ns() < t->end_ns) {
		int64_t due = dp_wall_ns() / 1000000 + 3600 * 1000;
		for (unsigned b = 0; b < t->batch; b++) {
			snprintf(keys[b], sizeof keys[b], "rate-%u-%u-%u-%llu-%u", t->batch,
				 t->threads, t->id, (unsigned long long)t->calls, b);
			s[b] = (tw_cluster_defer_spec){ .kind = "rate",
							.key = keys[b],
							.due_ms = due,
							.payload = payload,
							.payload_len = sizeof payload };
		}
		int64_t t0 = dp_mono_ns();
		int rc = t->batch == 1 ? tw_cluster_defer(t->c, s) :
					 tw_cluster_defer_many(t->c, s, t->batch, NULL);
		int64_t took = dp_mono_ns() - t0;
		t->calls++;
		if (rc != TW_OK) {
			if (!t->failed++)
				t->first_error = rc;
			continue;
		}
		t->tasks += t->batch;
		if (t->nlat < t->cap)
			t->lat[t->nlat++] = took;
	}
	return NULL;
}

/* One round: threads threads deferring batch tasks per call for seconds. */
static int rate_round(struct dp_replica *r, unsigned nr, unsigned threads, unsigned batch,
		      unsigned seconds)
{
	struct rater *t = calloc(threads, sizeof *t);
	size_t cap = MAX_CALLS / threads;
	int64_t *lat = malloc(sizeof(int64_t) * cap * threads);
	if (!t || !lat) {
		free(t), free(lat);
		return -1;
	}
	int64_t end = dp_mono_ns() + (int64_t)seconds * 1000000000, t0 = dp_mono_ns();
	unsigned started = 0;
	for (; started < threads; started++) {
		t[started] = (struct rater){ .c = r[started % nr].c,
					     .id = started,
					     .threads = threads,
					     .batch = batch,
					     .end_ns = end,
					     .lat = lat + cap * started,
					     .cap = cap };
		if (pthread_create(&t[started].thread, NULL, rate_loop, &t[started]))
			break;
	}
	uint64_t tasks = 0, calls = 0, failed = 0;
	size_t n = 0;
	for (unsigned k = 0; k < started; k++) {
		pthread_join(t[k].thread, NULL);
		tasks += t[k].tasks, calls += t[k].calls, failed += t[k].failed;
		if (t[k].failed)
			fprintf(stderr, "defer_perf: thread %u: %llu calls failed, the first: %s\n",
				k, (unsigned long long)t[k].failed,
				tw_cluster_strerror(t[k].first_error));
		memmove(lat + n, t[k].lat, sizeof(int64_t) * t[k].nlat);
		n += t[k].nlat;
	}
	double took = (double)(dp_mono_ns() - t0) / 1e9;
	char name[96];
	snprintf(name, sizeof name, "%s_t%u_tasks_per_s", batch == 1 ? "single" : "batch60",
		 threads);
	dp_fig(name, (double)(int64_t)((double)tasks / took));
	snprintf(name, sizeof name, "%s_t%u_calls_per_s", batch == 1 ? "single" : "batch60",
		 threads);
	dp_fig(name, (double)(int64_t)((double)calls / took));
	snprintf(name, sizeof name, "%s_t%u_failed_calls", batch == 1 ? "single" : "batch60",
		 threads);
	dp_fig(name, (double)failed);
	snprintf(name, sizeof name, "%s_t%u_call", batch == 1 ? "single" : "batch60", threads);
	dp_pcts(name, lat, n);
	free(t), free(lat);
	return started == threads ? 0 : -1;
}

int dp_rate(const struct dp_opts *o, etcd_harness *h)
{
	unsigned nr = o->replicas;
	struct dp_replica r[8] = { { 0 } };
	int rc = -1;
	for (unsigned k = 0; k < nr; k++) {
		char member[16];
		snprintf(member, sizeof member, "r%u", k);
		if (dp_join(&r[k], h, "/defer-perf/", member, RATE_GROUPS))
			goto out;
	}
	dp_sleep_ms(3000);
	printf("# %u s per round, tasks due an hour ahead, 32-byte payload\n", o->seconds);
	rc = 0;
	unsigned counts[2] = { 1, o->threads };
	for (unsigned i = 0; i < (o->threads > 1 ? 2u : 1u); i++) {
		rc |= rate_round(r, nr, counts[i], 1, o->seconds);
		rc |= rate_round(r, nr, counts[i], BATCH, o->seconds);
	}
	dp_fig("defers_counted", (double)DP_SUM(r, nr, defers));
	dp_fig("pending_held", (double)DP_SUM(r, nr, defer_pending));
out:
	for (unsigned k = 0; k < nr; k++)
		dp_leave(&r[k]);
	return rc;
}

static atomic_uint req_runs;

static int on_req(const tw_cluster_task *t, void *arg)
{
	(void)t, (void)arg;
	atomic_fetch_add(&req_runs, 1);
	return 0;
}

struct req_snap {
	uint64_t requests, claims, runs;
	int64_t at_ns;
};

static void snap(struct dp_replica *r, unsigned nr, struct req_snap *s)
{
	s->requests = DP_SUM(r, nr, etcd_requests);
	s->claims = DP_SUM(r, nr, defer_claim_requests);
	s->runs = DP_SUM(r, nr, defer_runs);
	s->at_ns = dp_mono_ns();
}

int dp_requests(const struct dp_opts *o, etcd_harness *h)
{
	unsigned nr = o->replicas, n = o->tasks;
	struct dp_replica r[8] = { { 0 } };
	int rc = -1;
	for (unsigned k = 0; k < nr; k++) {
		char member[16];
		snprintf(member, sizeof member, "r%u", k);
		if (dp_join(&r[k], h, "/defer-perf/", member, RATE_GROUPS) ||
		    tw_cluster_handle(r[k].c, "req", on_req, NULL) != TW_OK)
			goto out;
	}
	dp_sleep_ms(3000);
	struct req_snap a, b, c;
	snap(r, nr, &a);
	dp_sleep_ms(o->seconds * 1000);
	snap(r, nr, &b);
	double idle_per_s = (double)(b.requests - a.requests) * 1e9 / (double)(b.at_ns - a.at_ns);
	dp_fig("idle_requests_per_s", idle_per_s);
	/* etcd keeps every revision until it is compacted: what a task's history leaves. */
	int64_t size0 = 0, use0 = 0, size1 = 0, use1 = 0;
	const char *ep = etcd_harness_endpoints(h)[0];
	if (dp_etcd_status(ep, &size0, &use0))
		goto out;
	/* Dues spread evenly over --seconds, from when the defers (batched: a few thousand a
	 * second) are surely done and held, before the first claim (claim_ahead_ms ahead). */
	int64_t base = dp_wall_ns() / 1000000 + 3000 + n / 2;
	tw_cluster_defer_spec s[BATCH];
	char keys[BATCH][32];
	for (unsigned i = 0; i < n; i += BATCH) {
		unsigned m = n - i < BATCH ? n - i : BATCH;
		for (unsigned k = 0; k < m; k++) {
			snprintf(keys[k], sizeof keys[k], "req-%07u", i + k);
			s[k] = (tw_cluster_defer_spec){
				.kind = "req",
				.key = keys[k],
				.due_ms = base + (int64_t)o->seconds * 1000 * (i + k) / n
			};
		}
		/* A timed-out batch may have been stored: its retry then finds the keys taken. */
		int drc = tw_cluster_defer_many(r[i / BATCH % nr].c, s, m, NULL);
		for (int tries = 0; drc == -TW_CLUSTER_EUNAVAILABLE && tries < 5; tries++)
			if ((drc = tw_cluster_defer_many(r[i / BATCH % nr].c, s, m, NULL)) ==
			    -TW_EEXIST)
				drc = TW_OK;
		if (drc != TW_OK) {
			fprintf(stderr, "defer_perf: defer_many: %s\n", tw_cluster_strerror(drc));
			goto out;
		}
	}
	int64_t before_claims = base - 1500 - dp_wall_ns() / 1000000;
	if (before_claims < 0 || dp_wait_pending(r, nr, n, (unsigned)before_claims) < 0) {
		fprintf(stderr, "defer_perf: the owners did not hold the %u tasks in time\n", n);
		goto out;
	}
	snap(r, nr, &b);
	int64_t end = dp_mono_ns() + ((int64_t)o->seconds + 20) * 1000000000;
	while ((atomic_load(&req_runs) < n || DP_SUM(r, nr, defer_pending)) && dp_mono_ns() < end)
		dp_sleep_ms(10);
	/* The last deletes are batched on the defer thread: let them go out. */
	dp_sleep_ms(300);
	snap(r, nr, &c);
	double span_s = (double)(c.at_ns - b.at_ns) / 1e9;
	uint64_t runs = c.runs - b.runs;
	double extra = (double)(c.requests - b.requests) - idle_per_s * span_s;
	printf("# %u tasks due over %u s (%.0f a second)\n", n, o->seconds, (double)n / o->seconds);
	dp_fig("runs", (double)runs);
	dp_fig("span_s", span_s);
	dp_fig("requests_in_span", (double)(c.requests - b.requests));
	dp_fig("requests_per_run", runs ? extra / (double)runs : 0);
	dp_fig("claim_requests_per_run", runs ? (double)(c.claims - b.claims) / (double)runs : 0);
	dp_fig("pending_left", (double)DP_SUM(r, nr, defer_pending));
	if (dp_etcd_status(ep, &size1, &use1) == 0 && runs) {
		dp_fig("etcd_db_in_use_growth_bytes_per_run", (double)(use1 - use0) / (double)runs);
		dp_fig("etcd_db_size_growth_bytes_per_run", (double)(size1 - size0) / (double)runs);
	}
	rc = runs == n ? 0 : -1;
out:
	for (unsigned k = 0; k < nr; k++)
		dp_leave(&r[k]);
	return rc;
}
