/*
 * cluster/balance.c - the worker thread: each round (CL_ROUND_MS) it reads the members and
 * the groups' owners in one request, takes free groups up to this replica's share, hands back
 * what is over it once its claimed fire times have run, and claims the owned jobs' fire times
 * due within claim_ahead_ms.
 *
 * Shares: the live members sorted by name, member i takes groups / n groups, and one more when
 * i < groups % n. Every replica computes the same shares from the same list, so the groups
 * settle with no replica owning more than one above another; a replica only ever takes a free
 * group, so two owners never hold one group at once.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

/* Fire times claimed per transaction at most (claim.c's operation limit). */
#define CLAIM_BATCH 30

struct view {
	char (*members)[TW_CLUSTER_MEMBER_MAX + 1];
	size_t nmembers;
	uint64_t *owner_token; /* per group: the owner key's create revision, 0: free */
	bool *owner_is_me;     /* per group: the key names this replica under its lease */
};

static int cmp_names(const void *a, const void *b)
{
	return strcmp(a, b);
}

static const char *key_tail(const etcd_kv *kv, size_t prefix_len, char *buf, size_t cap)
{
	size_t n = kv->key_len > prefix_len ? kv->key_len - prefix_len : 0;
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, kv->key + (kv->key_len - n), n);
	buf[n] = '\0';
	return buf;
}

/* One request: the members and the owners, as of one revision. */
static int read_view(struct tw_cluster *c, int64_t lease, struct view *v)
{
	char mk[CL_KEY_MAX], ok[CL_KEY_MAX];
	int mlen = tw__cl_key(c, mk, "members/"), olen = tw__cl_key(c, ok, "owners/");
	uint8_t *mend = NULL, *oend = NULL;
	size_t mend_len = 0, oend_len = 0;
	if (tw__etcd_prefix_end(mk, (size_t)mlen, &mend, &mend_len) != 0 ||
	    tw__etcd_prefix_end(ok, (size_t)olen, &oend, &oend_len) != 0) {
		free(mend);
		return -TW_ENOMEM;
	}
	etcd_op ops[2] = {
		{ .kind = ETCD_OP_RANGE,
		  .key = mk,
		  .key_len = (size_t)mlen,
		  .range_end = mend,
		  .range_end_len = mend_len },
		{ .kind = ETCD_OP_RANGE,
		  .key = ok,
		  .key_len = (size_t)olen,
		  .range_end = oend,
		  .range_end_len = oend_len },
	};
	etcd_txn_result res = { 0 };
	etcd_status st = { 0 };
	int rc = tw__cl_note(c, tw__etcd_txn(c->worker_client, NULL, 0, ops, 2, NULL, 0, &res, &st),
			     &st);
	free(mend);
	free(oend);
	if (rc != TW_OK)
		return rc;
	if (res.count != 2) {
		tw__etcd_txn_result_free(&res);
		return -TW_CLUSTER_EETCD;
	}
	const etcd_range_result *m = &res.results[0].range, *o = &res.results[1].range;
	v->members = calloc(m->count ? m->count : 1, sizeof *v->members);
	if (!v->members) {
		tw__etcd_txn_result_free(&res);
		return -TW_ENOMEM;
	}
	for (size_t i = 0; i < m->count; i++)
		key_tail(&m->kvs[i], (size_t)mlen, v->members[v->nmembers++], sizeof v->members[0]);
	qsort(v->members, v->nmembers, sizeof v->members[0], cmp_names);
	for (size_t i = 0; i < o->count; i++) {
		char tail[16];
		key_tail(&o->kvs[i], (size_t)olen, tail, sizeof tail);
		char *end;
		unsigned long g = strtoul(tail, &end, 10);
		if (*end || g >= c->groups)
			continue;
		v->owner_token[g] = (uint64_t)o->kvs[i].create_revision;
		v->owner_is_me[g] = o->kvs[i].lease == lease &&
				    o->kvs[i].value_len == strlen(c->member) &&
				    memcmp(o->kvs[i].value, c->member, o->kvs[i].value_len) == 0;
	}
	tw__etcd_txn_result_free(&res);
	return TW_OK;
}

