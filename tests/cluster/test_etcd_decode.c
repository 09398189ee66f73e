/*
 * tests/cluster/test_etcd_decode.c - the stream framing and the decoders against answers
 * recorded from etcd 3.4's gateway (tests/cluster/recorded/, one answer body per file): the
 * framing must give the same objects wherever the reads split the bytes, and the decoders the
 * values etcd wrote, with proto3's left-out fields read as 0.
 */
#include "etcd_internal.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *name, size_t *len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", RECORDED_DIR, name);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	char *buf = malloc(1 << 16);
	cr_assert_not_null(buf);
	*len = fread(buf, 1, 1 << 16, f);
	cr_assert(feof(f) && !ferror(f), "%s: read failed or over 64 KiB", path);
	fclose(f);
	return buf;
}

typedef struct {
	char *text[16]; /* each object as compact JSON with sorted keys */
	size_t n;
} objects;

static void objects_free(objects *o)
{
	for (size_t i = 0; i < o->n; i++)
		free(o->text[i]);
	o->n = 0;
}

static void drain(etcd_stream *s, objects *o)
{
	json_t *obj;
	etcd_status st;
	int rc;
	while ((rc = tw__etcd_stream_next(s, &obj, &st)) == 1) {
		cr_assert_lt(o->n, 16);
		o->text[o->n] = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
		cr_assert_not_null(o->text[o->n]);
		o->n++;
		json_decref(obj);
	}
	cr_assert_eq(rc, 0, "stream: %s", st.message);
}

static void feed(etcd_stream *s, const char *data, size_t len, objects *o)
{
	etcd_status st;
	cr_assert_eq(tw__etcd_stream_feed(s, data, len, &st), 0, "feed: %s", st.message);
	drain(s, o);
}

static void assert_same(const objects *a, const objects *b, const char *what)
{
	cr_assert_eq(a->n, b->n, "%s: %zu objects, %zu expected", what, a->n, b->n);
	for (size_t i = 0; i < a->n; i++)
		cr_assert_str_eq(a->text[i], b->text[i], "%s: object %zu differs", what, i);
}

static const struct {
	const char *name;
	size_t objects;
} recordings[] = {
	{ "delete.json", 1 },
	{ "error_compacted.json", 1 },
	{ "error_lease_not_found.json", 1 },
	{ "keepalive.json", 1 },
	{ "keepalive_gone.json", 1 },
	{ "lease_grant.json", 1 },
	{ "put.json", 1 },
	{ "range_binary.json", 1 },
	{ "range_count.json", 1 },
	{ "range_empty.json", 1 },
	{ "range_more.json", 1 },
	{ "status.json", 1 },
	{ "txn_failure.json", 1 },
	{ "txn_success.json", 1 },
	{ "watch_binary.json", 3 },
	{ "watch_compacted.json", 2 },
	{ "watch_events.json", 5 },
	{ "watch_shutdown.json", 2 },
};

Test(stream, every_split_gives_the_same_objects)
{
	for (size_t r = 0; r < sizeof(recordings) / sizeof(recordings[0]); r++) {
		size_t len;
		char *data = slurp(recordings[r].name, &len);
		etcd_stream s;
		objects whole = { 0 }, got = { 0 };
		tw__etcd_stream_init(&s, 1 << 16);
		feed(&s, data, len, &whole);
		tw__etcd_stream_free(&s);
		cr_assert_eq(whole.n, recordings[r].objects, "%s: %zu objects", recordings[r].name,
			     whole.n);
		for (size_t k = 0; k <= len; k++) {
			tw__etcd_stream_init(&s, 1 << 16);
			feed(&s, data, k, &got);
			feed(&s, data + k, len - k, &got);
			tw__etcd_stream_free(&s);
			assert_same(&got, &whole, recordings[r].name);
			objects_free(&got);
		}
		tw__etcd_stream_init(&s, 1 << 16);
		for (size_t k = 0; k < len; k++)
			feed(&s, data + k, 1, &got);
		tw__etcd_stream_free(&s);
		assert_same(&got, &whole, recordings[r].name);
		objects_free(&got);
		objects_free(&whole);
		free(data);
	}
}

