/*
 * tests/cluster/test_defer_view.c - deferred tasks as an operator reads them: the record codec
 * (cluster/defer_record.c, through cluster/defer.h), and tw_cluster_task_read, _dead_read,
 * _requeue and the task counts of tw_cluster_view_read against a real etcd. The tasks, claims
 * and dead letters are written here straight into etcd in the brief's layout, so that these
 * views are tested apart from the replica that writes them in production; the last test reads
 * what a replica wrote.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "defer.h"
#include "etcd.h"
#include "etcd_harness.h"
#include "tickwheel_cluster.h"

/* ---- the codec: no etcd ---- */

TestSuite(codec, .timeout = 10);

static void round_trip(const struct cl_record *in)
{
	uint8_t *v;
	size_t len;
	cr_assert_eq(tw__cl_record_encode(in, &v, &len), TW_OK);
	struct cl_record out;
	cr_assert_eq(tw__cl_record_decode(v, len, &out), 0, "%.*s", (int)len, v);
	cr_assert_str_eq(out.kind, in->kind);
	cr_assert_eq(out.due_ms, in->due_ms);
	cr_assert_eq(out.attempts, in->attempts);
	cr_assert_eq(out.max_attempts, in->max_attempts);
	cr_assert_eq(out.backoff_ms, in->backoff_ms);
	cr_assert_eq(out.dead, in->dead);
	cr_assert_eq(out.last_code, in->dead ? in->last_code : 0);
	cr_assert_eq(out.payload_len, in->payload_len);
	cr_assert(in->payload_len == 0 || memcmp(out.payload, in->payload, in->payload_len) == 0);
	free(v);
}

Test(codec, records_round_trip)
{
	/* Binary payloads with newlines and NULs: only the first newline ends the header. */
	static const uint8_t bytes[] = { 'a', '\n', 0, 0xff, '\n', 't', 'w', '1', ' ' };
	struct cl_record r = { .kind = "order.timeout",
			       .due_ms = 1796339000123,
			       .attempts = 0,
			       .max_attempts = 5,
			       .backoff_ms = 1000,
			       .payload = bytes,
			       .payload_len = sizeof bytes };
	round_trip(&r);
	r.payload_len = 0;
	round_trip(&r);
	r.dead = true;
	r.last_code = -7;
	r.attempts = 1000;
	r.max_attempts = TW_CLUSTER_ATTEMPTS_MAX;
	r.backoff_ms = TW_CLUSTER_BACKOFF_MAX_MS;
	round_trip(&r);
	r.payload = bytes;
	r.payload_len = sizeof bytes;
	r.due_ms = INT64_MAX;
	memset(r.kind, 'k', TW_CLUSTER_KIND_MAX);
	r.kind[TW_CLUSTER_KIND_MAX] = '\0';
	round_trip(&r);
	uint8_t *v;
	size_t len;
	r.dead = false;
	strcpy(r.kind, "x");
	r.due_ms = 42;
	r.attempts = 2;
	r.max_attempts = 3;
	r.backoff_ms = 10;
	r.payload_len = 1;
	cr_assert_eq(tw__cl_record_encode(&r, &v, &len), TW_OK);
	cr_assert_eq(len, strlen("tw1 x 42 2 3 10\na"));
	cr_assert_eq(memcmp(v, "tw1 x 42 2 3 10\na", len), 0, "etcdctl shows this text");
	free(v);
}

static int decode_text(const char *text)
{
	struct cl_record r;
	return tw__cl_record_decode((const uint8_t *)text, strlen(text), &r);
}

