/*
 * tests/cluster/test_etcd_fake.c - the client against fake_gateway: the failures a real etcd
 * does not give on demand, each mapped to its kind, and failover only where it is safe.
 */
#include "etcd_internal.h"
#include "fake_gateway.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static char reply_buf[4][4096];

/* A whole answer with a Content-Length; the fake closes after it. */
static const char *reply(int slot, int status, const char *reason, const char *body)
{
	snprintf(reply_buf[slot], sizeof(reply_buf[slot]),
		 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nConnection: close\r\n"
		 "Content-Length: %zu\r\n\r\n%s",
		 status, reason, strlen(body), body);
	return reply_buf[slot];
}

static fake_gateway *start_fake(fake_mode mode, const char *text, size_t chunk)
{
	fake_gateway *f = fake_gateway_start(mode, text, chunk);
	cr_assert_not_null(f, "the fake gateway did not start");
	return f;
}

static etcd_client *client_of(fake_gateway *a, fake_gateway *b, unsigned timeout_ms)
{
	const char *eps[2] = { fake_gateway_endpoint(a), b ? fake_gateway_endpoint(b) : NULL };
	etcd_client *c;
	etcd_status st;
	cr_assert_eq(tw__etcd_client_create(eps, b ? 2 : 1, timeout_ms, &c, &st), 0, "%s",
		     st.message);
	return c;
}

static const char ok_put[] = "{\"header\":{\"revision\":\"7\"}}";

Test(fake, unavailable_moves_the_next_request_on)
{
	fake_gateway *down = start_fake(
		FAKE_ANSWER,
		reply(0, 503, "Service Unavailable",
		      "{\"error\":\"etcdserver: no leader\",\"message\":\"etcdserver: no leader\","
		      "\"code\":14}"),
		0);
	fake_gateway *up = start_fake(FAKE_ANSWER, reply(1, 200, "OK", ok_put), 0);
	etcd_client *c = client_of(down, up, 2000);
	etcd_status st;
	int64_t rev = 0;
	cr_assert_eq(tw__etcd_put(c, "k", 1, "v", 1, 0, &rev, &st), -1);
	cr_assert(st.kind == ETCD_EGRPC && st.grpc_code == 14 && st.http_status == 503);
	cr_assert_str_eq(st.message, "etcdserver: no leader");
	cr_assert_eq(fake_gateway_requests(up, NULL, 0), 0, "a write was sent twice");
	cr_assert_eq(tw__etcd_put(c, "k", 1, "v", 1, 0, &rev, &st), 0, "%s", st.message);
	cr_assert_eq(rev, 7);
	char path[128];
	cr_assert_eq(fake_gateway_requests(up, path, sizeof(path)), 1);
	cr_assert_str_eq(path, "/v3/kv/put");
	cr_assert_eq(fake_gateway_requests(down, NULL, 0), 1);
	tw__etcd_client_destroy(c);
	fake_gateway_stop(down);
	fake_gateway_stop(up);
}

