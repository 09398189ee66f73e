/*
 * cluster/defer_work.c - the defer worker: claims the tasks whose alarm fired and writes the
 * results of the handlers that returned, a few tasks per transaction, so that a run costs a
 * share of a claim and of a delete rather than a round trip each.
 *
 * A claim is one transaction per batch of a group's tasks: it holds only while this replica
 * owns the group with its token, each task is as this replica last read it (mod revision),
 * and each task's claim key is absent (or is the lost owner's claim it read); it puts the
 * claims and reads the tasks back (their payloads). A refused batch reads the owner key, the
 * tasks and their claims in its failure branch, so each task is settled from that answer.
 * A result is written under the compare that the claim key is still this replica's claim.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"

/* etcd takes at most 128 compares, and 128 operations per branch (--max-txn-ops). */
#define CLAIM_BATCH 40 /* 1 + 2n compares, 2n success and 1 + 2n failure operations */
#define DONE_BATCH 30  /* n compares, at most 3n operations */
/* What a task that cannot be claimed now (etcd unreachable, a group draining) waits. */
#define RETRY_MS 100

struct keys {
	char task[CL_KEY_MAX], claim[CL_KEY_MAX], dead[CL_KEY_MAX], value[128];
	int task_len, claim_len, dead_len, value_len;
	uint8_t *record; /* a put's value */
	size_t record_len;
};

static void back_to_held(struct tw_cluster *c, struct cl_task *t, int64_t at_ms)
{
	if (t->state != CL_CLAIMING)
		return;
	t->state = CL_HELD;
	tw__cl_task_unbusy(c->defer, t);
	tw__cl_task_arm(c, t, at_ms);
}

static uint64_t owner_token(struct tw_cluster *c, unsigned g, bool *draining)
{
	pthread_mutex_lock(&c->lock);
	uint64_t token = c->group[g].token;
	*draining = c->group[g].draining;
	pthread_mutex_unlock(&c->lock);
	return token;
}

