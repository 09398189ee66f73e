/*
 * cluster/defer_load.c - the loader: holds every task of the groups this replica owns. A
 * group taken is read whole (pages of a range pinned to one revision, tasks then claims);
 * one watch over P/defer/ then follows every change after the revisions read. When the
 * owned groups change, the worker raises `reload` and the watch ends within its poll (100
 * ms); the loader reads the new groups, drops the lost ones, and watches again from the
 * revision after the last one it saw, skipping a group's events up to its own load.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"

/* A group's load reads pages of this many keys at first: etcd 3.4 walks the rest of the
 * range for every page (to count it), so a load costs keys^2 / page, and large pages are
 * what keeps a group of 100 000 tasks loading in seconds. Pages whose payloads make them
 * larger than LOAD_PAGE_BYTES shrink the next ones to that size. */
#define LOAD_PAGE       5000
#define LOAD_PAGE_MIN   50
#define LOAD_PAGE_BYTES (4 << 20)
#define PAUSE_MS        100

static void pause_ms(struct cl_defer *d, unsigned ms)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 10000000 };
	for (unsigned i = 0; i < ms / 10 && !atomic_load(&d->stop) && !atomic_load(&d->reload); i++)
		(void)nanosleep(&ts, NULL);
}

/* A task read (a load's page or a watch's put): held, or brought up to date while HELD.
 * Returns its due (INT64_MAX for a value that is no task). Under lock. */
static int64_t task_put(struct tw_cluster *c, unsigned g, const char *key, const etcd_kv *kv)
{
	struct cl_defer *d = c->defer;
	struct cl_record rec;
	if (tw__cl_record_decode(kv->value, kv->value_len, &rec) != 0 || rec.dead) {
		tw__cl_log(c, TW_LOG_WARNING, "cluster %s: %.*s is not a task: ignored", c->member,
			   (int)kv->key_len, (const char *)kv->key);
		return INT64_MAX;
	}
	struct cl_task *t = tw__cl_task_find(d, key);
	if (!t) {
		(void)tw__cl_task_hold(c, key, g, &rec, kv->mod_revision);
		return rec.due_ms;
	}
	/* Claimed here, the task is written by this replica alone (cancel and move refuse a
	 * claimed task), and a claim under way is settled by its answer. */
	if (t->state != CL_HELD || kv->mod_revision <= t->mod_rev)
		return rec.due_ms;
	t->rec = rec;
	t->rec.payload = NULL;
	t->rec.payload_len = 0;
	t->mod_rev = kv->mod_revision;
	tw__cl_task_arm_alarm(c, t);
	return rec.due_ms;
}

/* A claim read: another owner's (a lost one) is noted, so that the claim of it compares with
 * it; this replica's own are its business. Under lock. */
static void claim_put(struct tw_cluster *c, const char *key, const etcd_kv *kv)
{
	struct cl_task *t = tw__cl_task_find(c->defer, key);
	struct cl_claim_value cv;
	if (!t || t->state != CL_HELD || kv->mod_revision <= t->other_claim_rev ||
	    tw__cl_claim_decode(kv->value, kv->value_len, &cv) != 0)
		return;
	/* Ours under the group's present token: a claim whose answer was lost, which the next
	 * claim finds and adopts with its attempt. */
	if (cv.token == c->defer->loaded_token[t->group] && strcmp(cv.member, c->member) == 0)
		return;
	t->other_claim_rev = kv->mod_revision;
	t->other_claim_attempt = cv.attempt;
}

static void apply(struct tw_cluster *c, const etcd_kv *kv, bool deleted)
{
	struct cl_defer *d = c->defer;
	char which, key[TW_CLUSTER_KEY_MAX + 1];
	unsigned g;
	if (tw__cl_task_key_parse(c, kv->key, kv->key_len, &which, &g, key) != 0 ||
	    g >= c->groups || !d->loaded_token[g] || kv->mod_revision <= d->loaded_rev[g])
		return;
	if (!deleted) {
		if (which == 't')
			(void)task_put(c, g, key, kv);
		else
			claim_put(c, key, kv);
		return;
	}
	struct cl_task *t = tw__cl_task_find(d, key);
	if (!t || t->state != CL_HELD)
		return;
	if (which == 't')
		tw__cl_task_drop(c, t); /* cancelled, or done by another owner */
	else
		t->other_claim_rev = 0;
}

