/*
 * cluster/defer_work.c - the defer worker: claims the tasks whose alarm fired (defer_claim.c)
 * and writes the results of the handlers that returned, a few tasks per transaction, so that
 * a run costs a share of a claim and of a write rather than a round trip each. A result is
 * written under the compare that the claim key is still this replica's claim: the task is
 * deleted, put back for its retry, or moved to the dead letters.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"

/* etcd takes at most 128 compares, and 128 operations per branch (--max-txn-ops): n
 * compares and at most 3n operations. */
#define DONE_BATCH 30
/* What the worker waits before it writes again when etcd did not answer. */
#define RETRY_MS 100
/* How long claims of tasks not yet near their due wait for others to share a transaction. */
#define LINGER_MS 20

struct keys {
	char task[CL_KEY_MAX], claim[CL_KEY_MAX], dead[CL_KEY_MAX], done[CL_KEY_MAX];
	int task_len, claim_len, dead_len, done_len;
	uint8_t *record; /* a put's value */
	size_t record_len;
};

enum outcome { DONE_OK, DONE_RETRY, DONE_DEAD };

static enum outcome outcome_of(const struct cl_task *t)
{
	if (t->result == 0)
		return DONE_OK;
	return t->attempt < t->rec.max_attempts ? DONE_RETRY : DONE_DEAD;
}

/* The operations that write t's result: 2 or 3, into ops; keys and values in k. */
static size_t result_ops(struct tw_cluster *c, struct cl_task *t, struct keys *k, etcd_op *ops,
			 int64_t now, int64_t tomb)
{
	enum outcome o = outcome_of(t);
	k->task_len = tw__cl_task_key(c, k->task, 't', t->group, t->key);
	k->claim_len = tw__cl_task_key(c, k->claim, 'c', t->group, t->key);
	size_t n = 0;
	struct cl_record rec = t->rec;
	rec.attempts = t->attempt;
	rec.payload = t->payload;
	rec.payload_len = t->payload_len;
	if (o == DONE_RETRY)
		rec.due_ms = now + tw__cl_backoff_ms(rec.backoff_ms, t->attempt);
	if (o == DONE_DEAD) {
		rec.dead = true;
		rec.last_code = t->result;
		k->dead_len = tw__cl_key(c, k->dead, "dead/%s", t->key);
	}
	if (o != DONE_OK && tw__cl_record_encode(&rec, &k->record, &k->record_len) != TW_OK)
		return 0;
	if (o == DONE_RETRY)
		ops[n++] = (etcd_op){ .kind = ETCD_OP_PUT,
				      .key = k->task,
				      .key_len = (size_t)k->task_len,
				      .value = k->record,
				      .value_len = k->record_len };
	else
		ops[n++] = (etcd_op){ .kind = ETCD_OP_DELETE,
				      .key = k->task,
				      .key_len = (size_t)k->task_len };
	ops[n++] = (etcd_op){ .kind = ETCD_OP_DELETE,
			      .key = k->claim,
			      .key_len = (size_t)k->claim_len };
	if (o == DONE_DEAD)
		ops[n++] = (etcd_op){ .kind = ETCD_OP_PUT,
				      .key = k->dead,
				      .key_len = (size_t)k->dead_len,
				      .value = k->record,
				      .value_len = k->record_len };
	if (o == DONE_OK && tomb) {
		k->done_len = tw__cl_key(c, k->done, "defer/done/%s", t->key);
		ops[n++] = (etcd_op){ .kind = ETCD_OP_PUT,
				      .key = k->done,
				      .key_len = (size_t)k->done_len,
				      .lease = tomb };
	}
	return n;
}

/* A result written at revision rev: the task leaves, or waits for its retry. Under lock. */
static void written(struct tw_cluster *c, struct cl_task *t, const struct keys *k, int64_t rev)
{
	struct cl_defer *d = c->defer;
	if (t->state != CL_DONE)
		return;
	enum outcome o = outcome_of(t);
	/* A retry of a group no longer held here is the owner's: it reads it from etcd. */
	if (o != DONE_RETRY || !d->loaded_token[t->group]) {
		d->stats.dead += o == DONE_DEAD;
		d->stats.retries += o == DONE_RETRY;
		tw__cl_task_drop(c, t);
		return;
	}
	struct cl_record rec;
	if (tw__cl_record_decode(k->record, k->record_len, &rec) == 0) {
		t->rec = rec;
		t->rec.payload = NULL;
		t->rec.payload_len = 0;
	}
	d->stats.retries++;
	free(t->payload);
	t->payload = NULL;
	t->payload_len = 0;
	t->token = 0;
	t->claim_rev = 0;
	t->mod_rev = rev;
	t->state = CL_HELD;
	tw__cl_task_unbusy(d, t);
	tw__cl_task_arm_alarm(c, t);
}

