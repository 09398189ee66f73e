/*
 * tests/cluster/chaos_producer.c - a chaos replica's deferred tasks (chaos_defer.h): the
 * handlers of the three kinds, and three producer threads that defer at the plan's rate, retry
 * a defer whose answer was lost (and a few on purpose, to see -TW_EEXIST), and cancel or move
 * some of their tasks later. Everything goes to LOG.defer before and after each call.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chaos_defer.h"

#define ACTIONS_MAX 4096
#define BATCH_MAX   40
#define KEY_CAP     64
#define TRIES       6

static int log_fd = -1;
static atomic_bool stopping;
static int64_t plan_start_ms, plan_end_ms;
static double per_ms;
static unsigned plan_seed;
static int replica_no;
static tw_cluster *cluster;
static pthread_t threads[3];
static int nthreads;
static atomic_uint_fast64_t made, cancels, moves;

static int64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Before trying again after a lost answer: 100 ms, doubled each time; cut short by a stop. */
static void back_off(int tries)
{
	for (unsigned ms = 0; ms < 100u << tries && !atomic_load(&stopping); ms += 20)
		sleep_ms(20);
}

/* One write() per line, so that a SIGKILL leaves whole lines only. */
static void logf_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_line(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof line)
		n = snprintf(line, sizeof line, "L %" PRId64 " 0 chaos: a log line too long\n",
			     wall_ns());
	if (write(log_fd, line, (size_t)n) != n)
		_exit(12);
}

int chaos_defer_open(const char *log_path)
{
	char path[600];
	snprintf(path, sizeof path, "%s.defer", log_path);
	log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (log_fd < 0)
		perror(path);
	return log_fd < 0 ? -1 : 0;
}

void chaos_defer_library_log(int level, const char *message, void *arg)
{
	(void)arg;
	if (log_fd >= 0)
		logf_line("L %" PRId64 " %d %s\n", wall_ns(), level, message);
}

static int handler(const tw_cluster_task *t, void *arg)
{
	char kind = *(const char *)arg;
	logf_line("S %" PRId64 " %s %u %" PRIu64 " %" PRId64 " %u\n", wall_ns(), t->key, t->attempt,
		  t->token, t->due_ms, t->group);
	/* Some handlers work long enough for a SIGSTOP or a SIGKILL to land in them often. */
	unsigned work_ms = t->key[strlen(t->key) - 1] == '7' ? 30 : 1;
	sleep_ms(work_ms);
	int rc = 0;
	char payload[KEY_CAP] = "";
	unsigned fail_until = 0;
	if (t->payload_len < sizeof payload)
		memcpy(payload, t->payload, t->payload_len);
	if (kind == 'd')
		rc = 7;
	else if (kind == 'f' && sscanf(payload, "fail=%u", &fail_until) == 1 &&
		 t->attempt <= fail_until)
		rc = 3;
	logf_line("E %" PRId64 " %s %u %d\n", wall_ns(), t->key, t->attempt, rc);
	return rc;
}

int chaos_defer_handle(tw_cluster *c)
{
	static const char *const kinds[] = { "ok", "flaky", "doomed" };
	for (int i = 0; i < 3; i++) {
		int rc = tw_cluster_handle(c, kinds[i], handler, (void *)kinds[i]);
		if (rc != TW_OK) {
			fprintf(stderr, "chaos_replica: handle %s: %s\n", kinds[i],
				tw_cluster_strerror(rc));
			return -1;
		}
	}
	return 0;
}

static bool ambiguous(int rc)
{
	return rc == -TW_CLUSTER_EUNAVAILABLE || rc == -TW_CLUSTER_EETCD;
}

/* A producer's later cancel or move of one of its tasks. */
struct action {
	int64_t at_ms, due_ms; /* due_ms: a move's new due; 0: a cancel */
	char key[KEY_CAP];
};

struct producer {
	int no;        /* 0, 1: singles, cancels, moves; 2: batches */
	double per_ms; /* tasks a ms */
	unsigned seed;
	uint64_t seq, batch;
	struct action actions[ACTIONS_MAX];
	size_t nactions;
};

static double unit(struct producer *p)
{
	return (double)rand_r(&p->seed) / ((double)RAND_MAX + 1);
}

