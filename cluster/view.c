/*
 * cluster/view.c - tw_cluster_view_read: members, owners, jobs and their last claimed fire
 * times, and how many deferred tasks there are, read in one transaction so that they agree
 * with each other.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

#define TW_CLUSTER_API __attribute__((visibility("default")))
#define NRANGES        8

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_job(const void *a, const void *b)
{
	return strcmp(((const tw_cluster_job_view *)a)->name,
		      ((const tw_cluster_job_view *)b)->name);
}

/* The key's bytes after the prefix, as a string (keys and values carry a NUL). */
static const char *tail(const etcd_kv *kv, size_t prefix_len)
{
	return kv->key_len >= prefix_len ? (const char *)kv->key + prefix_len : "";
}

static char *dup_value(const etcd_kv *kv)
{
	char *s = malloc(kv->value_len + 1);
	if (s) {
		if (kv->value_len)
			memcpy(s, kv->value, kv->value_len);
		s[kv->value_len] = '\0';
	}
	return s;
}

TW_CLUSTER_API void tw_cluster_view_free(tw_cluster_view *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->nmembers; i++)
		free((char *)v->members[i]);
	free((void *)v->members);
	for (unsigned g = 0; v->group && g < v->groups; g++)
		free((char *)v->group[g].owner);
	free(v->group);
	for (size_t i = 0; i < v->njobs; i++) {
		free((char *)v->jobs[i].name);
		free((char *)v->jobs[i].schedule);
	}
	free(v->jobs);
	free(v);
}

static int fill(tw_cluster_view *v, const struct tw_cluster *c, const etcd_txn_result *res,
		const size_t *plen)
{
	const etcd_range_result *cfg = &res->results[0].range, *mem = &res->results[1].range,
				*own = &res->results[2].range, *jobs = &res->results[3].range,
				*last = &res->results[4].range;
	v->revision = res->revision;
	if (cfg->count == 1)
		v->groups = (unsigned)strtoul((const char *)cfg->kvs[0].value, NULL, 10);
	if (v->groups > 4096)
		return -TW_CLUSTER_EETCD;
	const char **members = calloc(mem->count + 1, sizeof *members);
	v->members = members;
	v->group = calloc(v->groups + 1, sizeof *v->group);
	v->jobs = calloc(jobs->count + 1, sizeof *v->jobs);
	if (!members || !v->group || !v->jobs)
		return -TW_ENOMEM;
	for (size_t i = 0; i < mem->count; i++)
		if (!(members[v->nmembers++] = strdup(tail(&mem->kvs[i], plen[1]))))
			return -TW_ENOMEM;
	qsort(members, v->nmembers, sizeof *members, cmp_str);
	for (size_t i = 0; i < own->count; i++) {
		unsigned long g = strtoul(tail(&own->kvs[i], plen[2]), NULL, 10);
		if (g >= v->groups)
			continue;
		free((char *)v->group[g].owner);
		if (!(v->group[g].owner = dup_value(&own->kvs[i])))
			return -TW_ENOMEM;
		v->group[g].token = (uint64_t)own->kvs[i].create_revision;
	}
	for (size_t i = 0; i < jobs->count; i++) {
		tw_cluster_job_view *j = &v->jobs[v->njobs++];
		j->last_fire_ms = INT64_MIN;
		if (!(j->name = strdup(tail(&jobs->kvs[i], plen[3]))) ||
		    !(j->schedule = dup_value(&jobs->kvs[i])))
			return -TW_ENOMEM;
		j->group = v->groups ? tw__cl_hash(j->name) % v->groups : 0;
		for (size_t k = 0; k < last->count; k++)
			if (strcmp(tail(&last->kvs[k], plen[4]), j->name) == 0)
				j->last_fire_ms =
					strtoll((const char *)last->kvs[k].value, NULL, 10);
	}
	qsort(v->jobs, v->njobs, sizeof *v->jobs, cmp_job);
	v->tasks = (uint64_t)res->results[5].range.total;
	v->tasks_claimed = (uint64_t)res->results[6].range.total;
	v->dead = (uint64_t)res->results[7].range.total;
	(void)c;
	return TW_OK;
}

TW_CLUSTER_API int tw_cluster_view_read(const char *const *endpoints, const char *prefix,
					unsigned timeout_ms, tw_cluster_view **out)
{
	if (!endpoints || !endpoints[0] || !out)
		return -TW_EINVAL;
	*out = NULL;
	if (!prefix)
		prefix = "/tickwheel/";
	if (strlen(prefix) == 0 || strlen(prefix) > 128)
		return -TW_EINVAL;
	/* A cluster record of its own for the key helpers and the error counts. */
	struct tw_cluster *c = calloc(1, sizeof *c);
	tw_cluster_view *v = calloc(1, sizeof *v);
	if (!c || !v || pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c);
		free(v);
		return -TW_ENOMEM;
	}
	memcpy(c->prefix, prefix, strlen(prefix) + 1); /* at most 128 bytes: checked above */
	c->was_connected = true;
	size_t n = 0;
	while (endpoints[n])
		n++;
	etcd_client *client = NULL;
	etcd_status st = { 0 };
	int rc =
		tw__etcd_client_create(endpoints, n, timeout_ms ? timeout_ms : 2000, &client, &st) ?
			-TW_EINVAL :
			TW_OK;
	/* The last three are counts only: a status line must not read a million tasks. */
	const char *names[NRANGES] = { "config/groups", "members/", "owners/",  "jobs/",
				       "last/",         "defer/t/", "defer/c/", "dead/" };
	char keys[NRANGES][CL_KEY_MAX];
	uint8_t *ends[NRANGES] = { 0 };
	size_t plen[NRANGES], end_len[NRANGES] = { 0 };
	etcd_op ops[NRANGES];
	for (int i = 0; rc == TW_OK && i < NRANGES; i++) {
		int len = tw__cl_key(c, keys[i], "%s", names[i]);
		plen[i] = (size_t)len;
		ops[i] = (etcd_op){ .kind = ETCD_OP_RANGE,
				    .key = keys[i],
				    .key_len = (size_t)len,
				    .count_only = i >= 5 };
		if (i > 0) {
			if (tw__etcd_prefix_end(keys[i], (size_t)len, &ends[i], &end_len[i]) != 0)
				rc = -TW_ENOMEM;
			ops[i].range_end = ends[i];
			ops[i].range_end_len = end_len[i];
		}
	}
	etcd_txn_result res = { 0 };
	if (rc == TW_OK)
		rc = tw__cl_note(c, tw__etcd_txn(client, NULL, 0, ops, NRANGES, NULL, 0, &res, &st),
				 &st);
	if (rc == TW_OK)
		rc = res.count == NRANGES ? fill(v, c, &res, plen) : -TW_CLUSTER_EETCD;
	tw__etcd_txn_result_free(&res);
	for (int i = 0; i < NRANGES; i++)
		free(ends[i]);
	tw__etcd_client_destroy(client);
	pthread_mutex_destroy(&c->lock);
	free(c);
	if (rc != TW_OK) {
		tw_cluster_view_free(v);
		return rc;
	}
	*out = v;
	return TW_OK;
}