/* The first error, with how many objects came before it. */
static int framing_error(const char *text, size_t max, size_t piece, size_t *before)
{
	etcd_stream s;
	etcd_status st;
	json_t *obj;
	int rc = 0;
	*before = 0;
	tw__etcd_stream_init(&s, max);
	for (size_t off = 0, len = strlen(text); off < len && rc >= 0; off += piece) {
		size_t n = len - off < piece ? len - off : piece;
		if (tw__etcd_stream_feed(&s, text + off, n, &st)) {
			rc = -1;
			break;
		}
		while ((rc = tw__etcd_stream_next(&s, &obj, &st)) == 1) {
			json_decref(obj);
			(*before)++;
		}
	}
	if (rc < 0) {
		cr_assert_eq(st.kind, ETCD_EPARSE);
		/* A failed stream takes no more. */
		cr_assert_eq(tw__etcd_stream_feed(&s, "{}", 2, &st), -1);
		cr_assert_eq(tw__etcd_stream_next(&s, &obj, &st), -1);
	}
	tw__etcd_stream_free(&s);
	return rc < 0 ? -1 : 0;
}

Test(stream, garbage_and_oversize_are_errors)
{
	size_t before;
	for (size_t piece = 1; piece <= 64; piece *= 4) {
		cr_assert_eq(framing_error("x{}", 100, piece, &before), -1);
		cr_assert_eq(framing_error("{}}", 100, piece, &before), -1);
		cr_assert_eq(before, 1);
		cr_assert_eq(framing_error("{} [1]", 100, piece, &before), -1);
		cr_assert_eq(before, 1);
		cr_assert_eq(framing_error("{\"a\":1,}", 100, piece, &before), -1);
		cr_assert_eq(framing_error("{\"a\":1,\"a\":2}", 100, piece, &before), -1);
		cr_assert_eq(framing_error("{\"a\":\"\\u0000\"}", 100, piece, &before), -1);
		/* Over the limit, whether complete or not yet. */
		cr_assert_eq(
			framing_error("{\"a\":\"0123456789012345678901234\"}", 16, piece, &before),
			-1);
		cr_assert_eq(
			framing_error("{\"a\":\"0123456789012345678901234", 16, piece, &before),
			-1);
		/* Braces and escaped quotes inside strings are not structure. */
		cr_assert_eq(framing_error(" \n{\"a\":\"}\\\"{[\"}\r\n\t{\"b\":[{}]}\n", 100, piece,
					   &before),
			     0);
		cr_assert_eq(before, 2);
		cr_assert_eq(framing_error(" \n \n", 100, piece, &before), 0);
		cr_assert_eq(before, 0);
	}
}

/* The objects of a recording, in order. */
static size_t load(const char *name, json_t **out, size_t max)
{
	size_t len, n = 0;
	char *data = slurp(name, &len);
	etcd_stream s;
	etcd_status st;
	tw__etcd_stream_init(&s, 1 << 16);
	cr_assert_eq(tw__etcd_stream_feed(&s, data, len, &st), 0);
	json_t *obj;
	while (tw__etcd_stream_next(&s, &obj, &st) == 1) {
		cr_assert_lt(n, max);
		out[n++] = obj;
	}
	tw__etcd_stream_free(&s);
	free(data);
	return n;
}

static void assert_bytes(const uint8_t *got, size_t len, const char *want, size_t want_len)
{
	cr_assert_eq(len, want_len, "%zu bytes, %zu expected", len, want_len);
	if (len)
		cr_assert_eq(memcmp(got, want, len), 0);
	else
		cr_assert_null(got);
}