/* A task's kind, key, due and attempts, into s (key and payload in the buffers given). */
static void make_task(struct producer *p, tw_cluster_defer_spec *s, char *key, char *payload)
{
	double u = unit(p);
	const char *kind = u < 0.85 ? "ok" : u < 0.99 ? "flaky" : "doomed";
	snprintf(key, KEY_CAP, "%s.r%d.%ld.%c%" PRIu64, kind, replica_no, (long)getpid(),
		 "stb"[p->no], p -> seq++);
	int64_t now = wall_ns() / 1000000;
	double v = unit(p);
	int64_t ahead = v < 0.10 ? 0 :
			v < 0.25 ? (int64_t)(unit(p) * 2000) :
				   2000 + (int64_t)(unit(p) * 3000);
	*s = (tw_cluster_defer_spec){ .kind = kind, .key = key, .due_ms = now + ahead };
	if (kind[0] == 'f') {
		s->payload_len =
			(size_t)snprintf(payload, KEY_CAP, "fail=%d", 1 + (int)(unit(p) * 2));
		s->max_attempts = CHAOS_FLAKY_ATTEMPTS;
		s->backoff_ms = CHAOS_FLAKY_BACKOFF_MS;
	} else {
		s->payload_len = (size_t)snprintf(payload, KEY_CAP, "r%d payload %" PRIu64,
						  replica_no, p->seq);
		if (kind[0] == 'd') {
			s->max_attempts = 2 + (unsigned)(unit(p) * 2);
			s->backoff_ms = CHAOS_DOOMED_BACKOFF_MS;
		}
	}
	s->payload = payload;
}

static void plan_action(struct producer *p, const tw_cluster_defer_spec *s)
{
	double u = unit(p);
	if (u >= 0.09 || p->nactions == ACTIONS_MAX)
		return;
	int64_t now = wall_ns() / 1000000, left = s->due_ms > now ? s->due_ms - now : 0;
	struct action *a = &p->actions[p->nactions++];
	snprintf(a->key, sizeof a->key, "%s", s->key);
	if (u < 0.05) {
		/* Before, around and after the claim: TW_OK, -TW_ESTATE, -TW_ENOTFOUND. */
		a->at_ms = now + (int64_t)(unit(p) * (double)(left + 600));
		a->due_ms = 0;
	} else {
		a->at_ms = now + (int64_t)(unit(p) * (double)(left > 200 ? left - 200 : 0));
		a->due_ms = s->due_ms - 1500 + (int64_t)(unit(p) * 3500);
		if (a->due_ms < a->at_ms)
			a->due_ms = a->at_ms;
	}
}

static void run_actions(struct producer *p)
{
	int64_t now = wall_ns() / 1000000;
	for (size_t i = 0; i < p->nactions && !atomic_load(&stopping);) {
		struct action a = p->actions[i];
		if (a.at_ms > now) {
			i++;
			continue;
		}
		p->actions[i] = p->actions[--p->nactions];
		int rc;
		for (int tries = 0; tries < TRIES; tries++) {
			if (a.due_ms == 0) {
				logf_line("C %" PRId64 " %s\n", wall_ns(), a.key);
				rc = tw_cluster_defer_cancel(cluster, a.key);
				logf_line("c %" PRId64 " %s %d\n", wall_ns(), a.key, rc);
				atomic_fetch_add(&cancels, 1);
			} else {
				logf_line("M %" PRId64 " %s %" PRId64 "\n", wall_ns(), a.key,
					  a.due_ms);
				rc = tw_cluster_defer_move(cluster, a.key, a.due_ms, 0);
				logf_line("m %" PRId64 " %s %d\n", wall_ns(), a.key, rc);
				atomic_fetch_add(&moves, 1);
			}
			if (!ambiguous(rc) || atomic_load(&stopping))
				break;
			back_off(tries);
		}
	}
}

/* Defers s (one task) until an answer that is not ambiguous, then sometimes again on purpose. */
static void defer_one(struct producer *p, tw_cluster_defer_spec *s)
{
	int rc = 1, try = 1; /* 1: no call made */
	for (; try <= TRIES && !atomic_load(&stopping); try++) {
		logf_line("D %" PRId64 " %s %" PRId64 " 0 %d\n", wall_ns(), s->key, s->due_ms, try);
		rc = tw_cluster_defer(cluster, s);
		logf_line("d %" PRId64 " %s %d\n", wall_ns(), s->key, rc);
		if (!ambiguous(rc))
			break;
		back_off(try - 1);
	}
	atomic_fetch_add(&made, 1);
	if (rc != TW_OK && rc != -TW_EEXIST)
		return;
	if (s->due_ms - wall_ns() / 1000000 > 1500 && unit(p) < 0.03) {
		logf_line("D %" PRId64 " %s %" PRId64 " 0 %d\n", wall_ns(), s->key, s->due_ms,
			  try + 1);
		int again = tw_cluster_defer(cluster, s);
		logf_line("d %" PRId64 " %s %d\n", wall_ns(), s->key, again);
	}
	plan_action(p, s);
}

static void log_batch(const tw_cluster_defer_spec *s, size_t n, int rc, const int *results)
{
	for (size_t i = 0; i < n; i++) {
		int code = rc;
		if (rc == -TW_EEXIST)
			code = results[i] == -TW_EEXIST ? -TW_EEXIST : CHAOS_NOT_STORED;
		logf_line("d %" PRId64 " %s %d\n", wall_ns(), s[i].key, code);
	}
}

