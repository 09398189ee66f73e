/*
 * tests/cluster/test_etcd_watch.c - watches against a real 3-member etcd: history from a
 * revision, live writes, a compacted start, and the stop flag.
 */
#include "client_test.h"

TestSuite(watch, .init = start, .fini = stop, .timeout = 60);

Test(watch, watch_from_a_revision)
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

Test(watch, watch_sees_live_writes)
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

Test(watch, watch_and_range_compacted)
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

Test(watch, stop_flag_ends_a_watch)
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
