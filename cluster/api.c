/*
 * cluster/api.c - tw_cluster_join, _add, _cancel, _leave, _stats: the calls of
 * api/tickwheel_cluster.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

#define TW_CLUSTER_API __attribute__((visibility("default")))

TW_CLUSTER_API void tw_cluster_config_init_sized(tw_cluster_config *cfg, size_t size)
{
	if (cfg)
		memset(cfg, 0, size);
}

TW_CLUSTER_API const char *tw_cluster_version(void)
{
	return TW_CLUSTER_VERSION_STRING;
}

TW_CLUSTER_API unsigned tw_cluster_group_of(const char *name, unsigned groups)
{
	return name && groups ? tw__cl_hash(name) % groups : 0;
}

TW_CLUSTER_API const char *tw_cluster_strerror(int code)
{
	switch (code < 0 ? -code : code) {
	case TW_CLUSTER_EUNAVAILABLE:
		return "no etcd endpoint answered";
	case TW_CLUSTER_ECONFLICT:
		return "the cluster recorded another definition for that name";
	case TW_CLUSTER_EETCD:
		return "etcd refused the request or gave an unexpected answer";
	default:
		return tw_strerror(code);
	}
}

/* Copies the struct the caller's size allows: fields it lacks stay zero (their defaults);
 * fields it has past ours must be zero. */
static int copy_in(void *dst, size_t ours, const void *src, size_t theirs)
{
	memset(dst, 0, ours);
	memcpy(dst, src, theirs < ours ? theirs : ours);
	for (size_t i = ours; i < theirs; i++)
		if (((const uint8_t *)src)[i])
			return -TW_EINVAL;
	return TW_OK;
}

static bool prefix_ok(const char *p)
{
	size_t n = strlen(p);
	if (n == 0 || n > 128)
		return false;
	for (size_t i = 0; i < n; i++)
		if (p[i] < 0x21 || p[i] > 0x7e)
			return false;
	return true;
}

static void free_cluster(struct tw_cluster *c)
{
	tw__cl_defer_free(c);
	tw__etcd_client_destroy(c->keeper_client);
	tw__etcd_client_destroy(c->worker_client);
	tw__etcd_client_destroy(c->run_client);
	for (size_t i = 0; i < c->nendpoints; i++)
		free(c->endpoints[i]);
	free(c->group);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->run_lock);
	pthread_mutex_destroy(&c->sleep_lock);
	pthread_cond_destroy(&c->released);
	pthread_cond_destroy(&c->claimed);
	pthread_cond_destroy(&c->wake);
	free(c);
}

