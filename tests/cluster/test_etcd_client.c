/*
 * tests/cluster/test_etcd_client.c - the transport against a real 3-member etcd (etcd_harness):
 * every call, the watch's ends, and failover with members killed, stopped or absent.
 */
#include "etcd_harness.h"
#include "etcd_internal.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static etcd_harness *H;
static etcd_client *C;

static void start(void)
{
	H = etcd_harness_start(3);
	cr_assert_not_null(H, "etcd did not start (see stderr)");
	etcd_status st;
	cr_assert_eq(tw__etcd_client_create(etcd_harness_endpoints(H), 3, 3000, &C, &st), 0, "%s",
		     st.message);
}

static void stop(void)
{
	tw__etcd_client_destroy(C);
	C = NULL;
	etcd_harness_stop(H);
	H = NULL;
}

TestSuite(client, .init = start, .fini = stop, .timeout = 60);

#define OK(call)                                                                            \
	do {                                                                                \
		etcd_status st_;                                                            \
		etcd_status *st = &st_;                                                     \
		cr_assert_eq((call), 0, "%s: %s: %s", #call, tw__etcd_error_name(st_.kind), \
			     st_.message);                                                  \
	} while (0)

static void put_str(etcd_client *c, const char *key, const char *value, int64_t lease, int64_t *rev)
{
	OK(tw__etcd_put(c, key, strlen(key), value, strlen(value), lease, rev, st));
}

static void range_str(const char *key, const char *end, int64_t limit, etcd_range_result *r)
{
	etcd_range_req req = { .key = key, .key_len = strlen(key), .limit = limit };
	if (end) {
		req.range_end = end;
		req.range_end_len = strlen(end);
	}
	OK(tw__etcd_range(C, &req, r, st));
}

Test(client, put_range_paging_delete)
{
	int64_t first = 0, rev = 0;
	char key[16], value[16];
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "p/%d", i);
		snprintf(value, sizeof(value), "v%d", i);
		put_str(C, key, value, 0, &rev);
		if (!first)
			first = rev;
	}
	cr_assert_eq(rev, first + 9);
	put_str(C, "p0", "outside", 0, NULL);

	/* Pages of 3 through the prefix, each starting after the last key seen. */
	uint8_t *end;
	size_t end_len, seen = 0;
	cr_assert_eq(tw__etcd_prefix_end("p/", 2, &end, &end_len), 0);
	/* etcd's paging: the next page starts at the last key with a 0 byte added. */
	char from[32] = "p/";
	size_t from_len = 2;
	for (bool more = true; more;) {
		etcd_range_result r;
		etcd_range_req req = { .key = from,
				       .key_len = from_len,
				       .range_end = end,
				       .range_end_len = end_len,
				       .limit = 3 };
		OK(tw__etcd_range(C, &req, &r, st));
		more = r.more;
		cr_assert_eq(r.total, (int64_t)(10 - seen));
		cr_assert(r.count == 3 || (!more && r.count == 1));
		for (size_t i = 0; i < r.count; i++, seen++) {
			snprintf(key, sizeof(key), "p/%zu", seen);
			cr_assert_str_eq((char *)r.kvs[i].key, key);
			snprintf(value, sizeof(value), "v%zu", seen);
			cr_assert_str_eq((char *)r.kvs[i].value, value);
			cr_assert_eq(r.kvs[i].mod_revision, first + (int64_t)seen);
		}
		const etcd_kv *last = &r.kvs[r.count - 1];
		memcpy(from, last->key, last->key_len);
		from[last->key_len] = '\0';
		from_len = last->key_len + 1;
		tw__etcd_range_result_free(&r);
	}
	cr_assert_eq(seen, 10);

	/* keys_only, count_only, the key alone, and an older revision. */
	etcd_range_result r;
	etcd_range_req req = { .key = "p/",
			       .key_len = 2,
			       .range_end = end,
			       .range_end_len = end_len,
			       .keys_only = true };
	OK(tw__etcd_range(C, &req, &r, st));
	cr_assert(r.count == 10 && r.kvs[0].value == NULL && r.kvs[0].key_len == 3);
	tw__etcd_range_result_free(&r);
	req.keys_only = false;
	req.count_only = true;
	OK(tw__etcd_range(C, &req, &r, st));
	cr_assert(r.count == 0 && r.total == 10);
	tw__etcd_range_result_free(&r);
	put_str(C, "p/3", "changed", 0, NULL);
	range_str("p/3", NULL, 0, &r);
	cr_assert(r.count == 1 && !strcmp((char *)r.kvs[0].value, "changed"));
	cr_assert_eq(r.kvs[0].version, 2);
	tw__etcd_range_result_free(&r);
	etcd_range_req old = { .key = "p/3", .key_len = 3, .revision = first + 3 };
	OK(tw__etcd_range(C, &old, &r, st));
	cr_assert(r.count == 1 && !strcmp((char *)r.kvs[0].value, "v3"));
	tw__etcd_range_result_free(&r);

	int64_t deleted = -1;
	OK(tw__etcd_delete(C, "p/0", 3, NULL, 0, &deleted, st));
	cr_assert_eq(deleted, 1);
	OK(tw__etcd_delete(C, "p/0", 3, NULL, 0, &deleted, st));
	cr_assert_eq(deleted, 0);
	OK(tw__etcd_delete(C, "p/", 2, end, end_len, &deleted, st));
	cr_assert_eq(deleted, 9);
	range_str("p", "q", 0, &r);
	cr_assert(r.count == 1 && !strcmp((char *)r.kvs[0].key, "p0"));
	tw__etcd_range_result_free(&r);
	free(end);

	etcd_status st;
	cr_assert_eq(tw__etcd_put(C, "", 0, "v", 1, 0, NULL, &st), -1);
	cr_assert_eq(st.kind, ETCD_EINVAL);
}

