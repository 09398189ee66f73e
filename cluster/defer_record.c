/*
 * cluster/defer_record.c - the text of a deferred task, its claim and its dead letter in
 * etcd (cluster/defer.h has the layout). Text, so that an operator reads them with etcdctl.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defer.h"

bool tw__cl_kind_ok(const char *kind)
{
	size_t n = 0;
	if (!kind)
		return false;
	for (; kind[n]; n++) {
		char ch = kind[n];
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == ':' ||
			  ch == '-';
		if (!ok || n >= TW_CLUSTER_KIND_MAX)
			return false;
	}
	return n > 0;
}

bool tw__cl_task_key_ok(const char *key)
{
	size_t n = 0;
	if (!key)
		return false;
	for (; key[n]; n++)
		if ((unsigned char)key[n] < 0x21 || (unsigned char)key[n] > 0x7e ||
		    n >= TW_CLUSTER_KEY_MAX)
			return false;
	return n > 0;
}

int tw__cl_record_encode(const struct cl_record *r, uint8_t **out, size_t *len)
{
	char head[CL_RECORD_HEAD_MAX + 1];
	int n = r->dead ? snprintf(head, sizeof head, "tw1 %s %" PRId64 " %u %u %u %d\n", r->kind,
				   r->due_ms, r->attempts, r->max_attempts, r->backoff_ms,
				   r->last_code) :
			  snprintf(head, sizeof head, "tw1 %s %" PRId64 " %u %u %u\n", r->kind,
				   r->due_ms, r->attempts, r->max_attempts, r->backoff_ms);
	if (n < 0 || (size_t)n >= sizeof head)
		return -TW_EINVAL;
	uint8_t *v = malloc((size_t)n + r->payload_len + 1);
	if (!v)
		return -TW_ENOMEM;
	memcpy(v, head, (size_t)n);
	if (r->payload_len)
		memcpy(v + n, r->payload, r->payload_len);
	v[(size_t)n + r->payload_len] = '\0';
	*out = v;
	*len = (size_t)n + r->payload_len;
	return TW_OK;
}

int tw__cl_record_decode(const uint8_t *value, size_t len, struct cl_record *r)
{
	memset(r, 0, sizeof *r);
	const uint8_t *nl = value ? memchr(value, '\n', len < CL_RECORD_HEAD_MAX ? len :
							   CL_RECORD_HEAD_MAX) :
				    NULL;
	if (!nl)
		return -1;
	char head[CL_RECORD_HEAD_MAX + 1];
	size_t hlen = (size_t)(nl - value);
	memcpy(head, value, hlen);
	head[hlen] = '\0';
	char kind[TW_CLUSTER_KIND_MAX + 2];
	int end = 0;
	long long due;
	int got = sscanf(head, "tw1 %64s %lld %u %u %u%n", kind, &due, &r->attempts,
			 &r->max_attempts, &r->backoff_ms, &end);
	if (got != 5 || !tw__cl_kind_ok(kind))
		return -1;
	if (head[end] == ' ') {
		int tail = 0;
		if (sscanf(head + end, " %d%n", &r->last_code, &tail) != 1 || head[end + tail])
			return -1;
		r->dead = true;
	} else if (head[end]) {
		return -1;
	}
	memcpy(r->kind, kind, strlen(kind) + 1);
	r->due_ms = due;
	r->payload = nl + 1;
	r->payload_len = len - hlen - 1;
	return 0;
}

int tw__cl_claim_encode(const struct cl_claim_value *v, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%u %s %" PRIu64, v->attempt, v->member, v->token);
	return n < 0 || (size_t)n >= cap ? -TW_EINVAL : n;
}

int tw__cl_claim_decode(const uint8_t *value, size_t len, struct cl_claim_value *v)
{
	char text[TW_CLUSTER_MEMBER_MAX + 48];
	memset(v, 0, sizeof *v);
	if (!value || len == 0 || len >= sizeof text)
		return -1;
	memcpy(text, value, len);
	text[len] = '\0';
	char member[TW_CLUSTER_MEMBER_MAX + 2];
	int end = 0;
	if (sscanf(text, "%u %64s %" SCNu64 "%n", &v->attempt, member, &v->token, &end) != 3 ||
	    text[end] || strlen(member) > TW_CLUSTER_MEMBER_MAX)
		return -1;
	memcpy(v->member, member, strlen(member) + 1);
	return 0;
}

int64_t tw__cl_backoff_ms(unsigned backoff_ms, unsigned failed)
{
	int64_t wait = backoff_ms ? backoff_ms : CL_DEFAULT_BACKOFF_MS;
	for (unsigned i = 1; i < failed && wait < TW_CLUSTER_BACKOFF_MAX_MS; i++)
		wait *= 2;
	return wait < TW_CLUSTER_BACKOFF_MAX_MS ? wait : TW_CLUSTER_BACKOFF_MAX_MS;
}