Test(codec, records_refused)
{
	cr_assert_eq(decode_text("tw1 k 1 0 5 1000\npayload"), 0);
	cr_assert_eq(decode_text("tw1 k 1 0 5 1000 -3\n"), 0);
	const char *bad[] = {
		"",
		"tw1 k 1 0 5 1000",        /* no newline */
		"tw2 k 1 0 5 1000\n",      /* another format */
		"tw1 k 1 0 5\n",           /* a field short */
		"tw1 k/x 1 0 5 1000\n",    /* not a kind */
		"tw1 k 1 0 5 1000 -3 4\n", /* a field too many */
		"tw1 k 1 0 5 1000 code\n", /* a code that is no number */
		"tw1 k 1 0 5 1000x\n",     /* trailing bytes */
		"tw1 k one 0 5 1000\n",    /* a due that is no number */
		"TW1 k 1 0 5 1000\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		cr_expect_eq(decode_text(bad[i]), -1, "decoded \"%s\"", bad[i]);
	/* A kind one byte over its limit. */
	char head[200] = "tw1 ";
	memset(head + 4, 'k', TW_CLUSTER_KIND_MAX + 1);
	strcpy(head + 4 + TW_CLUSTER_KIND_MAX + 1, " 1 0 5 1000\n");
	cr_assert_eq(decode_text(head), -1);
	struct cl_record r;
	cr_assert_eq(tw__cl_record_decode(NULL, 0, &r), -1);
}

Test(codec, claims_and_names)
{
	struct cl_claim_value c = { .attempt = 3,
				    .member = "gw-1",
				    .token = 18446744073709551615u };
	char buf[128];
	int n = tw__cl_claim_encode(&c, buf, sizeof buf);
	cr_assert_eq(n, (int)strlen("3 gw-1 18446744073709551615"));
	cr_assert_str_eq(buf, "3 gw-1 18446744073709551615");
	struct cl_claim_value d;
	cr_assert_eq(tw__cl_claim_decode((const uint8_t *)buf, (size_t)n, &d), 0);
	cr_assert(d.attempt == 3 && d.token == c.token && !strcmp(d.member, "gw-1"));
	cr_assert_eq(tw__cl_claim_encode(&c, buf, 8), -TW_EINVAL, "a cut claim is refused");
	const char *bad[] = { "", "3 gw-1", "3 gw-1 7 8", "x gw-1 7", "3 gw-1 7 " };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		cr_expect_eq(tw__cl_claim_decode((const uint8_t *)bad[i], strlen(bad[i]), &d), -1,
			     "decoded \"%s\"", bad[i]);

	char key[TW_CLUSTER_KEY_MAX + 2];
	memset(key, '~', TW_CLUSTER_KEY_MAX);
	key[TW_CLUSTER_KEY_MAX] = '\0';
	cr_assert(tw__cl_task_key_ok(key));
	key[TW_CLUSTER_KEY_MAX] = '!';
	key[TW_CLUSTER_KEY_MAX + 1] = '\0';
	cr_assert(!tw__cl_task_key_ok(key));
	cr_assert(tw__cl_task_key_ok("order:42/\"x\""));
	cr_assert(!tw__cl_task_key_ok("order 42") && !tw__cl_task_key_ok("") &&
		  !tw__cl_task_key_ok("\x7f") && !tw__cl_task_key_ok(NULL));
	cr_assert(tw__cl_kind_ok("order.timeout") && !tw__cl_kind_ok("order/timeout") &&
		  !tw__cl_kind_ok(""));

	cr_assert_eq(tw__cl_backoff_ms(0, 1), CL_DEFAULT_BACKOFF_MS);
	cr_assert_eq(tw__cl_backoff_ms(100, 1), 100);
	cr_assert_eq(tw__cl_backoff_ms(100, 4), 800);
	cr_assert_eq(tw__cl_backoff_ms(100, 1000), TW_CLUSTER_BACKOFF_MAX_MS);
}

/* ---- the views against etcd ---- */

static etcd_harness *etcd;
static etcd_client *raw;
static const char *const *EP;

static void start(void)
{
	etcd = etcd_harness_start(1);
	cr_assert_not_null(etcd, "etcd did not start");
	EP = etcd_harness_endpoints(etcd);
	etcd_status st;
	cr_assert_eq(tw__etcd_client_create(EP, 1, 2000, &raw, &st), 0, "%s", st.message);
}

static void stop(void)
{
	tw__etcd_client_destroy(raw);
	raw = NULL;
	etcd_harness_stop(etcd);
	etcd = NULL;
}

