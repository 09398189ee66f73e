/*
 * cluster/claim.c - claiming fire times: one etcd transaction that creates each claim key
 * (job, fire time) if it is absent and succeeds only while the group's owner key still has
 * the claimer's create revision (its fencing token). The same transaction records each job's
 * latest claimed fire time (what a taker reads to count missed fire times) and deletes the
 * job's claims older than the retention, so the keys do not pile up.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

/* etcd refuses a transaction of more than 128 operations by default (--max-txn-ops). */
#define CLAIM_TXN_OPS 128

struct claim_keys {
	char claim[CL_KEY_MAX], last[CL_KEY_MAX], old_from[CL_KEY_MAX], old_to[CL_KEY_MAX];
	char last_value[24], claim_value[96];
	int claim_len, last_len, from_len, to_len, last_value_len, claim_value_len;
};

static int64_t retention_ms(const struct cl_job *j)
{
	int64_t ten = j->period_ms ? (int64_t)j->period_ms * 10 : 0;
	return ten > CL_CLAIM_RETENTION_MS ? ten : CL_CLAIM_RETENTION_MS;
}

static int latency_bucket(int64_t ns)
{
	int b = 0;
	for (int64_t us = ns / 1000; us > 0 && b < 19; us >>= 1)
		b++;
	return b;
}

int tw__cl_claim(struct tw_cluster *c, etcd_client *client, unsigned g, uint64_t token,
		 struct cl_job *const *jobs, const int64_t *fires, size_t n)
{
	if (n == 0)
		return 1;
	/* Per fire time: a compare and a put of its claim; per job (n at most): the last put and
	 * the delete of old claims; one compare for the owner. */
	if (1 + 4 * n > CLAIM_TXN_OPS)
		return -TW_EINVAL;
	struct claim_keys *k = calloc(n, sizeof *k);
	etcd_compare *cmp = calloc(n + 1, sizeof *cmp);
	etcd_op *ops = calloc(3 * n, sizeof *ops);
	int rc = -TW_ENOMEM;
	if (!k || !cmp || !ops)
		goto out;
	char owner[CL_KEY_MAX];
	int owner_len = tw__cl_key(c, owner, "owners/%04u", g);
	cmp[0] = (etcd_compare){ .target = ETCD_CMP_CREATE,
				 .result = ETCD_CMP_EQUAL,
				 .key = owner,
				 .key_len = (size_t)owner_len,
				 .number = (int64_t)token };
	size_t nops = 0;
	for (size_t i = 0; i < n; i++) {
		const struct cl_job *j = jobs[i];
		struct claim_keys *ki = &k[i];
		ki->claim_len =
			tw__cl_key(c, ki->claim, "claims/%s/%015" PRId64, j->name, fires[i]);
		ki->last_len = tw__cl_key(c, ki->last, "last/%s", j->name);
		ki->from_len = tw__cl_key(c, ki->old_from, "claims/%s/", j->name);
		/* Trimmed below the job's first fire time in this batch, so that the delete
		 * never meets one of the batch's own puts (etcd refuses that). */
		int64_t first = fires[i];
		for (size_t m = 0; m < i; m++)
			if (jobs[m] == j && fires[m] < first)
				first = fires[m];
		int64_t old = first - retention_ms(j);
		ki->to_len = tw__cl_key(c, ki->old_to, "claims/%s/%015" PRId64, j->name,
					old > 0 ? old : 0);
		ki->last_value_len =
			snprintf(ki->last_value, sizeof ki->last_value, "%015" PRId64, fires[i]);
		ki->claim_value_len = snprintf(ki->claim_value, sizeof ki->claim_value,
					       "%s %" PRIu64, c->member, token);
		if (ki->claim_len < 0 || ki->last_len < 0 || ki->from_len < 0 || ki->to_len < 0) {
			rc = -TW_EINVAL;
			goto out;
		}
		cmp[1 + i] = (etcd_compare){ .target = ETCD_CMP_CREATE,
					     .result = ETCD_CMP_EQUAL,
					     .key = ki->claim,
					     .key_len = (size_t)ki->claim_len };
		ops[nops++] = (etcd_op){ .kind = ETCD_OP_PUT,
					 .key = ki->claim,
					 .key_len = (size_t)ki->claim_len,
					 .value = ki->claim_value,
					 .value_len = (size_t)ki->claim_value_len };
		/* Only a job's last fire time in this batch records "last" and trims: fire
		 * times of one job come in order. */
		bool last_of_job = true;
		for (size_t m = i + 1; m < n; m++)
			if (jobs[m] == j)
				last_of_job = false;
		if (!last_of_job)
			continue;
		ops[nops++] = (etcd_op){ .kind = ETCD_OP_PUT,
					 .key = ki->last,
					 .key_len = (size_t)ki->last_len,
					 .value = ki->last_value,
					 .value_len = (size_t)ki->last_value_len };
		if (old > 0)
			ops[nops++] = (etcd_op){ .kind = ETCD_OP_DELETE,
						 .key = ki->old_from,
						 .key_len = (size_t)ki->from_len,
						 .range_end = ki->old_to,
						 .range_end_len = (size_t)ki->to_len };
	}
	etcd_txn_result res = { 0 };
	etcd_status st = { 0 };
	int64_t t0 = tw__cl_mono_ns();
	int erc = tw__etcd_txn(client, cmp, n + 1, ops, nops, NULL, 0, &res, &st);
	int64_t took = tw__cl_mono_ns() - t0;
	rc = tw__cl_note(c, erc, &st);
	pthread_mutex_lock(&c->lock);
	c->stats.claim_requests++;
	c->stats.claim_latency_us[latency_bucket(took)]++;
	c->stats.claim_latency_sum_ns += (uint64_t)took;
	if (rc == TW_OK && res.succeeded)
		c->stats.claims += n;
	pthread_mutex_unlock(&c->lock);
	if (rc == TW_OK)
		rc = res.succeeded ? 1 : 0;
	tw__etcd_txn_result_free(&res);
out:
	free(k);
	free(cmp);
	free(ops);
	return rc;
}

int tw__cl_own_claim(struct tw_cluster *c, etcd_client *client, const struct cl_job *j,
		     int64_t fire, uint64_t token)
{
	char key[CL_KEY_MAX], mine[96];
	int klen = tw__cl_key(c, key, "claims/%s/%015" PRId64, j->name, fire);
	int mlen = snprintf(mine, sizeof mine, "%s %" PRIu64, c->member, token);
	if (klen < 0 || mlen < 0)
		return -TW_EINVAL;
	etcd_range_req req = { .key = key, .key_len = (size_t)klen };
	etcd_range_result r = { 0 };
	etcd_status st = { 0 };
	int rc = tw__cl_note(c, tw__etcd_range(client, &req, &r, &st), &st);
	if (rc == TW_OK)
		rc = r.count == 1 && r.kvs[0].value_len == (size_t)mlen &&
		     memcmp(r.kvs[0].value, mine, (size_t)mlen) == 0;
	tw__etcd_range_result_free(&r);
	return rc;
}
