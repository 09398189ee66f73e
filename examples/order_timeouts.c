/*
 * examples/order_timeouts.c - orders cancelled when they are still unpaid N seconds after they
 * were placed, with the timeouts stored in etcd as deferred tasks, so that a timeout outlives
 * the replica that placed the order.
 *
 *   order_timeouts ENDPOINTS MEMBER [SECONDS [UNPAID_AFTER_S [STORE_DIR]]]
 *   order_timeouts http://127.0.0.1:2379 shop-1 30 5
 *
 * Each replica places an order every 250 ms for SECONDS (default 10) and defers a task of kind
 * "order.timeout" under the key "order:<id>", due UNPAID_AFTER_S (default 2) later, with the
 * order as a JSON payload; every other order is paid halfway through, and its timeout
 * cancelled, and every sixth (from the fifth) is paid 100 ms before its timeout, after the task
 * was claimed: too late to cancel the task, in time for the order. Whichever replica owns the key's group runs the handler at the due, wherever the
 * order was placed. Start several in terminals with different member names, kill one with
 * kill -9: its timeouts still run, on another replica, at the takeover.
 *
 * The store. The orders live in STORE_DIR (default /tmp/order_timeouts), one file per order
 * and a second file once it is closed, "paid" or "cancelled", made with link(2): whichever
 * closes it first wins, atomically. It stands for the database every replica shares; run the
 * replicas on one machine, or give them a shared directory. In a database the same rule is
 * "UPDATE orders SET state = 'cancelled' WHERE id = $1 AND state = 'unpaid'".
 *
 * At least once. A handler may run twice for one key: when its owner is lost after the claim
 * and before the task's delete, the next owner runs it again with attempt + 1. So the handler
 * does nothing the store has not checked: it closes the order only if no one did, and an
 * attempt above 1 that finds it cancelled says an earlier run did it. The key is the
 * idempotency key; the attempt says whether to expect an earlier run.
 *
 * At the end the replica waits (up to UNPAID_AFTER_S + 10 s) until every order it placed is
 * closed, prints what happened, and exits 1 if an order is still open, or was cancelled
 * before its time, or the cluster refused a call.
 */
#define _POSIX_C_SOURCE 200809L /* strdup, strtok_r, nanosleep with -std=c11 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tickwheel_cluster.h"

#define MAX_ORDERS 4096

