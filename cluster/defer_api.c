/*
 * cluster/defer_api.c - tw_cluster_defer, _defer_many, _defer_cancel, _defer_move and
 * tw_cluster_handle: the producers' side, which any replica calls for any task.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

#define TW_CLUSTER_API __attribute__((visibility("default")))

/* The longest delay a defer or move takes, as the jobs' longest period. */
#define DELAY_MAX (UINT64_C(1) << 40)
/* Payloads of one tw_cluster_defer_many together: etcd takes requests of 1.5 MiB, and the
 * gateway's base64 makes 4 bytes of 3. */
#define BATCH_PAYLOAD_MAX ((size_t)512 * 1024)
/* Reads and writes a move tries before it gives up on a task that keeps changing. */
#define MOVE_TRIES 8

static int due_of(int64_t due_ms, uint64_t delay_ms, int64_t *out)
{
	if (due_ms < 0)
		return -TW_EINVAL;
	if (due_ms > 0) {
		if (due_ms - tw__cl_wall_ms() > (int64_t)DELAY_MAX)
			return -TW_ERANGE;
		*out = due_ms;
		return TW_OK;
	}
	if (delay_ms > DELAY_MAX)
		return -TW_ERANGE;
	*out = tw__cl_wall_ms() + (int64_t)delay_ms;
	return TW_OK;
}

static int check_spec(const tw_cluster_defer_spec *s, int64_t *due)
{
	if (!tw__cl_kind_ok(s->kind) || !tw__cl_task_key_ok(s->key) ||
	    s->payload_len > TW_CLUSTER_PAYLOAD_MAX || (s->payload_len && !s->payload) ||
	    s->max_attempts > TW_CLUSTER_ATTEMPTS_MAX)
		return -TW_EINVAL;
	return due_of(s->due_ms, s->delay_ms, due);
}

/* Copies the caller's spec of size bytes into ours (fields it lacks stay zero). */
static int spec_in(tw_cluster_defer_spec *dst, const void *src, size_t size)
{
	memset(dst, 0, sizeof *dst);
	memcpy(dst, src, size < sizeof *dst ? size : sizeof *dst);
	for (size_t i = sizeof *dst; i < size; i++)
		if (((const uint8_t *)src)[i])
			return -TW_EINVAL;
	return TW_OK;
}

struct put {
	char key[CL_KEY_MAX], done[CL_KEY_MAX];
	int key_len, done_len;
	uint8_t *value;
	size_t value_len;
};

static int make_put(struct tw_cluster *c, const tw_cluster_defer_spec *s, int64_t due,
		    struct put *p)
{
	struct cl_record rec = { .due_ms = due,
				 .max_attempts =
					 s->max_attempts ? s->max_attempts : CL_DEFAULT_ATTEMPTS,
				 .backoff_ms =
					 s->backoff_ms ? s->backoff_ms : CL_DEFAULT_BACKOFF_MS,
				 .payload = s->payload,
				 .payload_len = s->payload_len };
	memcpy(rec.kind, s->kind, strlen(s->kind) + 1);
	unsigned g = tw__cl_hash(s->key) % c->groups;
	p->key_len = tw__cl_task_key(c, p->key, 't', g, s->key);
	p->done_len = tw__cl_key(c, p->done, "defer/done/%s", s->key);
	if (p->key_len < 0 || p->done_len < 0)
		return -TW_EINVAL;
	return tw__cl_record_encode(&rec, &p->value, &p->value_len);
}

static bool leaving(struct tw_cluster *c)
{
	return atomic_load(&c->leaving) || atomic_load(&c->defer->draining);
}