static unsigned share_of(const struct tw_cluster *c, const struct view *v)
{
	size_t n = v->nmembers, rank = n;
	for (size_t i = 0; i < n; i++)
		if (strcmp(v->members[i], c->member) == 0)
			rank = i;
	if (rank == n) /* not listed (the member key is being put again): take nothing */
		return 0;
	return (unsigned)(c->groups / n + (rank < c->groups % n ? 1 : 0));
}

/* Groups this replica believed it owned whose key is gone or another's: lost. Groups whose
 * key names this replica under its lease though it did not know: taken by a request whose
 * answer was lost; they are taken over (tw__cl_take_group) by the caller, in adopt[]. */
static size_t reconcile(struct tw_cluster *c, const struct view *v, unsigned *adopt,
			uint64_t *adopt_token)
{
	size_t nadopt = 0;
	unsigned lost[64];
	size_t nlost = 0;
	pthread_mutex_lock(&c->lock);
	for (unsigned g = 0; g < c->groups; g++) {
		struct cl_group *gr = &c->group[g];
		if (gr->token && (!v->owner_is_me[g] || v->owner_token[g] != gr->token)) {
			*gr = (struct cl_group){ 0 };
			for (struct cl_job *j = c->jobs; j; j = j->next)
				if (j->group == g) {
					j->missed += j->nclaimed;
					c->stats.missed += j->nclaimed;
					j->nclaimed = 0;
				}
			if (nlost < 64)
				lost[nlost++] = g;
		} else if (!gr->token && v->owner_is_me[g]) {
			adopt[nadopt] = g;
			adopt_token[nadopt++] = v->owner_token[g];
		}
	}
	unsigned owned = 0;
	for (unsigned g = 0; g < c->groups; g++)
		owned += c->group[g].token != 0;
	c->stats.groups_owned = owned;
	c->stats.members = v->nmembers;
	pthread_mutex_unlock(&c->lock);
	if (nlost)
		tw__cl_defer_groups_changed(c);
	for (size_t i = 0; i < nlost; i++)
		tw__cl_log(c, TW_LOG_WARNING, "cluster %s: lost group %u", c->member, lost[i]);
	return nadopt;
}

/* What a holder records of itself (holder/, released/): its name and lease, one incarnation. */
static int holder_value(const struct tw_cluster *c, int64_t lease, char *buf, size_t cap)
{
	return snprintf(buf, cap, "%s %" PRIx64, c->member, (uint64_t)lease);
}

/* Takes group g if it is free: 1 taken, 0 not, < 0 a code. */
static int take(struct tw_cluster *c, unsigned g, int64_t lease)
{
	char owner[CL_KEY_MAX], holder[CL_KEY_MAX], released[CL_KEY_MAX], me[96];
	int olen = tw__cl_key(c, owner, "owners/%04u", g);
	int hlen = tw__cl_key(c, holder, "holder/%04u", g);
	int rlen = tw__cl_key(c, released, "released/%04u", g);
	int melen = holder_value(c, lease, me, sizeof me);
	etcd_compare free_ = { .target = ETCD_CMP_CREATE,
			       .result = ETCD_CMP_EQUAL,
			       .key = owner,
			       .key_len = (size_t)olen };
	etcd_op ops[4] = {
		{ .kind = ETCD_OP_RANGE, .key = holder, .key_len = (size_t)hlen },
		{ .kind = ETCD_OP_RANGE, .key = released, .key_len = (size_t)rlen },
		{ .kind = ETCD_OP_PUT,
		  .key = owner,
		  .key_len = (size_t)olen,
		  .value = c->member,
		  .value_len = strlen(c->member),
		  .lease = lease },
		{ .kind = ETCD_OP_PUT,
		  .key = holder,
		  .key_len = (size_t)hlen,
		  .value = me,
		  .value_len = (size_t)melen },
	};
	etcd_txn_result res = { 0 };
	etcd_status st = { 0 };
	int rc = tw__cl_note(
		c, tw__etcd_txn(c->worker_client, &free_, 1, ops, 4, NULL, 0, &res, &st), &st);
	if (rc != TW_OK || !res.succeeded || res.count != 4) {
		tw__etcd_txn_result_free(&res);
		return rc != TW_OK ? rc : 0;
	}
	/* A takeover: the previous holder did not hand the group back (it died, or its lease
	 * ran out); a hand-back records the holder's value under released/. */
	const etcd_range_result *h = &res.results[0].range, *r = &res.results[1].range;
	/* Handed back: the hand-back's record was written after the last holder's. Revisions,
	 * not values: a member may take back a group it handed back, then die. */
	bool takeover =
		h->count == 1 && (r->count != 1 || r->kvs[0].mod_revision < h->kvs[0].mod_revision);
	uint64_t token = (uint64_t)res.revision;
	tw__etcd_txn_result_free(&res);
	tw__cl_take_group(c, g, token, takeover);
	return 1;
}