TestSuite(views, .init = start, .fini = stop, .timeout = 60);

#define P      "/dv/"
#define GROUPS 8

static int64_t put(const char *key, const void *value, size_t len)
{
	etcd_status st;
	int64_t rev = 0;
	cr_assert_eq(tw__etcd_put(raw, key, strlen(key), value, len, 0, &rev, &st), 0, "%s",
		     st.message);
	return rev;
}

static bool exists(const char *key)
{
	etcd_status st;
	etcd_range_result r;
	etcd_range_req req = { .key = key, .key_len = strlen(key) };
	cr_assert_eq(tw__etcd_range(raw, &req, &r, &st), 0, "%s", st.message);
	bool yes = r.count == 1;
	tw__etcd_range_result_free(&r);
	return yes;
}

static void joined(void)
{
	put(P "config/groups", "8", 1);
}

/* P/defer/t/<group>/<key> or P/dead/<key>, with a record made by the codec. */
static void put_record(const char *key, const char *kind, int64_t due_ms, unsigned attempts,
		       bool dead, int last_code, const char *payload)
{
	struct cl_record r = { .due_ms = due_ms,
			       .attempts = attempts,
			       .max_attempts = 3,
			       .backoff_ms = 250,
			       .dead = dead,
			       .last_code = last_code,
			       .payload = (const uint8_t *)payload,
			       .payload_len = strlen(payload) };
	snprintf(r.kind, sizeof r.kind, "%s", kind);
	uint8_t *v;
	size_t len;
	cr_assert_eq(tw__cl_record_encode(&r, &v, &len), TW_OK);
	char k[512];
	if (dead)
		snprintf(k, sizeof k, P "dead/%s", key);
	else
		snprintf(k, sizeof k, P "defer/t/%04u/%s", tw_cluster_group_of(key, GROUPS), key);
	put(k, v, len);
	free(v);
}

