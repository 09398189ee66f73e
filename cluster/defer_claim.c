/*
 * cluster/defer_claim.c - claiming deferred tasks, a batch of them (of any of the owned
 * groups) per transaction. The transaction holds only while this replica owns each of their
 * groups with its token, each task is as this replica last read it (mod revision), and each
 * task's claim key is absent (or is the lost owner's claim it read); it puts the claims and
 * reads the tasks back (their payloads). A refused batch reads the owner keys, the tasks and
 * their claims in its failure branch, so each task is settled from that one answer.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

/* etcd takes at most 128 compares and 128 operations per branch (--max-txn-ops): groups +
 * 2n compares, 2n success and groups + 2n failure operations. */
#define CLAIM_BATCH 40
#define RETRY_MS    100

struct claim_keys {
	char task[CL_KEY_MAX], claim[CL_KEY_MAX], value[128];
	int task_len, claim_len, value_len;
	size_t owner; /* index of its group among the batch's groups */
};

struct owner {
	unsigned group;
	uint64_t token;
	char key[CL_KEY_MAX];
	int key_len;
};

static void back_to_held(struct tw_cluster *c, struct cl_task *t, int64_t at_ms)
{
	if (t->state != CL_CLAIMING)
		return;
	t->state = CL_HELD;
	tw__cl_task_unbusy(c->defer, t);
	tw__cl_task_arm(c, t, at_ms);
}

static void adopt_claim(struct tw_cluster *c, struct cl_task *t, uint64_t token, unsigned attempt,
			int64_t claim_rev, const etcd_kv *task_kv)
{
	struct cl_record rec;
	if (!task_kv || tw__cl_record_decode(task_kv->value, task_kv->value_len, &rec) != 0) {
		tw__cl_task_drop(c, t);
		return;
	}
	uint8_t *payload = rec.payload_len ? malloc(rec.payload_len) : NULL;
	if (rec.payload_len && !payload) {
		/* The claim stands: the task runs when this replica has the memory, or at the
		 * next owner. */
		back_to_held(c, t, tw__cl_wall_ms() + RETRY_MS);
		return;
	}
	if (rec.payload_len)
		memcpy(payload, rec.payload, rec.payload_len);
	free(t->payload);
	t->payload = payload;
	t->payload_len = rec.payload_len;
	t->rec = rec;
	t->rec.payload = NULL;
	t->rec.payload_len = 0;
	t->mod_rev = task_kv->mod_revision;
	if (t->other_claim_rev)
		c->defer->stats.reclaims++;
	t->other_claim_rev = 0;
	t->token = token;
	t->attempt = attempt;
	t->claim_rev = claim_rev;
	t->state = CL_CLAIMED;
	tw__cl_task_arm(c, t, t->rec.due_ms);
}

/* Settles a refused batch's tasks from its failure branch: the owners, then (task, claim)
 * for each task. Under lock. */
