/*
 * cluster/etcd_internal.h - what the transport's files share and nothing above them sees: the
 * status setters, base64, and typed reads of the gateway's JSON fields.
 */
#ifndef TW_CLUSTER_ETCD_INTERNAL_H
#define TW_CLUSTER_ETCD_INTERNAL_H

#include "etcd.h"

#include <curl/curl.h>

/* The most an answer (or one stream message) may hold: far above etcd's request limit (1.5
 * MiB) so that a large range still passes, low enough that a broken peer cannot exhaust us. */
#define ETCD_MAX_ANSWER ((size_t)64 << 20)

struct etcd_client {
	char **endpoints;
	size_t n, cur; /* cur: the endpoint that answered last, tried first */
	unsigned timeout_ms;
	CURL *easy;   /* one handle, so its connection is reused request after request */
	CURLM *multi; /* watches only: made on the first one */
	struct curl_slist *headers;
	char *body; /* the answer being received */
	size_t body_len, body_cap;
	bool body_too_big, body_nomem;
	char errbuf[CURL_ERROR_SIZE];
};

/* Fills *st (st may be NULL) and returns -1, so that a failure is one statement. */
int tw__etcd_fail(etcd_status *st, etcd_error kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void tw__etcd_status_ok(etcd_status *st);

/* Standard base64 with padding, as Go's encoding/json writes []byte. encode: a NUL-terminated
 * malloc'ed string or NULL (ENOMEM). decode: strict (length a multiple of 4, padding only at
 * the end); *out is malloc'ed with a NUL after its *out_len bytes. -1: not base64; -2: ENOMEM. */
char *tw__etcd_b64_encode(const void *data, size_t len);
int tw__etcd_b64_decode(const char *text, size_t len, uint8_t **out, size_t *out_len);

/* Fields of a JSON object; a missing field (or JSON null) reads as the proto3 default. An
 * int64 may be a string (as the gateway sends it) or an integer; anything else is EPARSE. */
int tw__etcd_get_int64(const json_t *obj, const char *name, int64_t *out, etcd_status *st);
int tw__etcd_get_uint64(const json_t *obj, const char *name, uint64_t *out, etcd_status *st);
int tw__etcd_get_bool(const json_t *obj, const char *name, bool *out, etcd_status *st);
/* A base64 field into malloc'ed bytes (NUL after them); missing: NULL and 0. */
int tw__etcd_get_bytes(const json_t *obj, const char *name, uint8_t **out, size_t *len,
		       etcd_status *st);
/* An object field: missing or null gives *out NULL; another type is EPARSE. */
int tw__etcd_get_object(const json_t *obj, const char *name, const json_t **out, etcd_status *st);
/* header.revision of an answer. */
int tw__etcd_get_header_revision(const json_t *root, int64_t *out, etcd_status *st);

/* Sets a base64 field of a request; -1 with ENOMEM. */
int tw__etcd_set_bytes(json_t *obj, const char *name, const void *data, size_t len,
		       etcd_status *st);
/* Sets an int64 field as the string the gateway's proto3 JSON expects. */
int tw__etcd_set_int64(json_t *obj, const char *name, int64_t v, etcd_status *st);
/* json_object_set_new that owns value in all cases and reports ENOMEM. */
int tw__etcd_set(json_t *obj, const char *name, json_t *value, etcd_status *st);

void tw__etcd_kv_free(etcd_kv *kv);
int tw__etcd_decode_kv(const json_t *obj, etcd_kv *kv, etcd_status *st);

/* One unary call: POST body (not consumed) to path; *answer is the decoded 200 answer, after
 * every error object was turned into *st. Failover, timeouts: etcd_http.c. */
int tw__etcd_call(etcd_client *c, const char *path, const json_t *body, json_t **answer,
		  etcd_status *st);

/* Per attempt: the URL, the body and the bounds of one POST on the client's handle. */
int tw__etcd_http_prepare(etcd_client *c, size_t endpoint, const char *path, const char *body,
			  long timeout_ms, long connect_ms, etcd_status *st);
/* Whether a failed attempt left nothing applied (no connection was made, nothing was sent),
 * so that the next endpoint may be tried; otherwise *st says what happened. */
bool tw__etcd_http_unsent(etcd_client *c, CURLcode rc);
void tw__etcd_http_error(etcd_client *c, CURLcode rc, etcd_status *st);
/* Milliseconds on the monotonic clock. */
int64_t tw__etcd_now_ms(void);

#endif
