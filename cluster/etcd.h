/*
 * cluster/etcd.h - etcd's v3 API through its JSON gateway (/v3/...), from C: the one place
 * in libtickwheel-cluster that speaks HTTP (libcurl) and JSON (jansson). Everything above it
 * sees typed requests and answers: raw key and value bytes (the gateway's base64 is undone
 * here), int64 fields as numbers (the gateway sends them as strings and leaves out every field
 * whose value is the default, so a missing field reads as 0), and every failure as one
 * etcd_status.
 *
 * A client holds an ordered list of endpoints ("http://127.0.0.1:2379"); a request goes to the
 * endpoint that answered last and, when that one cannot be reached, to the next ones in turn.
 * A request is sent to a second endpoint only when the first failed before it could have been
 * applied (the connection was refused or could not be made); after a timeout or a dropped
 * connection mid-request the caller gets ETCD_ETIMEOUT / ETCD_ECONNECT and decides, since a
 * write may have been applied; the client's next request then starts at the next endpoint (as
 * it does after an ETCD_EGRPC answer with grpc_code 14, unavailable: "no leader", "leader
 * changed", which a member cut off from the others gives to every request). A client is used
 * by one thread at a time (it owns one curl handle and its connection); make one per thread.
 *
 * Streams (watch) are a sequence of JSON objects whose boundaries have nothing to do with
 * HTTP chunks: etcd_stream cuts a byte stream into whole objects wherever the reads split it.
 */
#ifndef TW_CLUSTER_ETCD_H
#define TW_CLUSTER_ETCD_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What went wrong, coarsely: the cluster library counts errors by this kind. */
typedef enum {
	ETCD_OK = 0,
	ETCD_ECONNECT,   /* no endpoint could be reached, or the connection dropped mid-request */
	ETCD_ETIMEOUT,   /* no answer within the client's timeout */
	ETCD_EHTTP,      /* an HTTP status other than 200 with no gRPC error in the body */
	ETCD_EGRPC,      /* etcd answered with an error object (grpc_code, message) */
	ETCD_EPARSE,     /* the answer is not the JSON etcd sends (malformed, a field's type) */
	ETCD_ECOMPACTED, /* a range or watch at a revision etcd has compacted away */
	ETCD_ENOLEASE,   /* the lease does not exist (expired or revoked) */
	ETCD_ENOMEM,
	ETCD_ECANCELED, /* a watch stopped by its stop flag, its callback, or etcd (cancel_reason) */
	ETCD_EINVAL,    /* a bad argument (no endpoints, an empty key) */
} etcd_error;

typedef struct {
	etcd_error kind;
	int grpc_code;    /* ETCD_EGRPC: the gRPC status code etcd gave (e.g. 14 unavailable) */
	long http_status; /* the last HTTP status seen; 0: none */
	char message[160];
} etcd_status;

/* The names of etcd_error's kinds, for logs and metric labels: "connect", "timeout", ... */
const char *tw__etcd_error_name(etcd_error kind);

/* key and value are malloc'ed with a NUL after their bytes (so text reads as a C string);
 * NULL when etcd left them out (empty). */
typedef struct {
	uint8_t *key;
	size_t key_len;
	uint8_t *value;
	size_t value_len;
	int64_t create_revision, mod_revision, version, lease;
} etcd_kv;

typedef struct {
	etcd_kv *kvs;
	size_t count;
	bool more;        /* more keys in the range than limit let through */
	int64_t total;    /* keys in the range ("count") */
	int64_t revision; /* the store's revision when it answered (header.revision) */
} etcd_range_result;

void tw__etcd_range_result_free(etcd_range_result *r);

typedef struct etcd_client etcd_client;

/* endpoints: n >= 1 URLs copied; timeout_ms bounds each request (connect included). */
int tw__etcd_client_create(const char *const *endpoints, size_t n, unsigned timeout_ms,
			   etcd_client **out, etcd_status *st);
void tw__etcd_client_destroy(etcd_client *c);
/* The endpoint the client talks to now (for logs). */
const char *tw__etcd_client_endpoint(const etcd_client *c);

/* The end of the range of every key that starts with prefix (etcd's "prefix" range end):
 * the prefix with its last byte below 0xff incremented and the bytes after it dropped; a
 * prefix of only 0xff bytes gives "\0" (every key from the prefix on). *out is malloc'ed. */
int tw__etcd_prefix_end(const void *prefix, size_t len, uint8_t **out, size_t *out_len);

