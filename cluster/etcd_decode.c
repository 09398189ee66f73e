/*
 * cluster/etcd_decode.c - etcd's answers as the gateway writes them (rpc.proto's field names,
 * proto3 JSON: int64s as strings, bytes as base64, default values left out), into the typed
 * results of etcd.h. Pure: no I/O, so the tests and the fuzzer call these directly.
 */
#include "etcd_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* etcd's own errors arrive as gRPC codes with a message; the two the cluster library acts on
 * are told apart by etcd's fixed texts (rpctypes: ErrCompacted, ErrLeaseNotFound). */
static etcd_error kind_of(int code, const char *message)
{
	if (code == 11 && strstr(message, "compacted"))
		return ETCD_ECOMPACTED;
	if (code == 5 && strstr(message, "lease not found"))
		return ETCD_ENOLEASE;
	return ETCD_EGRPC;
}

static int grpc_error(etcd_status *st, const json_t *code, const json_t *message)
{
	const char *text = json_is_string(message) ? json_string_value(message) : "";
	int c = (int)json_integer_value(code);
	tw__etcd_fail(st, kind_of(c, text), "%s", text);
	if (st)
		st->grpc_code = c;
	return -1;
}

int tw__etcd_decode_error(const json_t *root, etcd_status *st)
{
	if (!json_is_object(root))
		return tw__etcd_fail(st, ETCD_EPARSE, "the answer is not a JSON object");
	const json_t *err = json_object_get(root, "error");
	/* A stream's error (grpc-gateway's): {"error":{"grpc_code":14,"http_code":503,...}}. */
	if (json_is_object(err)) {
		const json_t *code = json_object_get(err, "grpc_code");
		if (!json_is_integer(code))
			return tw__etcd_fail(st, ETCD_EPARSE, "an error object without grpc_code");
		grpc_error(st, code, json_object_get(err, "message"));
		const json_t *http = json_object_get(err, "http_code");
		if (st && json_is_integer(http))
			st->http_status = (long)json_integer_value(http);
		return -1;
	}
	/* A unary call's error: {"error":"..","message":"..","code":N}. */
	const json_t *code = json_object_get(root, "code");
	if (json_is_integer(code) && (json_is_string(err) || json_object_get(root, "message"))) {
		const json_t *message = json_object_get(root, "message");
		return grpc_error(st, code, json_is_string(message) ? message : err);
	}
	if (err && !json_is_null(err))
		return tw__etcd_fail(st, ETCD_EPARSE, "an error field of an unknown shape");
	return 0;
}

void tw__etcd_kv_free(etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

int tw__etcd_decode_kv(const json_t *obj, etcd_kv *kv, etcd_status *st)
{
	memset(kv, 0, sizeof(*kv));
	if (!json_is_object(obj))
		return tw__etcd_fail(st, ETCD_EPARSE, "a key-value is not an object");
	if (tw__etcd_get_bytes(obj, "key", &kv->key, &kv->key_len, st) ||
	    tw__etcd_get_bytes(obj, "value", &kv->value, &kv->value_len, st) ||
	    tw__etcd_get_int64(obj, "create_revision", &kv->create_revision, st) ||
	    tw__etcd_get_int64(obj, "mod_revision", &kv->mod_revision, st) ||
	    tw__etcd_get_int64(obj, "version", &kv->version, st) ||
	    tw__etcd_get_int64(obj, "lease", &kv->lease, st)) {
		tw__etcd_kv_free(kv);
		return -1;
	}
	return 0;
}

void tw__etcd_range_result_free(etcd_range_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->count; i++)
		tw__etcd_kv_free(&r->kvs[i]);
	free(r->kvs);
	memset(r, 0, sizeof(*r));
}

/* An array field: missing gives *out NULL and *n 0. */
static int get_array(const json_t *obj, const char *name, const json_t **out, size_t *n,
		     etcd_status *st)
{
	const json_t *v = json_object_get(obj, name);
	*out = NULL;
	*n = 0;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return tw__etcd_fail(st, ETCD_EPARSE, "field %s is not an array", name);
	*out = v;
	*n = json_array_size(v);
	return 0;
}

static int decode_range_body(const json_t *root, etcd_range_result *out, etcd_status *st)
{
	const json_t *kvs;
	size_t n;
	memset(out, 0, sizeof(*out));
	if (tw__etcd_get_header_revision(root, &out->revision, st) ||
	    tw__etcd_get_bool(root, "more", &out->more, st) ||
	    tw__etcd_get_int64(root, "count", &out->total, st) ||
	    get_array(root, "kvs", &kvs, &n, st))
		return -1;
	if (n) {
		out->kvs = calloc(n, sizeof(*out->kvs));
		if (!out->kvs)
			return tw__etcd_fail(st, ETCD_ENOMEM, "decoding a range");
	}
	for (size_t i = 0; i < n; i++) {
		if (tw__etcd_decode_kv(json_array_get(kvs, i), &out->kvs[i], st)) {
			tw__etcd_range_result_free(out);
			return -1;
		}
		out->count = i + 1;
	}
	return 0;
}

int tw__etcd_decode_range(const json_t *root, etcd_range_result *out, etcd_status *st)
{
	memset(out, 0, sizeof(*out));
	if (tw__etcd_decode_error(root, st))
		return -1;
	return decode_range_body(root, out, st);
}

void tw__etcd_txn_result_free(etcd_txn_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->count; i++)
		if (r->results[i].kind == ETCD_OP_RANGE)
			tw__etcd_range_result_free(&r->results[i].range);
	free(r->results);
	memset(r, 0, sizeof(*r));
}