/* Writes the results of ts[0..n) in one transaction: 1 written, 0 refused (a claim is no
 * longer ours), < 0 a code. */
static int write_results(struct tw_cluster *c, struct cl_task **ts, size_t n)
{
	struct cl_defer *d = c->defer;
	int64_t tomb = tw__cl_tomb_lease(c, d->work_client);
	struct keys *k = calloc(n, sizeof *k);
	etcd_compare *cmp = calloc(n, sizeof *cmp);
	etcd_op *ops = calloc(3 * n, sizeof *ops);
	int rc = -TW_ENOMEM;
	size_t nops = 0;
	int64_t now = tw__cl_wall_ms();
	if (!k || !cmp || !ops)
		goto out;
	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < n; i++) {
		size_t m = result_ops(c, ts[i], &k[i], ops + nops, now, tomb);
		nops += m;
		cmp[i] = (etcd_compare){ .target = ETCD_CMP_MOD,
					 .result = ETCD_CMP_EQUAL,
					 .key = k[i].claim,
					 .key_len = (size_t)k[i].claim_len,
					 .number = ts[i]->claim_rev };
		if (m == 0)
			rc = -TW_ENOMEM;
	}
	pthread_mutex_unlock(&d->lock);
	if (nops < 2 * n)
		goto out;
	etcd_txn_result res = { 0 };
	etcd_status st = { 0 };
	rc = tw__cl_note(c, tw__etcd_txn(d->work_client, cmp, n, ops, nops, NULL, 0, &res, &st),
			 &st);
	if (rc != TW_OK && st.kind == ETCD_ENOLEASE)
		tw__cl_tomb_lease_lost(c); /* the next try takes a new one */
	if (rc == TW_OK) {
		rc = res.succeeded ? 1 : 0;
		pthread_mutex_lock(&d->lock);
		for (size_t i = 0; rc == 1 && i < n; i++)
			written(c, ts[i], &k[i], res.revision);
		pthread_mutex_unlock(&d->lock);
	}
	tw__etcd_txn_result_free(&res);
out:
	for (size_t i = 0; k && i < n; i++)
		free(k[i].record);
	free(k);
	free(cmp);
	free(ops);
	return rc;
}

/* A result refused: the claim is no longer this replica's. Either another owner took the task
 * over, or this replica's own write was applied and its answer lost (then asked again): the
 * task is dropped, and held again as etcd has it now if it is still there (a retry put back
 * whose answer was lost: its watch event came while the task was not held). */
static void refresh(struct tw_cluster *c, struct cl_task *t)
{
	struct cl_defer *d = c->defer;
	char tkey[CL_KEY_MAX], ckey[CL_KEY_MAX];
	int tlen = tw__cl_task_key(c, tkey, 't', t->group, t->key);
	int clen = tw__cl_task_key(c, ckey, 'c', t->group, t->key);
	etcd_op ops[2] = {
		{ .kind = ETCD_OP_RANGE, .key = tkey, .key_len = (size_t)tlen },
		{ .kind = ETCD_OP_RANGE, .key = ckey, .key_len = (size_t)clen },
	};
	etcd_txn_result res = { 0 };
	etcd_status st = { 0 };
	int rc = tw__cl_note(c, tw__etcd_txn(d->work_client, NULL, 0, ops, 2, NULL, 0, &res, &st),
			     &st);
	pthread_mutex_lock(&d->lock);
	if (t->state == CL_DONE) {
		unsigned g = t->group;
		char key[TW_CLUSTER_KEY_MAX + 1];
		memcpy(key, t->key, strlen(t->key) + 1);
		tw__cl_task_drop(c, t);
		const etcd_range_result *task = res.count == 2 ? &res.results[0].range : NULL;
		const etcd_range_result *claim = res.count == 2 ? &res.results[1].range : NULL;
		struct cl_record rec;
		struct cl_task *again = NULL;
		if (rc == TW_OK && task && task->count == 1 && d->loaded_token[g] &&
		    !tw__cl_task_find(d, key) &&
		    tw__cl_record_decode(task->kvs[0].value, task->kvs[0].value_len, &rec) == 0)
			again = tw__cl_task_hold(c, key, g, &rec, task->kvs[0].mod_revision);
		struct cl_claim_value cv;
		if (again && claim->count == 1 &&
		    tw__cl_claim_decode(claim->kvs[0].value, claim->kvs[0].value_len, &cv) == 0) {
			again->other_claim_rev = claim->kvs[0].mod_revision;
			again->other_claim_attempt = cv.attempt;
		}
	}
	pthread_mutex_unlock(&d->lock);
	tw__etcd_txn_result_free(&res);
}

