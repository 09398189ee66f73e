/*
 * cluster/defer_view.c - deferred tasks as etcd holds them, for an operator's tool: a key's
 * task, claim and dead letter (tw_cluster_task_read), the dead letters a page at a time
 * (tw_cluster_dead_read), and a dead letter put back as a task (tw_cluster_requeue). Like
 * tw_cluster_view_read, these need no lease and no engine: a reader holds a cluster record
 * of its own only for the key helpers and the error counts.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "defer.h"

#define TW_CLUSTER_API __attribute__((visibility("default")))
/* A requeue whose dead letter changed under it reads it again; a bound, in case a writer
 * keeps changing it. */
#define REQUEUE_TRIES 10

struct reader {
	struct tw_cluster *c;
	etcd_client *client;
};

static void reader_close(struct reader *r)
{
	if (r->client)
		tw__etcd_client_destroy(r->client);
	if (r->c) {
		pthread_mutex_destroy(&r->c->lock);
		free(r->c);
	}
	memset(r, 0, sizeof *r);
}

static int reader_open(struct reader *r, const char *const *endpoints, const char *prefix,
		       unsigned timeout_ms)
{
	memset(r, 0, sizeof *r);
	if (!endpoints || !endpoints[0])
		return -TW_EINVAL;
	if (!prefix)
		prefix = "/tickwheel/";
	size_t plen = strlen(prefix);
	if (plen == 0 || plen > 128)
		return -TW_EINVAL;
	r->c = calloc(1, sizeof *r->c);
	if (!r->c)
		return -TW_ENOMEM;
	if (pthread_mutex_init(&r->c->lock, NULL) != 0) {
		free(r->c);
		r->c = NULL;
		return -TW_ENOMEM;
	}
	memcpy(r->c->prefix, prefix, plen + 1);
	r->c->was_connected = true;
	size_t n = 0;
	while (endpoints[n])
		n++;
	etcd_status st = { 0 };
	if (n > TW_CLUSTER_ENDPOINTS_MAX ||
	    tw__etcd_client_create(endpoints, n, timeout_ms ? timeout_ms : 2000, &r->client, &st) !=
		    0) {
		reader_close(r);
		return st.kind == ETCD_ENOMEM ? -TW_ENOMEM : -TW_EINVAL;
	}
	return TW_OK;
}

static int reader_txn(struct reader *r, const etcd_compare *cmp, size_t ncmp,
		      const etcd_op *success, size_t nsuccess, const etcd_op *failure,
		      size_t nfailure, etcd_txn_result *res)
{
	etcd_status st = { 0 };
	int rc = tw__cl_note(
		r->c,
		tw__etcd_txn(r->client, cmp, ncmp, success, nsuccess, failure, nfailure, res, &st),
		&st);
	if (rc == TW_OK && res->succeeded && res->count != nsuccess)
		rc = -TW_CLUSTER_EETCD;
	if (rc == TW_OK && !res->succeeded && res->count != nfailure)
		rc = -TW_CLUSTER_EETCD;
	return rc;
}

/* The groups recorded at the first join: -TW_ENOTFOUND when there is none. */
static int groups_of(const etcd_range_result *cfg, unsigned *groups)
{
	if (cfg->count != 1)
		return -TW_ENOTFOUND;
	unsigned long g = strtoul((const char *)cfg->kvs[0].value, NULL, 10);
	if (g == 0 || g > 4096)
		return -TW_CLUSTER_EETCD;
	*groups = (unsigned)g;
	return TW_OK;
}

static void entry_free(tw_cluster_task_view *t)
{
	free((char *)t->key);
	free((char *)t->kind);
	free((char *)t->claimed_by);
	free((void *)t->payload);
}

TW_CLUSTER_API void tw_cluster_task_list_free(tw_cluster_task_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->count; i++)
		entry_free(&list->tasks[i]);
	free(list->tasks);
	free(list);
}

static tw_cluster_task_list *list_new(size_t cap)
{
	tw_cluster_task_list *l = calloc(1, sizeof *l);
	if (l && !(l->tasks = calloc(cap ? cap : 1, sizeof *l->tasks))) {
		free(l);
		l = NULL;
	}
	return l;
}

/* Appends key's record (kv) with its claim (claim_kv, or NULL) to l, whose room the caller
 * made. A value that is no record (an operator's own key under the prefix) is left out. */
