/*
 * fuzz_etcd_stream.c - libFuzzer target for the etcd transport's pure half (cluster/): bytes
 * through the stream framing, fed in pieces whose sizes the input chooses, and each object
 * through every decoder. ASan and UBSan catch a bad read or an overflow; the target checks
 * that the framing gives the same objects and the same verdict as one feed of everything
 * (the split must not matter), and that each decoder's refusal is one of its kinds.
 *
 * Input: byte 0 = n (mod 8); the next n bytes are piece sizes - 1, used in turn (n = 0: one
 * piece); the rest is the stream. Corpus: tests/fuzz/corpus/etcd_stream/ (recorded answers).
 */
#include "etcd_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OBJECT  4096
#define MAX_OBJECTS 64

static void check_kv(const etcd_kv *kv)
{
	/* The bytes are followed by a NUL, and absent means NULL with length 0. */
	if ((kv->key && kv->key[kv->key_len]) || (!kv->key && kv->key_len) ||
	    (kv->value && kv->value[kv->value_len]) || (!kv->value && kv->value_len))
		abort();
}

static void check_failure(const etcd_status *st)
{
	if (st->kind != ETCD_EPARSE && st->kind != ETCD_EGRPC && st->kind != ETCD_ECOMPACTED &&
	    st->kind != ETCD_ENOLEASE && st->kind != ETCD_ENOMEM)
		abort();
	if (!memchr(st->message, '\0', sizeof(st->message)))
		abort();
}

static void decode_all(const json_t *obj)
{
	etcd_status st = { 0 };
	etcd_range_result r;
	etcd_txn_result t;
	etcd_watch_msg m;
	if (tw__etcd_decode_error(obj, &st))
		check_failure(&st);
	if (tw__etcd_decode_range(obj, &r, &st)) {
		check_failure(&st);
		if (r.kvs || r.count)
			abort();
	} else {
		for (size_t i = 0; i < r.count; i++)
			check_kv(&r.kvs[i]);
		tw__etcd_range_result_free(&r);
	}
	if (tw__etcd_decode_txn(obj, &t, &st)) {
		check_failure(&st);
		if (t.results || t.count)
			abort();
	} else {
		for (size_t i = 0; i < t.count; i++)
			for (size_t j = 0;
			     t.results[i].kind == ETCD_OP_RANGE && j < t.results[i].range.count;
			     j++)
				check_kv(&t.results[i].range.kvs[j]);
		tw__etcd_txn_result_free(&t);
	}
	if (tw__etcd_decode_watch(obj, &m, &st)) {
		check_failure(&st);
		if (m.events || m.count)
			abort();
	} else {
		for (size_t i = 0; i < m.count; i++) {
			check_kv(&m.events[i].kv);
			check_kv(&m.events[i].prev_kv);
		}
		if (!memchr(m.cancel_reason, '\0', sizeof(m.cancel_reason)))
			abort();
		tw__etcd_watch_msg_free(&m);
	}
}

typedef struct {
	char *text[MAX_OBJECTS];
	size_t n;
	bool failed;
} run;

/* Drains s into r; false once the stream failed. */
static bool drain(etcd_stream *s, run *r, bool decode)
{
	etcd_status st;
	json_t *obj;
	int rc;
	while ((rc = tw__etcd_stream_next(s, &obj, &st)) == 1) {
		if (r->n < MAX_OBJECTS) {
			r->text[r->n] = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
			if (!r->text[r->n])
				abort();
		}
		r->n++;
		if (decode)
			decode_all(obj);
		json_decref(obj);
	}
	if (rc < 0) {
		if (st.kind != ETCD_EPARSE && st.kind != ETCD_ENOMEM)
			abort();
		r->failed = true;
	}
	return rc == 0;
}

static void run_free(run *r)
{
	for (size_t i = 0; i < r->n && i < MAX_OBJECTS; i++)
		free(r->text[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t nsizes = data[0] % 8;
	if (size < 1 + nsizes)
		return 0;
	const uint8_t *sizes = data + 1;
	const char *stream = (const char *)data + 1 + nsizes;
	size_t len = size - 1 - nsizes;
	etcd_status st;

	run whole = { 0 }, pieces = { 0 };
	etcd_stream s;
	tw__etcd_stream_init(&s, MAX_OBJECT);
	if (tw__etcd_stream_feed(&s, stream, len, &st))
		abort();
	drain(&s, &whole, false);
	tw__etcd_stream_free(&s);

	tw__etcd_stream_init(&s, MAX_OBJECT);
	for (size_t off = 0, i = 0; off < len; i++) {
		size_t n = nsizes ? (size_t)sizes[i % nsizes] + 1 : len;
		if (n > len - off)
			n = len - off;
		if (tw__etcd_stream_feed(&s, stream + off, n, &st))
			abort(); /* only a failed stream refuses, and drain stops at that */
		off += n;
		if (!drain(&s, &pieces, true))
			break;
	}
	tw__etcd_stream_free(&s);

	if (whole.n != pieces.n || whole.failed != pieces.failed)
		abort();
	for (size_t i = 0; i < whole.n && i < MAX_OBJECTS; i++)
		if (strcmp(whole.text[i], pieces.text[i]))
			abort();
	run_free(&whole);
	run_free(&pieces);
	return 0;
}
