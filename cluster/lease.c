/*
 * cluster/lease.c - the replica's lease: taken at join, renewed by the keeper thread every
 * third of the TTL, and the member key recorded under it.
 *
 * The lease counts as valid until the time a renewal was sent plus the TTL granted, on this
 * replica's CLOCK_MONOTONIC: etcd's leader started its own count when it received the renewal,
 * which is later, so the replica's end comes first (a new etcd leader renews every lease to a
 * full TTL, which only moves etcd's end later). Self-fencing is judged against that end.
 */
#include <stdio.h>
#include <string.h>

#include "cluster.h"

/* Puts the member key under the lease if no member of the name is recorded. 1: put; 0: the
 * name is taken; < 0: a code. */
static int record_member(struct tw_cluster *c, etcd_client *client, int64_t lease)
{
	char key[CL_KEY_MAX];
	if (tw__cl_key(c, key, "members/%s", c->member) < 0)
		return -TW_EINVAL;
	int rc = tw__cl_create(c, client, key, c->member, strlen(c->member), lease);
	return rc < 0 ? rc : rc == 1;
}

/* Whether a member of this replica's name is recorded: 1 yes, 0 no, < 0 a code. */
static int member_recorded(struct tw_cluster *c, etcd_client *client)
{
	char key[CL_KEY_MAX];
	int len = tw__cl_key(c, key, "members/%s", c->member);
	etcd_range_req req = { .key = key, .key_len = (size_t)len, .count_only = true };
	etcd_range_result r = { 0 };
	etcd_status st = { 0 };
	int rc = tw__cl_note(c, tw__etcd_range(client, &req, &r, &st), &st);
	if (rc == TW_OK)
		rc = r.total > 0;
	tw__etcd_range_result_free(&r);
	return rc;
}

int tw__cl_lease_take(struct tw_cluster *c, etcd_client *client)
{
	/* A name still recorded is a previous run of this replica whose lease has not expired
	 * yet (or a live replica of the same name: then it stays, and the join fails). It is
	 * waited for before the lease is granted, so that the wait costs the new lease nothing. */
	int64_t give_up = tw__cl_mono_ns() + ((int64_t)c->ttl_s + 1) * 1000000000;
	int rc;
	while ((rc = member_recorded(c, client)) == 1 && tw__cl_mono_ns() < give_up &&
	       !atomic_load(&c->stop))
		tw__cl_sleep(c, 200, false);
	if (rc != 0)
		return rc == 1 ? -TW_EEXIST : rc;
	etcd_status st = { 0 };
	int64_t id = 0, ttl = 0;
	int64_t sent = tw__cl_mono_ns();
	rc = tw__cl_note(c, tw__etcd_lease_grant(client, c->ttl_s, &id, &ttl, &st), &st);
	if (rc != TW_OK)
		return rc;
	if ((rc = record_member(c, client, id)) != 1) {
		/* Taken meanwhile by another start of the same name. */
		(void)tw__etcd_lease_revoke(client, id, &st);
		return rc == 0 ? -TW_EEXIST : rc;
	}
	pthread_mutex_lock(&c->lock);
	c->lease_id = id;
	pthread_mutex_unlock(&c->lock);
	atomic_store(&c->lease_deadline_ns, sent + ttl * 1000000000);
	return TW_OK;
}

/* The lease is gone: so are the groups' owner keys, and with them every claim's right. */
static void lease_lost(struct tw_cluster *c)
{
	pthread_mutex_lock(&c->lock);
	c->stats.leases_lost++;
	for (unsigned g = 0; g < c->groups; g++)
		c->group[g] = (struct cl_group){ 0 };
	c->stats.groups_owned = 0;
	/* Fire times claimed and not run are lost with the lease. */
	for (struct cl_job *j = c->jobs; j; j = j->next) {
		j->missed += j->nclaimed;
		c->stats.missed += j->nclaimed;
		j->nclaimed = 0;
	}
	pthread_mutex_unlock(&c->lock);
	tw__cl_log(c, TW_LOG_WARNING, "cluster %s: lease expired; taking a new one", c->member);
}

void *tw__cl_keeper_main(void *arg)
{
	struct tw_cluster *c = arg;
	unsigned backoff_ms = 100;
	while (!atomic_load(&c->stop)) {
		pthread_mutex_lock(&c->lock);
		int64_t id = c->lease_id;
		pthread_mutex_unlock(&c->lock);
		etcd_status st = { 0 };
		int64_t ttl = 0, sent = tw__cl_mono_ns();
		int rc;
		if (id == 0)
			rc = tw__cl_lease_take(c, c->keeper_client);
		else
			rc = tw__cl_note(
				c, tw__etcd_lease_keepalive(c->keeper_client, id, &ttl, &st), &st);
		if (id != 0)
			tw__cl_fence_check(c, tw__cl_mono_ns());
		if (id != 0 && rc == TW_OK) {
			atomic_store(&c->lease_deadline_ns, sent + ttl * 1000000000);
			pthread_mutex_lock(&c->lock);
			c->stats.lease_renewals++;
			pthread_mutex_unlock(&c->lock);
		} else if (id != 0 && st.kind == ETCD_ENOLEASE) {
			lease_lost(c);
			pthread_mutex_lock(&c->lock);
			c->lease_id = 0;
			pthread_mutex_unlock(&c->lock);
			continue;
		}
		tw__cl_fence_check(c, tw__cl_mono_ns());
		if (rc == TW_OK) {
			backoff_ms = 100;
			tw__cl_sleep(c, c->ttl_s * 1000 / 3, false);
		} else {
			/* Tries again soon: the fence is near when renewals fail. */
			tw__cl_sleep(c, backoff_ms, false);
			backoff_ms = backoff_ms * 2 > 1000 ? 1000 : backoff_ms * 2;
		}
	}
	return NULL;
}
