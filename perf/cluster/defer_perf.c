/*
 * perf/cluster/defer_perf.c - deferred tasks (tw_cluster_defer) measured against a 3-member
 * etcd on 127.0.0.1 (tests/cluster/etcd_harness, data in /dev/shm), replicas in this process.
 * One scenario per run; each prints its figures as "name = value" lines (perf/README.md,
 * "The cluster programs"; figures in perf/results/HISTORY.md, "Deferred tasks"):
 *
 *   defer_perf lateness   tasks deferred >= 2 s ahead beside local one-shots due at the same
 *                         instants in the same engines; tasks due now: defer's return to start
 *   defer_perf rate       defers per second, one per call and 60 per call
 *   defer_perf capacity   etcd bytes per task, a million pending, memory, takeover loads
 *   defer_perf requests   etcd requests per run, the replicas' idle rate taken off
 *
 * Options: --seconds S, --tasks N, --replicas R, --threads T, --group-tasks N, --payload B,
 * --quick (a few seconds each, for a smoke run).
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "defer_perf.h"

int64_t dp_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t dp_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void dp_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void dp_fig(const char *name, double value)
{
	if (value == (double)(int64_t)value)
		printf("%s = %lld\n", name, (long long)value);
	else
		printf("%s = %.2f\n", name, value);
	fflush(stdout);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

void dp_pcts(const char *name, int64_t *v, size_t n)
{
	char key[128];
	snprintf(key, sizeof key, "%s_n", name);
	dp_fig(key, (double)n);
	if (!n)
		return;
	qsort(v, n, sizeof *v, cmp_i64);
	static const struct {
		const char *tag;
		double p;
	} at[] = { { "p50", 50 }, { "p99", 99 }, { "max", 100 } };
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
		snprintf(key, sizeof key, "%s_%s_us", name, at[i].tag);
		size_t k = (size_t)(at[i].p / 100 * (double)(n - 1));
		printf("%s = %.0f\n", key, (double)v[k] / 1000);
	}
	fflush(stdout);
}

static void log_line(int level, const char *message, void *arg)
{
	(void)arg;
	fprintf(stderr, "defer_perf: log %d: %s\n", level, message);
}

int dp_join(struct dp_replica *r, const etcd_harness *h, const char *prefix, const char *member,
	    unsigned groups)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 2;
	snprintf(r->member, sizeof r->member, "%s", member);
	int rc = tw_engine_create(&cfg, &r->e);
	if (rc != TW_OK) {
		fprintf(stderr, "defer_perf: engine: %s\n", tw_strerror(rc));
		r->e = NULL;
		return -1;
	}
	tw_cluster_config cc;
	tw_cluster_config_init(&cc);
	cc.engine = r->e;
	cc.endpoints = etcd_harness_endpoints(h);
	cc.member = r->member;
	cc.prefix = prefix;
	cc.groups = groups;
	/* DEFER_PERF_LOG=1: the cluster's log lines on stderr, to see why a figure is odd. */
	if (getenv("DEFER_PERF_LOG"))
		cc.log = log_line;
	if ((rc = tw_cluster_join(&cc, &r->c)) != TW_OK) {
		fprintf(stderr, "defer_perf: join %s: %s\n", member, tw_cluster_strerror(rc));
		tw_engine_destroy(r->e);
		r->e = NULL;
		r->c = NULL;
		return -1;
	}
	return 0;
}

void dp_leave(struct dp_replica *r)
{
	if (r->c)
		tw_cluster_leave(r->c);
	if (r->e)
		tw_engine_destroy(r->e);
	r->c = NULL;
	r->e = NULL;
}

uint64_t dp_sum(struct dp_replica *r, unsigned n, size_t field)
{
	uint64_t sum = 0;
	for (unsigned i = 0; i < n; i++) {
		tw_cluster_counters s;
		if (!r[i].c || tw_cluster_stats(r[i].c, &s) != TW_OK)
			continue;
		uint64_t v;
		memcpy(&v, (const char *)&s + field, sizeof v);
		sum += v;
	}
	return sum;
}

int64_t dp_wait_pending(struct dp_replica *r, unsigned n, uint64_t want, unsigned timeout_ms)
{
	int64_t t0 = dp_mono_ns(), end = t0 + (int64_t)timeout_ms * 1000000;
	while (DP_SUM(r, n, defer_pending) != want) {
		if (dp_mono_ns() > end)
			return -1;
		dp_sleep_ms(2);
	}
	return (dp_mono_ns() - t0) / 1000000;
}

long dp_rss_kib(pid_t pid)
{
	char path[64], line[256];
	if (pid)
		snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	else
		snprintf(path, sizeof path, "/proc/self/status");
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	long kib = -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = strtol(line + 6, NULL, 10);
	if (fclose(f))
		return -1;
	return kib;
}