TW_CLUSTER_API int tw_cluster_defer_many_sized(tw_cluster *c, const tw_cluster_defer_spec *specs,
					       size_t n, size_t size, int *results)
{
	if (!c || !specs || n == 0 || n > TW_CLUSTER_DEFER_BATCH_MAX || size == 0)
		return -TW_EINVAL;
	if (leaving(c))
		return -TW_ESHUTDOWN;
	tw_cluster_defer_spec *s = calloc(n, sizeof *s);
	struct put *p = calloc(n, sizeof *p);
	etcd_compare *cmp = calloc(2 * n, sizeof *cmp);
	etcd_op *ops = calloc(n, sizeof *ops), *reads = calloc(2 * n, sizeof *reads);
	int rc = s && p && cmp && ops && reads ? TW_OK : -TW_ENOMEM;
	size_t bytes = 0;
	for (size_t i = 0; rc == TW_OK && i < n; i++) {
		int64_t due;
		rc = spec_in(&s[i], (const uint8_t *)specs + i * size, size);
		if (rc == TW_OK)
			rc = check_spec(&s[i], &due);
		for (size_t j = 0; rc == TW_OK && j < i; j++)
			if (strcmp(s[j].key, s[i].key) == 0)
				rc = -TW_EINVAL;
		bytes += s[i].payload_len;
		if (rc == TW_OK && bytes > BATCH_PAYLOAD_MAX)
			rc = -TW_EINVAL;
		if (rc == TW_OK)
			rc = make_put(c, &s[i], due, &p[i]);
		if (rc != TW_OK)
			break;
		/* Absent, and not done a moment ago: a late copy of a defer whose task ran
		 * meanwhile finds its tombstone. */
		cmp[2 * i] = (etcd_compare){ .target = ETCD_CMP_CREATE,
					     .result = ETCD_CMP_EQUAL,
					     .key = p[i].key,
					     .key_len = (size_t)p[i].key_len };
		cmp[2 * i + 1] = (etcd_compare){ .target = ETCD_CMP_CREATE,
						 .result = ETCD_CMP_EQUAL,
						 .key = p[i].done,
						 .key_len = (size_t)p[i].done_len };
		ops[i] = (etcd_op){ .kind = ETCD_OP_PUT,
				    .key = p[i].key,
				    .key_len = (size_t)p[i].key_len,
				    .value = p[i].value,
				    .value_len = p[i].value_len };
		reads[2 * i] = (etcd_op){ .kind = ETCD_OP_RANGE,
					  .key = p[i].key,
					  .key_len = (size_t)p[i].key_len,
					  .limit = 1 };
		reads[2 * i + 1] = (etcd_op){ .kind = ETCD_OP_RANGE,
					      .key = p[i].done,
					      .key_len = (size_t)p[i].done_len,
					      .limit = 1 };
	}
	etcd_txn_result res = { 0 };
	if (rc == TW_OK) {
		etcd_client *client = tw__cl_pool_get(c);
		etcd_status st = { 0 };
		rc = client ? tw__cl_note(c,
					  tw__etcd_txn(client, cmp, 2 * n, ops, n, reads, 2 * n,
						       &res, &st),
					  &st) :
			      -TW_ENOMEM;
		if (client)
			tw__cl_pool_put(c, client);
	}
	if (rc == TW_OK && !res.succeeded && res.count != 2 * n)
		rc = -TW_CLUSTER_EETCD;
	if (rc == TW_OK) {
		for (size_t i = 0; results && i < n; i++)
			results[i] = res.succeeded || (res.results[2 * i].range.count == 0 &&
						       res.results[2 * i + 1].range.count == 0) ?
					     TW_OK :
					     -TW_EEXIST;
		if (!res.succeeded)
			rc = -TW_EEXIST;
	}
	if (rc == TW_OK) {
		pthread_mutex_lock(&c->defer->lock);
		c->defer->stats.defers += n;
		pthread_mutex_unlock(&c->defer->lock);
	}
	tw__etcd_txn_result_free(&res);
	for (size_t i = 0; p && i < n; i++)
		free(p[i].value);
	free(s);
	free(p);
	free(cmp);
	free(ops);
	free(reads);
	return rc;
}

TW_CLUSTER_API int tw_cluster_defer_sized(tw_cluster *c, const tw_cluster_defer_spec *spec,
					  size_t size)
{
	if (!c || !spec)
		return -TW_EINVAL;
	int rc = tw_cluster_defer_many_sized(c, spec, 1, size, NULL);
	return rc;
}

/* The task key's state: 1 live and unclaimed (rev: its mod revision, value read into *kv
 * when asked), 2 claimed, 0 absent; < 0 a code. */