Test(decode, ranges)
{
	json_t *o[1];
	etcd_range_result r;
	etcd_status st;
	load("range_more.json", o, 1);
	cr_assert_eq(tw__etcd_decode_range(o[0], &r, &st), 0, "%s", st.message);
	cr_assert(r.more);
	cr_assert_eq(r.total, 2);
	cr_assert_eq(r.revision, 4);
	cr_assert_eq(r.count, 1);
	assert_bytes(r.kvs[0].key, r.kvs[0].key_len, "a/1", 3);
	assert_bytes(r.kvs[0].value, r.kvs[0].value_len, "v1", 2);
	cr_assert_eq(r.kvs[0].create_revision, 2);
	cr_assert_eq(r.kvs[0].mod_revision, 2);
	cr_assert_eq(r.kvs[0].version, 1);
	cr_assert_eq(r.kvs[0].lease, 0);
	tw__etcd_range_result_free(&r);
	json_decref(o[0]);

	load("range_binary.json", o, 1);
	cr_assert_eq(tw__etcd_decode_range(o[0], &r, &st), 0, "%s", st.message);
	cr_assert_eq(r.count, 1);
	assert_bytes(r.kvs[0].key, r.kvs[0].key_len, "bin/\x00\xff\x01", 7);
	assert_bytes(r.kvs[0].value, r.kvs[0].value_len, "\xff\x00v", 3);
	cr_assert(!r.more);
	tw__etcd_range_result_free(&r);
	json_decref(o[0]);

	/* Nothing found: no kvs, no count, no more: all left out. */
	load("range_empty.json", o, 1);
	cr_assert_eq(tw__etcd_decode_range(o[0], &r, &st), 0, "%s", st.message);
	cr_assert(r.count == 0 && r.total == 0 && !r.more && r.kvs == NULL);
	cr_assert_eq(r.revision, 4);
	tw__etcd_range_result_free(&r);
	json_decref(o[0]);

	load("range_count.json", o, 1);
	cr_assert_eq(tw__etcd_decode_range(o[0], &r, &st), 0, "%s", st.message);
	cr_assert(r.count == 0 && r.total == 2);
	tw__etcd_range_result_free(&r);
	json_decref(o[0]);
}

Test(decode, txns)
{
	json_t *o[1];
	etcd_txn_result t;
	etcd_status st;
	load("txn_success.json", o, 1);
	cr_assert_eq(tw__etcd_decode_txn(o[0], &t, &st), 0, "%s", st.message);
	cr_assert(t.succeeded);
	cr_assert_eq(t.revision, 5);
	cr_assert_eq(t.count, 3);
	cr_assert_eq(t.results[0].kind, ETCD_OP_PUT);
	cr_assert_eq(t.results[0].revision, 5);
	cr_assert_eq(t.results[1].kind, ETCD_OP_RANGE);
	cr_assert_eq(t.results[1].range.count, 1);
	assert_bytes(t.results[1].range.kvs[0].value, t.results[1].range.kvs[0].value_len, "v1", 2);
	cr_assert_eq(t.results[2].kind, ETCD_OP_DELETE);
	cr_assert_eq(t.results[2].deleted, 1);
	tw__etcd_txn_result_free(&t);
	json_decref(o[0]);

	/* The failure branch: "succeeded" false is left out. */
	load("txn_failure.json", o, 1);
	cr_assert_eq(tw__etcd_decode_txn(o[0], &t, &st), 0, "%s", st.message);
	cr_assert(!t.succeeded);
	cr_assert_eq(t.count, 1);
	cr_assert_eq(t.results[0].kind, ETCD_OP_RANGE);
	assert_bytes(t.results[0].range.kvs[0].key, t.results[0].range.kvs[0].key_len, "t/1", 3);
	cr_assert_eq(t.results[0].range.kvs[0].create_revision, 5);
	tw__etcd_txn_result_free(&t);
	json_decref(o[0]);
}