static void put_claim(const char *key, unsigned attempt, const char *member, uint64_t token)
{
	struct cl_claim_value c = { .attempt = attempt, .token = token };
	snprintf(c.member, sizeof c.member, "%s", member);
	char v[128], k[512];
	int n = tw__cl_claim_encode(&c, v, sizeof v);
	cr_assert_gt(n, 0);
	snprintf(k, sizeof k, P "defer/c/%04u/%s", tw_cluster_group_of(key, GROUPS), key);
	put(k, v, (size_t)n);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

Test(views, task_read_each_state)
{
	tw_cluster_task_list *l = (void *)1;
	cr_assert_eq(tw_cluster_task_read(EP, P, 0, "order:1", &l), -TW_ENOTFOUND,
		     "no replica ever joined under the prefix");
	cr_assert_null(l);
	joined();
	cr_assert_eq(tw_cluster_task_read(EP, P, 0, "order:1", &l), TW_OK);
	cr_assert(l->count == 0 && l->revision > 0);
	tw_cluster_task_list_free(l);

	put_record("order:1", "order.timeout", 1796339000000, 0, false, 0, "{\"id\":1}");
	cr_assert_eq(tw_cluster_task_read(EP, P, 0, "order:1", &l), TW_OK);
	cr_assert_eq(l->count, 1);
	tw_cluster_task_view *t = &l->tasks[0];
	cr_assert_eq(t->state, TW_CLUSTER_TASK_PENDING);
	cr_assert_str_eq(t->key, "order:1");
	cr_assert_str_eq(t->kind, "order.timeout");
	cr_assert(t->due_ms == 1796339000000 && t->attempt == 0 && t->max_attempts == 3 &&
		  t->backoff_ms == 250 && t->claimed_by == NULL && t->token == 0);
	cr_assert_eq(t->group, tw_cluster_group_of("order:1", GROUPS));
	cr_assert(t->payload_len == 8 && memcmp(t->payload, "{\"id\":1}", 8) == 0);
	tw_cluster_task_list_free(l);

	/* Claimed: the claim's attempt, member and token; then a dead letter of the same key
	 * (a requeued task that failed before), listed after the live task. */
	put_claim("order:1", 2, "gw-2", 77);
	put_record("order:1", "order.timeout", 1796338000000, 3, true, 9, "old");
	cr_assert_eq(tw_cluster_task_read(EP, P, 0, "order:1", &l), TW_OK);
	cr_assert_eq(l->count, 2);
	t = &l->tasks[0];
	cr_assert(t->state == TW_CLUSTER_TASK_CLAIMED && t->attempt == 2 && t->token == 77);
	cr_assert_str_eq(t->claimed_by, "gw-2");
	t = &l->tasks[1];
	cr_assert(t->state == TW_CLUSTER_TASK_DEAD && t->attempt == 3 && t->last_code == 9 &&
		  t->due_ms == 1796338000000 && t->claimed_by == NULL && t->token == 0);
	cr_assert(t->payload_len == 3 && strcmp(t->payload, "old") == 0);
	tw_cluster_task_list_free(l);

	/* Another key in the same cluster has nothing; another prefix has no cluster. */
	cr_assert_eq(tw_cluster_task_read(EP, P, 0, "order:2", &l), TW_OK);
	cr_assert_eq(l->count, 0);
	tw_cluster_task_list_free(l);
	cr_assert_eq(tw_cluster_task_read(EP, "/other/", 0, "order:1", &l), -TW_ENOTFOUND);

	cr_assert_eq(tw_cluster_task_read(EP, P, 0, "order 1", &l), -TW_EINVAL);
	cr_assert_eq(tw_cluster_task_read(EP, P, 0, NULL, &l), -TW_EINVAL);
	cr_assert_eq(tw_cluster_task_read(NULL, P, 0, "k", &l), -TW_EINVAL);
	cr_assert_eq(tw_cluster_task_read(EP, "", 0, "k", &l), -TW_EINVAL);
	cr_assert_eq(tw_cluster_task_read(EP, P, 0, "k", NULL), -TW_EINVAL);
	tw_cluster_task_list_free(NULL);
}

Test(views, dead_read_pages_in_key_order)
{
	tw_cluster_task_list *l;
	cr_assert_eq(tw_cluster_dead_read(EP, P, 0, NULL, 0, &l), -TW_ENOTFOUND);
	joined();
	/* "k1" is a prefix of "k10": a page after "k1" must still start at "k10". */
	const char *keys[] = { "k1", "k10", "k2", "k3", "k4", "k5", "k6" };
	for (size_t i = 0; i < 7; i++)
		put_record(keys[i], "mail", 1000 + (int64_t)i, 3, true, (int)i, keys[i]);
	/* Keys under dead/ that are no dead letter (an operator's own) are left out, and a
	 * page is still full while dead letters follow. */
	put(P "dead/zz-not-a-record", "hello", 5);
	put(P "dead/k30", "x", 1);
	put(P "dead/k31", "x", 1);
	put(P "dead/k32", "x", 1);
	put_record("live", "mail", 5, 0, false, 0, ""); /* not a dead letter */

	const char *after = NULL;
	size_t seen = 0, pages = 0;
	char last[64];
	for (bool more = true; more; pages++) {
		cr_assert_eq(tw_cluster_dead_read(EP, P, 0, after, 3, &l), TW_OK);
		more = l->more;
		for (size_t i = 0; i < l->count; i++, seen++) {
			cr_assert_lt(seen, 7);
			cr_assert_str_eq(l->tasks[i].key, keys[seen]);
			cr_assert_eq(l->tasks[i].state, TW_CLUSTER_TASK_DEAD);
			cr_assert_eq(l->tasks[i].last_code, (int)seen);
			cr_assert_eq(l->tasks[i].due_ms, 1000 + (int64_t)seen);
			cr_assert_str_eq(l->tasks[i].payload, keys[seen]);
		}
		if (l->count) {
			snprintf(last, sizeof last, "%s", l->tasks[l->count - 1].key);
			after = last;
		}
		tw_cluster_task_list_free(l);
	}
	/* 3 + 3 + 1 dead letters. */
	cr_assert_eq(seen, 7);
	cr_assert_eq(pages, 3);

	cr_assert_eq(tw_cluster_dead_read(EP, P, 0, NULL, 0, &l), TW_OK);
	cr_assert(l->count == 7 && !l->more);
	tw_cluster_task_list_free(l);
	cr_assert_eq(tw_cluster_dead_read(EP, P, 0, "k3", 3, &l), TW_OK);
	cr_assert(l->count == 3 && l->more, "a page of operator keys is read through");
	cr_assert(!strcmp(l->tasks[0].key, "k4") && !strcmp(l->tasks[2].key, "k6"));
	tw_cluster_task_list_free(l);
	cr_assert_eq(tw_cluster_dead_read(EP, P, 0, "k6", 0, &l), TW_OK);
	cr_assert(l->count == 0 && !l->more);
	tw_cluster_task_list_free(l);
	cr_assert_eq(tw_cluster_dead_read(EP, P, 0, "bad key", 0, &l), -TW_EINVAL);
}

Test(views, requeue)
{
	cr_assert_eq(tw_cluster_requeue(EP, P, 0, "mail:1", 0), -TW_ENOTFOUND);
	joined();
	cr_assert_eq(tw_cluster_requeue(EP, P, 0, "mail:1", 0), -TW_ENOTFOUND, "no dead letter");
	put_record("mail:1", "mail", 1000, 3, true, 5, "payload\n2");
	int64_t before = wall_ms();
	cr_assert_eq(tw_cluster_requeue(EP, P, 0, "mail:1", 0), TW_OK);
	int64_t after = wall_ms();
	cr_assert(!exists(P "dead/mail:1"), "the dead letter went as the task came");
	tw_cluster_task_list *l;
	cr_assert_eq(tw_cluster_task_read(EP, P, 0, "mail:1", &l), TW_OK);
	cr_assert_eq(l->count, 1);
	tw_cluster_task_view *t = &l->tasks[0];
	cr_assert(t->state == TW_CLUSTER_TASK_PENDING && t->attempt == 0 && t->max_attempts == 3 &&
		  t->backoff_ms == 250 && t->last_code == 0);
	cr_assert_str_eq(t->kind, "mail");
	cr_assert(t->due_ms >= before && t->due_ms <= after, "due now: %" PRId64, t->due_ms);
	cr_assert(t->payload_len == 9 && memcmp(t->payload, "payload\n2", 9) == 0);
	tw_cluster_task_list_free(l);
	cr_assert_eq(tw_cluster_requeue(EP, P, 0, "mail:1", 0), -TW_ENOTFOUND, "done once");

	/* A live task has the key: refused, and the dead letter stays. */
	put_record("mail:1", "mail", 2000, 4, true, 6, "second");
	cr_assert_eq(tw_cluster_requeue(EP, P, 0, "mail:1", 0), -TW_EEXIST);
	cr_assert(exists(P "dead/mail:1"));

	/* A given due, and a dead letter whose key hashes to another group. */
	put_record("mail:2", "mail", 3000, 3, true, 1, "");
	cr_assert_eq(tw_cluster_requeue(EP, P, 0, "mail:2", 1796339000000), TW_OK);
	cr_assert_eq(tw_cluster_task_read(EP, P, 0, "mail:2", &l), TW_OK);
	cr_assert(l->count == 1 && l->tasks[0].due_ms == 1796339000000 &&
		  l->tasks[0].payload_len == 0);
	tw_cluster_task_list_free(l);
	char k[256];
	snprintf(k, sizeof k, P "defer/t/%04u/mail:2", tw_cluster_group_of("mail:2", GROUPS));
	cr_assert(exists(k), "stored in its group: %s", k);

	/* A value under dead/ that is no dead letter is not one. */
	put(P "dead/mine", "hello", 5);
	cr_assert_eq(tw_cluster_requeue(EP, P, 0, "mine", 0), -TW_ENOTFOUND);
	cr_assert_eq(tw_cluster_requeue(EP, P, 0, "mail:2", -1), -TW_EINVAL);
	cr_assert_eq(tw_cluster_requeue(EP, P, 0, "", 0), -TW_EINVAL);
	cr_assert_eq(tw_cluster_requeue(NULL, P, 0, "k", 0), -TW_EINVAL);
}

Test(views, view_counts_tasks)
{
	joined();
	tw_cluster_view *v;
	cr_assert_eq(tw_cluster_view_read(EP, P, 0, &v), TW_OK);
	cr_assert(v->tasks == 0 && v->tasks_claimed == 0 && v->dead == 0 && v->groups == GROUPS);
	tw_cluster_view_free(v);
	char key[32];
	for (int i = 0; i < 5; i++) {
		snprintf(key, sizeof key, "t:%d", i);
		put_record(key, "k", 1, 0, false, 0, "");
		if (i < 2)
			put_claim(key, 1, "gw-1", 9);
	}
	put_record("d:1", "k", 1, 3, true, 1, "");
	put_record("d:2", "k", 1, 3, true, 1, "");
	put_record("d:3", "k", 1, 3, true, 1, "");
	put("/dv/deadline", "not under dead/", 15);
	cr_assert_eq(tw_cluster_view_read(EP, P, 0, &v), TW_OK);
	cr_assert_eq(v->tasks, 5);
	cr_assert_eq(v->tasks_claimed, 2);
	cr_assert_eq(v->dead, 3);
	tw_cluster_view_free(v);
}

Test(views, unreachable)
{
	const char *nowhere[] = { "http://127.0.0.1:1", NULL };
	tw_cluster_task_list *l;
	cr_assert_eq(tw_cluster_task_read(nowhere, P, 300, "k", &l), -TW_CLUSTER_EUNAVAILABLE);
	cr_assert_eq(tw_cluster_dead_read(nowhere, P, 300, NULL, 0, &l), -TW_CLUSTER_EUNAVAILABLE);
	cr_assert_eq(tw_cluster_requeue(nowhere, P, 300, "k", 0), -TW_CLUSTER_EUNAVAILABLE);
}

/* ---- the views of what a replica writes ---- */

static struct {
	atomic_int code;          /* what the "fail" handler returns */
	atomic_uint last_attempt; /* its last run's attempt */
	atomic_uint runs;
	atomic_bool hold; /* the "slow" handler waits while set */
	atomic_uint slow_runs;
} h;

static int fail_handler(const tw_cluster_task *t, void *arg)
{
	(void)arg;
	atomic_store(&h.last_attempt, t->attempt);
	atomic_fetch_add(&h.runs, 1);
	return atomic_load(&h.code);
}

static int slow_handler(const tw_cluster_task *t, void *arg)
{
	(void)t;
	(void)arg;
	while (atomic_load(&h.hold))
		sleep_ms(10);
	atomic_fetch_add(&h.slow_runs, 1);
	return 0;
}

/* Until the key's list has want entries, the first in state (0: any); within 10 s. */
static tw_cluster_task_list *wait_task(const char *key, size_t want, unsigned state)
{
	for (int i = 0; i < 1000; i++, sleep_ms(10)) {
		tw_cluster_task_list *l;
		cr_assert_eq(tw_cluster_task_read(EP, P, 0, key, &l), TW_OK);
		if (l->count == want && (want == 0 || !state || l->tasks[0].state == state))
			return l;
		tw_cluster_task_list_free(l);
	}
	cr_assert_fail("%s: not %zu entries in state %u within 10 s", key, want, state);
	return NULL;
}

Test(views, what_a_replica_writes)
{
	tw_config ecfg;
	tw_config_init(&ecfg);
	ecfg.executors = 2;
	tw_engine *e;
	cr_assert_eq(tw_engine_create(&ecfg, &e), TW_OK);
	tw_cluster_config cfg;
	tw_cluster_config_init(&cfg);
	cfg.engine = e;
	cfg.endpoints = EP;
	cfg.member = "v-1";
	cfg.prefix = P;
	cfg.groups = GROUPS;
	cfg.lease_ttl_s = 2;
	cfg.claim_ahead_ms = 200;
	tw_cluster *c;
	cr_assert_eq(tw_cluster_join(&cfg, &c), TW_OK);
	atomic_store(&h.code, 3);
	atomic_store(&h.hold, true);
	cr_assert_eq(tw_cluster_handle(c, "fail", fail_handler, NULL), TW_OK);
	cr_assert_eq(tw_cluster_handle(c, "slow", slow_handler, NULL), TW_OK);

	/* Pending: as deferred, no attempt made. */
	tw_cluster_defer_spec far = { .kind = "fail",
				      .key = "far:1",
				      .delay_ms = 600000,
				      .payload = "x",
				      .payload_len = 1,
				      .max_attempts = 4,
				      .backoff_ms = 20 };
	int64_t before = wall_ms();
	cr_assert_eq(tw_cluster_defer(c, &far), TW_OK);
	tw_cluster_task_list *l = wait_task("far:1", 1, TW_CLUSTER_TASK_PENDING);
	cr_assert(l->tasks[0].attempt == 0 && l->tasks[0].max_attempts == 4 &&
		  l->tasks[0].backoff_ms == 20 && l->tasks[0].due_ms >= before + 600000);
	cr_assert_str_eq(l->tasks[0].kind, "fail");
	tw_cluster_task_list_free(l);

	/* Claimed while its handler runs: by v-1, attempt 1, with the owner's token. */
	tw_cluster_defer_spec slow = { .kind = "slow", .key = "slow:1" };
	cr_assert_eq(tw_cluster_defer(c, &slow), TW_OK);
	l = wait_task("slow:1", 1, TW_CLUSTER_TASK_CLAIMED);
	cr_assert(l->tasks[0].attempt == 1 && l->tasks[0].token > 0);
	cr_assert_str_eq(l->tasks[0].claimed_by, "v-1");
	tw_cluster_task_list_free(l);
	tw_cluster_view *v;
	cr_assert_eq(tw_cluster_view_read(EP, P, 0, &v), TW_OK);
	cr_assert(v->tasks == 2 && v->tasks_claimed == 1 && v->dead == 0, "%" PRIu64 " %" PRIu64,
		  v->tasks, v->tasks_claimed);
	tw_cluster_view_free(v);
	atomic_store(&h.hold, false);
	tw_cluster_task_list_free(wait_task("slow:1", 0, 0));
	cr_assert_eq(atomic_load(&h.slow_runs), 1);

	/* Failing twice: a dead letter with the last attempt and its code; requeued, it runs
	 * again from attempt 1 and, succeeding, is gone. */
	tw_cluster_defer_spec now = { .kind = "fail",
				      .key = "now:1",
				      .payload = "p\n",
				      .payload_len = 2,
				      .max_attempts = 2,
				      .backoff_ms = 20 };
	cr_assert_eq(tw_cluster_defer(c, &now), TW_OK);
	l = wait_task("now:1", 1, TW_CLUSTER_TASK_DEAD);
	cr_assert(l->tasks[0].attempt == 2 && l->tasks[0].last_code == 3 &&
		  l->tasks[0].payload_len == 2 && memcmp(l->tasks[0].payload, "p\n", 2) == 0);
	tw_cluster_task_list_free(l);
	cr_assert_eq(atomic_load(&h.runs), 2);
	cr_assert_eq(tw_cluster_dead_read(EP, P, 0, NULL, 0, &l), TW_OK);
	cr_assert(l->count == 1 && strcmp(l->tasks[0].key, "now:1") == 0);
	tw_cluster_task_list_free(l);
	atomic_store(&h.code, 0);
	cr_assert_eq(tw_cluster_requeue(EP, P, 0, "now:1", 0), TW_OK);
	tw_cluster_task_list_free(wait_task("now:1", 0, 0));
	cr_assert_eq(atomic_load(&h.runs), 3);
	cr_assert_eq(atomic_load(&h.last_attempt), 1, "a requeued task starts afresh");

	tw_cluster_leave(c);
	tw_engine_destroy(e);
}