static void defer_batch(struct producer *p, size_t n)
{
	tw_cluster_defer_spec s[BATCH_MAX];
	char keys[BATCH_MAX][KEY_CAP], payloads[BATCH_MAX][KEY_CAP];
	int results[BATCH_MAX];
	for (size_t i = 0; i < n; i++)
		make_task(p, &s[i], keys[i], payloads[i]);
	p->batch++;
	int rc = 1, try = 1; /* 1: no call made */
	for (; try <= TRIES && !atomic_load(&stopping); try++) {
		for (size_t i = 0; i < n; i++)
			logf_line("D %" PRId64 " %s %" PRId64 " %" PRIu64 " %d\n", wall_ns(),
				  s[i].key, s[i].due_ms, p->batch, try);
		rc = tw_cluster_defer_many(cluster, s, n, results);
		log_batch(s, n, rc, results);
		if (!ambiguous(rc))
			break;
		back_off(try - 1);
	}
	atomic_fetch_add(&made, n);
	int64_t soonest = INT64_MAX;
	for (size_t i = 0; i < n; i++)
		soonest = s[i].due_ms < soonest ? s[i].due_ms : soonest;
	if ((rc == TW_OK || rc == -TW_EEXIST) && soonest - wall_ns() / 1000000 > 1500 &&
	    unit(p) < 0.05) {
		for (size_t i = 0; i < n; i++)
			logf_line("D %" PRId64 " %s %" PRId64 " %" PRIu64 " %d\n", wall_ns(),
				  s[i].key, s[i].due_ms, p->batch, try + 1);
		rc = tw_cluster_defer_many(cluster, s, n, results);
		log_batch(s, n, rc, results);
	}
}

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	/* This incarnation makes the plan's tasks from now on, catching up after a pause. */
	int64_t now = wall_ns() / 1000000;
	uint64_t done =
		now > plan_start_ms ? (uint64_t)((double)(now - plan_start_ms) * p->per_ms) : 0;
	while (!atomic_load(&stopping)) {
		now = wall_ns() / 1000000;
		if (now >= plan_end_ms && p->nactions == 0)
			break;
		/* A producer behind the plan at its end (a slow etcd, a loaded machine)
		 * leaves the rest unmade: every task is due before the driver's drain. */
		int64_t until = now < plan_end_ms ? now : plan_end_ms;
		uint64_t due = until > plan_start_ms ?
				       (uint64_t)((double)(until - plan_start_ms) * p->per_ms) :
				       0;
		/* After a stall (etcd away, a pause) at most half a second of the plan is made
		 * up: a burst then would load etcd as it recovers, beyond what users do. */
		uint64_t slack = (uint64_t)(p->per_ms * 500) + 1;
		if (due > done + slack)
			done = due - slack;
		while (done < due && !atomic_load(&stopping) && wall_ns() / 1000000 < plan_end_ms) {
			if (p->no < 2) {
				tw_cluster_defer_spec s;
				char key[KEY_CAP], payload[KEY_CAP];
				make_task(p, &s, key, payload);
				defer_one(p, &s);
				done++;
				run_actions(p);
			} else {
				size_t n = 5 + (size_t)(unit(p) * (BATCH_MAX - 4));
				if (n > due - done)
					n = (size_t)(due - done);
				defer_batch(p, n);
				done += n;
			}
		}
		run_actions(p);
		sleep_ms(20);
	}
	free(p);
	return NULL;
}

int chaos_defer_start(tw_cluster *c, int replica)
{
	const char *plan = getenv("TW_CHAOS_DEFER_PLAN");
	uint64_t total;
	if (!plan ||
	    sscanf(plan, "%" SCNd64 " %" SCNd64 " %" SCNu64 " %u", &plan_start_ms, &plan_end_ms,
		   &total, &plan_seed) != 4 ||
	    total == 0 || plan_end_ms <= plan_start_ms)
		return 0;
	cluster = c;
	replica_no = replica;
	per_ms = (double)total / (double)(plan_end_ms - plan_start_ms);
	/* SIGTERM must reach the main thread's pause(), not a producer. */
	sigset_t term, old;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	if (pthread_sigmask(SIG_BLOCK, &term, &old) != 0)
		return -1;
	/* 30 % of the tasks one at a time from two threads, the rest in batches from a third:
	 * a single defer is a round trip, which a loaded machine makes slow. */
	for (int i = 0; i < 3; i++) {
		struct producer *p = calloc(1, sizeof *p);
		if (!p)
			break;
		p->no = i;
		p->per_ms = per_ms * (i < 2 ? 0.15 : 0.7);
		p->seed = plan_seed ^ (unsigned)getpid() * 2654435761u ^ (unsigned)i;
		if (pthread_create(&threads[nthreads], NULL, producer_main, p) != 0) {
			free(p);
			break;
		}
		nthreads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (nthreads < 3)
		fprintf(stderr, "chaos_replica: no producer thread\n");
	return nthreads < 3 ? -1 : 0;
}

void chaos_defer_stop(void)
{
	atomic_store(&stopping, true);
	for (int i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	nthreads = 0;
}

void chaos_defer_totals(uint64_t *defers, uint64_t *cancels_out, uint64_t *moves_out)
{
	*defers = atomic_load(&made);
	*cancels_out = atomic_load(&cancels);
	*moves_out = atomic_load(&moves);
}