Test(fake, a_dropped_request_is_not_sent_again)
{
	fake_gateway *drop = start_fake(FAKE_DROP, NULL, 0);
	fake_gateway *up = start_fake(FAKE_ANSWER, reply(0, 200, "OK", ok_put), 0);
	etcd_client *c = client_of(drop, up, 2000);
	etcd_status st;
	cr_assert_eq(tw__etcd_put(c, "k", 1, "v", 1, 0, NULL, &st), -1);
	cr_assert_eq(st.kind, ETCD_ECONNECT, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert_eq(fake_gateway_requests(drop, NULL, 0), 1);
	cr_assert_eq(fake_gateway_requests(up, NULL, 0), 0, "a write was sent twice");
	/* The caller's retry goes to the next endpoint. */
	cr_assert_eq(tw__etcd_put(c, "k", 1, "v", 1, 0, NULL, &st), 0, "%s", st.message);
	cr_assert_eq(fake_gateway_requests(up, NULL, 0), 1);
	tw__etcd_client_destroy(c);
	fake_gateway_stop(drop);
	fake_gateway_stop(up);
}

Test(fake, silence_times_out_without_failover)
{
	fake_gateway *silent = start_fake(FAKE_SILENT, NULL, 0);
	fake_gateway *up = start_fake(FAKE_ANSWER, reply(0, 200, "OK", ok_put), 0);
	etcd_client *c = client_of(silent, up, 300);
	etcd_status st;
	int64_t t0 = tw__etcd_now_ms();
	cr_assert_eq(tw__etcd_put(c, "k", 1, "v", 1, 0, NULL, &st), -1);
	int64_t took = tw__etcd_now_ms() - t0;
	cr_assert_eq(st.kind, ETCD_ETIMEOUT, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert(took >= 280 && took < 1000, "the timeout took %lld ms", (long long)took);
	cr_assert_eq(fake_gateway_requests(up, NULL, 0), 0);
	tw__etcd_client_destroy(c);
	fake_gateway_stop(silent);
	fake_gateway_stop(up);
}

static void expect_kind(const char *text, etcd_error kind, long http_status)
{
	fake_gateway *f = start_fake(FAKE_ANSWER, text, 0);
	etcd_client *c = client_of(f, NULL, 2000);
	etcd_status st;
	etcd_range_result r;
	etcd_range_req req = { .key = "k", .key_len = 1 };
	cr_assert_eq(tw__etcd_range(c, &req, &r, &st), -1);
	cr_assert_eq(st.kind, kind, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert_eq(st.http_status, http_status);
	tw__etcd_client_destroy(c);
	fake_gateway_stop(f);
}

Test(fake, answers_that_are_not_etcd_s)
{
	expect_kind(reply(0, 200, "OK", "not json"), ETCD_EPARSE, 200);
	expect_kind(reply(0, 200, "OK", "{\"header\":{\"revision\":true}}"), ETCD_EPARSE, 200);
	expect_kind(reply(0, 200, "OK", "{\"kvs\":[{\"key\":\"!!\"}]}"), ETCD_EPARSE, 200);
	expect_kind(reply(0, 200, "OK", "[1]"), ETCD_EPARSE, 200);
	expect_kind(reply(0, 502, "Bad Gateway", "<html>bad gateway</html>"), ETCD_EHTTP, 502);
	expect_kind(reply(0, 404, "Not Found", "{}"), ETCD_EHTTP, 404);
	expect_kind(reply(0, 400, "Bad Request",
			  "{\"error\":\"x\",\"message\":\"etcdserver: mvcc: required revision has "
			  "been compacted\",\"code\":11}"),
		    ETCD_ECOMPACTED, 400);
}

typedef struct {
	int messages, events;
} counts;

static int count(const etcd_watch_msg *m, void *arg)
{
	counts *n = arg;
	n->messages++;
	n->events += (int)m->count;
	return 0;
}

/* A stream whose body ends with the connection, written 7 bytes at a time. */
static const char stream_head[] =
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
	"{\"result\":{\"header\":{\"revision\":\"6\"},\"created\":true}}\n"
	"{\"result\":{\"header\":{\"revision\":\"7\"},\"events\":[{\"kv\":{\"key\":\"dy8x\","
	"\"mod_revision\":\"7\",\"value\":\"b25l\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":"
	"\"dy8y\",\"mod_revision\":\"7\"}}]}}\n";

Test(fake, a_stream_split_anywhere_ends_with_its_error)
{
	char text[2048];
	snprintf(text, sizeof(text), "%s%s", stream_head,
		 "{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"transport is "
		 "closing\",\"http_status\":\"Service Unavailable\"}}\n");
	fake_gateway *f = start_fake(FAKE_ANSWER, text, 7);
	etcd_client *c = client_of(f, NULL, 2000);
	counts n = { 0 };
	etcd_watch_req req = { .key = "w/", .key_len = 2 };
	etcd_status st;
	cr_assert_eq(tw__etcd_watch(c, &req, count, &n, &st), -1);
	cr_assert_eq(st.kind, ETCD_EGRPC, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert(st.grpc_code == 14 && st.http_status == 503);
	cr_assert(n.messages == 2 && n.events == 2, "%d messages, %d events", n.messages, n.events);
	tw__etcd_client_destroy(c);
	fake_gateway_stop(f);

	/* Cut in the middle of an object: the stream ended, not a parse error. */
	snprintf(text, sizeof(text), "%s%s", stream_head, "{\"result\":{\"hea");
	f = start_fake(FAKE_ANSWER, text, 7);
	c = client_of(f, NULL, 2000);
	n = (counts){ 0 };
	cr_assert_eq(tw__etcd_watch(c, &req, count, &n, &st), -1);
	cr_assert_eq(st.kind, ETCD_ECONNECT, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert_eq(n.messages, 2);
	tw__etcd_client_destroy(c);
	fake_gateway_stop(f);

	/* Never created: the watch gives up after the client's timeout. */
	f = start_fake(FAKE_SILENT, NULL, 0);
	c = client_of(f, NULL, 300);
	cr_assert_eq(tw__etcd_watch(c, &req, count, &n, &st), -1);
	cr_assert_eq(st.kind, ETCD_ETIMEOUT, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	tw__etcd_client_destroy(c);
	fake_gateway_stop(f);
}

Test(fake, a_watch_refused)
{
	etcd_watch_req req = { .key = "w/", .key_len = 2 };
	counts n = { 0 };
	etcd_status st;
	/* What etcd 3.4 answers a watch whose key is not base64. */
	fake_gateway *f = start_fake(FAKE_ANSWER,
				     reply(0, 500, "Internal Server Error",
					   "{\"error\":\"illegal base64 data at input byte 0\","
					   "\"message\":\"illegal base64 data at input byte 0\","
					   "\"code\":2}"),
				     0);
	etcd_client *c = client_of(f, NULL, 2000);
	cr_assert_eq(tw__etcd_watch(c, &req, count, &n, &st), -1);
	cr_assert_eq(st.kind, ETCD_EGRPC, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert(st.grpc_code == 2 && st.http_status == 500 && n.messages == 0);
	tw__etcd_client_destroy(c);
	fake_gateway_stop(f);

	f = start_fake(FAKE_ANSWER, reply(0, 404, "Not Found", "404 page not found"), 0);
	c = client_of(f, NULL, 2000);
	cr_assert_eq(tw__etcd_watch(c, &req, count, &n, &st), -1);
	cr_assert_eq(st.kind, ETCD_EHTTP, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert_eq(st.http_status, 404);
	tw__etcd_client_destroy(c);
	fake_gateway_stop(f);
}