static int init_sync(struct tw_cluster *c)
{
	pthread_condattr_t ca;
	if (pthread_condattr_init(&ca) != 0)
		return -TW_ENOMEM;
	int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(&c->released, &ca);
	if (rc == 0)
		rc = pthread_cond_init(&c->claimed, &ca);
	if (rc == 0)
		rc = pthread_cond_init(&c->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (rc == 0)
		rc = pthread_mutex_init(&c->lock, NULL);
	if (rc == 0)
		rc = pthread_mutex_init(&c->run_lock, NULL);
	if (rc == 0)
		rc = pthread_mutex_init(&c->sleep_lock, NULL);
	return rc == 0 ? TW_OK : -TW_ENOMEM;
}

/* Records the number of groups at the first join; later joins must agree. */
static int check_groups(struct tw_cluster *c)
{
	char key[CL_KEY_MAX], want[32];
	if (tw__cl_key(c, key, "config/groups") < 0)
		return -TW_EINVAL;
	int wlen = snprintf(want, sizeof want, "%u", c->groups);
	int rc = tw__cl_create(c, c->worker_client, key, want, (size_t)wlen, 0);
	return rc == 2 ? -TW_CLUSTER_ECONFLICT : rc < 0 ? rc : TW_OK;
}

static int check_config(const tw_cluster_config *cfg)
{
	if (!cfg->engine || !cfg->endpoints || !cfg->endpoints[0] ||
	    !tw__cl_member_name_ok(cfg->member, TW_CLUSTER_MEMBER_MAX))
		return -TW_EINVAL;
	size_t n = 0;
	while (cfg->endpoints[n])
		if (++n > TW_CLUSTER_ENDPOINTS_MAX)
			return -TW_EINVAL;
	if (cfg->prefix && !prefix_ok(cfg->prefix))
		return -TW_EINVAL;
	if (cfg->lease_ttl_s && (cfg->lease_ttl_s < 2 || cfg->lease_ttl_s > 3600))
		return -TW_EINVAL;
	if (cfg->groups > 4096)
		return -TW_EINVAL;
	unsigned ttl_ms = (cfg->lease_ttl_s ? cfg->lease_ttl_s : 10) * 1000;
	unsigned margin = cfg->fence_margin_ms ? cfg->fence_margin_ms : 500;
	unsigned ahead = cfg->claim_ahead_ms ? cfg->claim_ahead_ms : 1000;
	if (margin > ttl_ms / 2 || ahead > ttl_ms - margin || ahead > 30000)
		return -TW_EINVAL;
	return TW_OK;
}

static int start_threads(struct tw_cluster *c)
{
	if (pthread_create(&c->keeper, NULL, tw__cl_keeper_main, c) != 0)
		return -TW_ERESOURCE;
	c->keeper_started = true;
	if (pthread_create(&c->worker, NULL, tw__cl_worker_main, c) != 0)
		return -TW_ERESOURCE;
	c->worker_started = true;
	return TW_OK;
}

static void stop_threads(struct tw_cluster *c)
{
	atomic_store(&c->stop, true);
	pthread_mutex_lock(&c->sleep_lock);
	pthread_cond_broadcast(&c->wake);
	pthread_mutex_unlock(&c->sleep_lock);
	if (c->keeper_started)
		pthread_join(c->keeper, NULL);
	if (c->worker_started)
		pthread_join(c->worker, NULL);
	c->keeper_started = c->worker_started = false;
}

/*
 * What makes a replica a member, the caller holding c->attaching: takes the lease and records
 * the member (waiting out an earlier run's key), then starts the cluster's threads and the
 * deferred tasks' (the cluster's first: the worker tells the defer part of its groups). On
 * failure nothing of it is left, and attaching is let go, so that the attach may be tried
 * again.
 */
static int attach(struct tw_cluster *c)
{
	int rc = tw__cl_lease_take(c, c->worker_client);
	/* Logged before the threads start: the worker's client is the worker's from then on. */
	if (rc == TW_OK)
		tw__cl_log(c, TW_LOG_INFO,
			   "cluster %s: attached at %s (lease %" PRIx64 ", ttl %u s)", c->member,
			   tw__etcd_client_endpoint(c->worker_client), (uint64_t)c->lease_id,
			   c->ttl_s);
	if (rc == TW_OK &&
	    ((rc = start_threads(c)) != TW_OK || (rc = tw__cl_defer_start(c)) != TW_OK)) {
		stop_threads(c);
		tw__cl_defer_stop(c);
		atomic_store(&c->stop, false);
		etcd_status st = { 0 };
		(void)tw__etcd_lease_revoke(c->worker_client, c->lease_id, &st);
		pthread_mutex_lock(&c->lock);
		c->lease_id = 0;
		pthread_mutex_unlock(&c->lock);
		atomic_store(&c->lease_deadline_ns, 0);
	}
	if (rc == TW_OK)
		atomic_store(&c->attached, true);
	else
		atomic_store(&c->attaching, false);
	return rc;
}

TW_CLUSTER_API int tw_cluster_join_sized(const tw_cluster_config *user, size_t size,
					 tw_cluster **out)
{
	if (!user || !out)
		return -TW_EINVAL;
	*out = NULL;
	tw_cluster_config cfg;
	int rc = copy_in(&cfg, sizeof cfg, user, size);
	if (rc != TW_OK || (rc = check_config(&cfg)) != TW_OK)
		return rc;
	struct tw_cluster *c = calloc(1, sizeof *c);
	if (!c)
		return -TW_ENOMEM;
	if (init_sync(c) != TW_OK) {
		free(c);
		return -TW_ENOMEM;
	}
	c->engine = cfg.engine;
	(void)snprintf(c->prefix, sizeof c->prefix, "%s", cfg.prefix ? cfg.prefix : "/tickwheel/");
	(void)snprintf(c->member, sizeof c->member, "%s", cfg.member);
	c->ttl_s = cfg.lease_ttl_s ? cfg.lease_ttl_s : 10;
	c->groups = cfg.groups ? cfg.groups : 64;
	c->timeout_ms = cfg.request_timeout_ms ? cfg.request_timeout_ms : 2000;
	c->claim_ahead_ms = cfg.claim_ahead_ms ? cfg.claim_ahead_ms : 1000;
	c->fence_margin_ms = cfg.fence_margin_ms ? cfg.fence_margin_ms : 500;
	c->log = cfg.log;
	c->log_arg = cfg.log_arg;
	c->was_connected = true;
	c->group = calloc(c->groups, sizeof *c->group);
	rc = c->group ? TW_OK : -TW_ENOMEM;
	for (size_t i = 0; rc == TW_OK && cfg.endpoints[i]; i++)
		if (!(c->endpoints[c->nendpoints++] = strdup(cfg.endpoints[i])))
			rc = -TW_ENOMEM;
	etcd_status st = { 0 };
	etcd_client **clients[3] = { &c->keeper_client, &c->worker_client, &c->run_client };
	for (int i = 0; rc == TW_OK && i < 3; i++)
		if (tw__etcd_client_create((const char *const *)c->endpoints, c->nendpoints,
					   c->timeout_ms, clients[i], &st) != 0)
			rc = st.kind == ETCD_ENOMEM ? -TW_ENOMEM : -TW_EINVAL;
	if (rc == TW_OK)
		rc = tw__cl_defer_init(c);
	if (rc == TW_OK)
		rc = check_groups(c);
	if (rc == TW_OK && !cfg.attach_later) {
		atomic_store(&c->attaching, true);
		rc = attach(c);
	}
	if (rc != TW_OK) {
		free_cluster(c);
		return rc;
	}
	if (cfg.attach_later)
		tw__cl_log(c, TW_LOG_INFO, "cluster %s: joined %s, not attached yet", c->member,
			   tw__etcd_client_endpoint(c->worker_client));
	*out = c;
	return TW_OK;
}

TW_CLUSTER_API int tw_cluster_attach(tw_cluster *c)
{
	if (!c)
		return -TW_EINVAL;
	bool no = false;
	if (atomic_load(&c->attached) || !atomic_compare_exchange_strong(&c->attaching, &no, true))
		return -TW_ESTATE;
	return attach(c);
}

static int check_spec(const tw_cluster_job_spec *s)
{
	if (!s->callback || !tw__cl_member_name_ok(s->name, TW_CLUSTER_JOB_NAME_MAX) ||
	    (s->period_ms == 0) == (s->cron == NULL) ||
	    (s->misfire != TW_MISFIRE_RUN_ONCE && s->misfire != TW_MISFIRE_SKIP))
		return -TW_EINVAL;
	if (s->period_ms > (UINT64_C(1) << 40))
		return -TW_ERANGE;
	if (s->period_ms && s->phase_ms >= s->period_ms)
		return -TW_EINVAL;
	if (s->cron && strstr(s->cron, "@every"))
		return -TW_EINVAL;
	return TW_OK;
}

/* Records the job's definition if the cluster has none, else compares. */
static int record_job(struct tw_cluster *c, const struct cl_job *j)
{
	char key[CL_KEY_MAX], text[1024];
	int tlen = tw__cl_schedule_text(j, text, sizeof text);
	if (tw__cl_key(c, key, "jobs/%s", j->name) < 0 || tlen < 0)
		return -TW_EINVAL;
	pthread_mutex_lock(&c->run_lock);
	int rc = tw__cl_create(c, c->run_client, key, text, (size_t)tlen, 0);
	pthread_mutex_unlock(&c->run_lock);
	return rc == 2 ? -TW_CLUSTER_ECONFLICT : rc < 0 ? rc : TW_OK;
}

static struct cl_job *find_job(struct tw_cluster *c, const char *name)
{
	for (struct cl_job *j = c->jobs; j; j = j->next)
		if (strcmp(j->name, name) == 0)
			return j;
	return NULL;
}

static void free_job(struct cl_job *j)
{
	tw_cron_free(j->cron);
	free(j->cron_text);
	free(j);
}

TW_CLUSTER_API int tw_cluster_add_sized(tw_cluster *c, const tw_cluster_job_spec *user, size_t size)
{
	if (!c || !user)
		return -TW_EINVAL;
	tw_cluster_job_spec s;
	int rc = copy_in(&s, sizeof s, user, size);
	if (rc != TW_OK || (rc = check_spec(&s)) != TW_OK)
		return rc;
	if (atomic_load(&c->leaving))
		return -TW_ESHUTDOWN;
	struct cl_job *j = calloc(1, sizeof *j);
	if (!j)
		return -TW_ENOMEM;
	j->cluster = c;
	(void)snprintf(j->name, sizeof j->name, "%s", s.name);
	j->group = tw__cl_hash(j->name) % c->groups;
	j->period_ms = s.period_ms;
	j->phase_ms = s.phase_ms;
	j->callback = s.callback;
	j->arg = s.arg;
	j->release = s.release;
	j->misfire = s.misfire;
	if (s.cron) {
		if (!(j->cron_text = strdup(s.cron))) {
			free(j);
			return -TW_ENOMEM;
		}
		rc = tw_cron_parse(s.cron, &j->cron, NULL);
		int64_t first;
		if (rc == TW_OK)
			rc = tw_cron_next(j->cron, tw__cl_wall_ns(), &first, 1);
		if (rc != TW_OK) {
			free_job(j);
			return rc;
		}
	}
	if ((rc = record_job(c, j)) != TW_OK) {
		free_job(j);
		return rc;
	}
	char local[TW_NAME_MAX + 1 + 8];
	(void)snprintf(local, sizeof local, "cluster:%s", j->name);
	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->leaving)) {
		pthread_mutex_unlock(&c->lock);
		free_job(j);
		return -TW_ESHUTDOWN;
	}
	if (find_job(c, j->name)) {
		pthread_mutex_unlock(&c->lock);
		free_job(j);
		return -TW_EEXIST;
	}
	int64_t now = tw__cl_wall_ms();
	j->claimed_upto_ms = now;
	j->pending_fire_ms = tw__cl_next_fire(j, now);
	int64_t wall = tw__cl_wall_ns(), mono = tw__cl_mono_ns();
	/* A calendar whose last fire time passed since the check above: no due at all. */
	bool none = j->pending_fire_ms == INT64_MAX;
	int64_t ahead = none ? 0 : j->pending_fire_ms * 1000000 - wall;
	tw_task_spec task = { .callback = tw__cl_run,
			      .arg = j,
			      .release = tw__cl_job_release,
			      .name = local,
			      .delay_ms = none ? TW_NEVER : 0,
			      .first_due_ns =
				      none ? 0 : (uint64_t)(mono + (ahead > 0 ? ahead : 0)) };
	rc = tw_add(c->engine, &task, &j->task);
	if (rc == TW_OK) {
		j->next = c->jobs;
		c->jobs = j;
		c->live_jobs++;
		c->stats.jobs++;
	}
	pthread_mutex_unlock(&c->lock);
	if (rc != TW_OK)
		free_job(j);
	return rc;
}