struct body {
	char buf[4096];
	size_t len;
};

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t len = size * n;
	if (len > sizeof b->buf - 1 - b->len)
		return 0;
	memcpy(b->buf + b->len, data, len);
	b->len += len;
	b->buf[b->len] = 0;
	return len;
}

/* int64 fields of etcd's JSON come as strings; proto3 leaves zeros out. */
static int64_t json_i64(json_t *o, const char *name)
{
	json_t *v = json_object_get(o, name);
	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

int dp_etcd_status(const char *endpoint, int64_t *db_size, int64_t *db_in_use)
{
	char url[256];
	snprintf(url, sizeof url, "%s/v3/maintenance/status", endpoint);
	CURL *curl = curl_easy_init();
	if (!curl)
		return -1;
	struct body b = { .len = 0 };
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "{}");
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
	CURLcode cr = curl_easy_perform(curl);
	curl_easy_cleanup(curl);
	if (cr != CURLE_OK) {
		fprintf(stderr, "defer_perf: %s: %s\n", url, curl_easy_strerror(cr));
		return -1;
	}
	json_t *o = json_loads(b.buf, 0, NULL);
	if (!json_is_object(o)) {
		fprintf(stderr, "defer_perf: %s: not JSON: %.200s\n", url, b.buf);
		json_decref(o);
		return -1;
	}
	*db_size = json_i64(o, "dbSize");
	*db_in_use = json_i64(o, "dbSizeInUse");
	json_decref(o);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: defer_perf lateness|rate|capacity|requests [--seconds S] "
			"[--tasks N] [--replicas R] [--threads T] [--group-tasks N] "
			"[--payload B] [--quick]\n");
	return 2;
}

/* The machine is shared: its load beside the figures says how quiet the run was. */
static void print_load(const char *when)
{
	char buf[128] = "";
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (!fgets(buf, sizeof buf, f))
			buf[0] = 0;
		if (fclose(f))
			buf[0] = 0;
	}
	buf[strcspn(buf, "\n")] = 0;
	printf("# loadavg %s: %s\n", when, buf);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	const char *scenario = argv[1];
	bool quick = false;
	for (int i = 2; i < argc; i++)
		quick |= !strcmp(argv[i], "--quick");
	/* Defaults per scenario; --quick scales them to a few seconds. */
	struct dp_opts o = { .seconds = 20,
			     .tasks = 2000,
			     .replicas = 3,
			     .threads = 8,
			     .group_tasks = 100000,
			     .payload = 32,
			     .quick = quick };
	if (!strcmp(scenario, "capacity"))
		o.tasks = quick ? 6000 : 1000000;
	else if (!strcmp(scenario, "requests"))
		o.tasks = quick ? 200 : 2000;
	if (quick) {
		o.seconds = 3;
		o.group_tasks = 3000;
		if (!strcmp(scenario, "lateness"))
			o.tasks = 150;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			continue;
		if (i + 1 >= argc)
			return usage();
		char *end;
		unsigned long v = strtoul(argv[i + 1], &end, 10);
		if (*end || !v || v > 100000000)
			return usage();
		const char *k = argv[i++];
		if (!strcmp(k, "--seconds"))
			o.seconds = (unsigned)v;
		else if (!strcmp(k, "--tasks"))
			o.tasks = (unsigned)v;
		else if (!strcmp(k, "--replicas") && v >= 2 && v <= 8)
			o.replicas = (unsigned)v;
		else if (!strcmp(k, "--threads") && v <= 256)
			o.threads = (unsigned)v;
		else if (!strcmp(k, "--group-tasks"))
			o.group_tasks = (unsigned)v;
		else if (!strcmp(k, "--payload") && v <= TW_CLUSTER_PAYLOAD_MAX)
			o.payload = (unsigned)v;
		else
			return usage();
	}
	int (*run)(const struct dp_opts *, etcd_harness *) =
		!strcmp(scenario, "lateness") ? dp_lateness :
		!strcmp(scenario, "rate")     ? dp_rate :
		!strcmp(scenario, "capacity") ? dp_capacity :
		!strcmp(scenario, "requests") ? dp_requests :
						NULL;
	if (!run)
		return usage();
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		fprintf(stderr, "defer_perf: curl_global_init failed\n");
		return 1;
	}
	etcd_harness *h = etcd_harness_start(3);
	if (!h) {
		fprintf(stderr, "defer_perf: etcd did not start\n");
		return 1;
	}
	printf("defer_perf %s: %u replicas, 3-member etcd on 127.0.0.1 (%s)\n", scenario,
	       o.replicas, etcd_harness_dir(h));
	print_load("at start");
	int rc = run(&o, h);
	print_load("at end");
	etcd_harness_stop(h);
	curl_global_cleanup();
	return rc ? 1 : 0;
}
