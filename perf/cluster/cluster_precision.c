/*
 * perf/cluster/cluster_precision.c - how late cluster jobs start beside the same jobs run as
 * local tasks, in one run against a 3-member etcd on 127.0.0.1 (tests/cluster/etcd_harness):
 * R replicas in this process, each with an engine of its own that runs both the cluster jobs
 * and a local twin of each (same period, same fire times on the wall clock's grid). Prints
 * lateness percentiles (start minus due, on the replica's monotonic clock) of both, the claim
 * latency, and etcd requests per cluster run.
 *
 *   cluster_precision [--seconds S] [--jobs J] [--replicas R]    (defaults 20, 20, 3)
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd_harness.h"
#include "tickwheel_cluster.h"

#define MAX_SAMPLES  1000000
#define MAX_REPLICAS 8

struct samples {
	pthread_mutex_t lock;
	int64_t *ns;
	size_t n;
};

static struct samples cluster_late = { PTHREAD_MUTEX_INITIALIZER, NULL, 0 },
		      local_late = { PTHREAD_MUTEX_INITIALIZER, NULL, 0 };

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void keep(struct samples *s, int64_t v)
{
	pthread_mutex_lock(&s->lock);
	if (s->n < MAX_SAMPLES)
		s->ns[s->n++] = v;
	pthread_mutex_unlock(&s->lock);
}

static int on_cluster(const tw_cluster_fire *f, void *arg)
{
	(void)arg;
	keep(&cluster_late, f->start_lateness_ns);
	return 0;
}

static int on_local(const tw_fire *f, void *arg)
{
	(void)arg;
	keep(&local_late, mono_ns() - (int64_t)f->due_ns);
	return 0;
}

static int cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct(struct samples *s, double p)
{
	if (!s->n)
		return 0;
	size_t i = (size_t)(p / 100 * (double)(s->n - 1));
	return (double)s->ns[i] / 1000;
}

static const uint64_t periods[] = { 100, 150, 200, 250, 300, 400, 500, 600, 750, 1000 };

int main(int argc, char **argv)
{
	unsigned seconds = 20, jobs = 20, replicas = 3;
	for (int i = 1; i + 1 < argc; i += 2) {
		unsigned v = (unsigned)atoi(argv[i + 1]);
		if (!strcmp(argv[i], "--seconds") && v > 0)
			seconds = v;
		else if (!strcmp(argv[i], "--jobs") && v > 0 && v <= 1000)
			jobs = v;
		else if (!strcmp(argv[i], "--replicas") && v > 0 && v <= MAX_REPLICAS)
			replicas = v;
		else {
			fprintf(stderr, "usage: cluster_precision [--seconds S] [--jobs J] "
					"[--replicas R]\n");
			return 2;
		}
	}
	if (argc % 2 == 0) {
		fprintf(stderr,
			"usage: cluster_precision [--seconds S] [--jobs J] [--replicas R]\n");
		return 2;
	}
	cluster_late.ns = malloc(MAX_SAMPLES * sizeof(int64_t));
	local_late.ns = malloc(MAX_SAMPLES * sizeof(int64_t));
	etcd_harness *h = etcd_harness_start(3);
	if (!h || !cluster_late.ns || !local_late.ns) {
		fprintf(stderr, "cluster_precision: etcd did not start\n");
		return 1;
	}
	tw_engine *e[MAX_REPLICAS];
	tw_cluster *c[MAX_REPLICAS];
	for (unsigned r = 0; r < replicas; r++) {
		tw_config cfg;
		tw_config_init(&cfg);
		cfg.executors = 2;
		char member[16];
		snprintf(member, sizeof member, "r%u", r);
		tw_cluster_config cc;
		tw_cluster_config_init(&cc);
		cc.endpoints = etcd_harness_endpoints(h);
		cc.member = member;
		cc.prefix = "/precision/";
		cc.groups = 16;
		int rc = tw_engine_create(&cfg, &e[r]);
		cc.engine = e[r];
		if (rc != TW_OK || (rc = tw_cluster_join(&cc, &c[r])) != TW_OK) {
			fprintf(stderr, "cluster_precision: %s\n", tw_cluster_strerror(rc));
			return 1;
		}
		for (unsigned j = 0; j < jobs; j++) {
			char name[32];
			uint64_t p = periods[j % 10];
			snprintf(name, sizeof name, "job%03u", j);
			tw_cluster_job_spec s = { .name = name,
						  .period_ms = p,
						  .callback = on_cluster };
			if ((rc = tw_cluster_add(c[r], &s)) != TW_OK) {
				fprintf(stderr, "cluster_precision: add: %s\n",
					tw_cluster_strerror(rc));
				return 1;
			}
			/* The twin: due at the same wall-clock grid, on the monotonic clock. */
			int64_t wall = wall_ns(), mono = mono_ns();
			int64_t next = (wall / 1000000 / (int64_t)p + 1) * (int64_t)p * 1000000;
			tw_task_spec t = { .period_ms = p,
					   .callback = on_local,
					   .first_due_ns = (uint64_t)(mono + next - wall) };
			tw_id id;
			if (tw_add(e[r], &t, &id) != TW_OK)
				return 1;
		}
	}
	/* Membership and groups settle first: runs during the joins are not measured. */
	struct timespec settle = { 3, 0 }, run = { seconds, 0 };
	nanosleep(&settle, NULL);
	pthread_mutex_lock(&cluster_late.lock);
	pthread_mutex_lock(&local_late.lock);
	cluster_late.n = local_late.n = 0;
	pthread_mutex_unlock(&local_late.lock);
	pthread_mutex_unlock(&cluster_late.lock);
	tw_cluster_counters before[MAX_REPLICAS];
	for (unsigned r = 0; r < replicas; r++)
		tw_cluster_stats(c[r], &before[r]);
	nanosleep(&run, NULL);
	uint64_t runs = 0, requests = 0, claims = 0, ahead = 0, claim_requests = 0, lat_sum = 0;
	uint64_t buckets[20] = { 0 };
	for (unsigned r = 0; r < replicas; r++) {
		tw_cluster_counters s;
		tw_cluster_stats(c[r], &s);
		runs += s.runs - before[r].runs;
		requests += s.etcd_requests - before[r].etcd_requests;
		claims += s.claims - before[r].claims;
		ahead += s.claims_ahead - before[r].claims_ahead;
		claim_requests += s.claim_requests - before[r].claim_requests;
		lat_sum += s.claim_latency_sum_ns - before[r].claim_latency_sum_ns;
		for (int b = 0; b < 20; b++)
			buckets[b] += s.claim_latency_us[b] - before[r].claim_latency_us[b];
	}
	for (unsigned r = 0; r < replicas; r++) {
		tw_cluster_leave(c[r]);
		tw_engine_destroy(e[r]);
	}
	etcd_harness_stop(h);
	qsort(cluster_late.ns, cluster_late.n, sizeof(int64_t), cmp);
	qsort(local_late.ns, local_late.n, sizeof(int64_t), cmp);
	printf("cluster_precision: %u replicas, %u jobs, %u s, 3-member etcd on 127.0.0.1\n",
	       replicas, jobs, seconds);
	printf("lateness (us)      runs      p50      p90      p99     max\n");
	printf("cluster jobs  %9zu %8.0f %8.0f %8.0f %7.0f\n", cluster_late.n,
	       pct(&cluster_late, 50), pct(&cluster_late, 90), pct(&cluster_late, 99),
	       pct(&cluster_late, 100));
	printf("local twins   %9zu %8.0f %8.0f %8.0f %7.0f\n", local_late.n, pct(&local_late, 50),
	       pct(&local_late, 90), pct(&local_late, 99), pct(&local_late, 100));
	printf("p99 cluster - local: %.0f us (goal: at most 1000)\n",
	       pct(&cluster_late, 99) - pct(&local_late, 99));
	uint64_t cum = 0, p50 = 0, p99 = 0;
	for (int b = 0; b < 20; b++) {
		cum += buckets[b];
		if (!p50 && cum * 2 >= claim_requests)
			p50 = 1u << b;
		if (!p99 && cum * 100 >= claim_requests * 99)
			p99 = 1u << b;
	}
	printf("claims: %" PRIu64 " fire times in %" PRIu64 " transactions, %.1f%% ahead of "
	       "their due; latency mean %.0f us, p50 < %" PRIu64 " us, p99 < %" PRIu64 " us\n",
	       claims, claim_requests, claims ? 100.0 * (double)ahead / (double)claims : 0,
	       claim_requests ? (double)lat_sum / (double)claim_requests / 1000 : 0, p50, p99);
	printf("etcd requests per cluster run: %.2f (%" PRIu64 " requests, %" PRIu64
	       " runs; membership rounds and lease renewals included)\n",
	       runs ? (double)requests / (double)runs : 0, requests, runs);
	free(cluster_late.ns);
	free(local_late.ns);
	return 0;
}