/* Writes the queued results; those etcd did not take are queued again, in order, and the
 * worker waits a little before the next try. Returns whether all went. */
static bool write_queued(struct tw_cluster *c, struct cl_task *list)
{
	struct cl_defer *d = c->defer;
	while (list) {
		struct cl_task *batch[DONE_BATCH];
		size_t n = 0;
		pthread_mutex_lock(&d->lock);
		while (list && n < DONE_BATCH) {
			struct cl_task *t = list;
			list = list->qnext;
			if (t->state == CL_DONE)
				batch[n++] = t;
			else
				tw__cl_task_put(t);
		}
		pthread_mutex_unlock(&d->lock);
		if (n == 0)
			continue;
		int rc = write_results(c, batch, n);
		/* Refused: one claim of the batch is no longer ours; each alone tells which. */
		for (size_t i = 0; rc == 0 && n > 1 && i < n; i++) {
			int one = write_results(c, &batch[i], 1);
			if (one == 0) {
				refresh(c, batch[i]);
			} else if (one < 0) {
				rc = one;
				break;
			}
		}
		if (rc == 0 && n == 1)
			refresh(c, batch[0]);
		if (rc < 0) {
			/* Queued again in front of what came since, for the next round. */
			pthread_mutex_lock(&d->lock);
			struct cl_task *head = NULL, **tail = &head;
			for (size_t i = 0; i < n; i++)
				if (batch[i]->state == CL_DONE) {
					*tail = batch[i];
					tail = &batch[i]->qnext;
				} else {
					tw__cl_task_put(batch[i]);
				}
			*tail = list;
			if (head) {
				struct cl_task *last = head;
				while (last->qnext)
					last = last->qnext;
				last->qnext = d->done_head;
				if (!d->done_head)
					d->done_tail = &last->qnext;
				d->done_head = head;
			}
			pthread_mutex_unlock(&d->lock);
			return false;
		}
		for (size_t i = 0; i < n; i++)
			tw__cl_task_put(batch[i]);
	}
	return true;
}

/* Leaving: the claims of tasks that did not start go back (deleted, if still ours), so the
 * taker claims them with the attempt this replica would have run. */