/* What a leaving replica gives back with each group: the claims of its jobs' fire times after
 * now (it runs none of them any more), and "last" set to now, so that the taker claims and runs
 * them rather than count them lost. */
#define HAND_BACK_JOBS 60

int tw__cl_hand_back(struct tw_cluster *c, etcd_client *client, const unsigned *groups, size_t n,
		     const struct cl_job_name *jobs, size_t njobs)
{
	int64_t lease;
	pthread_mutex_lock(&c->lock);
	lease = c->lease_id;
	pthread_mutex_unlock(&c->lock);
	int rc = TW_OK;
	struct job_keys {
		char from[CL_KEY_MAX], last[CL_KEY_MAX], last_value[24];
		int from_len, last_len, last_value_len;
		uint8_t *end;
		size_t end_len;
	} *k = njobs ? calloc(HAND_BACK_JOBS, sizeof *k) : NULL;
	if (njobs && !k)
		return -TW_ENOMEM;
	int64_t now = tw__cl_wall_ms();
	for (size_t i = 0; i < n && rc != -TW_CLUSTER_EUNAVAILABLE; i++) {
		unsigned g = groups[i];
		pthread_mutex_lock(&c->lock);
		uint64_t token = c->group[g].token;
		pthread_mutex_unlock(&c->lock);
		if (!token)
			continue;
		char owner[CL_KEY_MAX], released[CL_KEY_MAX], me[96];
		int olen = tw__cl_key(c, owner, "owners/%04u", g);
		int rlen = tw__cl_key(c, released, "released/%04u", g);
		int melen = holder_value(c, lease, me, sizeof me);
		etcd_compare mine = { .target = ETCD_CMP_CREATE,
				      .result = ETCD_CMP_EQUAL,
				      .key = owner,
				      .key_len = (size_t)olen,
				      .number = (int64_t)token };
		etcd_op ops[2 + 2 * HAND_BACK_JOBS] = {
			{ .kind = ETCD_OP_DELETE, .key = owner, .key_len = (size_t)olen },
			{ .kind = ETCD_OP_PUT,
			  .key = released,
			  .key_len = (size_t)rlen,
			  .value = me,
			  .value_len = (size_t)melen },
		};
		size_t nops = 2, nk = 0;
		for (size_t j = 0; j < njobs && nk < HAND_BACK_JOBS; j++) {
			if (jobs[j].group != g)
				continue;
			struct job_keys *jk = &k[nk++];
			/* After now, and after the job's latest run here (a wall clock set back
			 * since must not give a run's claim away). */
			int64_t upto =
				jobs[j].last_run_fire_ms > now ? jobs[j].last_run_fire_ms : now;
			char prefix[CL_KEY_MAX];
			int plen = tw__cl_key(c, prefix, "claims/%s/", jobs[j].name);
			jk->from_len = tw__cl_key(c, jk->from, "claims/%s/%015" PRId64,
						  jobs[j].name, upto + 1);
			jk->last_len = tw__cl_key(c, jk->last, "last/%s", jobs[j].name);
			jk->last_value_len = snprintf(jk->last_value, sizeof jk->last_value,
						      "%015" PRId64, upto);
			free(jk->end);
			jk->end = NULL;
			if (tw__etcd_prefix_end(prefix, (size_t)plen, &jk->end, &jk->end_len) != 0)
				continue;
			ops[nops++] = (etcd_op){ .kind = ETCD_OP_DELETE,
						 .key = jk->from,
						 .key_len = (size_t)jk->from_len,
						 .range_end = jk->end,
						 .range_end_len = jk->end_len };
			ops[nops++] = (etcd_op){ .kind = ETCD_OP_PUT,
						 .key = jk->last,
						 .key_len = (size_t)jk->last_len,
						 .value = jk->last_value,
						 .value_len = (size_t)jk->last_value_len };
		}
		etcd_txn_result res = { 0 };
		etcd_status st = { 0 };
		int one = tw__cl_note(
			c, tw__etcd_txn(client, &mine, 1, ops, nops, NULL, 0, &res, &st), &st);
		bool succeeded = one == TW_OK && res.succeeded;
		tw__etcd_txn_result_free(&res);
		if (one != TW_OK) {
			rc = one;
			continue;
		}
		pthread_mutex_lock(&c->lock);
		c->group[g] = (struct cl_group){ 0 };
		/* Not succeeded: the group was no longer ours (the lease ran out); nothing to give. */
		c->stats.releases += succeeded;
		if (c->stats.groups_owned)
			c->stats.groups_owned--;
		pthread_mutex_unlock(&c->lock);
		tw__cl_defer_groups_changed(c);
	}
	for (size_t j = 0; k && j < HAND_BACK_JOBS; j++)
		free(k[j].end);
	free(k);
	return rc;
}