/* Each returns 0 or -1 with *st filled. */

/* keys [key, range_end) (range_end NULL: the key alone), at most limit of them (0: all), as
 * of revision (0: the newest); keys_only leaves values out. */
typedef struct {
	const void *key;
	size_t key_len;
	const void *range_end;
	size_t range_end_len;
	int64_t limit;
	int64_t revision;
	bool keys_only;
	bool count_only;
} etcd_range_req;
int tw__etcd_range(etcd_client *c, const etcd_range_req *req, etcd_range_result *out,
		   etcd_status *st);

/* lease 0: none. *revision (may be NULL): the revision the put made. */
int tw__etcd_put(etcd_client *c, const void *key, size_t key_len, const void *value,
		 size_t value_len, int64_t lease, int64_t *revision, etcd_status *st);
/* range_end NULL: the key alone. *deleted (may be NULL): how many keys went. */
int tw__etcd_delete(etcd_client *c, const void *key, size_t key_len, const void *range_end,
		    size_t range_end_len, int64_t *deleted, etcd_status *st);

/* A transaction: if every compare holds, the success ops run, else the failure ops; one
 * revision, all or nothing. */
typedef enum {
	ETCD_CMP_VERSION,
	ETCD_CMP_CREATE,
	ETCD_CMP_MOD,
	ETCD_CMP_VALUE,
	ETCD_CMP_LEASE
} etcd_cmp_target;
typedef enum {
	ETCD_CMP_EQUAL,
	ETCD_CMP_GREATER,
	ETCD_CMP_LESS,
	ETCD_CMP_NOT_EQUAL
} etcd_cmp_result;
typedef struct {
	etcd_cmp_target target;
	etcd_cmp_result result;
	const void *key;
	size_t key_len;
	int64_t number; /* VERSION, CREATE, MOD, LEASE: the revision, version or lease id */
	/* VALUE: compared as bytes (etcd fails a VALUE compare on a missing key) */
	const void *value;
	size_t value_len;
} etcd_compare;

typedef enum { ETCD_OP_RANGE, ETCD_OP_PUT, ETCD_OP_DELETE } etcd_op_kind;
typedef struct {
	etcd_op_kind kind;
	const void *key;
	size_t key_len;
	const void *range_end; /* RANGE, DELETE: NULL for the key alone */
	size_t range_end_len;
	const void *value; /* PUT */
	size_t value_len;
	int64_t lease;   /* PUT: 0 for none */
	int64_t limit;   /* RANGE: 0 for all */
	bool count_only; /* RANGE: no keys, only their number (etcd_range_result.total) */
} etcd_op;

typedef struct {
	etcd_op_kind kind;
	etcd_range_result range; /* RANGE */
	int64_t deleted;         /* DELETE */
	int64_t revision;        /* PUT: header.revision of its answer */
} etcd_op_result;

typedef struct {
	bool succeeded;
	int64_t revision;
	etcd_op_result *results; /* one per op of the branch taken */
	size_t count;
} etcd_txn_result;

void tw__etcd_txn_result_free(etcd_txn_result *r);
int tw__etcd_txn(etcd_client *c, const etcd_compare *cmp, size_t ncmp, const etcd_op *success,
		 size_t nsuccess, const etcd_op *failure, size_t nfailure, etcd_txn_result *out,
		 etcd_status *st);

/* Leases. grant: ttl_s >= 1 asked, *granted_ttl_s what etcd gave. keepalive: one renewal (one
 * POST, as HTTP/1.1 cannot stream a request); ETCD_ENOLEASE when the lease is gone. revoke: a
 * lease that is already gone is not an error. */
int tw__etcd_lease_grant(etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl_s,
			 etcd_status *st);
int tw__etcd_lease_keepalive(etcd_client *c, int64_t id, int64_t *ttl_s, etcd_status *st);
int tw__etcd_lease_revoke(etcd_client *c, int64_t id, etcd_status *st);

/* The cluster's members (/v3/cluster/member/list): client_urls are what each advertises (none
 * for a member added but not started). Free with tw__etcd_member_list_free. */
typedef struct {
	uint64_t id;
	char name[64];
	char **client_urls;
	size_t nclient;
	bool is_learner;
} etcd_member;
int tw__etcd_member_list(etcd_client *c, etcd_member **members, size_t *n, etcd_status *st);
void tw__etcd_member_list_free(etcd_member *members, size_t n);

