/*
 * cluster/defer_hold.c - the tasks this replica holds: a map by key (chained, doubling) and
 * each task's local one-shot in the engine.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

static size_t bucket_of(const struct cl_defer *d, const char *key)
{
	return tw__cl_hash(key) & (d->nbuckets - 1);
}

struct cl_task *tw__cl_task_find(struct cl_defer *d, const char *key)
{
	for (struct cl_task *t = d->buckets[bucket_of(d, key)]; t; t = t->hnext)
		if (strcmp(t->key, key) == 0)
			return t;
	return NULL;
}

static void grow(struct cl_defer *d)
{
	size_t n = d->nbuckets * 2;
	struct cl_task **b = calloc(n, sizeof(struct cl_task *));
	if (!b) /* longer chains, nothing worse */
		return;
	for (size_t i = 0; i < d->nbuckets; i++)
		for (struct cl_task *t = d->buckets[i], *next; t; t = next) {
			next = t->hnext;
			size_t k = tw__cl_hash(t->key) & (n - 1);
			t->hnext = b[k];
			b[k] = t;
		}
	free(d->buckets);
	d->buckets = b;
	d->nbuckets = n;
}

void tw__cl_task_put(struct cl_task *t)
{
	if (atomic_fetch_sub(&t->refs, 1) == 1) {
		free(t->payload);
		free(t);
	}
}

static int64_t alarm_of(const struct tw_cluster *c, const struct cl_task *t)
{
	return t->rec.due_ms - (int64_t)c->claim_ahead_ms;
}

static uint64_t mono_due_of(int64_t wall_ms)
{
	/* The wall clock first, then the monotonic one: the later reading only puts the due
	 * later, never before the wall-clock time. */
	int64_t wall = tw__cl_wall_ns();
	int64_t mono = tw__cl_mono_ns();
	/* Dues are at most 2^40 ms ahead (tw_cluster_defer's bound): this cannot overflow for
	 * them; a due written into etcd by other means is held at that bound. */
	int64_t limit = wall / 1000000 + ((int64_t)1 << 40);
	int64_t ahead = (wall_ms < limit ? wall_ms : limit) * 1000000 - wall;
	return (uint64_t)(mono + (ahead > 0 ? ahead : 0));
}

struct cl_task *tw__cl_task_hold(struct tw_cluster *c, const char *key, unsigned group,
				 const struct cl_record *rec, int64_t mod_rev)
{
	struct cl_defer *d = c->defer;
	size_t klen = strlen(key);
	struct cl_task *t = calloc(1, sizeof *t + klen + 1);
	if (!t)
		return NULL;
	memcpy(t->key, key, klen + 1);
	t->defer = d;
	t->group = group;
	t->rec = *rec;
	t->rec.payload = NULL;
	t->rec.payload_len = 0;
	t->mod_rev = mod_rev;
	t->state = CL_HELD;
	atomic_init(&t->refs, 2); /* the map, the local task */
	tw_task_spec spec = { .callback = tw__cl_task_fire,
			      .arg = t,
			      .release = tw__cl_task_release,
			      .first_due_ns = mono_due_of(alarm_of(c, t)) };
	/* Counted first: the release may not find the count below it. */
	pthread_mutex_lock(&d->release_lock);
	d->live_locals++;
	pthread_mutex_unlock(&d->release_lock);
	int rc = tw_add(c->engine, &spec, &t->local);
	if (rc != TW_OK) {
		pthread_mutex_lock(&d->release_lock);
		d->live_locals--;
		pthread_mutex_unlock(&d->release_lock);
		tw__cl_log(c, TW_LOG_ERROR,
			   "cluster %s: task %s not held: the engine refused it (%s); its group "
			   "is read again in a second",
			   c->member, key, tw_strerror(rc));
		if (!d->refused[group])
			d->refused_ms = tw__cl_wall_ms();
		d->refused[group] = true;
		free(t);
		return NULL;
	}
	t->local_live = true;
	if (d->count >= d->nbuckets)
		grow(d);
	size_t b = bucket_of(d, key);
	t->hnext = d->buckets[b];
	d->buckets[b] = t;
	d->count++;
	if (!tw__cl_kind_find(d, t->rec.kind)) { /* counted from now, not from its alarm */
		t->unhandled = true;
		d->stats.unhandled++;
	}
	return t;
}

