/*
 * cluster/etcd_cluster.c - calls about the cluster rather than its keys: a member's status,
 * the member list, compaction.
 */
#include "etcd_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* POST body (consumed) to path; *answer for the caller to read and decref. */
static int call(etcd_client *c, const char *path, json_t *body, json_t **answer, etcd_status *st)
{
	if (!body)
		return tw__etcd_fail(st, ETCD_ENOMEM, "building a request");
	int rc = tw__etcd_call(c, path, body, answer, st);
	json_decref(body);
	return rc;
}

int tw__etcd_compact(etcd_client *c, int64_t revision, bool physical, etcd_status *st)
{
	json_t *answer = NULL;
	tw__etcd_status_ok(st);
	json_t *body = json_object();
	if (body && (tw__etcd_set_int64(body, "revision", revision, st) ||
		     (physical && tw__etcd_set(body, "physical", json_true(), st)))) {
		json_decref(body);
		return -1;
	}
	if (call(c, "/v3/kv/compaction", body, &answer, st))
		return -1;
	json_decref(answer);
	return 0;
}

int tw__etcd_status(etcd_client *c, uint64_t *member_id, uint64_t *leader_id, int64_t *revision,
		    etcd_status *st)
{
	json_t *answer = NULL;
	const json_t *header;
	tw__etcd_status_ok(st);
	if (call(c, "/v3/maintenance/status", json_object(), &answer, st))
		return -1;
	uint64_t member = 0, leader = 0;
	int64_t rev = 0;
	int rc = tw__etcd_get_object(answer, "header", &header, st);
	if (!rc && header)
		rc = tw__etcd_get_uint64(header, "member_id", &member, st);
	if (!rc)
		rc = tw__etcd_get_uint64(answer, "leader", &leader, st);
	if (!rc)
		rc = tw__etcd_get_header_revision(answer, &rev, st);
	json_decref(answer);
	if (rc)
		return -1;
	if (member_id)
		*member_id = member;
	if (leader_id)
		*leader_id = leader;
	if (revision)
		*revision = rev;
	return 0;
}

void tw__etcd_member_list_free(etcd_member *members, size_t n)
{
	for (size_t i = 0; members && i < n; i++) {
		for (size_t j = 0; j < members[i].nclient; j++)
			free(members[i].client_urls[j]);
		free(members[i].client_urls);
	}
	free(members);
}

static int decode_member(const json_t *obj, etcd_member *m, etcd_status *st)
{
	if (!json_is_object(obj))
		return tw__etcd_fail(st, ETCD_EPARSE, "a member is not an object");
	const json_t *name = json_object_get(obj, "name"),
		     *urls = json_object_get(obj, "clientURLs");
	if (tw__etcd_get_uint64(obj, "ID", &m->id, st) ||
	    tw__etcd_get_bool(obj, "isLearner", &m->is_learner, st))
		return -1;
	/* A member added but not started yet has neither a name nor client URLs. */
	if (name && !json_is_string(name))
		return tw__etcd_fail(st, ETCD_EPARSE, "a member's name is not a string");
	(void)snprintf(m->name, sizeof(m->name), "%s", name ? json_string_value(name) : "");
	if (!urls || json_is_null(urls))
		return 0;
	if (!json_is_array(urls))
		return tw__etcd_fail(st, ETCD_EPARSE, "a member's clientURLs is not an array");
	size_t n = json_array_size(urls);
	if (n && !(m->client_urls = calloc(n, sizeof(*m->client_urls))))
		return tw__etcd_fail(st, ETCD_ENOMEM, "decoding the member list");
	for (size_t i = 0; i < n; i++) {
		const json_t *u = json_array_get(urls, i);
		if (!json_is_string(u))
			return tw__etcd_fail(st, ETCD_EPARSE, "a client URL is not a string");
		if (!(m->client_urls[i] = strdup(json_string_value(u))))
			return tw__etcd_fail(st, ETCD_ENOMEM, "decoding the member list");
		m->nclient = i + 1;
	}
	return 0;
}

int tw__etcd_member_list(etcd_client *c, etcd_member **members, size_t *n, etcd_status *st)
{
	json_t *answer = NULL;
	*members = NULL;
	*n = 0;
	tw__etcd_status_ok(st);
	if (call(c, "/v3/cluster/member/list", json_object(), &answer, st))
		return -1;
	const json_t *list = json_object_get(answer, "members");
	size_t count = json_array_size(list);
	etcd_member *out = NULL;
	int rc = 0;
	if (!json_is_array(list))
		rc = tw__etcd_fail(st, ETCD_EPARSE, "a member list without members");
	else if (!(out = calloc(count ? count : 1, sizeof(*out))))
		rc = tw__etcd_fail(st, ETCD_ENOMEM, "decoding the member list");
	for (size_t i = 0; !rc && i < count; i++)
		rc = decode_member(json_array_get(list, i), &out[i], st);
	json_decref(answer);
	if (rc) {
		tw__etcd_member_list_free(out, count);
		return -1;
	}
	*members = out;
	*n = count;
	return 0;
}