static void adopt_claim(struct tw_cluster *c, struct cl_task *t, uint64_t token, unsigned attempt,
			int64_t claim_rev, const etcd_kv *task_kv)
{
	struct cl_record rec;
	if (!task_kv || tw__cl_record_decode(task_kv->value, task_kv->value_len, &rec) != 0) {
		tw__cl_task_drop(c, t);
		return;
	}
	free(t->payload);
	t->payload = rec.payload_len ? malloc(rec.payload_len) : NULL;
	if (rec.payload_len && !t->payload) {
		/* The claim stands: the task runs when this replica has the memory, or at the
		 * next owner. */
		back_to_held(c, t, tw__cl_wall_ms() + RETRY_MS);
		return;
	}
	if (rec.payload_len)
		memcpy(t->payload, rec.payload, rec.payload_len);
	t->payload_len = rec.payload_len;
	t->rec = rec;
	t->rec.payload = NULL;
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

/* Settles a refused batch's tasks from its failure branch: owner, then (task, claim) each. */
static void settle_refused(struct tw_cluster *c, struct cl_task **ts, size_t n, uint64_t token,
			   const etcd_txn_result *res)
{
	int64_t now = tw__cl_wall_ms();
	const etcd_range_result *owner = res->count == 1 + 2 * n ? &res->results[0].range : NULL;
	bool ours = owner && owner->count == 1 &&
		    (uint64_t)owner->kvs[0].create_revision == token;
	for (size_t i = 0; i < n; i++) {
		struct cl_task *t = ts[i];
		if (t->state != CL_CLAIMING)
			continue;
		if (!ours) { /* the group is gone: the loader drops its tasks */
			back_to_held(c, t, now + RETRY_MS);
			continue;
		}
		const etcd_range_result *task = &res->results[1 + 2 * i].range;
		const etcd_range_result *claim = &res->results[2 + 2 * i].range;
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

static void claim_batch(struct tw_cluster *c, struct cl_task **ts, size_t n, unsigned g)
{
	struct cl_defer *d = c->defer;
	bool draining = false;
	uint64_t token = owner_token(c, g, &draining);
	struct keys *k = calloc(n, sizeof *k);
	etcd_compare *cmp = calloc(1 + 2 * n, sizeof *cmp);
	etcd_op *ops = calloc(2 * n, sizeof *ops), *fail = calloc(1 + 2 * n, sizeof *fail);
	char owner[CL_KEY_MAX];
	int olen = tw__cl_key(c, owner, "owners/%04u", g);
	pthread_mutex_lock(&d->lock);
	bool go = k && cmp && ops && fail && token && !draining && !atomic_load(&d->draining) &&
		  d->loaded_token[g] == token;
	for (size_t i = 0; go && i < n; i++) {
		struct cl_task *t = ts[i];
		struct cl_claim_value cv = { .attempt = t->other_claim_rev ?
								t->other_claim_attempt + 1 :
								t->rec.attempts + 1,
					     .token = token };
		memcpy(cv.member, c->member, sizeof cv.member);
		k[i].task_len = tw__cl_task_key(c, k[i].task, 't', g, t->key);
		k[i].claim_len = tw__cl_task_key(c, k[i].claim, 'c', g, t->key);
		k[i].value_len = tw__cl_claim_encode(&cv, k[i].value, sizeof k[i].value);
		cmp[1 + 2 * i] = (etcd_compare){ .target = ETCD_CMP_MOD,
						 .result = ETCD_CMP_EQUAL,
						 .key = k[i].task,
						 .key_len = (size_t)k[i].task_len,
						 .number = t->mod_rev };
		cmp[2 + 2 * i] = (etcd_compare){ .target = t->other_claim_rev ? ETCD_CMP_MOD :
										ETCD_CMP_CREATE,
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
		fail[1 + 2 * i] = ops[2 * i + 1];
		fail[2 + 2 * i] = (etcd_op){ .kind = ETCD_OP_RANGE,
					     .key = k[i].claim,
					     .key_len = (size_t)k[i].claim_len };
		/* Attempt numbers are settled by the answer; keep the one asked for. */
		ts[i]->attempt = cv.attempt;
	}
	if (!go) {
		/* Not ours (the loader drops the tasks), draining, or out of memory. */
		for (size_t i = 0; i < n; i++)
			back_to_held(c, ts[i], tw__cl_wall_ms() + RETRY_MS);
		pthread_mutex_unlock(&d->lock);
		goto out;
	}
	d->stats.claim_requests++;
	pthread_mutex_unlock(&d->lock);
	cmp[0] = (etcd_compare){ .target = ETCD_CMP_CREATE,
				 .result = ETCD_CMP_EQUAL,
				 .key = owner,
				 .key_len = (size_t)olen,
				 .number = (int64_t)token };
	fail[0] = (etcd_op){ .kind = ETCD_OP_RANGE, .key = owner, .key_len = (size_t)olen };
	etcd_txn_result res = { 0 };
	etcd_status st = { 0 };
	int rc = tw__cl_note(c,
			     tw__etcd_txn(d->work_client, cmp, 1 + 2 * n, ops, 2 * n, fail,
					  1 + 2 * n, &res, &st),
			     &st);
	pthread_mutex_lock(&d->lock);
	if (rc != TW_OK) {
		/* Claimed or not, nobody runs them before a claim of ours is confirmed: asked
		 * again, a claim that was applied is found ours in the failure branch. */
		for (size_t i = 0; i < n; i++)
			back_to_held(c, ts[i], tw__cl_wall_ms() + RETRY_MS);
	} else if (res.succeeded && res.count == 2 * n) {
		for (size_t i = 0; i < n; i++) {
			if (ts[i]->state != CL_CLAIMING)
				continue;
			const etcd_range_result *task = &res.results[2 * i + 1].range;
			adopt_claim(c, ts[i], token, ts[i]->attempt, res.revision,
				    task->count == 1 ? &task->kvs[0] : NULL);
		}
	} else if (!res.succeeded) {
		settle_refused(c, ts, n, token, &res);
	} else {
		for (size_t i = 0; i < n; i++)
			back_to_held(c, ts[i], tw__cl_wall_ms() + RETRY_MS);
	}
	pthread_mutex_unlock(&d->lock);
	tw__etcd_txn_result_free(&res);
out:
	free(k);
	free(cmp);
	free(ops);
	free(fail);
}

/* Takes the claim queue and claims its tasks, a group's at a time. */
static void claim_queued(struct tw_cluster *c, struct cl_task *list)
{
	struct cl_defer *d = c->defer;
	while (list) {
		struct cl_task *batch[CLAIM_BATCH];
		size_t n = 0;
		unsigned g = list->group;
		struct cl_task **p = &list;
		pthread_mutex_lock(&d->lock);
		while (*p && n < CLAIM_BATCH) {
			struct cl_task *t = *p;
			if (t->group == g || t->state != CL_CLAIMING) {
				*p = t->qnext;
				if (t->state == CL_CLAIMING)
					batch[n++] = t;
				else
					tw__cl_task_put(t);
			} else {
				p = &t->qnext;
			}
		}
		pthread_mutex_unlock(&d->lock);
		if (n)
			claim_batch(c, batch, n, g);
		for (size_t i = 0; i < n; i++)
			tw__cl_task_put(batch[i]);
	}
}

enum outcome { DONE_OK, DONE_RETRY, DONE_DEAD };

static enum outcome outcome_of(const struct cl_task *t)
{
	if (t->result == 0)
		return DONE_OK;
	return t->attempt < t->rec.max_attempts ? DONE_RETRY : DONE_DEAD;
}

/* The operations that write t's result: 2 or 3, into ops; keys and values in k. */
static size_t result_ops(struct tw_cluster *c, struct cl_task *t, struct keys *k, etcd_op *ops,
			 int64_t now)
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
		size_t m = result_ops(c, ts[i], &k[i], ops + nops, now);
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
				pthread_mutex_lock(&d->lock);
				if (batch[i]->state == CL_DONE)
					tw__cl_task_drop(c, batch[i]);
				pthread_mutex_unlock(&d->lock);
			} else if (one < 0) {
				rc = one;
				break;
			}
		}
		if (rc == 0 && n == 1) {
			pthread_mutex_lock(&d->lock);
			if (batch[0]->state == CL_DONE)
				tw__cl_task_drop(c, batch[0]);
			pthread_mutex_unlock(&d->lock);
		}
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
	etcd_op *ops = calloc(n, sizeof *ops);
	int rc = -TW_ENOMEM;
	if (k && cmp && ops) {
		for (size_t i = 0; i < n; i++) {
			k[i].claim_len =
				tw__cl_task_key(c, k[i].claim, 'c', batch[i]->group, batch[i]->key);
			cmp[i] = (etcd_compare){ .target = ETCD_CMP_MOD,
						 .result = ETCD_CMP_EQUAL,
						 .key = k[i].claim,
						 .key_len = (size_t)k[i].claim_len,
						 .number = batch[i]->claim_rev };
			ops[i] = (etcd_op){ .kind = ETCD_OP_DELETE,
					    .key = k[i].claim,
					    .key_len = (size_t)k[i].claim_len };
		}
		etcd_txn_result res = { 0 };
		etcd_status st = { 0 };
		rc = tw__cl_note(c,
				 tw__etcd_txn(d->work_client, cmp, n, ops, n, NULL, 0, &res, &st),
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

void *tw__cl_defer_worker_main(void *arg)
{
	struct tw_cluster *c = arg;
	struct cl_defer *d = c->defer;
	bool backoff = false;
	while (!atomic_load(&d->stop)) {
		pthread_mutex_lock(&d->lock);
		wait_work(d, backoff ? RETRY_MS : (atomic_load(&d->draining) ? 20 : 1000), backoff);
		struct cl_task *claims = d->claim_head, *done = d->done_head;
		d->claim_head = d->done_head = NULL;
		d->claim_tail = &d->claim_head;
		d->done_tail = &d->done_head;
		pthread_mutex_unlock(&d->lock);
		/* Results first: they free the claims that leave waits for. */
		backoff = !write_queued(c, done);
		claim_queued(c, claims);
		if (atomic_load(&d->draining))
			give_back_claims(c);
	}
	return NULL;
}
