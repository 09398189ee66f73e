/*
 * cluster/run.c - a cluster job in the local engine: a one-shot task armed for the job's next
 * fire time (its UTC instant turned into a CLOCK_MONOTONIC due) and armed again by each run,
 * so that every replica's task stands for the same fire times whatever its clocks did since
 * it started. A run goes ahead only on the group's owner, for a fire time it claimed, while
 * its lease is not fenced.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"

int tw__cl_arm(struct cl_job *j, int64_t fire_ms)
{
	j->pending_fire_ms = fire_ms;
	if (fire_ms == INT64_MAX) /* a calendar with no fire time left: the task completes */
		return TW_OK;
	/* The wall clock first, then the monotonic one: the later monotonic reading can only
	 * put the due later, never before the fire time. */
	int64_t wall = tw__cl_wall_ns();
	int64_t mono = tw__cl_mono_ns();
	int64_t ahead = fire_ms * 1000000 - wall;
	return tw_set_due(j->cluster->engine, j->task, (uint64_t)(mono + (ahead > 0 ? ahead : 0)));
}

void tw__cl_job_put(struct cl_job *j)
{
	if (--j->refs == 0 && j->released) {
		tw_cron_free(j->cron);
		free(j->cron_text);
		free(j);
	}
}

void tw__cl_job_release(void *arg)
{
	struct cl_job *j = arg;
	struct tw_cluster *c = j->cluster;
	if (j->release)
		j->release(j->arg);
	pthread_mutex_lock(&c->lock);
	/* Still listed: a calendar job with no fire time left ended on its own. */
	for (struct cl_job **p = &c->jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			c->stats.jobs--;
			break;
		}
	if (c->left && c->nleft < c->left_cap) {
		struct cl_job_name *l = &c->left[c->nleft++];
		l->group = j->group;
		l->last_run_fire_ms = j->last_run_fire_ms;
		memcpy(l->name, j->name, sizeof l->name);
	}
	j->released = true;
	j->refs++;
	tw__cl_job_put(j);
	c->live_jobs--;
	pthread_cond_broadcast(&c->released);
	pthread_mutex_unlock(&c->lock);
}

/* Takes the job's claims up to fire out of its ring: *found says whether fire's own was
 * there, and *token is its token. Returns how many claims before fire went. Under lock. */
static unsigned take_claims_upto(struct cl_job *j, int64_t fire, bool *found, uint64_t *token)
{
	unsigned keep = 0, before = 0;
	*found = false;
	for (unsigned i = 0; i < j->nclaimed; i++) {
		if (j->claimed[i] == fire) {
			*found = true;
			*token = j->claimed_token[i];
		} else if (j->claimed[i] < fire) {
			before++;
		} else {
			j->claimed[keep] = j->claimed[i];
			j->claimed_token[keep++] = j->claimed_token[i];
		}
	}
	j->nclaimed = keep;
	return before;
}

/* Takes fire out of the job's claims; claims before it were not run (the local task fell
 * behind): missed. Under lock. */
static uint64_t take_claim(struct tw_cluster *c, struct cl_job *j, int64_t fire, bool *found)
{
	uint64_t token = 0;
	unsigned before = take_claims_upto(j, fire, found, &token);
	j->missed += before;
	c->stats.missed += before;
	return token;
}

static void wait_for_worker(struct tw_cluster *c, struct cl_job *j, int64_t fire)
{
	struct timespec until;
	(void)clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += c->timeout_ms / 1000 + 1;
	while (j->claiming_upto_ms >= fire &&
	       pthread_cond_timedwait(&c->claimed, &c->lock, &until) == 0)
		;
}

/* The claim of one fire time at its due, in the run's thread. Under lock; drops it around
 * the request. No executor waits on an etcd that did not answer the last request, nor longer
 * than a moment for another run's claim: the engine's other tasks share these threads. */