void tw__cl_task_unbusy(struct cl_defer *d, struct cl_task *t)
{
	atomic_fetch_sub(&d->busy[t->group], 1);
	pthread_cond_broadcast(&d->progress);
}

void tw__cl_task_drop(struct tw_cluster *c, struct cl_task *t)
{
	struct cl_defer *d = c->defer;
	size_t b = bucket_of(d, t->key);
	for (struct cl_task **p = &d->buckets[b]; *p; p = &(*p)->hnext)
		if (*p == t) {
			*p = t->hnext;
			d->count--;
			break;
		}
	if (t->unhandled) {
		t->unhandled = false;
		d->stats.unhandled--;
	}
	if (t->state == CL_CLAIMING || t->state == CL_CLAIMED || t->state == CL_RUNNING ||
	    t->state == CL_DONE)
		tw__cl_task_unbusy(d, t);
	t->state = CL_GONE;
	if (t->local_live) {
		t->local_live = false;
		/* The release may come inline: it only drops a reference. */
		(void)tw_cancel(c->engine, t->local);
	}
	tw__cl_task_put(t);
}

void tw__cl_task_release(void *arg)
{
	struct cl_task *t = arg;
	struct cl_defer *d = t->defer;
	tw__cl_task_put(t);
	/* The last use of d: leave frees it once every local task was released. */
	pthread_mutex_lock(&d->release_lock);
	if (--d->live_locals == 0)
		pthread_cond_broadcast(&d->released);
	pthread_mutex_unlock(&d->release_lock);
}

void tw__cl_task_arm(struct tw_cluster *c, struct cl_task *t, int64_t wall_ms)
{
	if (!t->local_live)
		return;
	int rc = wall_ms == INT64_MAX ? tw_set_delay(c->engine, t->local, TW_NEVER) :
					tw_set_due(c->engine, t->local, mono_due_of(wall_ms));
	if (rc != TW_OK)
		tw__cl_log(c, TW_LOG_ERROR, "cluster %s: task %s: the engine refused its due (%s)",
			   c->member, t->key, tw_strerror(rc));
}

void tw__cl_task_arm_alarm(struct tw_cluster *c, struct cl_task *t)
{
	tw__cl_task_arm(c, t, alarm_of(c, t));
}

void tw__cl_task_enqueue(struct cl_defer *d, struct cl_task *t, bool done)
{
	atomic_fetch_add(&t->refs, 1);
	t->qnext = NULL;
	if (done) {
		*d->done_tail = t;
		d->done_tail = &t->qnext;
	} else {
		*d->claim_tail = t;
		d->claim_tail = &t->qnext;
	}
	pthread_cond_signal(&d->work);
}

struct cl_kind *tw__cl_kind_find(struct cl_defer *d, const char *kind)
{
	for (struct cl_kind *k = d->kinds; k; k = k->next)
		if (strcmp(k->name, kind) == 0)
			return k;
	return NULL;
}

int tw__cl_task_key(const struct tw_cluster *c, char *buf, char which, unsigned group,
		    const char *key)
{
	return tw__cl_key(c, buf, "defer/%c/%04u/%s", which, group, key);
}

int tw__cl_task_key_parse(const struct tw_cluster *c, const uint8_t *k, size_t len, char *which,
			  unsigned *group, char *key)
{
	size_t plen = strlen(c->prefix);
	/* prefix "defer/" which "/" dddd "/" key */
	if (len < plen + 6 + 2 + 5 + 1 || memcmp(k, c->prefix, plen) != 0 ||
	    memcmp(k + plen, "defer/", 6) != 0)
		return -1;
	const uint8_t *p = k + plen + 6;
	if ((p[0] != 't' && p[0] != 'c') || p[1] != '/' || p[6] != '/')
		return -1;
	unsigned g = 0;
	for (int i = 2; i < 6; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		g = g * 10 + (unsigned)(p[i] - '0');
	}
	size_t klen = len - (size_t)(p + 7 - k);
	if (klen == 0 || klen > TW_CLUSTER_KEY_MAX)
		return -1;
	*which = (char)p[0];
	*group = g;
	memcpy(key, p + 7, klen);
	key[klen] = '\0';
	return 0;
}