Test(decode, watch_stream)
{
	json_t *o[8];
	etcd_watch_msg m;
	etcd_status st;
	cr_assert_eq(load("watch_events.json", o, 8), 5);
	cr_assert_eq(tw__etcd_decode_watch(o[0], &m, &st), 0, "%s", st.message);
	cr_assert(m.created && !m.canceled && m.count == 0 && m.revision == 6);
	tw__etcd_watch_msg_free(&m);
	cr_assert_eq(tw__etcd_decode_watch(o[1], &m, &st), 0, "%s", st.message);
	cr_assert(!m.created && m.count == 1 && m.revision == 7);
	cr_assert_eq(m.events[0].type, ETCD_EVENT_PUT);
	assert_bytes(m.events[0].kv.value, m.events[0].kv.value_len, "one", 3);
	cr_assert_null(m.events[0].prev_kv.key);
	tw__etcd_watch_msg_free(&m);
	cr_assert_eq(tw__etcd_decode_watch(o[2], &m, &st), 0, "%s", st.message);
	assert_bytes(m.events[0].kv.value, m.events[0].kv.value_len, "uno", 3);
	assert_bytes(m.events[0].prev_kv.value, m.events[0].prev_kv.value_len, "one", 3);
	cr_assert_eq(m.events[0].kv.version, 2);
	tw__etcd_watch_msg_free(&m);
	/* An empty value is left out. */
	cr_assert_eq(tw__etcd_decode_watch(o[3], &m, &st), 0, "%s", st.message);
	assert_bytes(m.events[0].kv.value, m.events[0].kv.value_len, "", 0);
	tw__etcd_watch_msg_free(&m);
	/* A delete: only the key and mod_revision; the rest reads 0. */
	cr_assert_eq(tw__etcd_decode_watch(o[4], &m, &st), 0, "%s", st.message);
	cr_assert_eq(m.events[0].type, ETCD_EVENT_DELETE);
	assert_bytes(m.events[0].kv.key, m.events[0].kv.key_len, "w/1", 3);
	cr_assert(m.events[0].kv.mod_revision == 10 && m.events[0].kv.create_revision == 0 &&
		  m.events[0].kv.version == 0);
	cr_assert_eq(m.events[0].prev_kv.mod_revision, 8);
	tw__etcd_watch_msg_free(&m);
	for (int i = 0; i < 5; i++)
		json_decref(o[i]);

	cr_assert_eq(load("watch_binary.json", o, 8), 3);
	cr_assert_eq(tw__etcd_decode_watch(o[1], &m, &st), 0, "%s", st.message);
	assert_bytes(m.events[0].kv.key, m.events[0].kv.key_len, "bin/\x00\xffk", 7);
	assert_bytes(m.events[0].kv.value, m.events[0].kv.value_len, "\x00\xff\x00", 3);
	tw__etcd_watch_msg_free(&m);
	for (int i = 0; i < 3; i++)
		json_decref(o[i]);

	/* A start revision compacted away: created, then canceled with the compact revision
	 * and no header revision. */
	cr_assert_eq(load("watch_compacted.json", o, 8), 2);
	cr_assert_eq(tw__etcd_decode_watch(o[1], &m, &st), 0, "%s", st.message);
	cr_assert(m.canceled && m.compact_revision == 8 && m.revision == 0 && !m.created);
	tw__etcd_watch_msg_free(&m);
	for (int i = 0; i < 2; i++)
		json_decref(o[i]);

	/* etcd shutting down under a watch: the gateway's stream error object. */
	cr_assert_eq(load("watch_shutdown.json", o, 8), 2);
	cr_assert_eq(tw__etcd_decode_watch(o[1], &m, &st), -1);
	cr_assert_eq(st.kind, ETCD_EGRPC);
	cr_assert_eq(st.grpc_code, 14);
	cr_assert_eq(st.http_status, 503);
	cr_assert_str_eq(st.message, "transport is closing");
	for (int i = 0; i < 2; i++)
		json_decref(o[i]);
}