static int list_add(tw_cluster_task_list *l, const char *key, const etcd_kv *kv,
		    const etcd_kv *claim_kv, unsigned groups)
{
	struct cl_record rec;
	struct cl_claim_value claim;
	if (tw__cl_record_decode(kv->value, kv->value_len, &rec) != 0)
		return TW_OK;
	bool claimed = !rec.dead && claim_kv &&
		       tw__cl_claim_decode(claim_kv->value, claim_kv->value_len, &claim) == 0;
	tw_cluster_task_view *t = &l->tasks[l->count];
	memset(t, 0, sizeof *t);
	t->state = rec.dead ? TW_CLUSTER_TASK_DEAD :
		   claimed  ? TW_CLUSTER_TASK_CLAIMED :
			      TW_CLUSTER_TASK_PENDING;
	t->due_ms = rec.due_ms;
	t->attempt = claimed ? claim.attempt : rec.attempts;
	t->max_attempts = rec.max_attempts;
	t->backoff_ms = rec.backoff_ms;
	t->group = tw__cl_hash(key) % groups;
	t->last_code = rec.dead ? rec.last_code : 0;
	t->token = claimed ? claim.token : 0;
	t->payload_len = rec.payload_len;
	uint8_t *payload = malloc(rec.payload_len + 1);
	t->key = strdup(key);
	t->kind = strdup(rec.kind);
	t->claimed_by = claimed ? strdup(claim.member) : NULL;
	t->payload = payload;
	l->count++; /* counted now, so that a failure below frees what was made */
	if (!payload || !t->key || !t->kind || (claimed && !t->claimed_by))
		return -TW_ENOMEM;
	if (rec.payload_len)
		memcpy(payload, rec.payload, rec.payload_len);
	payload[rec.payload_len] = '\0'; /* a text payload prints as it is */
	return TW_OK;
}

static etcd_op range_op(const char *key, int len)
{
	return (etcd_op){ .kind = ETCD_OP_RANGE, .key = key, .key_len = (size_t)len };
}

/* The number of groups, for the key's task and claim keys. */
static int read_groups(struct reader *r, unsigned *groups)
{
	char key[CL_KEY_MAX];
	int len = tw__cl_key(r->c, key, "config/groups");
	if (len < 0)
		return -TW_EINVAL;
	etcd_op op = range_op(key, len);
	etcd_txn_result res = { 0 };
	int rc = reader_txn(r, NULL, 0, &op, 1, NULL, 0, &res);
	if (rc == TW_OK)
		rc = groups_of(&res.results[0].range, groups);
	tw__etcd_txn_result_free(&res);
	return rc;
}

TW_CLUSTER_API int tw_cluster_task_read(const char *const *endpoints, const char *prefix,
					unsigned timeout_ms, const char *key,
					tw_cluster_task_list **out)
{
	if (out)
		*out = NULL;
	if (!key || !out || !tw__cl_task_key_ok(key))
		return -TW_EINVAL;
	struct reader r;
	int rc = reader_open(&r, endpoints, prefix, timeout_ms);
	if (rc != TW_OK)
		return rc;
	unsigned groups = 0;
	rc = read_groups(&r, &groups);
	char task[CL_KEY_MAX], claim[CL_KEY_MAX], dead[CL_KEY_MAX];
	int tlen = 0, clen = 0, dlen = 0;
	if (rc == TW_OK) {
		unsigned g = tw__cl_hash(key) % groups;
		tlen = tw__cl_key(r.c, task, "defer/t/%04u/%s", g, key);
		clen = tw__cl_key(r.c, claim, "defer/c/%04u/%s", g, key);
		dlen = tw__cl_key(r.c, dead, "dead/%s", key);
		if (tlen < 0 || clen < 0 || dlen < 0)
			rc = -TW_EINVAL;
	}
	etcd_txn_result res = { 0 };
	if (rc == TW_OK) {
		/* One transaction, so that the task and its claim are seen as of one revision. */
		etcd_op ops[3] = { range_op(task, tlen), range_op(claim, clen),
				   range_op(dead, dlen) };
		rc = reader_txn(&r, NULL, 0, ops, 3, NULL, 0, &res);
	}
	tw_cluster_task_list *l = NULL;
	if (rc == TW_OK && !(l = list_new(2)))
		rc = -TW_ENOMEM;
	if (rc == TW_OK) {
		const etcd_range_result *t = &res.results[0].range, *c = &res.results[1].range,
					*d = &res.results[2].range;
		l->revision = res.revision;
		if (t->count == 1)
			rc = list_add(l, key, &t->kvs[0], c->count == 1 ? &c->kvs[0] : NULL,
				      groups);
		if (rc == TW_OK && d->count == 1)
			rc = list_add(l, key, &d->kvs[0], NULL, groups);
	}
	tw__etcd_txn_result_free(&res);
	reader_close(&r);
	if (rc != TW_OK) {
		tw_cluster_task_list_free(l);
		return rc;
	}
	*out = l;
	return TW_OK;
}

