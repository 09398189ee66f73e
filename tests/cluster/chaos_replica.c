/*
 * tests/cluster/chaos_replica.c - one replica of the chaos test (chaos.c): joins, defines the
 * test's jobs, and for each run appends "job fire_ms token member start_ms" to its log, then
 * writes to the fenced resource (a datagram to the driver) at the end of the run, as a real
 * job's side effect would. It also defers, cancels, moves and runs deferred tasks, logged to
 * LOG.defer (chaos_defer.h). SIGTERM: stops deferring, leaves and writes its counters to
 * LOG.stats.
 *
 * Even replicas register their handlers right after the join, odd ones after their jobs and a
 * pause: tasks that come to an odd one first wait for their handler there.
 *
 *   chaos_replica ENDPOINTS MEMBER PREFIX RESOURCE_SOCKET LOG
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "chaos_defer.h"
#include "chaos_jobs.h"
#include "tickwheel_cluster.h"

static int log_fd, resource_fd;
static struct sockaddr_un resource;
static const char *member;

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int run(const tw_cluster_fire *f, void *arg)
{
	char line[160];
	int n = snprintf(line, sizeof line,
			 "%s %" PRId64 " %" PRIu64 " %s %" PRId64 " %" PRIu64 "\n", f->job,
			 f->fire_time_ms, f->token, member, wall_ms(), f->missed);
	if (write(log_fd, line, (size_t)n) != n)
		_exit(10);
	/* The run's work, during which a SIGSTOP can land; then its side effect. The first
	 * jobs work long enough for a pause to catch one in the middle often. */
	struct timespec work = { 0, (long)(arg ? 40000000 : 2000000) };
	nanosleep(&work, NULL);
	if (sendto(resource_fd, line, (size_t)n, 0, (struct sockaddr *)&resource,
		   sizeof resource) != n)
		_exit(11);
	return 0;
}

static volatile sig_atomic_t stop;
static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr,
			"usage: chaos_replica ENDPOINTS MEMBER PREFIX RESOURCE_SOCKET LOG\n");
		return 2;
	}
	member = argv[2];
	log_fd = open(argv[5], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	resource_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (log_fd < 0 || resource_fd < 0 || chaos_defer_open(argv[5]) != 0)
		return 3;
	int replica = atoi(member + 1);
	resource.sun_family = AF_UNIX;
	if (strlen(argv[4]) >= sizeof resource.sun_path)
		return 2;
	memcpy(resource.sun_path, argv[4], strlen(argv[4]) + 1);
	const char *endpoints[TW_CLUSTER_ENDPOINTS_MAX + 1] = { 0 };
	char *save = NULL;
	int n = 0;
	for (char *u = strtok_r(argv[1], ",", &save); u && n < TW_CLUSTER_ENDPOINTS_MAX;
	     u = strtok_r(NULL, ",", &save))
		endpoints[n++] = u;
	struct sigaction sa = { .sa_handler = on_term };
	sigaction(SIGTERM, &sa, NULL);

	tw_config ecfg;
	tw_config_init(&ecfg);
	ecfg.executors = 2;
	tw_engine *e;
	if (tw_engine_create(&ecfg, &e) != TW_OK)
		return 4;
	tw_cluster_config cfg;
	tw_cluster_config_init(&cfg);
	cfg.engine = e;
	cfg.endpoints = endpoints;
	cfg.member = member;
	cfg.prefix = argv[3];
	cfg.groups = CHAOS_GROUPS;
	cfg.lease_ttl_s = CHAOS_TTL_S;
	cfg.claim_ahead_ms = CHAOS_CLAIM_AHEAD_MS;
	cfg.request_timeout_ms = 1000;
	cfg.log = chaos_defer_library_log;
	tw_cluster *c;
	int rc;
	/* etcd may be between leaders when a replica restarts: retry for a while. */
	for (int tries = 0; (rc = tw_cluster_join(&cfg, &c)) != TW_OK && tries < 20 && !stop;
	     tries++)
		sleep(1);
	if (rc != TW_OK) {
		fprintf(stderr, "%s: join: %s\n", member, tw_cluster_strerror(rc));
		return 5;
	}
	if (replica % 2 == 0 && chaos_defer_handle(c) != 0)
		return 7;
	for (int i = 0; i < CHAOS_JOBS; i++) {
		char name[32];
		tw_cluster_job_spec s = { .name = name,
					  .callback = run,
					  .arg = (void *)(intptr_t)(i < 3),
					  .misfire =
						  i % 2 ? TW_MISFIRE_SKIP : TW_MISFIRE_RUN_ONCE };
		chaos_job(i, name, sizeof name, &s.period_ms, &s.cron);
		/* As the join: etcd may be between leaders, or a member paused. */
		for (int tries = 0; (rc = tw_cluster_add(c, &s)) != TW_OK && tries < 20 && !stop &&
				    (rc == -TW_CLUSTER_EUNAVAILABLE || rc == -TW_CLUSTER_EETCD);
		     tries++)
			sleep(1);
		if (rc != TW_OK) {
			fprintf(stderr, "%s: add %s: %s\n", member, name, tw_cluster_strerror(rc));
			return 6;
		}
	}
	/* The checker's windows: a restarted replica that took groups before it defined the
	 * jobs missed their fire times until now. */
	chaos_defer_library_log(TW_LOG_INFO, "chaos: jobs added", NULL);
	if (replica % 2 == 1) {
		struct timespec wait = { 0, 300000000 };
		nanosleep(&wait, NULL);
		if (chaos_defer_handle(c) != 0)
			return 7;
	}
	if (chaos_defer_start(c, replica) != 0)
		return 8;
	while (!stop)
		pause();
	/* The times a graceful restart spends here, for reading beside the driver's windows. */
	chaos_defer_library_log(TW_LOG_INFO, "chaos: SIGTERM", NULL);
	chaos_defer_stop();
	chaos_defer_library_log(TW_LOG_INFO, "chaos: producers stopped", NULL);
	tw_cluster_counters s;
	tw_cluster_stats(c, &s);
	tw_cluster_leave(c);
	chaos_defer_library_log(TW_LOG_INFO, "chaos: left", NULL);
	tw_engine_destroy(e);
	char path[600];
	snprintf(path, sizeof path, "%s.stats", argv[5]);
	FILE *f = fopen(path, "a");
	if (f) {
		fprintf(f,
			"runs %" PRIu64 " claims %" PRIu64 " ahead %" PRIu64 " lost %" PRIu64
			" missed %" PRIu64 " takeovers %" PRIu64 " fences %" PRIu64
			" requests %" PRIu64 "\n",
			s.runs, s.claims, s.claims_ahead, s.claims_lost, s.missed, s.takeovers,
			s.self_fences, s.etcd_requests);
		uint64_t made, cancels, moves;
		chaos_defer_totals(&made, &cancels, &moves);
		fprintf(f,
			"deferred %" PRIu64 " (calls: cancels %" PRIu64 " moves %" PRIu64
			") defers %" PRIu64 " runs %" PRIu64 " failures %" PRIu64
			" retries %" PRIu64 " dead %" PRIu64 " reclaims %" PRIu64
			" unhandled %" PRIu64 " loaded %" PRIu64 " last load %" PRIu64 " ms\n",
			made, cancels, moves, s.defers, s.defer_runs, s.defer_failures,
			s.defer_retries, s.defer_dead, s.defer_reclaims, s.defer_unhandled,
			s.defer_loaded, s.defer_load_ms_last);
		fclose(f);
	}
	return 0;
}