Test(decode, error_objects)
{
	json_t *o[1];
	etcd_range_result r;
	etcd_status st;
	load("error_compacted.json", o, 1);
	cr_assert_eq(tw__etcd_decode_range(o[0], &r, &st), -1);
	cr_assert_eq(st.kind, ETCD_ECOMPACTED);
	cr_assert_eq(st.grpc_code, 11);
	json_decref(o[0]);
	load("error_lease_not_found.json", o, 1);
	cr_assert_eq(tw__etcd_decode_error(o[0], &st), -1);
	cr_assert_eq(st.kind, ETCD_ENOLEASE);
	cr_assert_eq(st.grpc_code, 5);
	json_decref(o[0]);
	load("range_more.json", o, 1);
	cr_assert_eq(tw__etcd_decode_error(o[0], &st), 0);
	json_decref(o[0]);
	json_t *other = json_pack("{s:s,s:s,s:i}", "error", "etcdserver: no leader", "message",
				  "etcdserver: no leader", "code", 14);
	cr_assert_eq(tw__etcd_decode_error(other, &st), -1);
	cr_assert(st.kind == ETCD_EGRPC && st.grpc_code == 14);
	json_decref(other);
}

Test(decode, fields_and_base64)
{
	etcd_status st;
	int64_t v;
	uint64_t u;
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i,s:b,s:s,s:s}", "min", "-9223372036854775808",
			      "max", "9223372036854775807", "over", "9223372036854775808", "space",
			      " 1", "num", 5, "bool", 1, "id", "13668033151171901709", "empty", "");
	cr_assert_not_null(o);
	cr_assert(!tw__etcd_get_int64(o, "min", &v, &st) && v == INT64_MIN);
	cr_assert(!tw__etcd_get_int64(o, "max", &v, &st) && v == INT64_MAX);
	cr_assert(!tw__etcd_get_int64(o, "num", &v, &st) && v == 5);
	cr_assert(!tw__etcd_get_int64(o, "missing", &v, &st) && v == 0);
	cr_assert(tw__etcd_get_int64(o, "over", &v, &st) && st.kind == ETCD_EPARSE);
	cr_assert(tw__etcd_get_int64(o, "space", &v, &st) && st.kind == ETCD_EPARSE);
	cr_assert(tw__etcd_get_int64(o, "bool", &v, &st) && st.kind == ETCD_EPARSE);
	cr_assert(tw__etcd_get_int64(o, "empty", &v, &st) && st.kind == ETCD_EPARSE);
	cr_assert(!tw__etcd_get_uint64(o, "id", &u, &st) && u == 13668033151171901709ull);
	cr_assert(tw__etcd_get_uint64(o, "min", &u, &st));
	json_decref(o);

	uint8_t all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (uint8_t)i;
	for (size_t len = 0; len <= 256; len++) {
		char *text = tw__etcd_b64_encode(all + 256 - len, len);
		uint8_t *back;
		size_t back_len;
		cr_assert_not_null(text);
		cr_assert_eq(strlen(text), (len + 2) / 3 * 4);
		cr_assert_eq(tw__etcd_b64_decode(text, strlen(text), &back, &back_len), 0);
		cr_assert_eq(back_len, len);
		cr_assert_eq(memcmp(back, all + 256 - len, len), 0);
		cr_assert_eq(back[len], 0);
		free(back);
		free(text);
	}
	const char *bad[] = { "A", "AB=C", "====", "A===", "AB*D", "ABC=ABCD", "AB\nC" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t *back;
		size_t back_len;
		cr_assert_eq(tw__etcd_b64_decode(bad[i], strlen(bad[i]), &back, &back_len), -1,
			     "%s decoded", bad[i]);
	}

	uint8_t *end;
	size_t end_len;
	cr_assert_eq(tw__etcd_prefix_end("a/", 2, &end, &end_len), 0);
	assert_bytes(end, end_len, "a0", 2);
	free(end);
	cr_assert_eq(tw__etcd_prefix_end("a\xff\xff", 3, &end, &end_len), 0);
	assert_bytes(end, end_len, "b", 1);
	free(end);
	cr_assert_eq(tw__etcd_prefix_end("\xff", 1, &end, &end_len), 0);
	assert_bytes(end, end_len, "\x00", 1);
	free(end);
}