/* Reads group g whole into the map: 0, or a cluster code (the group is then not held). */
static int load_group(struct tw_cluster *c, unsigned g, uint64_t token)
{
	struct cl_defer *d = c->defer;
	int64_t t0 = tw__cl_mono_ns(), rev = 0, now = tw__cl_wall_ms();
	uint64_t loaded = 0, overdue = 0;
	int rc = TW_OK;
	pthread_mutex_lock(&d->lock);
	d->loaded_token[g] = token;
	d->loaded_rev[g] = INT64_MAX; /* no event applies until the load is read */
	pthread_mutex_unlock(&d->lock);
	for (int pass = 0; pass < 2 && rc == TW_OK; pass++) {
		char from[CL_KEY_MAX + 1];
		int flen = tw__cl_key(c, from, "defer/%c/%04u/", pass ? 'c' : 't', g);
		uint8_t *end = NULL;
		size_t end_len = 0;
		if (flen < 0 || tw__etcd_prefix_end(from, (size_t)flen, &end, &end_len) != 0)
			return -TW_ENOMEM;
		int64_t page = LOAD_PAGE;
		for (bool more = true; more && rc == TW_OK;) {
			etcd_range_req req = { .key = from,
					       .key_len = (size_t)flen,
					       .range_end = end,
					       .range_end_len = end_len,
					       .limit = page,
					       .revision = rev };
			etcd_range_result r = { 0 };
			etcd_status st = { 0 };
			rc = tw__cl_note(c, tw__etcd_range(d->load_client, &req, &r, &st), &st);
			if (rc != TW_OK)
				break;
			if (rev == 0)
				rev = r.revision;
			pthread_mutex_lock(&d->lock);
			for (size_t i = 0; i < r.count; i++) {
				char which, key[TW_CLUSTER_KEY_MAX + 1];
				unsigned kg;
				if (tw__cl_task_key_parse(c, r.kvs[i].key, r.kvs[i].key_len, &which,
							  &kg, key) != 0 ||
				    kg != g)
					continue;
				if (pass == 0) {
					overdue += task_put(c, g, key, &r.kvs[i]) < now;
					loaded++;
				} else {
					claim_put(c, key, &r.kvs[i]);
				}
			}
			pthread_mutex_unlock(&d->lock);
			size_t bytes = 0;
			for (size_t i = 0; i < r.count; i++)
				bytes += r.kvs[i].key_len + r.kvs[i].value_len;
			if (bytes > LOAD_PAGE_BYTES) {
				int64_t fit =
					(int64_t)((double)page * LOAD_PAGE_BYTES / (double)bytes);
				page = fit > LOAD_PAGE_MIN ? fit : LOAD_PAGE_MIN;
			}
			more = r.more && r.count > 0;
			if (more) { /* the next page starts right after the last key */
				const etcd_kv *last = &r.kvs[r.count - 1];
				if (last->key_len + 1 > CL_KEY_MAX) {
					rc = -TW_CLUSTER_EETCD;
				} else {
					memcpy(from, last->key, last->key_len);
					from[last->key_len] = '\0';
					flen = (int)last->key_len + 1;
				}
			}
			tw__etcd_range_result_free(&r);
		}
		free(end);
	}
	pthread_mutex_lock(&d->lock);
	if (rc == TW_OK) {
		d->loaded_rev[g] = rev;
		d->stats.loaded += loaded;
		d->stats.overdue += overdue;
		d->stats.load_ms_last = (uint64_t)((tw__cl_mono_ns() - t0) / 1000000);
	} else {
		d->loaded_token[g] = 0;
	}
	pthread_mutex_unlock(&d->lock);
	return rc;
}

/* Drops the tasks of every group whose holding ended (not owned, or owned anew). */
static void drop_groups(struct tw_cluster *c, const bool *gone)
{
	struct cl_defer *d = c->defer;
	pthread_mutex_lock(&d->lock);
	for (size_t b = 0; b < d->nbuckets; b++)
		for (struct cl_task *t = d->buckets[b], *next; t; t = next) {
			next = t->hnext;
			/* Runs going finish, and their results are written if the claim is still
			 * ours; what was only claimed is the next owner's. */
			if (gone[t->group] && t->state != CL_RUNNING && t->state != CL_DONE)
				tw__cl_task_drop(c, t);
		}
	pthread_mutex_unlock(&d->lock);
}

/* Brings the held groups in line with the owned ones: 0 when all are, -1 when a load must be
 * tried again. */