static const char *store_dir = "/tmp/order_timeouts";
static int64_t unpaid_after_ms = 2000;
static atomic_uint cancelled_here, repeats, errors;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* A path in the store; -1 (ENAMETOOLONG) rather than a cut path, which would be another. */
static int store_path(char *buf, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int store_path(char *buf, size_t cap, const char *fmt, ...)
{
	int n = snprintf(buf, cap, "%s/", store_dir);
	va_list ap;
	va_start(ap, fmt);
	int m = n > 0 && (size_t)n < cap ? vsnprintf(buf + n, cap - (size_t)n, fmt, ap) : -1;
	va_end(ap);
	if (m < 0 || (size_t)m >= cap - (size_t)n) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* An order's file holds its creation; "<id>.closed" its end, written whole before it appears. */
static int order_place(const char *id)
{
	char path[512];
	if (store_path(path, sizeof path, "%s", id) != 0)
		return -1;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return -1;
	int ok = dprintf(fd, "unpaid\n") > 0;
	return close(fd) == 0 && ok ? 0 : -1;
}

/* "paid" or "cancelled": 1 closed now; 0 closed before (its state in was); -1 the store
 * failed (errno). */
static int order_close(const char *id, const char *state, char *was, size_t cap)
{
	char tmp[512], path[512];
	if (store_path(tmp, sizeof tmp, ".%s.%ld.%s", id, (long)getpid(), state) != 0 ||
	    store_path(path, sizeof path, "%s.closed", id) != 0)
		return -1;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	int ok = dprintf(fd, "%s\n", state) > 0;
	if (close(fd) != 0 || !ok) {
		unlink(tmp);
		return -1;
	}
	int rc = link(tmp, path) == 0 ? 1 : errno == EEXIST ? 0 : -1;
	int saved = errno;
	if (unlink(tmp) != 0 && rc >= 0)
		return -1;
	if (rc != 0) {
		errno = saved;
		return rc;
	}
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(was, (int)cap, f))
		was[0] = '\0';
	was[strcspn(was, "\n")] = '\0';
	fclose(f);
	return 0;
}

/* The state of an order: "unpaid", "paid", "cancelled", or "unknown". */
static void order_state(const char *id, char *out, size_t cap)
{
	char path[512];
	FILE *f = store_path(path, sizeof path, "%s.closed", id) == 0 ? fopen(path, "r") : NULL;
	if (!f) {
		bool placed =
			store_path(path, sizeof path, "%s", id) == 0 && access(path, F_OK) == 0;
		snprintf(out, cap, "%s", placed ? "unpaid" : "unknown");
		return;
	}
	if (!fgets(out, (int)cap, f))
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/* Runs on the owner of the key's group, at the due, on an executor of its engine. */
static int on_timeout(const tw_cluster_task *task, void *arg)
{
	(void)arg;
	const char *id = task->key + strlen("order:");
	/* The payload is this program's own JSON; a real one would use a JSON parser. */
	char json[256];
	size_t len = task->payload_len < sizeof json - 1 ? task->payload_len : sizeof json - 1;
	memcpy(json, task->payload, len);
	json[len] = '\0';
	const char *at = strstr(json, "\"placed_ms\":");
	int64_t placed_ms = at ? strtoll(at + 12, NULL, 10) : 0;
	char was[32];
	int rc = order_close(id, "cancelled", was, sizeof was);
	if (rc < 0) {
		/* Nonzero: tried again after the backoff, then a dead letter (tw-cluster dead). */
		printf("ran %s, attempt %u of %u: the store failed (%s), to be retried\n",
		       task->key, task->attempt, task->max_attempts, strerror(errno));
		return 1;
	}
	int64_t now = now_ms();
	if (rc == 1) {
		atomic_fetch_add(&cancelled_here, 1);
		printf("ran %s, attempt %u: unpaid after %" PRId64 " ms: cancelled, %" PRId64
		       " ms after its due\n",
		       task->key, task->attempt, now - placed_ms, now - task->due_ms);
		if (now - placed_ms < unpaid_after_ms) {
			printf("  ... EARLY: before its %" PRId64 " ms were up\n", unpaid_after_ms);
			atomic_fetch_add(&errors, 1);
		}
	} else if (strcmp(was, "cancelled") == 0) {
		/* Only a run after a lost owner sees this: the first run closed it. */
		atomic_fetch_add(&repeats, 1);
		printf("ran %s, attempt %u: cancelled already, by an earlier attempt: nothing to "
		       "do\n",
		       task->key, task->attempt);
	} else {
		/* Paid just before its timeout: the cancel of the task came after its claim. */
		printf("ran %s, attempt %u: %s in time: nothing to do\n", task->key, task->attempt,
		       was);
	}
	return 0;
}

/* Defers the order's timeout. A call that timed out is made again with the same spec:
 * -TW_EEXIST then says the first one was stored, never that there are two. */
static int defer_timeout(tw_cluster *cluster, const char *key, const char *payload)
{
	tw_cluster_defer_spec spec = { .kind = "order.timeout",
				       .key = key,
				       .delay_ms = (uint64_t)unpaid_after_ms,
				       .payload = payload,
				       .payload_len = strlen(payload),
				       .max_attempts = 5,
				       .backoff_ms = 500 };
	int rc = -TW_CLUSTER_EUNAVAILABLE;
	for (int try = 0; try < 5 && rc == -TW_CLUSTER_EUNAVAILABLE; try++) {
		rc = tw_cluster_defer(cluster, &spec);
		if (rc == -TW_EEXIST && try > 0)
			rc = TW_OK;
	}
	return rc;
}

/* Pays the order, then cancels its timeout. The store decides who won, not the cancel:
 * -TW_ESTATE (claimed: the handler is about to run) and -TW_ENOTFOUND (it ran) are fine. */
static void pay(tw_cluster *cluster, const char *id)
{
	char was[32], key[128];
	int rc = order_close(id, "paid", was, sizeof was);
	if (rc < 0) {
		printf("pay %s: the store failed: %s\n", id, strerror(errno));
		atomic_fetch_add(&errors, 1);
		return;
	}
	if (snprintf(key, sizeof key, "order:%s", id) >= (int)sizeof key)
		return; /* ids are made below 96 bytes */
	int cancel = tw_cluster_defer_cancel(cluster, key);
	printf("paid %s%s; its timeout: %s\n", id, rc == 1 ? "" : " too late: it was cancelled",
	       cancel == TW_OK         ? "cancelled, it will not run" :
	       cancel == -TW_ESTATE    ? "claimed already, its handler sees the payment" :
	       cancel == -TW_ENOTFOUND ? "ran already" :
					 tw_cluster_strerror(cancel));
	if (cancel != TW_OK && cancel != -TW_ESTATE && cancel != -TW_ENOTFOUND)
		atomic_fetch_add(&errors, 1);
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

struct order {
	char id[96];
	int64_t pay_at_ms; /* 0: never paid */
};

/* Places an order every 250 ms for seconds, and pays some of them (see the top). */
static unsigned produce(tw_cluster *cluster, const char *member, int seconds, struct order *o)
{
	unsigned n = 0;
	long run = (long)time(NULL);
	int64_t end = now_ms() + (int64_t)seconds * 1000, next = 0;
	while (!stop && now_ms() < end + unpaid_after_ms) {
		int64_t now = now_ms();
		if (now >= next && now < end && n < MAX_ORDERS) {
			next = now + 250;
			struct order *x = &o[n];
			snprintf(x->id, sizeof x->id, "%s-%ld-%u", member, run, n);
			char key[128], payload[256];
			snprintf(key, sizeof key, "order:%s", x->id);
			snprintf(payload, sizeof payload,
				 "{\"order\":\"%s\",\"amount_cents\":%u,\"placed_ms\":%" PRId64 "}",
				 x->id, 1000 + 37 * n, now);
			if (order_place(x->id) != 0) {
				printf("place %s: %s\n", x->id, strerror(errno));
				atomic_fetch_add(&errors, 1);
				continue;
			}
			int rc = defer_timeout(cluster, key, payload);
			if (rc != TW_OK) {
				printf("defer %s: %s\n", key, tw_cluster_strerror(rc));
				atomic_fetch_add(&errors, 1);
			}
			x->pay_at_ms = n % 2      ? now + unpaid_after_ms / 2 :
				       n % 6 == 4 ? now + unpaid_after_ms - 100 :
						    0;
			n++;
		}
		for (unsigned i = 0; i < n; i++)
			if (o[i].pay_at_ms && now >= o[i].pay_at_ms) {
				o[i].pay_at_ms = 0;
				pay(cluster, o[i].id);
			}
		sleep_ms(20);
	}
	return n;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 6) {
		fprintf(stderr,
			"usage: %s ENDPOINTS MEMBER [SECONDS [UNPAID_AFTER_S [STORE_DIR]]]\n",
			argv[0]);
		return 2;
	}
	const char *endpoints[TW_CLUSTER_ENDPOINTS_MAX + 1] = { 0 };
	char *list = strdup(argv[1]), *save = NULL;
	int n = 0;
	for (char *url = strtok_r(list, ",", &save); url && n < TW_CLUSTER_ENDPOINTS_MAX;
	     url = strtok_r(NULL, ",", &save))
		endpoints[n++] = url;
	int seconds = argc > 3 ? atoi(argv[3]) : 10;
	if (argc > 4)
		unpaid_after_ms = atoll(argv[4]) * 1000;
	if (argc > 5)
		store_dir = argv[5];
	if (seconds < 1 || unpaid_after_ms < 1000 ||
	    (mkdir(store_dir, 0755) != 0 && errno != EEXIST)) {
		fprintf(stderr, "bad SECONDS or UNPAID_AFTER_S, or no store %s\n", store_dir);
		free(list);
		return 2;
	}

	tw_engine *engine;
	int rc = tw_engine_create(NULL, &engine);
	if (rc != TW_OK) {
		fprintf(stderr, "engine: %s\n", tw_strerror(rc));
		free(list);
		return 1;
	}
	tw_cluster_config cfg;
	tw_cluster_config_init(&cfg);
	cfg.engine = engine;
	cfg.endpoints = endpoints;
	cfg.member = argv[2];
	cfg.prefix = "/examples/order_timeouts/";
	cfg.lease_ttl_s = 5;
	/* A task is claimed this long before its due, and from then on cannot be cancelled (it
	 * will run): short here, so that a payment halfway to a 1 s timeout still cancels it. */
	cfg.claim_ahead_ms = 250;
	cfg.log = log_line;
	/* Member only once the handler is registered: a group taken before would hold tasks
	 * that nothing here can run. */
	cfg.attach_later = true;
	tw_cluster *cluster;
	if ((rc = tw_cluster_join(&cfg, &cluster)) != TW_OK) {
		fprintf(stderr, "join: %s\n", tw_cluster_strerror(rc));
		tw_engine_destroy(engine);
		free(list);
		return 1;
	}
	/* Before the attach: a replica that owns a group runs its tasks only with this. */
	if ((rc = tw_cluster_handle(cluster, "order.timeout", on_timeout, NULL)) != TW_OK) {
		fprintf(stderr, "handle: %s\n", tw_cluster_strerror(rc));
		atomic_fetch_add(&errors, 1);
	}
	if ((rc = tw_cluster_attach(cluster)) != TW_OK) {
		fprintf(stderr, "attach: %s\n", tw_cluster_strerror(rc));
		atomic_fetch_add(&errors, 1);
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	static struct order orders[MAX_ORDERS];
	unsigned placed = produce(cluster, argv[2], seconds, orders);
	/* Every order placed here closed, by whichever replica ran its timeout. */
	unsigned paid, cancelled, still_open;
	for (int64_t until = now_ms() + 10000;; sleep_ms(100)) {
		paid = cancelled = still_open = 0;
		for (unsigned i = 0; i < placed; i++) {
			char state[32];
			order_state(orders[i].id, state, sizeof state);
			paid += strcmp(state, "paid") == 0;
			cancelled += strcmp(state, "cancelled") == 0;
			still_open += strcmp(state, "paid") != 0 && strcmp(state, "cancelled") != 0;
		}
		if (still_open == 0 || stop || now_ms() > until)
			break;
	}

	tw_cluster_counters counts;
	tw_cluster_stats(cluster, &counts);
	printf("%s: %u orders placed: %u paid, %u cancelled unpaid, %u open; timeouts run here "
	       "%" PRIu64 " (%u cancelled an order, %u found it done by an earlier attempt), "
	       "%" PRIu64 " re-claimed after a lost owner\n",
	       argv[2], placed, paid, cancelled, still_open, counts.defer_runs,
	       atomic_load(&cancelled_here), atomic_load(&repeats), counts.defer_reclaims);
	tw_cluster_leave(cluster);
	tw_engine_destroy(engine);
	free(list);
	return still_open == 0 && atomic_load(&errors) == 0 ? 0 : 1;
}