static int read_task(struct tw_cluster *c, etcd_client *client, const char *tkey, const char *ckey,
		     etcd_kv *kv)
{
	etcd_op ops[2] = {
		{ .kind = ETCD_OP_RANGE, .key = tkey, .key_len = strlen(tkey) },
		{ .kind = ETCD_OP_RANGE, .key = ckey, .key_len = strlen(ckey) },
	};
	etcd_txn_result res = { 0 };
	etcd_status st = { 0 };
	int rc = tw__cl_note(c, tw__etcd_txn(client, NULL, 0, ops, 2, NULL, 0, &res, &st), &st);
	if (rc == TW_OK && res.count != 2)
		rc = -TW_CLUSTER_EETCD;
	if (rc == TW_OK) {
		const etcd_range_result *t = &res.results[0].range, *cl = &res.results[1].range;
		rc = t->count == 0 ? 0 : cl->count ? 2 : 1;
		if (rc == 1) { /* handed over: the caller frees it */
			*kv = t->kvs[0];
			memset(&t->kvs[0], 0, sizeof t->kvs[0]);
		}
	}
	tw__etcd_txn_result_free(&res);
	return rc;
}

static int keys_of(struct tw_cluster *c, const char *key, char *tkey, char *ckey)
{
	if (!tw__cl_task_key_ok(key))
		return -TW_EINVAL;
	unsigned g = tw__cl_hash(key) % c->groups;
	if (tw__cl_task_key(c, tkey, 't', g, key) < 0 || tw__cl_task_key(c, ckey, 'c', g, key) < 0)
		return -TW_EINVAL;
	return TW_OK;
}

TW_CLUSTER_API int tw_cluster_defer_cancel(tw_cluster *c, const char *key)
{
	char tkey[CL_KEY_MAX], ckey[CL_KEY_MAX];
	if (!c || !key)
		return -TW_EINVAL;
	int rc = keys_of(c, key, tkey, ckey);
	if (rc != TW_OK)
		return rc;
	if (leaving(c))
		return -TW_ESHUTDOWN;
	etcd_compare cmp[2] = {
		{ .target = ETCD_CMP_CREATE,
		  .result = ETCD_CMP_GREATER,
		  .key = tkey,
		  .key_len = strlen(tkey) },
		{ .target = ETCD_CMP_CREATE,
		  .result = ETCD_CMP_EQUAL,
		  .key = ckey,
		  .key_len = strlen(ckey) },
	};
	char done[CL_KEY_MAX];
	int dlen = tw__cl_key(c, done, "defer/done/%s", key);
	etcd_client *client = tw__cl_pool_get(c);
	if (!client || dlen < 0) {
		if (client)
			tw__cl_pool_put(c, client);
		return client ? -TW_EINVAL : -TW_ENOMEM;
	}
	/* The tombstone: a late copy of the task's defer (its answer lost, etcd applying it
	 * after this cancel) would make the task again, and run what was cancelled. */
	int64_t tomb = tw__cl_tomb_lease(c, client);
	etcd_op ops[2] = {
		{ .kind = ETCD_OP_DELETE, .key = tkey, .key_len = strlen(tkey) },
		{ .kind = ETCD_OP_PUT, .key = done, .key_len = (size_t)dlen, .lease = tomb },
	};
	etcd_op read = { .kind = ETCD_OP_RANGE, .key = tkey, .key_len = strlen(tkey), .limit = 1 };
	etcd_txn_result res = { 0 };
	etcd_status st = { 0 };
	rc = tw__cl_note(c, tw__etcd_txn(client, cmp, 2, ops, tomb ? 2 : 1, &read, 1, &res, &st),
			 &st);
	if (rc != TW_OK && st.kind == ETCD_ENOLEASE)
		tw__cl_tomb_lease_lost(c);
	tw__cl_pool_put(c, client);
	if (rc == TW_OK && !res.succeeded)
		rc = res.count == 1 && res.results[0].range.count ? -TW_ESTATE : -TW_ENOTFOUND;
	tw__etcd_txn_result_free(&res);
	return rc;
}