/* Over the share: mark groups draining (no new claims); under it: keep draining ones. */
static void rebalance(struct tw_cluster *c, const struct view *v, int64_t lease)
{
	unsigned share = share_of(c, v), owned = 0, draining = 0;
	pthread_mutex_lock(&c->lock);
	for (unsigned g = 0; g < c->groups; g++) {
		owned += c->group[g].token != 0;
		draining += c->group[g].draining;
	}
	for (unsigned g = c->groups; g-- > 0 && owned - draining > share;)
		if (c->group[g].token && !c->group[g].draining) {
			c->group[g].draining = true;
			draining++;
		}
	for (unsigned g = 0; g < c->groups && owned - draining < share; g++)
		if (c->group[g].draining) {
			c->group[g].draining = false;
			draining--;
		}
	/* Hand back the drained groups: no claimed fire time left to run. */
	unsigned back[64];
	size_t nback = 0;
	for (unsigned g = 0; g < c->groups && nback < 64; g++) {
		if (!c->group[g].draining)
			continue;
		bool idle = true;
		for (struct cl_job *j = c->jobs; j; j = j->next)
			if (j->group == g && j->nclaimed)
				idle = false;
		if (tw__cl_defer_group_busy(c, g))
			idle = false;
		if (idle)
			back[nback++] = g;
	}
	pthread_mutex_unlock(&c->lock);
	if (nback)
		(void)tw__cl_hand_back(c, c->worker_client, back, nback, NULL, 0);
	if (owned >= share)
		return;
	/* Free groups, tried from a place of this member's own, so that members taking
	 * groups at once seldom race for the same one. */
	unsigned start = tw__cl_hash(c->member) % c->groups;
	for (unsigned i = 0; i < c->groups && owned < share && !atomic_load(&c->stop) &&
			     !atomic_load(&c->stop_worker);
	     i++) {
		unsigned g = (start + i) % c->groups;
		if (v->owner_token[g])
			continue;
		if (take(c, g, lease) == 1)
			owned++;
	}
}

