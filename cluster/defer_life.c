/*
 * cluster/defer_life.c - the deferred tasks' part of a replica: set up at join, drained at
 * leave, the clients for calls from any thread, and the worker's hooks.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"

#define FIRST_BUCKETS 1024
/* How long leave waits, after the last handler returned, for results and claims to be
 * written, in request timeouts. */
#define DRAIN_TIMEOUTS 3

static int client(struct tw_cluster *c, etcd_client **out)
{
	etcd_status st = { 0 };
	if (tw__etcd_client_create((const char *const *)c->endpoints, c->nendpoints, c->timeout_ms,
				   out, &st) != 0)
		return st.kind == ETCD_ENOMEM ? -TW_ENOMEM : -TW_EINVAL;
	return TW_OK;
}

int tw__cl_defer_init(struct tw_cluster *c)
{
	struct cl_defer *d = calloc(1, sizeof *d);
	if (!d)
		return -TW_ENOMEM;
	c->defer = d;
	d->cluster = c;
	d->nbuckets = FIRST_BUCKETS;
	d->buckets = calloc(d->nbuckets, sizeof(struct cl_task *));
	d->loaded_token = calloc(c->groups, sizeof *d->loaded_token);
	d->loaded_rev = calloc(c->groups, sizeof *d->loaded_rev);
	d->busy = calloc(c->groups, sizeof *d->busy);
	d->refused = calloc(c->groups, sizeof *d->refused);
	d->claim_tail = &d->claim_head;
	d->done_tail = &d->done_head;
	if (!d->buckets || !d->loaded_token || !d->loaded_rev || !d->busy || !d->refused)
		return -TW_ENOMEM;
	for (unsigned g = 0; g < c->groups; g++)
		atomic_init(&d->busy[g], 0);
	pthread_condattr_t ca;
	if (pthread_condattr_init(&ca) != 0)
		return -TW_ENOMEM;
	int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(&d->work, &ca);
	if (rc == 0)
		rc = pthread_cond_init(&d->progress, &ca);
	if (rc == 0)
		rc = pthread_cond_init(&d->released, &ca);
	pthread_condattr_destroy(&ca);
	if (rc == 0)
		rc = pthread_mutex_init(&d->lock, NULL);
	if (rc == 0)
		rc = pthread_mutex_init(&d->release_lock, NULL);
	if (rc == 0)
		rc = pthread_mutex_init(&d->pool_lock, NULL);
	if (rc == 0)
		rc = pthread_mutex_init(&d->tomb_lock, NULL);
	if (rc != 0)
		return -TW_ENOMEM;
	if ((rc = client(c, &d->load_client)) != TW_OK ||
	    (rc = client(c, &d->watch_client)) != TW_OK ||
	    (rc = client(c, &d->work_client)) != TW_OK)
		return rc;
	return TW_OK;
}

int tw__cl_defer_start(struct tw_cluster *c)
{
	struct cl_defer *d = c->defer;
	if (pthread_create(&d->loader, NULL, tw__cl_loader_main, c) != 0)
		return -TW_ERESOURCE;
	d->loader_started = true;
	if (pthread_create(&d->worker, NULL, tw__cl_defer_worker_main, c) != 0)
		return -TW_ERESOURCE;
	d->worker_started = true;
	return TW_OK;
}

static bool busy(struct tw_cluster *c)
{
	for (unsigned g = 0; g < c->groups; g++)
		if (atomic_load(&c->defer->busy[g]))
			return true;
	return false;
}

static void stop_threads(struct cl_defer *d)
{
	atomic_store(&d->stop, true);
	atomic_store(&d->reload, true);
	pthread_mutex_lock(&d->lock);
	pthread_cond_broadcast(&d->work);
	pthread_mutex_unlock(&d->lock);
	if (d->loader_started)
		pthread_join(d->loader, NULL);
	if (d->worker_started)
		pthread_join(d->worker, NULL);
	d->loader_started = d->worker_started = false;
}

void tw__cl_defer_stop(struct tw_cluster *c)
{
	stop_threads(c->defer);
	atomic_store(&c->defer->stop, false);
	atomic_store(&c->defer->reload, false);
}

