/*
 * examples/cluster_job.c - one job defined on every replica, run once per fire time across
 * them: a report every second, written to a store that only takes writes carrying the
 * newest fencing token it has seen.
 *
 *   cluster_job ENDPOINTS MEMBER [SECONDS]
 *   cluster_job http://127.0.0.1:2379,http://127.0.0.1:22379 gw-1 30
 *
 * Start it on several machines (or in several terminals) with different member names: each
 * second, exactly one of them prints "ran". Kill the one that runs (kill -9): another takes
 * over within the lease's TTL (5 s here). Stop one with SIGSTOP past its TTL and let it go on
 * (SIGCONT): it fenced itself, and a write it still tries is refused by the store's check.
 */
#define _POSIX_C_SOURCE 200809L /* strdup, strtok_r with -std=c11 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tickwheel_cluster.h"

/*
 * The fenced resource. In production this check lives in the system written to: a database
 * row's "WHERE token <= $1", a storage API's conditional write. The point is that the check is
 * made by the resource, atomically with the write, not by the writer beforehand.
 */
struct fenced_store {
	pthread_mutex_t lock;
	uint64_t highest_token;
	unsigned writes, refused;
};

static bool store_write(struct fenced_store *s, uint64_t token, const char *what)
{
	pthread_mutex_lock(&s->lock);
	bool ok = token >= s->highest_token;
	if (ok) {
		s->highest_token = token;
		s->writes++;
		printf("store: %s (token %" PRIu64 ")\n", what, token);
	} else {
		s->refused++;
		printf("store: refused %s: token %" PRIu64 " is below %" PRIu64 "\n", what, token,
		       s->highest_token);
	}
	pthread_mutex_unlock(&s->lock);
	return ok;
}

static int report(const tw_cluster_fire *fire, void *arg)
{
	struct fenced_store *store = arg;
	char what[96];
	snprintf(what, sizeof what, "%s for %" PRId64 ".%03d", fire->job, fire->fire_time_ms / 1000,
		 (int)(fire->fire_time_ms % 1000));
	printf("ran %s, %" PRIu64 " missed before it\n", what, fire->missed);
	return store_write(store, fire->token, what) ? 0 : 1;
}

static void log_line(int level, const char *message, void *arg)
{
	(void)level;
	(void)arg;
	fprintf(stderr, "%s\n", message);
}

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: %s ENDPOINTS MEMBER [SECONDS]\n", argv[0]);
		return 2;
	}
	/* ENDPOINTS: comma-separated URLs. */
	const char *endpoints[TW_CLUSTER_ENDPOINTS_MAX + 1] = { 0 };
	char *list = strdup(argv[1]), *save = NULL;
	int n = 0;
	for (char *url = strtok_r(list, ",", &save); url && n < TW_CLUSTER_ENDPOINTS_MAX;
	     url = strtok_r(NULL, ",", &save))
		endpoints[n++] = url;
	int seconds = argc == 4 ? atoi(argv[3]) : 0;

	tw_engine *engine;
	int rc = tw_engine_create(NULL, &engine);
	if (rc != TW_OK) {
		fprintf(stderr, "engine: %s\n", tw_strerror(rc));
		return 1;
	}
	tw_cluster_config cfg;
	tw_cluster_config_init(&cfg);
	cfg.engine = engine;
	cfg.endpoints = endpoints;
	cfg.member = argv[2];
	cfg.prefix = "/examples/cluster_job/";
	cfg.lease_ttl_s = 5;
	cfg.log = log_line;
	/* Member only once the job is defined: a group taken before would miss its fire times
	 * until then (a restart's groups come back from the others at the attach). */
	cfg.attach_later = true;
	tw_cluster *cluster;
	if ((rc = tw_cluster_join(&cfg, &cluster)) != TW_OK) {
		fprintf(stderr, "join: %s\n", tw_cluster_strerror(rc));
		tw_engine_destroy(engine);
		free(list);
		return 1;
	}
	static struct fenced_store store = { .lock = PTHREAD_MUTEX_INITIALIZER };
	tw_cluster_job_spec job = { .name = "report",
				    .period_ms = 1000,
				    .callback = report,
				    .arg = &store,
				    .misfire = TW_MISFIRE_RUN_ONCE };
	if ((rc = tw_cluster_add(cluster, &job)) != TW_OK)
		fprintf(stderr, "add: %s\n", tw_cluster_strerror(rc));
	if ((rc = tw_cluster_attach(cluster)) != TW_OK) {
		fprintf(stderr, "attach: %s\n", tw_cluster_strerror(rc));
		tw_cluster_leave(cluster);
		tw_engine_destroy(engine);
		free(list);
		return 1;
	}

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (int s = 0; !stop && (seconds == 0 || s < seconds); s++)
		sleep(1);

	tw_cluster_counters counts;
	tw_cluster_stats(cluster, &counts);
	printf("%s: %" PRIu64 " runs, %" PRIu64 " claims, %" PRIu64 " takeovers, %" PRIu64
	       " self-fences; store: %u writes, %u refused\n",
	       argv[2], counts.runs, counts.claims, counts.takeovers, counts.self_fences,
	       store.writes, store.refused);
	tw_cluster_leave(cluster);
	tw_engine_destroy(engine);
	free(list);
	return rc == TW_OK ? 0 : 1;
}