static void give_back_claims(struct tw_cluster *c)
{
	struct cl_defer *d = c->defer;
	struct cl_task *batch[DONE_BATCH];
	size_t n = 0;
	pthread_mutex_lock(&d->lock);
	for (size_t b = 0; b < d->nbuckets && n < DONE_BATCH; b++)
		for (struct cl_task *t = d->buckets[b]; t && n < DONE_BATCH; t = t->hnext)
			if (t->state == CL_CLAIMED) {
				atomic_fetch_add(&t->refs, 1);
				batch[n++] = t;
			}
	pthread_mutex_unlock(&d->lock);
	if (n == 0)
		return;
	struct keys *k = calloc(n, sizeof *k);
	etcd_compare *cmp = calloc(n, sizeof *cmp);
	etcd_op *ops = calloc(2 * n, sizeof *ops);
	int rc = -TW_ENOMEM;
	if (k && cmp && ops) {
		rc = TW_OK;
		pthread_mutex_lock(&d->lock);
		for (size_t i = 0; i < n && rc == TW_OK; i++) {
			struct cl_task *t = batch[i];
			/* The task goes back with the attempts before this claim's counted as
			 * ended, so that the taker's claim has this one's number: a reclaim's
			 * attempt (a lost owner's run perhaps behind it) is not forgotten. */
			struct cl_record rec = t->rec;
			rec.attempts = t->attempt ? t->attempt - 1 : 0;
			rec.payload = t->payload;
			rec.payload_len = t->payload_len;
			rc = tw__cl_record_encode(&rec, &k[i].record, &k[i].record_len);
			k[i].task_len = tw__cl_task_key(c, k[i].task, 't', t->group, t->key);
			k[i].claim_len = tw__cl_task_key(c, k[i].claim, 'c', t->group, t->key);
			cmp[i] = (etcd_compare){ .target = ETCD_CMP_MOD,
						 .result = ETCD_CMP_EQUAL,
						 .key = k[i].claim,
						 .key_len = (size_t)k[i].claim_len,
						 .number = t->claim_rev };
			ops[2 * i] = (etcd_op){ .kind = ETCD_OP_PUT,
						.key = k[i].task,
						.key_len = (size_t)k[i].task_len,
						.value = k[i].record,
						.value_len = k[i].record_len };
			ops[2 * i + 1] = (etcd_op){ .kind = ETCD_OP_DELETE,
						    .key = k[i].claim,
						    .key_len = (size_t)k[i].claim_len };
		}
		pthread_mutex_unlock(&d->lock);
		etcd_txn_result res = { 0 };
		etcd_status st = { 0 };
		if (rc == TW_OK)
			rc = tw__cl_note(c,
					 tw__etcd_txn(d->work_client, cmp, n, ops, 2 * n, NULL, 0,
						      &res, &st),
					 &st);
		tw__etcd_txn_result_free(&res);
	}
	/* Given back, refused (one was not ours any more: the taker has it), or etcd out of
	 * reach (the claims stay, and the taker claims them again after the lease): in every
	 * case this replica is done with them. */
	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < n; i++) {
		if (batch[i]->state == CL_CLAIMED)
			tw__cl_task_drop(c, batch[i]);
		tw__cl_task_put(batch[i]);
	}
	pthread_mutex_unlock(&d->lock);
	(void)rc;
	for (size_t i = 0; k && i < n; i++)
		free(k[i].record);
	free(k);
	free(cmp);
	free(ops);
}

/* Until work comes, stop, or ms pass; with idle, ms pass whatever is queued (a backoff). */
static void wait_work(struct cl_defer *d, unsigned ms, bool idle)
{
	struct timespec until;
	(void)clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (long)ms * 1000000;
	while (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	while (!atomic_load(&d->stop) && (idle || (!d->claim_head && !d->done_head)) &&
	       pthread_cond_timedwait(&d->work, &d->lock, &until) == 0)
		;
}

/* Whether every queued claim is for a task due well after a short wait. Under lock. */
static bool claims_can_wait(const struct cl_defer *d)
{
	int64_t soon = tw__cl_wall_ms() + (int64_t)5 * LINGER_MS;
	for (const struct cl_task *t = d->claim_head; t; t = t->qnext)
		if (t->state == CL_CLAIMING && t->rec.due_ms < soon)
			return false;
	return true;
}

void *tw__cl_defer_worker_main(void *arg)
{
	struct tw_cluster *c = arg;
	struct cl_defer *d = c->defer;
	bool backoff = false;
	while (!atomic_load(&d->stop)) {
		pthread_mutex_lock(&d->lock);
		wait_work(d, backoff ? RETRY_MS : (atomic_load(&d->draining) ? 20 : 1000), backoff);
		/* Claims made claim_ahead_ms early can wait a moment for others to share their
		 * transaction: under load a claim then costs a fraction of a request. */
		if (d->claim_head && !d->done_head && claims_can_wait(d))
			wait_work(d, LINGER_MS, true);
		tw__cl_defer_retry_refused(c);
		struct cl_task *claims = d->claim_head, *done = d->done_head;
		d->claim_head = d->done_head = NULL;
		d->claim_tail = &d->claim_head;
		d->done_tail = &d->done_head;
		pthread_mutex_unlock(&d->lock);
		/* Results first: they free the claims that leave waits for. */
		backoff = !write_queued(c, done);
		tw__cl_claim_queued(c, claims);
		if (atomic_load(&d->draining))
			give_back_claims(c);
	}
	return NULL;
}