/* Room for n more entries in l. */
static int list_room(tw_cluster_task_list *l, size_t *cap, size_t n)
{
	if (l->count + n <= *cap)
		return TW_OK;
	size_t want = l->count + n;
	tw_cluster_task_view *t = realloc(l->tasks, want * sizeof *t);
	if (!t)
		return -TW_ENOMEM;
	l->tasks = t;
	*cap = want;
	return TW_OK;
}

/* The dead letters from start (start_len bytes) on, up to limit more of them, appended to l;
 * *next: where the following page starts (malloc'ed), NULL when the range ended. */
static int dead_page(struct reader *r, tw_cluster_task_list *l, size_t *cap, const void *start,
		     size_t start_len, size_t limit, unsigned *groups, uint8_t **next,
		     size_t *next_len)
{
	*next = NULL;
	char cfg[CL_KEY_MAX], dead[CL_KEY_MAX];
	int cfg_len = tw__cl_key(r->c, cfg, "config/groups");
	int dead_len = tw__cl_key(r->c, dead, "dead/");
	uint8_t *end = NULL;
	size_t end_len = 0;
	if (cfg_len < 0 || dead_len < 0)
		return -TW_EINVAL;
	if (tw__etcd_prefix_end(dead, (size_t)dead_len, &end, &end_len) != 0)
		return -TW_ENOMEM;
	/* The groups once, with the first page. */
	etcd_op ops[2] = { range_op(cfg, cfg_len), range_op(start, (int)start_len) };
	etcd_op *page = *groups ? &ops[0] : &ops[1];
	*page = range_op(start, (int)start_len);
	page->range_end = end;
	page->range_end_len = end_len;
	page->limit = limit > INT64_MAX ? INT64_MAX : (int64_t)limit;
	etcd_txn_result res = { 0 };
	size_t nops = *groups ? 1 : 2;
	int rc = reader_txn(r, NULL, 0, ops, nops, NULL, 0, &res);
	if (rc == TW_OK && !*groups) {
		rc = groups_of(&res.results[0].range, groups);
		l->revision = res.revision;
	}
	const etcd_range_result *d = rc == TW_OK ? &res.results[nops - 1].range : NULL;
	if (rc == TW_OK)
		rc = list_room(l, cap, d->count);
	for (size_t i = 0; rc == TW_OK && i < d->count; i++) {
		const etcd_kv *kv = &d->kvs[i];
		const char *key = (const char *)kv->key + dead_len;
		if (kv->key_len > (size_t)dead_len && tw__cl_task_key_ok(key))
			rc = list_add(l, key, kv, NULL, *groups);
	}
	if (rc == TW_OK && d->more && d->count) {
		/* After the last key: that key and a NUL byte. */
		const etcd_kv *last = &d->kvs[d->count - 1];
		if (!(*next = calloc(1, last->key_len + 1)))
			rc = -TW_ENOMEM;
		else
			memcpy(*next, last->key, last->key_len);
		*next_len = last->key_len + 1;
	}
	tw__etcd_txn_result_free(&res);
	free(end);
	return rc;
}

TW_CLUSTER_API int tw_cluster_dead_read(const char *const *endpoints, const char *prefix,
					unsigned timeout_ms, const char *after, size_t limit,
					tw_cluster_task_list **out)
{
	if (out)
		*out = NULL;
	if (!out || (after && !tw__cl_task_key_ok(after)))
		return -TW_EINVAL;
	struct reader r;
	int rc = reader_open(&r, endpoints, prefix, timeout_ms);
	if (rc != TW_OK)
		return rc;
	if (limit == 0)
		limit = 1000;
	char first[CL_KEY_MAX];
	int first_len = tw__cl_key(r.c, first, "dead/%s", after ? after : "");
	tw_cluster_task_list *l = list_new(0);
	size_t cap = 1;
	if (first_len < 0)
		rc = -TW_EINVAL;
	else if (!l)
		rc = -TW_ENOMEM;
	/* The first key after "after" is "after" and a NUL byte, so that a page after "k1"
	 * starts at "k10". Keys under dead/ that are no dead letter (an operator's own) are
	 * left out, and the next page read, so that a page is empty only at the end. */
	const void *start = first;
	size_t start_len = (size_t)first_len + (after ? 1 : 0);
	uint8_t *next = NULL;
	unsigned groups = 0;
	while (rc == TW_OK) {
		uint8_t *prev = next;
		rc = dead_page(&r, l, &cap, start, start_len, limit - l->count, &groups, &next,
			       &start_len);
		free(prev);
		start = next;
		if (rc != TW_OK || !next || l->count == limit)
			break;
	}
	if (rc == TW_OK)
		l->more = next != NULL;
	free(next);
	reader_close(&r);
	if (rc != TW_OK) {
		tw_cluster_task_list_free(l);
		return rc;
	}
	*out = l;
	return TW_OK;
}