static void settle_refused(struct tw_cluster *c, struct cl_task **ts, size_t n,
			   const struct claim_keys *k, const struct owner *o, size_t nowners,
			   const etcd_txn_result *res)
{
	int64_t now = tw__cl_wall_ms();
	if (res->count != nowners + 2 * n) {
		for (size_t i = 0; i < n; i++)
			back_to_held(c, ts[i], now + RETRY_MS);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct cl_task *t = ts[i];
		if (t->state != CL_CLAIMING)
			continue;
		const etcd_range_result *owner = &res->results[k[i].owner].range;
		uint64_t token = o[k[i].owner].token;
		if (owner->count != 1 || (uint64_t)owner->kvs[0].create_revision != token) {
			/* The group is gone: the loader drops its tasks. */
			back_to_held(c, t, now + RETRY_MS);
			continue;
		}
		const etcd_range_result *task = &res->results[nowners + 2 * i].range;
		const etcd_range_result *claim = &res->results[nowners + 2 * i + 1].range;
		if (task->count == 0) { /* cancelled, or done by another owner */
			tw__cl_task_drop(c, t);
			continue;
		}
		struct cl_claim_value cv;
		if (claim->count == 1 &&
		    tw__cl_claim_decode(claim->kvs[0].value, claim->kvs[0].value_len, &cv) == 0) {
			if (cv.token == token && strcmp(cv.member, c->member) == 0) {
				/* Ours: a claim whose answer was lost. */
				adopt_claim(c, t, token, cv.attempt, claim->kvs[0].mod_revision,
					    &task->kvs[0]);
				continue;
			}
			t->other_claim_rev = claim->kvs[0].mod_revision;
			t->other_claim_attempt = cv.attempt;
		} else {
			t->other_claim_rev = 0;
		}
		struct cl_record rec;
		if (tw__cl_record_decode(task->kvs[0].value, task->kvs[0].value_len, &rec) == 0) {
			t->rec = rec;
			t->rec.payload = NULL;
			t->rec.payload_len = 0;
		}
		t->mod_rev = task->kvs[0].mod_revision;
		back_to_held(c, t, t->rec.due_ms - (int64_t)c->claim_ahead_ms);
	}
}

/* The batch's groups with their tokens; tasks whose group is not held here with the
 * owner's token (lost, draining, loading anew) go back to waiting. Returns the tasks kept.
 * Under lock. */
static size_t owners_of(struct tw_cluster *c, struct cl_task **ts, size_t n, struct owner *o,
			size_t *nowners, struct claim_keys *k)
{
	struct cl_defer *d = c->defer;
	size_t kept = 0;
	*nowners = 0;
	for (size_t i = 0; i < n; i++) {
		struct cl_task *t = ts[i];
		size_t j = 0;
		while (j < *nowners && o[j].group != t->group)
			j++;
		if (j == *nowners) {
			pthread_mutex_lock(&c->lock);
			uint64_t token = c->group[t->group].token;
			bool draining = c->group[t->group].draining;
			pthread_mutex_unlock(&c->lock);
			if (!token || draining || d->loaded_token[t->group] != token ||
			    atomic_load(&d->draining)) {
				back_to_held(c, t, tw__cl_wall_ms() + RETRY_MS);
				tw__cl_task_put(t);
				continue;
			}
			o[j].group = t->group;
			o[j].token = token;
			o[j].key_len = tw__cl_key(c, o[j].key, "owners/%04u", t->group);
			(*nowners)++;
		}
		k[kept].owner = j;
		ts[kept++] = t;
	}
	return kept;
}