void tw__cl_defer_drain(struct tw_cluster *c)
{
	struct cl_defer *d = c->defer;
	if (!d)
		return;
	atomic_store(&d->draining, true);
	pthread_mutex_lock(&d->lock);
	pthread_cond_broadcast(&d->work);
	/* Handlers going finish whatever they take; then the results and the claims given
	 * back get a few request timeouts to reach etcd, after which the lease's expiry hands
	 * them to the next owner. */
	struct timespec until = { 0 };
	bool timed = false;
	while (busy(c) && d->worker_started) {
		if (d->stats.inflight == 0 && !timed) {
			(void)clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_sec += (time_t)(DRAIN_TIMEOUTS * c->timeout_ms / 1000 + 1);
			timed = true;
		}
		if (!timed) {
			pthread_cond_wait(&d->progress, &d->lock);
		} else if (pthread_cond_timedwait(&d->progress, &d->lock, &until) != 0) {
			break;
		}
	}
	pthread_mutex_unlock(&d->lock);
	stop_threads(d);
	pthread_mutex_lock(&d->lock);
	for (size_t b = 0; b < d->nbuckets; b++)
		while (d->buckets[b])
			tw__cl_task_drop(c, d->buckets[b]);
	for (struct cl_task *t = d->claim_head, *next; t; t = next) {
		next = t->qnext;
		tw__cl_task_put(t);
	}
	for (struct cl_task *t = d->done_head, *next; t; t = next) {
		next = t->qnext;
		tw__cl_task_put(t);
	}
	d->claim_head = d->done_head = NULL;
	pthread_mutex_unlock(&d->lock);
	/* A run of a local task may still be about to look at its task: the engine releases
	 * each local task after its last run, and the cluster lives until then. */
	pthread_mutex_lock(&d->release_lock);
	while (d->live_locals > 0)
		pthread_cond_wait(&d->released, &d->release_lock);
	pthread_mutex_unlock(&d->release_lock);
}

void tw__cl_defer_free(struct tw_cluster *c)
{
	struct cl_defer *d = c->defer;
	if (!d)
		return;
	stop_threads(d);
	tw__etcd_client_destroy(d->load_client);
	tw__etcd_client_destroy(d->watch_client);
	tw__etcd_client_destroy(d->work_client);
	for (size_t i = 0; i < d->npool; i++)
		tw__etcd_client_destroy(d->pool[i]);
	for (struct cl_kind *k = d->kinds, *next; k; k = next) {
		next = k->next;
		free(k);
	}
	free(d->buckets);
	free(d->loaded_token);
	free(d->loaded_rev);
	free(d->busy);
	free(d->refused);
	pthread_mutex_destroy(&d->lock);
	pthread_mutex_destroy(&d->release_lock);
	pthread_mutex_destroy(&d->pool_lock);
	pthread_mutex_destroy(&d->tomb_lock);
	pthread_cond_destroy(&d->work);
	pthread_cond_destroy(&d->progress);
	pthread_cond_destroy(&d->released);
	free(d);
	c->defer = NULL;
}

etcd_client *tw__cl_pool_get(struct tw_cluster *c)
{
	struct cl_defer *d = c->defer;
	etcd_client *cl = NULL;
	pthread_mutex_lock(&d->pool_lock);
	if (d->npool)
		cl = d->pool[--d->npool];
	pthread_mutex_unlock(&d->pool_lock);
	if (!cl && client(c, &cl) != TW_OK)
		return NULL;
	return cl;
}

void tw__cl_pool_put(struct tw_cluster *c, etcd_client *cl)
{
	struct cl_defer *d = c->defer;
	pthread_mutex_lock(&d->pool_lock);
	if (d->npool < sizeof d->pool / sizeof d->pool[0]) {
		d->pool[d->npool++] = cl;
		cl = NULL;
	}
	pthread_mutex_unlock(&d->pool_lock);
	tw__etcd_client_destroy(cl);
}

void tw__cl_defer_groups_changed(struct tw_cluster *c)
{
	if (c->defer)
		atomic_store(&c->defer->reload, true);
}

bool tw__cl_defer_group_busy(struct tw_cluster *c, unsigned g)
{
	return c->defer && atomic_load(&c->defer->busy[g]) > 0;
}

void tw__cl_defer_retry_refused(struct tw_cluster *c)
{
	struct cl_defer *d = c->defer;
	if (!d->refused_ms || tw__cl_wall_ms() - d->refused_ms < 1000)
		return;
	d->refused_ms = 0;
	for (unsigned g = 0; g < c->groups; g++)
		if (d->refused[g]) {
			d->refused[g] = false;
			d->loaded_token[g] = 0; /* read whole again; held tasks are kept */
		}
	atomic_store(&d->reload, true);
}

/* Granted anew every tenth of CL_TOMBSTONE_S with a TTL a tenth longer, so each tombstone
 * lives CL_TOMBSTONE_S to 1.1 times that, whatever becomes of this replica. */
int64_t tw__cl_tomb_lease(struct tw_cluster *c, etcd_client *client)
{
	struct cl_defer *d = c->defer;
	int64_t now = tw__cl_wall_ms();
	pthread_mutex_lock(&d->tomb_lock);
	if (!d->tomb_lease || now - d->tomb_granted_ms >= (int64_t)CL_TOMBSTONE_S * 100) {
		int64_t id = 0, ttl = 0;
		etcd_status st = { 0 };
		int rc = tw__cl_note(
			c, tw__etcd_lease_grant(client, CL_TOMBSTONE_S * 11 / 10, &id, &ttl, &st),
			&st);
		d->tomb_lease = rc == TW_OK ? id : 0;
		d->tomb_granted_ms = now;
	}
	int64_t lease = d->tomb_lease;
	pthread_mutex_unlock(&d->tomb_lock);
	return lease;
}

void tw__cl_tomb_lease_lost(struct tw_cluster *c)
{
	pthread_mutex_lock(&c->defer->tomb_lock);
	c->defer->tomb_lease = 0;
	pthread_mutex_unlock(&c->defer->tomb_lock);
}