/* One try: 1 requeued, 0 the dead letter changed meanwhile (try again), < 0 a code. */
static int requeue_once(struct reader *r, const char *key, int64_t due_ms)
{
	char cfg[CL_KEY_MAX], dead[CL_KEY_MAX], task[CL_KEY_MAX];
	int cfg_len = tw__cl_key(r->c, cfg, "config/groups");
	int dead_len = tw__cl_key(r->c, dead, "dead/%s", key);
	if (cfg_len < 0 || dead_len < 0)
		return -TW_EINVAL;
	etcd_op reads[2] = { range_op(cfg, cfg_len), range_op(dead, dead_len) };
	etcd_txn_result res = { 0 };
	int rc = reader_txn(r, NULL, 0, reads, 2, NULL, 0, &res);
	unsigned groups = 0;
	if (rc == TW_OK)
		rc = groups_of(&res.results[0].range, &groups);
	const etcd_range_result *d = rc == TW_OK ? &res.results[1].range : NULL;
	struct cl_record rec;
	if (rc == TW_OK &&
	    (d->count != 1 || tw__cl_record_decode(d->kvs[0].value, d->kvs[0].value_len, &rec) ||
	     !rec.dead))
		rc = -TW_ENOTFOUND;
	int task_len = rc == TW_OK ? tw__cl_key(r->c, task, "defer/t/%04u/%s",
						tw__cl_hash(key) % groups, key) :
				     0;
	if (rc == TW_OK && task_len < 0)
		rc = -TW_EINVAL;
	uint8_t *value = NULL;
	size_t value_len = 0;
	int64_t mod = rc == TW_OK ? d->kvs[0].mod_revision : 0;
	if (rc == TW_OK) {
		/* The task starts afresh: no attempts made, the dead letter's limits. */
		rec.dead = false;
		rec.last_code = 0;
		rec.attempts = 0;
		rec.due_ms = due_ms ? due_ms : tw__cl_wall_ms();
		rc = tw__cl_record_encode(&rec, &value, &value_len);
	}
	tw__etcd_txn_result_free(&res); /* rec.payload pointed into it: encoded by now */
	if (rc != TW_OK)
		return rc;
	etcd_compare cmp[2] = {
		{ .target = ETCD_CMP_MOD,
		  .result = ETCD_CMP_EQUAL,
		  .key = dead,
		  .key_len = (size_t)dead_len,
		  .number = mod },
		{ .target = ETCD_CMP_CREATE,
		  .result = ETCD_CMP_EQUAL,
		  .key = task,
		  .key_len = (size_t)task_len },
	};
	etcd_op writes[2] = {
		{ .kind = ETCD_OP_DELETE, .key = dead, .key_len = (size_t)dead_len },
		{ .kind = ETCD_OP_PUT,
		  .key = task,
		  .key_len = (size_t)task_len,
		  .value = value,
		  .value_len = value_len },
	};
	etcd_op check = range_op(task, task_len);
	check.count_only = true;
	rc = reader_txn(r, cmp, 2, writes, 2, &check, 1, &res);
	if (rc == TW_OK)
		rc = res.succeeded ? 1 : res.results[0].range.total > 0 ? -TW_EEXIST : 0;
	tw__etcd_txn_result_free(&res);
	free(value);
	return rc;
}

TW_CLUSTER_API int tw_cluster_requeue(const char *const *endpoints, const char *prefix,
				      unsigned timeout_ms, const char *key, int64_t due_ms)
{
	if (!key || !tw__cl_task_key_ok(key) || due_ms < 0)
		return -TW_EINVAL;
	struct reader r;
	int rc = reader_open(&r, endpoints, prefix, timeout_ms);
	for (int i = 0; rc == TW_OK && i < REQUEUE_TRIES; i++)
		rc = requeue_once(&r, key, due_ms);
	reader_close(&r);
	if (rc == 0) /* changed under every try */
		return -TW_CLUSTER_EETCD;
	return rc == 1 ? TW_OK : rc;
}