static int sync_groups(struct tw_cluster *c, bool *gone)
{
	struct cl_defer *d = c->defer;
	uint64_t *token = calloc(c->groups, sizeof *token);
	if (!token)
		return -1;
	pthread_mutex_lock(&c->lock);
	for (unsigned g = 0; g < c->groups; g++)
		token[g] = c->group[g].token;
	pthread_mutex_unlock(&c->lock);
	bool any = false;
	pthread_mutex_lock(&d->lock);
	for (unsigned g = 0; g < c->groups; g++) {
		gone[g] = d->loaded_token[g] && d->loaded_token[g] != token[g];
		any |= gone[g];
		if (gone[g])
			d->loaded_token[g] = 0;
	}
	pthread_mutex_unlock(&d->lock);
	if (any)
		drop_groups(c, gone);
	int rc = 0;
	for (unsigned g = 0; g < c->groups && !atomic_load(&d->stop); g++) {
		pthread_mutex_lock(&d->lock);
		bool load = token[g] && d->loaded_token[g] != token[g];
		pthread_mutex_unlock(&d->lock);
		if (load && load_group(c, g, token[g]) != TW_OK)
			rc = -1;
	}
	free(token);
	return rc;
}

static int on_watch(const etcd_watch_msg *msg, void *ctx)
{
	struct tw_cluster *c = ctx;
	struct cl_defer *d = c->defer;
	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < msg->count; i++) {
		const etcd_event *ev = &msg->events[i];
		apply(c, &ev->kv, ev->type == ETCD_EVENT_DELETE);
		if (ev->kv.mod_revision > d->watch_rev)
			d->watch_rev = ev->kv.mod_revision;
	}
	/* A progress notification (no events, not the created answer): every change up to its
	 * revision was delivered, so a later watch may start there, and is less likely to
	 * find its start compacted. */
	if (msg->count == 0 && !msg->created && !msg->canceled && msg->revision > d->watch_rev)
		d->watch_rev = msg->revision;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* The revision the watch starts after: the last it saw, or the oldest load. 0: none held. */
static int64_t watch_from(struct tw_cluster *c)
{
	struct cl_defer *d = c->defer;
	int64_t from = 0;
	pthread_mutex_lock(&d->lock);
	if (d->watch_rev) {
		from = d->watch_rev;
	} else {
		for (unsigned g = 0; g < c->groups; g++)
			if (d->loaded_token[g] && (from == 0 || d->loaded_rev[g] < from))
				from = d->loaded_rev[g];
	}
	pthread_mutex_unlock(&d->lock);
	return from;
}

void *tw__cl_loader_main(void *arg)
{
	struct tw_cluster *c = arg;
	struct cl_defer *d = c->defer;
	bool *gone = calloc(c->groups, sizeof *gone);
	char prefix[CL_KEY_MAX];
	int plen = tw__cl_key(c, prefix, "defer/");
	uint8_t *end = NULL;
	size_t end_len = 0;
	if (!gone || plen < 0 || tw__etcd_prefix_end(prefix, (size_t)plen, &end, &end_len) != 0) {
		tw__cl_log(c, TW_LOG_ERROR, "cluster %s: out of memory: no deferred task held",
			   c->member);
		free(gone);
		return NULL;
	}
	while (!atomic_load(&d->stop)) {
		atomic_store(&d->reload, false);
		if (sync_groups(c, gone) != 0) {
			pause_ms(d, PAUSE_MS);
			continue;
		}
		int64_t from = watch_from(c);
		if (from == 0) {
			pause_ms(d, PAUSE_MS);
			continue;
		}
		etcd_watch_req req = { .key = prefix,
				       .key_len = (size_t)plen,
				       .range_end = end,
				       .range_end_len = end_len,
				       .start_revision = from + 1,
				       .progress_notify = true,
				       .stop = &d->reload };
		etcd_status st = { 0 };
		if (tw__etcd_watch(d->watch_client, &req, on_watch, c, &st) == 0 ||
		    st.kind == ETCD_ECANCELED)
			continue;
		tw__cl_note_stream_end(c, &st);
		if (st.kind == ETCD_ECOMPACTED) {
			/* Changes were compacted away: read every group again. */
			pthread_mutex_lock(&d->lock);
			for (unsigned g = 0; g < c->groups; g++)
				d->loaded_token[g] = 0;
			d->watch_rev = 0;
			pthread_mutex_unlock(&d->lock);
			tw__cl_log(
				c, TW_LOG_WARNING,
				"cluster %s: the watch of deferred tasks was compacted: reloading",
				c->member);
			continue;
		}
		pause_ms(d, PAUSE_MS);
	}
	free(end);
	free(gone);
	return NULL;
}