/* Compacts the store's history up to revision (POST /v3/kv/compaction); physical: answer once
 * the space is reclaimed. Reads and watches below revision then give ETCD_ECOMPACTED. */
int tw__etcd_compact(etcd_client *c, int64_t revision, bool physical, etcd_status *st);

/* The member that answers: its id and the cluster's leader's id (/v3/maintenance/status). */
int tw__etcd_status(etcd_client *c, uint64_t *member_id, uint64_t *leader_id, int64_t *revision,
		    etcd_status *st);

/* Watches. A watch message (one object of the stream) decoded: */
typedef enum { ETCD_EVENT_PUT, ETCD_EVENT_DELETE } etcd_event_type;
typedef struct {
	etcd_event_type type;
	etcd_kv kv;
	etcd_kv prev_kv; /* zero unless asked for and present */
} etcd_event;
typedef struct {
	bool created, canceled;
	int64_t compact_revision; /* nonzero: the start revision was compacted (canceled) */
	int64_t revision;         /* header.revision */
	etcd_event *events;
	size_t count;
	char cancel_reason[128];
} etcd_watch_msg;
void tw__etcd_watch_msg_free(etcd_watch_msg *m);

/* Called once per message (the created one and a canceled one included), on the watching
 * thread; nonzero ends the watch (ETCD_ECANCELED). msg and what it points to live until fn
 * returns. fn runs inside the client's transfer: it must not use the same client. */
typedef int (*etcd_watch_fn)(const etcd_watch_msg *msg, void *ctx);

/* Watches [key, range_end) from start_revision (0: from now) and calls fn per message until
 * the stream ends, fn returns nonzero, *stop becomes true (checked at least every 100 ms; may
 * be NULL), or an error; blocks the calling thread all along. Returns -1 with *st: the kind
 * says why it ended (ETCD_ECOMPACTED: start_revision was compacted away, the message names the
 * compact revision; resume from a fresh range read. ETCD_ECANCELED: the stop flag, fn, or a
 * cancel by etcd, named in the message. ETCD_ECONNECT: the stream ended or broke). The
 * "created" answer must come within the client's timeout (else ETCD_ETIMEOUT); after it the
 * watch has no time limit. key_len >= 1. */
typedef struct {
	const void *key;
	size_t key_len;
	const void *range_end;
	size_t range_end_len;
	int64_t start_revision;
	bool prev_kv;
	bool progress_notify;
	const atomic_bool *stop;
} etcd_watch_req;
int tw__etcd_watch(etcd_client *c, const etcd_watch_req *req, etcd_watch_fn fn, void *ctx,
		   etcd_status *st);

/*
 * Stream framing, pure (no I/O): bytes in as they arrive, whole top-level JSON objects out.
 * Whitespace and newlines between objects are skipped; anything else outside an object, or an
 * object larger than max_object bytes, is an error (ETCD_EPARSE) after which the stream takes
 * no more. Unit-tested by splitting recorded etcd answers at every byte, and fuzzed.
 */
typedef struct {
	char *buf;
	size_t len, cap, max_object;
	size_t scan; /* bytes of buf already scanned */
	int depth;   /* object/array nesting at scan */
	bool in_string, escaped, failed;
} etcd_stream;
void tw__etcd_stream_init(etcd_stream *s, size_t max_object);
void tw__etcd_stream_free(etcd_stream *s);
/* Appends bytes; then call next until it gives 0. */
int tw__etcd_stream_feed(etcd_stream *s, const void *data, size_t len, etcd_status *st);
/* 1: *obj is the next whole object (json_decref it); 0: none yet; -1: error in *st. */
int tw__etcd_stream_next(etcd_stream *s, json_t **obj, etcd_status *st);

/* Decoders of answers' JSON (pure; exposed for tests and the fuzzer). Each fills *out or
 * returns -1 with *st (ETCD_EPARSE, or the error object's kind). An object of the form
 * {"error": ...} or {"code": N, "message": ...} is turned into its etcd_status. */
int tw__etcd_decode_error(const json_t *root, etcd_status *st);
int tw__etcd_decode_range(const json_t *root, etcd_range_result *out, etcd_status *st);
int tw__etcd_decode_txn(const json_t *root, etcd_txn_result *out, etcd_status *st);
int tw__etcd_decode_watch(const json_t *root, etcd_watch_msg *out, etcd_status *st);

#endif