static int decode_op_result(const json_t *obj, etcd_op_result *res, etcd_status *st)
{
	const json_t *body;
	memset(res, 0, sizeof(*res));
	if (!json_is_object(obj))
		return tw__etcd_fail(st, ETCD_EPARSE, "a txn response is not an object");
	if (tw__etcd_get_object(obj, "response_range", &body, st))
		return -1;
	if (body) {
		res->kind = ETCD_OP_RANGE;
		return decode_range_body(body, &res->range, st);
	}
	if (tw__etcd_get_object(obj, "response_put", &body, st))
		return -1;
	if (body) {
		res->kind = ETCD_OP_PUT;
		return tw__etcd_get_header_revision(body, &res->revision, st);
	}
	if (tw__etcd_get_object(obj, "response_delete_range", &body, st))
		return -1;
	if (body) {
		res->kind = ETCD_OP_DELETE;
		return tw__etcd_get_int64(body, "deleted", &res->deleted, st);
	}
	return tw__etcd_fail(st, ETCD_EPARSE, "a txn response of an unknown kind");
}

int tw__etcd_decode_txn(const json_t *root, etcd_txn_result *out, etcd_status *st)
{
	const json_t *responses;
	size_t n;
	memset(out, 0, sizeof(*out));
	if (tw__etcd_decode_error(root, st) ||
	    tw__etcd_get_header_revision(root, &out->revision, st) ||
	    tw__etcd_get_bool(root, "succeeded", &out->succeeded, st) ||
	    get_array(root, "responses", &responses, &n, st))
		return -1;
	if (n) {
		out->results = calloc(n, sizeof(*out->results));
		if (!out->results)
			return tw__etcd_fail(st, ETCD_ENOMEM, "decoding a txn");
	}
	for (size_t i = 0; i < n; i++) {
		if (decode_op_result(json_array_get(responses, i), &out->results[i], st)) {
			tw__etcd_txn_result_free(out);
			return -1;
		}
		out->count = i + 1;
	}
	return 0;
}

void tw__etcd_watch_msg_free(etcd_watch_msg *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->count; i++) {
		tw__etcd_kv_free(&m->events[i].kv);
		tw__etcd_kv_free(&m->events[i].prev_kv);
	}
	free(m->events);
	memset(m, 0, sizeof(*m));
}

static int decode_event(const json_t *obj, etcd_event *ev, etcd_status *st)
{
	const json_t *kv, *prev;
	memset(ev, 0, sizeof(*ev));
	if (!json_is_object(obj))
		return tw__etcd_fail(st, ETCD_EPARSE, "an event is not an object");
	/* proto3 JSON leaves PUT (0) out and names the enum; a number is legal JSON for it too. */
	const json_t *type = json_object_get(obj, "type");
	if (!type || json_is_null(type) ||
	    (json_is_string(type) && !strcmp(json_string_value(type), "PUT")) ||
	    (json_is_integer(type) && json_integer_value(type) == 0))
		ev->type = ETCD_EVENT_PUT;
	else if ((json_is_string(type) && !strcmp(json_string_value(type), "DELETE")) ||
		 (json_is_integer(type) && json_integer_value(type) == 1))
		ev->type = ETCD_EVENT_DELETE;
	else
		return tw__etcd_fail(st, ETCD_EPARSE, "an event of an unknown type");
	if (tw__etcd_get_object(obj, "kv", &kv, st) ||
	    tw__etcd_get_object(obj, "prev_kv", &prev, st))
		return -1;
	if (kv && tw__etcd_decode_kv(kv, &ev->kv, st))
		return -1;
	if (prev && tw__etcd_decode_kv(prev, &ev->prev_kv, st)) {
		tw__etcd_kv_free(&ev->kv);
		return -1;
	}
	return 0;
}

int tw__etcd_decode_watch(const json_t *root, etcd_watch_msg *out, etcd_status *st)
{
	const json_t *result, *events, *reason;
	size_t n;
	memset(out, 0, sizeof(*out));
	if (tw__etcd_decode_error(root, st) || tw__etcd_get_object(root, "result", &result, st))
		return -1;
	if (!result)
		return tw__etcd_fail(st, ETCD_EPARSE, "a watch message without a result");
	if (tw__etcd_get_header_revision(result, &out->revision, st) ||
	    tw__etcd_get_bool(result, "created", &out->created, st) ||
	    tw__etcd_get_bool(result, "canceled", &out->canceled, st) ||
	    tw__etcd_get_int64(result, "compact_revision", &out->compact_revision, st) ||
	    get_array(result, "events", &events, &n, st))
		return -1;
	reason = json_object_get(result, "cancel_reason");
	if (json_is_string(reason))
		(void)snprintf(out->cancel_reason, sizeof(out->cancel_reason), "%s",
			       json_string_value(reason));
	else if (reason && !json_is_null(reason))
		return tw__etcd_fail(st, ETCD_EPARSE, "field cancel_reason is not a string");
	if (n) {
		out->events = calloc(n, sizeof(*out->events));
		if (!out->events)
			return tw__etcd_fail(st, ETCD_ENOMEM, "decoding a watch message");
	}
	for (size_t i = 0; i < n; i++) {
		if (decode_event(json_array_get(events, i), &out->events[i], st)) {
			tw__etcd_watch_msg_free(out);
			return -1;
		}
		out->count = i + 1;
	}
	return 0;
}