TW_CLUSTER_API int tw_cluster_cancel(tw_cluster *c, const char *name)
{
	if (!c || !name)
		return -TW_EINVAL;
	pthread_mutex_lock(&c->lock);
	struct cl_job *j = find_job(c, name);
	if (!j || j->cancelled) {
		pthread_mutex_unlock(&c->lock);
		return -TW_ENOTFOUND;
	}
	j->cancelled = true;
	/* Out of the list now, so the name can be added again; the record lives on until
	 * the engine releases the task. */
	for (struct cl_job **p = &c->jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
	c->stats.jobs--;
	tw_id task = j->task;
	pthread_mutex_unlock(&c->lock);
	(void)tw_cancel(c->engine, task);
	return TW_OK;
}

TW_CLUSTER_API void tw_cluster_leave(tw_cluster *c)
{
	if (!c)
		return;
	/* The worker first: no group is taken or claimed from now on. The keeper goes on
	 * renewing the lease until the groups are handed back, however long the last runs
	 * take. */
	atomic_store(&c->stop_worker, true);
	pthread_mutex_lock(&c->sleep_lock);
	pthread_cond_broadcast(&c->wake);
	pthread_mutex_unlock(&c->sleep_lock);
	if (c->worker_started)
		pthread_join(c->worker, NULL);
	c->worker_started = false;
	/* With the groups still ours: deferred tasks' handlers finish, their results are
	 * written, and the claims not yet run go back. */
	tw__cl_defer_drain(c);
	pthread_mutex_lock(&c->lock);
	atomic_store(&c->leaving, true);
	/* Each job's name, group and latest run, recorded as the engine releases it. */
	c->left_cap = c->live_jobs;
	c->left = calloc(c->left_cap ? c->left_cap : 1, sizeof *c->left);
	tw_id tasks[256];
	for (;;) {
		size_t n = 0;
		for (struct cl_job *j = c->jobs; j && n < 256; j = j->next)
			if (!j->cancelled) {
				j->cancelled = true;
				tasks[n++] = j->task;
			}
		if (n == 0)
			break;
		pthread_mutex_unlock(&c->lock);
		for (size_t i = 0; i < n; i++)
			(void)tw_cancel(c->engine, tasks[i]);
		pthread_mutex_lock(&c->lock);
	}
	while (c->live_jobs > 0)
		pthread_cond_wait(&c->released, &c->lock);
	unsigned *owned = calloc(c->groups, sizeof *owned);
	size_t nowned = 0;
	for (unsigned g = 0; owned && g < c->groups; g++)
		if (c->group[g].token)
			owned[nowned++] = g;
	struct cl_job_name *left = c->left;
	size_t nleft = c->nleft;
	c->left = NULL;
	pthread_mutex_unlock(&c->lock);
	/* No run of ours starts any more: hand the groups back with the claims of fire times
	 * after now (and after each job's latest run), so the takers run those, and so that they
	 * know no owner died; then revoke the lease, which takes the member key with it. When
	 * etcd is not reachable, all of it expires with the lease. */
	int rc = owned ? tw__cl_hand_back(c, c->worker_client, owned, nowned, left, nleft) : TW_OK;
	free(owned);
	free(left);
	stop_threads(c);
	pthread_mutex_lock(&c->lock);
	int64_t lease = c->lease_id;
	pthread_mutex_unlock(&c->lock);
	if (rc != -TW_CLUSTER_EUNAVAILABLE && lease) {
		etcd_status st = { 0 };
		(void)tw__etcd_lease_revoke(c->worker_client, lease, &st);
	}
	tw__cl_log(c, TW_LOG_INFO, "cluster %s: left", c->member);
	free_cluster(c);
}

TW_CLUSTER_API int tw_cluster_stats_sized(tw_cluster *c, tw_cluster_counters *out, size_t size)
{
	if (!c || !out)
		return -TW_EINVAL;
	tw_cluster_counters s;
	pthread_mutex_lock(&c->lock);
	s = c->stats;
	pthread_mutex_unlock(&c->lock);
	struct cl_defer *d = c->defer;
	pthread_mutex_lock(&d->lock);
	s.defers = d->stats.defers;
	s.defer_pending = d->count;
	s.defer_inflight = d->stats.inflight;
	s.defer_unhandled = d->stats.unhandled;
	s.defer_runs = d->stats.runs;
	s.defer_failures = d->stats.failures;
	s.defer_retries = d->stats.retries;
	s.defer_dead = d->stats.dead;
	s.defer_reclaims = d->stats.reclaims;
	s.defer_claim_requests = d->stats.claim_requests;
	s.defer_loaded = d->stats.loaded;
	s.defer_load_ms_last = d->stats.load_ms_last;
	s.defer_overdue = d->stats.overdue;
	pthread_mutex_unlock(&d->lock);
	s.fenced = tw__cl_fenced(c, tw__cl_mono_ns());
	memset(out, 0, size);
	memcpy(out, &s, size < sizeof s ? size : sizeof s);
	return TW_OK;
}