static uint64_t claim_now(struct tw_cluster *c, struct cl_job *j, int64_t fire, uint64_t token)
{
	if (!c->was_connected) {
		j->missed++;
		c->stats.missed++;
		return 0;
	}
	j->claimed_upto_ms = fire;
	pthread_mutex_unlock(&c->lock);
	struct timespec until;
	(void)clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 50000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	int rc = -TW_CLUSTER_EUNAVAILABLE;
	if (pthread_mutex_timedlock(&c->run_lock, &until) == 0) {
		struct cl_job *jobs[1] = { j };
		rc = tw__cl_claim(c, c->run_client, j->group, token, jobs, &fire, 1);
		if (rc == 0 && tw__cl_own_claim(c, c->run_client, j, fire, token) == 1)
			rc = 1;
		pthread_mutex_unlock(&c->run_lock);
	}
	pthread_mutex_lock(&c->lock);
	if (rc < 0) {
		/* etcd did not answer: nobody ran this fire time, and nobody else knows. */
		j->missed++;
		c->stats.missed++;
		return 0;
	}
	if (rc == 0) {
		/* Another owner, or its claim: the taker counts what it did not run. */
		c->stats.claims_lost++;
		return 0;
	}
	return token;
}

int tw__cl_run(const tw_fire *fire, void *arg)
{
	struct cl_job *j = arg;
	struct tw_cluster *c = j->cluster;
	int64_t now = tw__cl_wall_ms();
	pthread_mutex_lock(&c->lock);
	if (j->cancelled) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	struct cl_group *g = &c->group[j->group];
	int64_t fire_ms;
	if (j->catchup_fire_ms) {
		fire_ms = j->catchup_fire_ms;
		j->catchup_fire_ms = 0;
		(void)tw__cl_arm(j, j->pending_fire_ms);
	} else {
		fire_ms = j->pending_fire_ms;
		if (fire_ms > now) {
			/* The wall clock was set back since the task was armed: never early. */
			(void)tw__cl_arm(j, fire_ms);
			pthread_mutex_unlock(&c->lock);
			return 0;
		}
		if (tw__cl_next_fire(j, fire_ms) <= now) {
			/* This replica fell behind by whole fire times: it runs the latest, and the
			 * ones before it pass unrun (with their claims, counted here once). */
			int64_t latest = tw__cl_latest_fire(j, fire_ms, now);
			if (g->token) {
				uint64_t n = tw__cl_count_fires(j, fire_ms - 1, latest - 1);
				j->missed += n;
				c->stats.missed += n;
			}
			bool found_before;
			uint64_t unused;
			(void)take_claims_upto(j, latest - 1, &found_before, &unused);
			fire_ms = latest;
		}
		(void)tw__cl_arm(j, tw__cl_next_fire(j, fire_ms));
	}
	if (!g->token) {
		c->stats.not_owner++;
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	bool found;
	uint64_t token = take_claim(c, j, fire_ms, &found);
	if (!found && j->claiming_upto_ms >= fire_ms) {
		wait_for_worker(c, j, fire_ms);
		token = take_claim(c, j, fire_ms, &found);
	}
	if (!found && fire_ms > j->claimed_upto_ms && g->token && !g->draining &&
	    !tw__cl_fenced(c, tw__cl_mono_ns()))
		found = (token = claim_now(c, j, fire_ms, g->token)) != 0;
	pthread_mutex_unlock(&c->lock);
	if (!found)
		return 0;
	int64_t start = tw__cl_mono_ns();
	bool fenced = tw__cl_fence_check(c, start);
	pthread_mutex_lock(&c->lock);
	/* Checked once more under the lock: a cancel that returned before this point keeps
	 * its promise that no run starts. */
	if (fenced || j->cancelled) {
		j->missed++;
		c->stats.missed++;
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	uint64_t missed = j->missed;
	j->missed = 0;
	j->last_run_fire_ms = fire_ms;
	c->stats.runs++;
	pthread_mutex_unlock(&c->lock);
	tw_cluster_fire cf = { .job = j->name,
			       .fire_time_ms = fire_ms,
			       .token = token,
			       .missed = missed,
			       .group = j->group,
			       .due_ns = fire->due_ns,
			       .start_lateness_ns = start - (int64_t)fire->due_ns };
	/* A failure counts in the cluster's counters, never in the local task's: the engine
	 * would pause a task after max_failures in a row, and no other replica could run the
	 * job while this one owns its group. */
	if (j->callback(&cf, j->arg) != 0) {
		pthread_mutex_lock(&c->lock);
		c->stats.failures++;
		pthread_mutex_unlock(&c->lock);
	}
	return 0;
}

void tw__cl_take_group(struct tw_cluster *c, unsigned g, uint64_t token, bool takeover)
{
	/* The last fire time claimed of every job, as the previous owner left it: a range over
	 * last/, filtered to this group's jobs below. */
	char lk[CL_KEY_MAX];
	int llen = tw__cl_key(c, lk, "last/");
	uint8_t *lend = NULL;
	size_t lend_len = 0;
	etcd_range_result last = { 0 };
	etcd_status st = { 0 };
	bool have_last = false;
	if (tw__etcd_prefix_end(lk, (size_t)llen, &lend, &lend_len) == 0) {
		etcd_range_req req = { .key = lk,
				       .key_len = (size_t)llen,
				       .range_end = lend,
				       .range_end_len = lend_len };
		have_last = tw__cl_note(c, tw__etcd_range(c->worker_client, &req, &last, &st),
					&st) == TW_OK;
		free(lend);
	}
	struct cl_job *catchup[CL_CLAIM_RING];
	int64_t catchup_fire[CL_CLAIM_RING];
	size_t ncatchup = 0;
	int64_t now = tw__cl_wall_ms();
	pthread_mutex_lock(&c->lock);
	c->group[g] = (struct cl_group){ .token = token };
	c->stats.acquisitions++;
	c->stats.takeovers += takeover;
	c->stats.groups_owned++;
	for (struct cl_job *j = c->jobs; j; j = j->next) {
		if (j->group != g || j->cancelled)
			continue;
		j->nclaimed = 0;
		int64_t L = INT64_MIN;
		for (size_t i = 0; have_last && i < last.count; i++) {
			const etcd_kv *kv = &last.kvs[i];
			size_t nlen = strlen(j->name);
			if (kv->key_len == (size_t)llen + nlen &&
			    memcmp(kv->key + llen, j->name, nlen) == 0) {
				char v[24] = { 0 };
				memcpy(v, kv->value, kv->value_len < 23 ? kv->value_len : 23);
				L = strtoll(v, NULL, 10);
			}
		}
		if (!have_last) {
			/* Not knowing what was claimed, claim nothing before now: the runs' own
			 * claims refuse what was. */
			L = now;
		}
		if (L == INT64_MIN) {
			j->claimed_upto_ms = now;
			continue;
		}
		uint64_t lost_ahead = tw__cl_count_fires(j, now, L);
		uint64_t passed = tw__cl_count_fires(j, L, now);
		uint64_t missed = lost_ahead + passed;
		if (passed && j->misfire == TW_MISFIRE_RUN_ONCE && ncatchup < CL_CLAIM_RING) {
			catchup[ncatchup] = j;
			catchup_fire[ncatchup++] = tw__cl_latest_fire(j, L, now);
			j->refs++;
			missed--;
		}
		j->claimed_upto_ms = L > now ? L : now;
		j->missed += missed;
		c->stats.missed += missed;
	}
	pthread_mutex_unlock(&c->lock);
	tw__cl_defer_groups_changed(c);
	tw__etcd_range_result_free(&last);
	for (size_t i = 0; i < ncatchup; i++) {
		struct cl_job *j = catchup[i];
		int rc = tw__cl_claim(c, c->worker_client, g, token, &catchup[i], &catchup_fire[i],
				      1);
		pthread_mutex_lock(&c->lock);
		if (rc == 1 && !j->released && j->nclaimed < CL_CLAIM_RING) {
			j->claimed[j->nclaimed] = catchup_fire[i];
			j->claimed_token[j->nclaimed++] = token;
			j->catchup_fire_ms = catchup_fire[i];
			(void)tw_set_delay(c->engine, j->task, 0);
		} else if (rc != 1) {
			j->missed++;
			c->stats.missed++;
		}
		tw__cl_job_put(j);
		pthread_mutex_unlock(&c->lock);
	}
}