/* Create-if-absent: the claim a replica makes for a fire time. */
static int claim(const char *key, const char *owner, etcd_txn_result *t)
{
	etcd_compare cmp = { .target = ETCD_CMP_CREATE,
			     .result = ETCD_CMP_EQUAL,
			     .key = key,
			     .key_len = strlen(key),
			     .number = 0 };
	etcd_op put = { .kind = ETCD_OP_PUT,
			.key = key,
			.key_len = strlen(key),
			.value = owner,
			.value_len = strlen(owner) };
	etcd_op get = { .kind = ETCD_OP_RANGE, .key = key, .key_len = strlen(key) };
	etcd_status st;
	int rc = tw__etcd_txn(C, &cmp, 1, &put, 1, &get, 1, t, &st);
	cr_assert_eq(rc, 0, "txn: %s", st.message);
	return t->succeeded;
}

Test(client, txn_branches)
{
	etcd_txn_result t;
	cr_assert(claim("job/1@100", "replica-a", &t));
	cr_assert_eq(t.count, 1);
	cr_assert_eq(t.results[0].kind, ETCD_OP_PUT);
	cr_assert_eq(t.results[0].revision, t.revision);
	int64_t won_at = t.revision;
	tw__etcd_txn_result_free(&t);

	cr_assert(!claim("job/1@100", "replica-b", &t));
	cr_assert_eq(t.count, 1);
	cr_assert_eq(t.results[0].kind, ETCD_OP_RANGE);
	cr_assert_str_eq((char *)t.results[0].range.kvs[0].value, "replica-a");
	cr_assert_eq(t.results[0].range.kvs[0].create_revision, won_at);
	tw__etcd_txn_result_free(&t);

	/* VALUE and MOD compares; a delete in the branch taken. */
	etcd_compare cmp[2] = {
		{ .target = ETCD_CMP_VALUE,
		  .result = ETCD_CMP_EQUAL,
		  .key = "job/1@100",
		  .key_len = 9,
		  .value = "replica-a",
		  .value_len = 9 },
		{ .target = ETCD_CMP_MOD,
		  .result = ETCD_CMP_EQUAL,
		  .key = "job/1@100",
		  .key_len = 9,
		  .number = won_at },
	};
	etcd_op del = { .kind = ETCD_OP_DELETE, .key = "job/1@100", .key_len = 9 };
	etcd_status st;
	OK(tw__etcd_txn(C, cmp, 2, &del, 1, NULL, 0, &t, st));
	cr_assert(t.succeeded && t.count == 1 && t.results[0].kind == ETCD_OP_DELETE);
	cr_assert_eq(t.results[0].deleted, 1);
	tw__etcd_txn_result_free(&t);
	OK(tw__etcd_txn(C, cmp, 2, &del, 1, NULL, 0, &t, st));
	cr_assert(!t.succeeded && t.count == 0);
	tw__etcd_txn_result_free(&t);

	cmp[0].target = 42;
	cr_assert_eq(tw__etcd_txn(C, cmp, 1, NULL, 0, NULL, 0, &t, &st), -1);
	cr_assert_eq(st.kind, ETCD_EINVAL);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts))
		;
}