/* Claims ts[0..n) (CLAIMING, one reference each, given up here). */
static void claim_batch(struct tw_cluster *c, struct cl_task **ts, size_t n)
{
	struct cl_defer *d = c->defer;
	struct claim_keys k[CLAIM_BATCH];
	struct owner o[CLAIM_BATCH];
	etcd_compare cmp[3 * CLAIM_BATCH];
	etcd_op ops[2 * CLAIM_BATCH], fail[3 * CLAIM_BATCH];
	size_t no = 0;
	pthread_mutex_lock(&d->lock);
	n = owners_of(c, ts, n, o, &no, k);
	for (size_t j = 0; j < no; j++) {
		cmp[j] = (etcd_compare){ .target = ETCD_CMP_CREATE,
					 .result = ETCD_CMP_EQUAL,
					 .key = o[j].key,
					 .key_len = (size_t)o[j].key_len,
					 .number = (int64_t)o[j].token };
		fail[j] = (etcd_op){ .kind = ETCD_OP_RANGE,
				     .key = o[j].key,
				     .key_len = (size_t)o[j].key_len };
	}
	for (size_t i = 0; i < n; i++) {
		struct cl_task *t = ts[i];
		struct cl_claim_value cv = { .attempt = t->other_claim_rev ?
								t->other_claim_attempt + 1 :
								t->rec.attempts + 1,
					     .token = o[k[i].owner].token };
		memcpy(cv.member, c->member, sizeof cv.member);
		t->attempt = cv.attempt;
		k[i].task_len = tw__cl_task_key(c, k[i].task, 't', t->group, t->key);
		k[i].claim_len = tw__cl_task_key(c, k[i].claim, 'c', t->group, t->key);
		k[i].value_len = tw__cl_claim_encode(&cv, k[i].value, sizeof k[i].value);
		cmp[no + 2 * i] = (etcd_compare){ .target = ETCD_CMP_MOD,
						  .result = ETCD_CMP_EQUAL,
						  .key = k[i].task,
						  .key_len = (size_t)k[i].task_len,
						  .number = t->mod_rev };
		cmp[no + 2 * i + 1] =
			(etcd_compare){ .target =
						t->other_claim_rev ? ETCD_CMP_MOD : ETCD_CMP_CREATE,
					.result = ETCD_CMP_EQUAL,
					.key = k[i].claim,
					.key_len = (size_t)k[i].claim_len,
					.number = t->other_claim_rev };
		ops[2 * i] = (etcd_op){ .kind = ETCD_OP_PUT,
					.key = k[i].claim,
					.key_len = (size_t)k[i].claim_len,
					.value = k[i].value,
					.value_len = (size_t)k[i].value_len };
		ops[2 * i + 1] = (etcd_op){ .kind = ETCD_OP_RANGE,
					    .key = k[i].task,
					    .key_len = (size_t)k[i].task_len };
		fail[no + 2 * i] = ops[2 * i + 1];
		fail[no + 2 * i + 1] = (etcd_op){ .kind = ETCD_OP_RANGE,
						  .key = k[i].claim,
						  .key_len = (size_t)k[i].claim_len };
	}
	if (n)
		d->stats.claim_requests++;
	pthread_mutex_unlock(&d->lock);
	if (n == 0)
		return;
	etcd_txn_result res = { 0 };
	etcd_status st = { 0 };
	int rc = tw__cl_note(c,
			     tw__etcd_txn(d->work_client, cmp, no + 2 * n, ops, 2 * n, fail,
					  no + 2 * n, &res, &st),
			     &st);
	pthread_mutex_lock(&d->lock);
	if (rc == TW_OK && res.succeeded && res.count == 2 * n) {
		for (size_t i = 0; i < n; i++) {
			if (ts[i]->state != CL_CLAIMING)
				continue;
			const etcd_range_result *task = &res.results[2 * i + 1].range;
			adopt_claim(c, ts[i], o[k[i].owner].token, ts[i]->attempt, res.revision,
				    task->count == 1 ? &task->kvs[0] : NULL);
		}
	} else if (rc == TW_OK && !res.succeeded) {
		settle_refused(c, ts, n, k, o, no, &res);
	} else {
		/* No answer: nobody runs these before a claim of ours is confirmed; asked again,
		 * a claim that was applied is found ours in the failure branch. */
		for (size_t i = 0; i < n; i++)
			back_to_held(c, ts[i], tw__cl_wall_ms() + RETRY_MS);
	}
	for (size_t i = 0; i < n; i++)
		tw__cl_task_put(ts[i]);
	pthread_mutex_unlock(&d->lock);
	tw__etcd_txn_result_free(&res);
}

void tw__cl_claim_queued(struct tw_cluster *c, struct cl_task *list)
{
	struct cl_defer *d = c->defer;
	while (list) {
		struct cl_task *batch[CLAIM_BATCH];
		size_t n = 0;
		pthread_mutex_lock(&d->lock);
		while (list && n < CLAIM_BATCH) {
			struct cl_task *t = list;
			list = t->qnext;
			if (t->state == CL_CLAIMING)
				batch[n++] = t;
			else
				tw__cl_task_put(t);
		}
		pthread_mutex_unlock(&d->lock);
		claim_batch(c, batch, n);
	}
}
