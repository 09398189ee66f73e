/*
 * cluster/etcd.c - the calls of etcd.h: each builds its request with jansson (rpc.proto's
 * field names, int64s as strings, bytes as base64), makes one tw__etcd_call and decodes.
 */
#include "etcd_internal.h"

#include <stdlib.h>
#include <string.h>

int tw__etcd_prefix_end(const void *prefix, size_t len, uint8_t **out, size_t *out_len)
{
	const uint8_t *p = prefix;
	size_t n = len;
	while (n && p[n - 1] == 0xff)
		n--;
	uint8_t *end = malloc(n ? n : 1);
	if (!end)
		return -1;
	if (!n) {
		/* etcd's "\0" range end: every key from the key on. */
		end[0] = 0;
		*out = end;
		*out_len = 1;
		return 0;
	}
	memcpy(end, p, n);
	end[n - 1]++;
	*out = end;
	*out_len = n;
	return 0;
}

static json_t *new_object(etcd_status *st)
{
	json_t *o = json_object();
	if (!o)
		tw__etcd_fail(st, ETCD_ENOMEM, "building a request");
	return o;
}

/* Sends body (consumed) and decodes nothing: *answer for the caller to read and decref. */
static int call(etcd_client *c, const char *path, json_t *body, json_t **answer, etcd_status *st)
{
	int rc = tw__etcd_call(c, path, body, answer, st);
	json_decref(body);
	return rc;
}

static int range_fields(json_t *o, const void *key, size_t key_len, const void *range_end,
			size_t range_end_len, int64_t limit, etcd_status *st)
{
	if (tw__etcd_set_bytes(o, "key", key, key_len, st) ||
	    (range_end && tw__etcd_set_bytes(o, "range_end", range_end, range_end_len, st)) ||
	    (limit && tw__etcd_set_int64(o, "limit", limit, st)))
		return -1;
	return 0;
}

int tw__etcd_range(etcd_client *c, const etcd_range_req *req, etcd_range_result *out,
		   etcd_status *st)
{
	memset(out, 0, sizeof(*out));
	tw__etcd_status_ok(st);
	if (!req->key_len)
		return tw__etcd_fail(st, ETCD_EINVAL, "an empty key");
	json_t *body = new_object(st), *answer;
	if (!body)
		return -1;
	if (range_fields(body, req->key, req->key_len, req->range_end, req->range_end_len,
			 req->limit, st) ||
	    (req->revision && tw__etcd_set_int64(body, "revision", req->revision, st)) ||
	    (req->keys_only && tw__etcd_set(body, "keys_only", json_true(), st)) ||
	    (req->count_only && tw__etcd_set(body, "count_only", json_true(), st))) {
		json_decref(body);
		return -1;
	}
	if (call(c, "/v3/kv/range", body, &answer, st))
		return -1;
	int rc = tw__etcd_decode_range(answer, out, st);
	json_decref(answer);
	return rc;
}

static int put_fields(json_t *o, const void *key, size_t key_len, const void *value,
		      size_t value_len, int64_t lease, etcd_status *st)
{
	if (tw__etcd_set_bytes(o, "key", key, key_len, st) ||
	    tw__etcd_set_bytes(o, "value", value, value_len, st) ||
	    (lease && tw__etcd_set_int64(o, "lease", lease, st)))
		return -1;
	return 0;
}

int tw__etcd_put(etcd_client *c, const void *key, size_t key_len, const void *value,
		 size_t value_len, int64_t lease, int64_t *revision, etcd_status *st)
{
	tw__etcd_status_ok(st);
	if (!key_len)
		return tw__etcd_fail(st, ETCD_EINVAL, "an empty key");
	json_t *body = new_object(st), *answer;
	if (!body)
		return -1;
	if (put_fields(body, key, key_len, value, value_len, lease, st)) {
		json_decref(body);
		return -1;
	}
	if (call(c, "/v3/kv/put", body, &answer, st))
		return -1;
	int64_t rev;
	int rc = tw__etcd_get_header_revision(answer, &rev, st);
	json_decref(answer);
	if (!rc && revision)
		*revision = rev;
	return rc;
}