TW_CLUSTER_API int tw_cluster_defer_move(tw_cluster *c, const char *key, int64_t due_ms,
					 uint64_t delay_ms)
{
	char tkey[CL_KEY_MAX], ckey[CL_KEY_MAX];
	int64_t due;
	if (!c || !key)
		return -TW_EINVAL;
	int rc = keys_of(c, key, tkey, ckey);
	if (rc == TW_OK)
		rc = due_of(due_ms, delay_ms, &due);
	if (rc != TW_OK)
		return rc;
	if (leaving(c))
		return -TW_ESHUTDOWN;
	etcd_client *client = tw__cl_pool_get(c);
	if (!client)
		return -TW_ENOMEM;
	rc = -TW_CLUSTER_EETCD;
	for (int i = 0; i < MOVE_TRIES; i++) {
		etcd_kv kv = { 0 };
		int state = read_task(c, client, tkey, ckey, &kv);
		struct cl_record rec;
		uint8_t *value = NULL;
		size_t len = 0;
		rc = state < 0  ? state :
		     state == 0 ? -TW_ENOTFOUND :
		     state == 2 ? -TW_ESTATE :
				  TW_OK;
		if (rc == TW_OK && tw__cl_record_decode(kv.value, kv.value_len, &rec) != 0)
			rc = -TW_CLUSTER_EETCD;
		if (rc == TW_OK) {
			rec.due_ms = due;
			rc = tw__cl_record_encode(&rec, &value, &len);
		}
		if (rc == TW_OK) {
			etcd_compare cmp[2] = {
				{ .target = ETCD_CMP_MOD,
				  .result = ETCD_CMP_EQUAL,
				  .key = tkey,
				  .key_len = strlen(tkey),
				  .number = kv.mod_revision },
				{ .target = ETCD_CMP_CREATE,
				  .result = ETCD_CMP_EQUAL,
				  .key = ckey,
				  .key_len = strlen(ckey) },
			};
			etcd_op put = { .kind = ETCD_OP_PUT,
					.key = tkey,
					.key_len = strlen(tkey),
					.value = value,
					.value_len = len };
			etcd_txn_result res = { 0 };
			etcd_status st = { 0 };
			rc = tw__cl_note(
				c, tw__etcd_txn(client, cmp, 2, &put, 1, NULL, 0, &res, &st), &st);
			bool moved = rc == TW_OK && res.succeeded;
			tw__etcd_txn_result_free(&res);
			if (rc == TW_OK && !moved)
				rc = 1; /* changed in between: read again */
		}
		free(value);
		free(kv.key);
		free(kv.value);
		if (rc != 1)
			break;
		rc = -TW_CLUSTER_EETCD;
	}
	tw__cl_pool_put(c, client);
	return rc;
}

TW_CLUSTER_API int tw_cluster_handle(tw_cluster *c, const char *kind, tw_cluster_handler handler,
				     void *arg)
{
	if (!c || !handler || !tw__cl_kind_ok(kind))
		return -TW_EINVAL;
	struct cl_defer *d = c->defer;
	struct cl_kind *k = calloc(1, sizeof *k);
	if (!k)
		return -TW_ENOMEM;
	k->handler = handler;
	k->arg = arg;
	memcpy(k->name, kind, strlen(kind) + 1);
	pthread_mutex_lock(&d->lock);
	int rc = leaving(c) ? -TW_ESHUTDOWN : tw__cl_kind_find(d, kind) ? -TW_EEXIST : TW_OK;
	if (rc == TW_OK) {
		k->next = d->kinds;
		d->kinds = k;
		/* The tasks that waited for it: their alarms, now (past ones fire at once). */
		for (size_t b = 0; b < d->nbuckets; b++)
			for (struct cl_task *t = d->buckets[b]; t; t = t->hnext)
				if (t->unhandled && strcmp(t->rec.kind, kind) == 0) {
					t->unhandled = false;
					d->stats.unhandled--;
					if (t->state == CL_HELD)
						tw__cl_task_arm_alarm(c, t);
				}
	}
	pthread_mutex_unlock(&d->lock);
	if (rc != TW_OK)
		free(k);
	return rc;
}