/* Claims the fire times of the owned groups' jobs due within claim_ahead_ms. */
static void claim_ahead(struct tw_cluster *c)
{
	int64_t now = tw__cl_wall_ms();
	/* Only fire times still ahead: one that is due may be claimed by its run meanwhile. */
	int64_t from = now + 2, upto = now + (int64_t)c->claim_ahead_ms;
	for (unsigned g = 0;
	     g < c->groups && !atomic_load(&c->stop) && !atomic_load(&c->stop_worker); g++) {
		struct cl_job *jobs[CLAIM_BATCH];
		int64_t fires[CLAIM_BATCH];
		size_t n = 0;
		pthread_mutex_lock(&c->lock);
		uint64_t token = c->group[g].token;
		if (!token || c->group[g].draining) {
			pthread_mutex_unlock(&c->lock);
			continue;
		}
		for (struct cl_job *j = c->jobs; j && n < CLAIM_BATCH; j = j->next) {
			if (j->group != g || j->cancelled)
				continue;
			int64_t after =
				j->claimed_upto_ms > from - 1 ? j->claimed_upto_ms : from - 1;
			unsigned room = CL_CLAIM_RING - j->nclaimed;
			for (int64_t t = tw__cl_next_fire(j, after);
			     t <= upto && n < CLAIM_BATCH && room > 0; t = tw__cl_next_fire(j, t)) {
				jobs[n] = j;
				fires[n++] = t;
				room--;
			}
		}
		/* The runs of these fire times wait for this answer rather than claim them
		 * again (run.c). */
		for (size_t i = 0; i < n; i++) {
			jobs[i]->claiming_upto_ms = fires[i];
			jobs[i]->refs++;
		}
		pthread_mutex_unlock(&c->lock);
		if (n == 0)
			continue;
		int rc = tw__cl_claim(c, c->worker_client, g, token, jobs, fires, n);
		/* Refused: an earlier batch whose answer was lost may have claimed some of these
		 * (each found ours is taken as claimed); the others are left to their runs. */
		bool own[CLAIM_BATCH] = { 0 };
		for (size_t i = 0; rc == 0 && i < n; i++)
			own[i] = tw__cl_own_claim(c, c->worker_client, jobs[i], fires[i], token) ==
				 1;
		pthread_mutex_lock(&c->lock);
		for (size_t i = 0; i < n; i++) {
			struct cl_job *j = jobs[i];
			j->claiming_upto_ms = 0;
			bool claimed = rc == 1 || own[i];
			if (claimed && c->group[g].token == token && j->nclaimed < CL_CLAIM_RING) {
				j->claimed[j->nclaimed] = fires[i];
				j->claimed_token[j->nclaimed++] = token;
			}
			if (own[i] && fires[i] > j->claimed_upto_ms)
				j->claimed_upto_ms = fires[i];
			/* Claimed or not, these fire times are settled for the worker: a refused
			 * batch leaves each to its run, which claims it alone. */
			if (rc == 1 && fires[i] > j->claimed_upto_ms)
				j->claimed_upto_ms = fires[i];
		}
		for (size_t i = 0; i < n; i++)
			tw__cl_job_put(jobs[i]);
		if (rc == 1)
			c->stats.claims_ahead += n;
		pthread_cond_broadcast(&c->claimed);
		pthread_mutex_unlock(&c->lock);
	}
}

void *tw__cl_worker_main(void *arg)
{
	struct tw_cluster *c = arg;
	struct view v = { 0 };
	v.owner_token = calloc(c->groups, sizeof *v.owner_token);
	v.owner_is_me = calloc(c->groups, sizeof *v.owner_is_me);
	unsigned *adopt = calloc(c->groups, sizeof *adopt);
	uint64_t *adopt_token = calloc(c->groups, sizeof *adopt_token);
	if (!v.owner_token || !v.owner_is_me || !adopt || !adopt_token) {
		free(adopt);
		free(adopt_token);
		tw__cl_log(c, TW_LOG_ERROR, "cluster %s: out of memory: no groups taken",
			   c->member);
		free(v.owner_token);
		free(v.owner_is_me);
		return NULL;
	}
	while (!atomic_load(&c->stop) && !atomic_load(&c->stop_worker)) {
		pthread_mutex_lock(&c->lock);
		int64_t lease = c->lease_id;
		pthread_mutex_unlock(&c->lock);
		memset(v.owner_token, 0, c->groups * sizeof *v.owner_token);
		memset(v.owner_is_me, 0, c->groups * sizeof *v.owner_is_me);
		v.nmembers = 0;
		if (lease != 0 && read_view(c, lease, &v) == TW_OK) {
			size_t nadopt = reconcile(c, &v, adopt, adopt_token);
			for (size_t i = 0; i < nadopt; i++)
				tw__cl_take_group(c, adopt[i], adopt_token[i], false);
			if (!tw__cl_fenced(c, tw__cl_mono_ns())) {
				rebalance(c, &v, lease);
				claim_ahead(c);
			}
		}
		free(v.members);
		v.members = NULL;
		tw__cl_sleep(c, CL_ROUND_MS, true);
	}
	free(v.owner_token);
	free(v.owner_is_me);
	free(adopt);
	free(adopt_token);
	return NULL;
}