static int64_t now_ms(void)
{
	return tw__etcd_now_ms();
}

Test(client, leases)
{
	int64_t id, ttl;
	etcd_range_result r;
	etcd_status st;
	OK(tw__etcd_lease_grant(C, 5, &id, &ttl, st));
	cr_assert(id > 0 && ttl == 5);
	OK(tw__etcd_lease_keepalive(C, id, &ttl, st));
	cr_assert_eq(ttl, 5);
	put_str(C, "owned", "x", id, NULL);
	range_str("owned", NULL, 0, &r);
	cr_assert(r.count == 1 && r.kvs[0].lease == id);
	tw__etcd_range_result_free(&r);
	OK(tw__etcd_lease_revoke(C, id, st));
	range_str("owned", NULL, 0, &r);
	cr_assert_eq(r.count, 0, "a key of a revoked lease stays");
	tw__etcd_range_result_free(&r);
	/* Revoking again, and renewing or putting with a revoked lease. */
	OK(tw__etcd_lease_revoke(C, id, st));
	cr_assert_eq(tw__etcd_lease_keepalive(C, id, &ttl, &st), -1);
	cr_assert_eq(st.kind, ETCD_ENOLEASE, "%s", tw__etcd_error_name(st.kind));
	cr_assert_eq(tw__etcd_put(C, "k", 1, "v", 1, id, NULL, &st), -1);
	cr_assert_eq(st.kind, ETCD_ENOLEASE, "%s", tw__etcd_error_name(st.kind));

	/* Expiry: a 2 s lease left alone is gone once its TTL has passed. */
	OK(tw__etcd_lease_grant(C, 2, &id, &ttl, st));
	cr_assert_eq(ttl, 2);
	put_str(C, "expiring", "x", id, NULL);
	sleep_ms(2600);
	cr_assert_eq(tw__etcd_lease_keepalive(C, id, &ttl, &st), -1);
	cr_assert_eq(st.kind, ETCD_ENOLEASE, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	range_str("expiring", NULL, 0, &r);
	cr_assert_eq(r.count, 0);
	tw__etcd_range_result_free(&r);
}

typedef struct {
	etcd_event_type type[16];
	char key[16][16];
	int64_t rev[16];
	bool prev[16];
	size_t n, stop_after;
	int created, canceled;
	int64_t compact_revision;
} seen;

static int collect(const etcd_watch_msg *m, void *arg)
{
	seen *s = arg;
	s->created += m->created;
	s->canceled += m->canceled;
	if (m->compact_revision)
		s->compact_revision = m->compact_revision;
	for (size_t i = 0; i < m->count && s->n < 16; i++, s->n++) {
		s->type[s->n] = m->events[i].type;
		snprintf(s->key[s->n], sizeof(s->key[0]), "%.*s", (int)m->events[i].kv.key_len,
			 (const char *)m->events[i].kv.key);
		s->rev[s->n] = m->events[i].kv.mod_revision;
		s->prev[s->n] = m->events[i].prev_kv.key != NULL;
	}
	return s->stop_after && s->n >= s->stop_after;
}

Test(client, watch_from_a_revision)
{
	int64_t r1, r2;
	int64_t deleted;
	put_str(C, "w/1", "a", 0, &r1);
	put_str(C, "w/2", "b", 0, NULL);
	OK(tw__etcd_delete(C, "w/1", 3, NULL, 0, &deleted, st));
	put_str(C, "x/other", "c", 0, NULL);
	put_str(C, "w/1", "d", 0, &r2);

	seen s = { .stop_after = 4 };
	etcd_watch_req req = { .key = "w/",
			       .key_len = 2,
			       .range_end = "w0",
			       .range_end_len = 2,
			       .start_revision = r1,
			       .prev_kv = true };
	etcd_status st;
	cr_assert_eq(tw__etcd_watch(C, &req, collect, &s, &st), -1);
	cr_assert_eq(st.kind, ETCD_ECANCELED, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert_eq(s.created, 1);
	cr_assert_eq(s.n, 4);
	etcd_event_type types[] = { ETCD_EVENT_PUT, ETCD_EVENT_PUT, ETCD_EVENT_DELETE,
				    ETCD_EVENT_PUT };
	const char *keys[] = { "w/1", "w/2", "w/1", "w/1" };
	for (size_t i = 0; i < 4; i++) {
		cr_assert_eq(s.type[i], types[i], "event %zu", i);
		cr_assert_str_eq(s.key[i], keys[i], "event %zu", i);
		cr_assert_eq(s.rev[i], i < 3 ? r1 + (int64_t)i : r2, "event %zu", i);
	}
	cr_assert(s.prev[2], "a delete with prev_kv asked carries it");

	/* The client is usable after the watch it aborted. */
	etcd_range_result r;
	range_str("w/1", NULL, 0, &r);
	cr_assert(r.count == 1 && !strcmp((char *)r.kvs[0].value, "d"));
	tw__etcd_range_result_free(&r);
}

typedef struct {
	const char *const *endpoints;
	atomic_bool created;
	int rc;
} writer;

static int note_created(const etcd_watch_msg *m, void *arg)
{
	void **pair = arg;
	if (m->created)
		atomic_store(&((writer *)pair[1])->created, true);
	return collect(m, pair[0]);
}

/* Writes once the watch is in place, through a client of its own (one per thread). */
static void *write_later(void *arg)
{
	writer *w = arg;
	etcd_client *c;
	etcd_status st;
	w->rc = -1;
	if (tw__etcd_client_create(w->endpoints, 3, 3000, &c, &st))
		return NULL;
	for (int i = 0; i < 500 && !atomic_load(&w->created); i++)
		sleep_ms(10);
	int64_t deleted;
	if (atomic_load(&w->created) && !tw__etcd_put(c, "l/1", 3, "a", 1, 0, NULL, &st) &&
	    !tw__etcd_put(c, "l/2", 3, "b", 1, 0, NULL, &st) &&
	    !tw__etcd_delete(c, "l/1", 3, NULL, 0, &deleted, &st))
		w->rc = 0;
	tw__etcd_client_destroy(c);
	return NULL;
}

Test(client, watch_sees_live_writes)
{
	writer w = { .endpoints = etcd_harness_endpoints(H), .created = false };
	seen s = { .stop_after = 3 };
	void *pair[2] = { &s, &w };
	pthread_t t;
	etcd_watch_req req = { .key = "l/", .key_len = 2, .range_end = "l0", .range_end_len = 2 };
	etcd_status st;
	cr_assert_eq(pthread_create(&t, NULL, write_later, &w), 0);
	int rc = tw__etcd_watch(C, &req, note_created, pair, &st);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(w.rc, 0, "the writer failed");
	cr_assert_eq(rc, -1);
	cr_assert_eq(st.kind, ETCD_ECANCELED, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert_eq(s.n, 3);
	cr_assert(s.type[0] == ETCD_EVENT_PUT && !strcmp(s.key[0], "l/1"));
	cr_assert(s.type[1] == ETCD_EVENT_PUT && !strcmp(s.key[1], "l/2"));
	cr_assert(s.type[2] == ETCD_EVENT_DELETE && !strcmp(s.key[2], "l/1"));
	cr_assert(s.rev[0] < s.rev[1] && s.rev[1] < s.rev[2]);
}

Test(client, watch_and_range_compacted)
{
	int64_t r1, r2;
	put_str(C, "c/1", "a", 0, &r1);
	put_str(C, "c/1", "b", 0, NULL);
	put_str(C, "c/1", "c", 0, &r2);
	OK(tw__etcd_compact(C, r2, true, st));

	seen s = { 0 };
	etcd_watch_req req = { .key = "c/1", .key_len = 3, .start_revision = r1 };
	etcd_status st;
	cr_assert_eq(tw__etcd_watch(C, &req, collect, &s, &st), -1);
	cr_assert_eq(st.kind, ETCD_ECOMPACTED, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert_eq(s.canceled, 1);
	cr_assert_eq(s.compact_revision, r2);
	cr_assert_eq(s.n, 0);

	etcd_range_result r;
	etcd_range_req old = { .key = "c/1", .key_len = 3, .revision = r1 };
	cr_assert_eq(tw__etcd_range(C, &old, &r, &st), -1);
	cr_assert_eq(st.kind, ETCD_ECOMPACTED, "%s", tw__etcd_error_name(st.kind));
	cr_assert_eq(st.grpc_code, 11);
}

typedef struct {
	atomic_bool stop;
	int64_t stopped_at;
} stopper;

static void *stop_later(void *arg)
{
	stopper *s = arg;
	sleep_ms(300);
	s->stopped_at = now_ms();
	atomic_store(&s->stop, true);
	return NULL;
}

Test(client, stop_flag_ends_a_watch)
{
	stopper sp = { .stop = false };
	pthread_t t;
	seen s = { 0 };
	etcd_watch_req req = { .key = "quiet", .key_len = 5, .stop = &sp.stop };
	etcd_status st;
	cr_assert_eq(pthread_create(&t, NULL, stop_later, &sp), 0);
	int rc = tw__etcd_watch(C, &req, collect, &s, &st);
	int64_t ended = now_ms();
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(rc, -1);
	cr_assert_eq(st.kind, ETCD_ECANCELED, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert_eq(s.created, 1);
	/* The loop looks every 100 ms; the rest is room for a loaded machine. */
	cr_assert_lt(ended - sp.stopped_at, 250, "the watch ended %lld ms after the stop",
		     (long long)(ended - sp.stopped_at));
}

Test(client, failover_past_a_killed_member)
{
	int leader = etcd_harness_wait_leader(H, 5000);
	cr_assert_geq(leader, 0, "no leader");
	/* A follower first, so that no election stands between its death and the next write. */
	int f = (leader + 1) % 3, o = (leader + 2) % 3;
	const char *eps[3] = { etcd_harness_endpoints(H)[f], etcd_harness_endpoints(H)[leader],
			       etcd_harness_endpoints(H)[o] };
	etcd_client *c;
	OK(tw__etcd_client_create(eps, 3, 3000, &c, st));
	put_str(c, "f/1", "before", 0, NULL);
	cr_assert_str_eq(tw__etcd_client_endpoint(c), eps[0]);
	cr_assert_eq(etcd_harness_signal(H, f, SIGKILL), 0);
	cr_assert_eq(etcd_harness_pid(H, f), 0);
	for (int i = 0; i < 5; i++)
		put_str(c, "f/1", "after", 0, NULL);
	cr_assert_str_neq(tw__etcd_client_endpoint(c), eps[0]);

	/* Back with its data: it catches up on what it missed. */
	cr_assert_eq(etcd_harness_restart(H, f), 0);
	cr_assert_eq(etcd_harness_wait_healthy(H, f, 10000), 0, "member %d did not come back", f);
	etcd_client *back;
	OK(tw__etcd_client_create(&eps[0], 1, 3000, &back, st));
	int64_t deadline = now_ms() + 5000;
	for (;;) {
		etcd_range_result r;
		etcd_range_req req = { .key = "f/1", .key_len = 3 };
		OK(tw__etcd_range(back, &req, &r, st));
		bool caught_up = r.count == 1 && !strcmp((char *)r.kvs[0].value, "after");
		tw__etcd_range_result_free(&r);
		if (caught_up)
			break;
		cr_assert_lt(now_ms(), deadline, "the restarted member did not catch up");
		sleep_ms(20);
	}
	tw__etcd_client_destroy(back);
	tw__etcd_client_destroy(c);
}

Test(client, a_killed_leader_is_replaced)
{
	int old = etcd_harness_wait_leader(H, 5000);
	cr_assert_geq(old, 0, "no leader");
	cr_assert_eq(etcd_harness_signal(H, old, SIGKILL), 0);
	int now = etcd_harness_wait_leader(H, 5000);
	cr_assert(now >= 0 && now != old, "no new leader (%d)", now);
	/* Writes go through again once the new leader is known; the client may first meet the
	 * dead member (refused: next endpoint) or an election (an error for the caller). */
	int64_t deadline = now_ms() + 5000;
	etcd_status st;
	while (tw__etcd_put(C, "after-election", 14, "x", 1, 0, NULL, &st)) {
		cr_assert_lt(now_ms(), deadline, "no write after the election: %s", st.message);
		sleep_ms(50);
	}
}

Test(client, lease_and_http_errors)
{
	etcd_status st;
	int64_t ttl;
	cr_assert_eq(tw__etcd_lease_keepalive(C, 12345, &ttl, &st), -1);
	cr_assert_eq(st.kind, ETCD_ENOLEASE, "%s", tw__etcd_error_name(st.kind));
	OK(tw__etcd_lease_revoke(C, 12345, st));
	cr_assert_eq(tw__etcd_lease_grant(C, 0, &ttl, NULL, &st), -1);
	cr_assert_eq(st.kind, ETCD_EINVAL);

	/* Not the gateway: a path etcd does not serve answers 404 in plain text. */
	char ep[96];
	snprintf(ep, sizeof(ep), "%s/elsewhere", etcd_harness_endpoints(H)[0]);
	const char *eps[] = { ep };
	etcd_client *c;
	OK(tw__etcd_client_create(eps, 1, 2000, &c, st));
	etcd_range_result r;
	etcd_range_req req = { .key = "k", .key_len = 1 };
	cr_assert_eq(tw__etcd_range(c, &req, &r, &st), -1);
	cr_assert_eq(st.kind, ETCD_EHTTP, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert_eq(st.http_status, 404);
	tw__etcd_client_destroy(c);
}

Test(client, every_member_stopped_times_out)
{
	etcd_client *c;
	etcd_status st;
	OK(tw__etcd_client_create(etcd_harness_endpoints(H), 3, 500, &c, st));
	put_str(c, "s/1", "x", 0, NULL);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(etcd_harness_signal(H, i, SIGSTOP), 0);
	int64_t t0 = now_ms();
	int rc = tw__etcd_put(c, "s/1", 3, "y", 1, 0, NULL, &st);
	int64_t took = now_ms() - t0;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(etcd_harness_signal(H, i, SIGCONT), 0);
	cr_assert_eq(rc, -1);
	cr_assert_eq(st.kind, ETCD_ETIMEOUT, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert(took >= 450 && took < 1500, "the timeout took %lld ms", (long long)took);
	/* The stopped endpoint is not the next one tried. */
	cr_assert_str_neq(tw__etcd_client_endpoint(c), etcd_harness_endpoints(H)[0]);
	tw__etcd_client_destroy(c);
}

Test(transport, every_endpoint_refusing)
{
	/* Ports just found free: nothing listens there. */
	char eps[3][64];
	const char *list[3];
	for (int i = 0; i < 3; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t len = sizeof(a);
		cr_assert(fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
			  !getsockname(fd, (struct sockaddr *)&a, &len));
		snprintf(eps[i], sizeof(eps[i]), "http://127.0.0.1:%d", ntohs(a.sin_port));
		list[i] = eps[i];
		cr_assert_eq(close(fd), 0);
	}
	etcd_client *c;
	etcd_status st;
	OK(tw__etcd_client_create(list, 3, 2000, &c, st));
	etcd_range_result r;
	etcd_range_req req = { .key = "k", .key_len = 1 };
	cr_assert_eq(tw__etcd_range(c, &req, &r, &st), -1);
	cr_assert_eq(st.kind, ETCD_ECONNECT, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	seen s = { 0 };
	etcd_watch_req w = { .key = "k", .key_len = 1 };
	cr_assert_eq(tw__etcd_watch(c, &w, collect, &s, &st), -1);
	cr_assert_eq(st.kind, ETCD_ECONNECT, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	tw__etcd_client_destroy(c);

	cr_assert_eq(tw__etcd_client_create(list, 0, 2000, &c, &st), -1);
	cr_assert_eq(st.kind, ETCD_EINVAL);
}