int tw__etcd_delete(etcd_client *c, const void *key, size_t key_len, const void *range_end,
		    size_t range_end_len, int64_t *deleted, etcd_status *st)
{
	tw__etcd_status_ok(st);
	if (!key_len)
		return tw__etcd_fail(st, ETCD_EINVAL, "an empty key");
	json_t *body = new_object(st), *answer;
	if (!body)
		return -1;
	if (range_fields(body, key, key_len, range_end, range_end_len, 0, st)) {
		json_decref(body);
		return -1;
	}
	if (call(c, "/v3/kv/deleterange", body, &answer, st))
		return -1;
	int64_t n;
	int rc = tw__etcd_get_int64(answer, "deleted", &n, st);
	json_decref(answer);
	if (!rc && deleted)
		*deleted = n;
	return rc;
}

static json_t *compare_json(const etcd_compare *cmp, etcd_status *st)
{
	static const char *const targets[] = { "VERSION", "CREATE", "MOD", "VALUE", "LEASE" };
	static const char *const fields[] = { "version", "create_revision", "mod_revision", "value",
					      "lease" };
	static const char *const results[] = { "EQUAL", "GREATER", "LESS", "NOT_EQUAL" };
	if ((unsigned)cmp->target > ETCD_CMP_LEASE || (unsigned)cmp->result > ETCD_CMP_NOT_EQUAL ||
	    !cmp->key_len) {
		tw__etcd_fail(st, ETCD_EINVAL, "a compare with a bad target, result or key");
		return NULL;
	}
	json_t *o = new_object(st);
	if (!o)
		return NULL;
	const char *f = fields[cmp->target];
	if (tw__etcd_set(o, "target", json_string(targets[cmp->target]), st) ||
	    tw__etcd_set(o, "result", json_string(results[cmp->result]), st) ||
	    tw__etcd_set_bytes(o, "key", cmp->key, cmp->key_len, st) ||
	    (cmp->target == ETCD_CMP_VALUE ?
		     tw__etcd_set_bytes(o, f, cmp->value, cmp->value_len, st) :
		     tw__etcd_set_int64(o, f, cmp->number, st))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *op_json(const etcd_op *op, etcd_status *st)
{
	json_t *o = new_object(st), *inner = new_object(st);
	if (!o || !inner || !op->key_len) {
		json_decref(o);
		json_decref(inner);
		if (o && inner)
			tw__etcd_fail(st, ETCD_EINVAL, "an op with an empty key");
		return NULL;
	}
	int rc;
	const char *name;
	switch (op->kind) {
	case ETCD_OP_RANGE:
		name = "request_range";
		rc = range_fields(inner, op->key, op->key_len, op->range_end, op->range_end_len,
				  op->limit, st) ||
		     (op->count_only && tw__etcd_set(inner, "count_only", json_true(), st));
		break;
	case ETCD_OP_PUT:
		name = "request_put";
		rc = put_fields(inner, op->key, op->key_len, op->value, op->value_len, op->lease,
				st);
		break;
	case ETCD_OP_DELETE:
		name = "request_delete_range";
		rc = range_fields(inner, op->key, op->key_len, op->range_end, op->range_end_len, 0,
				  st);
		break;
	default:
		name = NULL;
		rc = tw__etcd_fail(st, ETCD_EINVAL, "an op of an unknown kind");
	}
	if (rc) {
		json_decref(inner);
		json_decref(o);
		return NULL;
	}
	if (tw__etcd_set(o, name, inner, st)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int add_ops(json_t *body, const char *name, const etcd_op *ops, size_t n, etcd_status *st)
{
	json_t *arr = json_array();
	if (tw__etcd_set(body, name, arr, st))
		return -1;
	for (size_t i = 0; i < n; i++) {
		json_t *o = op_json(&ops[i], st);
		if (!o)
			return -1;
		if (json_array_append_new(arr, o))
			return tw__etcd_fail(st, ETCD_ENOMEM, "building a txn");
	}
	return 0;
}

int tw__etcd_txn(etcd_client *c, const etcd_compare *cmp, size_t ncmp, const etcd_op *success,
		 size_t nsuccess, const etcd_op *failure, size_t nfailure, etcd_txn_result *out,
		 etcd_status *st)
{
	memset(out, 0, sizeof(*out));
	tw__etcd_status_ok(st);
	json_t *body = new_object(st), *arr = json_array(), *answer;
	if (!body || tw__etcd_set(body, "compare", arr, st)) {
		json_decref(body);
		return -1;
	}
	for (size_t i = 0; i < ncmp; i++) {
		json_t *o = compare_json(&cmp[i], st);
		if (!o || json_array_append_new(arr, o)) {
			json_decref(body);
			return o ? tw__etcd_fail(st, ETCD_ENOMEM, "building a txn") : -1;
		}
	}
	if (add_ops(body, "success", success, nsuccess, st) ||
	    add_ops(body, "failure", failure, nfailure, st)) {
		json_decref(body);
		return -1;
	}
	if (call(c, "/v3/kv/txn", body, &answer, st))
		return -1;
	int rc = tw__etcd_decode_txn(answer, out, st);
	json_decref(answer);
	return rc;
}

static int lease_call(etcd_client *c, const char *path, const char *field, int64_t v,
		      json_t **answer, etcd_status *st)
{
	tw__etcd_status_ok(st);
	json_t *body = new_object(st);
	if (!body)
		return -1;
	if (tw__etcd_set_int64(body, field, v, st)) {
		json_decref(body);
		return -1;
	}
	return call(c, path, body, answer, st);
}

int tw__etcd_lease_grant(etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl_s,
			 etcd_status *st)
{
	json_t *answer;
	if (ttl_s < 1)
		return tw__etcd_fail(st, ETCD_EINVAL, "a lease TTL under 1 s");
	if (lease_call(c, "/v3/lease/grant", "TTL", ttl_s, &answer, st))
		return -1;
	int64_t lid, ttl;
	int rc = tw__etcd_get_int64(answer, "ID", &lid, st) ||
		 tw__etcd_get_int64(answer, "TTL", &ttl, st);
	json_decref(answer);
	if (rc)
		return -1;
	if (!lid)
		return tw__etcd_fail(st, ETCD_EPARSE, "a lease granted without an ID");
	*id = lid;
	if (granted_ttl_s)
		*granted_ttl_s = ttl;
	return 0;
}

int tw__etcd_lease_keepalive(etcd_client *c, int64_t id, int64_t *ttl_s, etcd_status *st)
{
	json_t *answer;
	const json_t *result;
	if (lease_call(c, "/v3/lease/keepalive", "ID", id, &answer, st))
		return -1;
	/* A stream of one message here: {"result":{"ID":..,"TTL":..}}; etcd answers a lease
	 * it does not know with its ID and no TTL (0, left out) rather than an error. */
	int64_t ttl = 0;
	int rc = tw__etcd_get_object(answer, "result", &result, st);
	if (!rc && !result)
		rc = tw__etcd_fail(st, ETCD_EPARSE, "a keepalive answer without a result");
	if (!rc)
		rc = tw__etcd_get_int64(result, "TTL", &ttl, st);
	json_decref(answer);
	if (rc)
		return -1;
	if (ttl <= 0)
		return tw__etcd_fail(st, ETCD_ENOLEASE, "lease %lld is gone", (long long)id);
	if (ttl_s)
		*ttl_s = ttl;
	return 0;
}

int tw__etcd_lease_revoke(etcd_client *c, int64_t id, etcd_status *st)
{
	json_t *answer;
	if (lease_call(c, "/v3/lease/revoke", "ID", id, &answer, st)) {
		if (st && st->kind == ETCD_ENOLEASE) {
			tw__etcd_status_ok(st);
			return 0;
		}
		return -1;
	}
	json_decref(answer);
	return 0;
}
