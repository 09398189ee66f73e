/*
 * cluster/defer_record.c - the text of a deferred task, its claim and its dead letter in
 * etcd (cluster/defer.h has the layout). Text, so that an operator reads them with etcdctl.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

/* Kinds have the member names' alphabet: [A-Za-z0-9._:-]. */
bool tw__cl_kind_ok(const char *kind)
{
	return tw__cl_member_name_ok(kind, TW_CLUSTER_KIND_MAX);
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

/* Splits text at single spaces into at most max fields: how many, or -1 for more, or an
 * empty field. */
static int fields(char *text, char **f, int max)
{
	int n = 0;
	for (char *p = text;;) {
		if (n == max || *p == '\0' || *p == ' ')
			return -1;
		f[n++] = p;
		p = strchr(p, ' ');
		if (!p)
			return n;
		*p++ = '\0';
	}
}

static bool int64_of(const char *s, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	*out = v;
	return errno == 0 && end != s && *end == '\0';
}

static bool unsigned_of(const char *s, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	*out = (unsigned)v;
	return errno == 0 && end != s && *end == '\0' && s[0] != '-' && v <= UINT_MAX;
}

int tw__cl_record_decode(const uint8_t *value, size_t len, struct cl_record *r)
{
	memset(r, 0, sizeof *r);
	const uint8_t *nl =
		value ? memchr(value, '\n', len < CL_RECORD_HEAD_MAX ? len : CL_RECORD_HEAD_MAX) :
			NULL;
	if (!nl)
		return -1;
	char head[CL_RECORD_HEAD_MAX + 1], *f[8];
	size_t hlen = (size_t)(nl - value);
	memcpy(head, value, hlen);
	head[hlen] = '\0';
	int n = fields(head, f, 8);
	int64_t code = 0;
	if ((n != 6 && n != 7) || strcmp(f[0], "tw1") != 0 || !tw__cl_kind_ok(f[1]) ||
	    !int64_of(f[2], &r->due_ms) || !unsigned_of(f[3], &r->attempts) ||
	    !unsigned_of(f[4], &r->max_attempts) || !unsigned_of(f[5], &r->backoff_ms) ||
	    (n == 7 && (!int64_of(f[6], &code) || code < INT_MIN || code > INT_MAX)))
		return -1;
	r->dead = n == 7;
	r->last_code = (int)code;
	memcpy(r->kind, f[1], strlen(f[1]) + 1);
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
	char text[TW_CLUSTER_MEMBER_MAX + 48], *f[4], *end;
	memset(v, 0, sizeof *v);
	if (!value || len == 0 || len >= sizeof text)
		return -1;
	memcpy(text, value, len);
	text[len] = '\0';
	if (fields(text, f, 4) != 3 || !unsigned_of(f[0], &v->attempt) ||
	    !tw__cl_member_name_ok(f[1], TW_CLUSTER_MEMBER_MAX) || f[2][0] == '-')
		return -1;
	errno = 0;
	unsigned long long token = strtoull(f[2], &end, 10);
	if (errno || end == f[2] || *end)
		return -1;
	v->token = token;
	memcpy(v->member, f[1], strlen(f[1]) + 1);
	return 0;
}

int64_t tw__cl_backoff_ms(unsigned backoff_ms, unsigned failed)
{
	int64_t wait = backoff_ms ? backoff_ms : CL_DEFAULT_BACKOFF_MS;
	for (unsigned i = 1; i < failed && wait < TW_CLUSTER_BACKOFF_MAX_MS; i++)
		wait *= 2;
	return wait < TW_CLUSTER_BACKOFF_MAX_MS ? wait : TW_CLUSTER_BACKOFF_MAX_MS;
}
