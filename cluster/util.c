/*
 * cluster/util.c - keys, clocks, the log and the error counts every part of the cluster uses.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cluster.h"

int tw__cl_key(const struct tw_cluster *c, char *buf, const char *fmt, ...)
{
	size_t plen = strlen(c->prefix);
	memcpy(buf, c->prefix, plen);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + plen, CL_KEY_MAX - plen, fmt, ap);
	va_end(ap);
	/* Names and prefixes are bounded so that every key fits; a cut key would be another
	 * key, so treat it as the bug it is. */
	if (n < 0 || (size_t)n >= CL_KEY_MAX - plen)
		return -1;
	return (int)plen + n;
}

/* FNV-1a: stable across builds and platforms, which a group number must be. */
unsigned tw__cl_hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 16777619u;
	}
	return h;
}

bool tw__cl_member_name_ok(const char *s, size_t max)
{
	size_t n = 0;
	if (!s)
		return false;
	for (; s[n]; n++) {
		char ch = s[n];
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == ':' ||
			  ch == '-';
		if (!ok || n >= max)
			return false;
	}
	return n > 0;
}

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	/* Only an invalid clock id fails, and these are constants. */
	(void)clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t tw__cl_mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

int64_t tw__cl_wall_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

int64_t tw__cl_wall_ms(void)
{
	return clock_ns(CLOCK_REALTIME) / 1000000;
}

void tw__cl_log(struct tw_cluster *c, int level, const char *fmt, ...)
{
	if (!c->log)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	(void)vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	c->log(level, line, c->log_arg);
}

/* The kinds tw_cluster_counters.etcd_errors counts, in its order. */
static int error_slot(etcd_error kind)
{
	switch (kind) {
	case ETCD_ECONNECT:
		return 0;
	case ETCD_ETIMEOUT:
		return 1;
	case ETCD_EHTTP:
		return 2;
	case ETCD_EGRPC:
		return 3;
	case ETCD_EPARSE:
		return 4;
	case ETCD_ECOMPACTED:
		return 5;
	case ETCD_ENOLEASE:
		return 6;
	default:
		return -1;
	}
}

int tw__cl_note(struct tw_cluster *c, int rc, const etcd_status *st)
{
	pthread_mutex_lock(&c->lock);
	c->stats.etcd_requests++;
	bool connected = rc == 0 || (st->kind != ETCD_ECONNECT && st->kind != ETCD_ETIMEOUT);
	if (rc != 0) {
		int slot = error_slot(st->kind);
		if (slot >= 0)
			c->stats.etcd_errors[slot]++;
	}
	bool changed = connected != c->was_connected;
	c->was_connected = connected;
	c->stats.connected = connected;
	pthread_mutex_unlock(&c->lock);
	if (changed)
		tw__cl_log(c, connected ? TW_LOG_INFO : TW_LOG_WARNING,
			   connected ? "cluster %s: etcd reachable again" :
				       "cluster %s: etcd unreachable (%s: %s)",
			   c->member, tw__etcd_error_name(st->kind), st->message);
	if (rc == 0)
		return TW_OK;
	switch (st->kind) {
	case ETCD_ECONNECT:
	case ETCD_ETIMEOUT:
		return -TW_CLUSTER_EUNAVAILABLE;
	case ETCD_ENOMEM:
		return -TW_ENOMEM;
	default:
		return -TW_CLUSTER_EETCD;
	}
}

void tw__cl_note_stream_end(struct tw_cluster *c, const etcd_status *st)
{
	int slot = error_slot(st->kind);
	pthread_mutex_lock(&c->lock);
	if (slot >= 0)
		c->stats.etcd_errors[slot]++;
	pthread_mutex_unlock(&c->lock);
}

bool tw__cl_fenced(struct tw_cluster *c, int64_t now_ns)
{
	int64_t deadline = atomic_load(&c->lease_deadline_ns);
	return now_ns >= deadline - (int64_t)c->fence_margin_ms * 1000000;
}

bool tw__cl_fence_check(struct tw_cluster *c, int64_t now_ns)
{
	bool fenced = tw__cl_fenced(c, now_ns);
	pthread_mutex_lock(&c->lock);
	bool changed = fenced != c->was_fenced;
	c->was_fenced = fenced;
	c->stats.fenced = fenced;
	if (changed && fenced)
		c->stats.self_fences++;
	pthread_mutex_unlock(&c->lock);
	if (changed)
		tw__cl_log(
			c, fenced ? TW_LOG_WARNING : TW_LOG_INFO,
			fenced ? "cluster %s: lease not confirmed in time: fenced, no cluster run" :
				 "cluster %s: lease confirmed: running again",
			c->member);
	return fenced;
}

void tw__cl_sleep(struct tw_cluster *c, unsigned ms, bool worker)
{
	struct timespec until;
	(void)clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&c->sleep_lock);
	while (!atomic_load(&c->stop) && !(worker && atomic_load(&c->stop_worker)) &&
	       pthread_cond_timedwait(&c->wake, &c->sleep_lock, &until) == 0)
		;
	pthread_mutex_unlock(&c->sleep_lock);
}

int tw__cl_create(struct tw_cluster *c, etcd_client *client, const char *key, const void *value,
		  size_t value_len, int64_t lease)
{
	size_t klen = strlen(key);
	etcd_compare absent = {
		.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL, .key = key, .key_len = klen
	};
	etcd_op put = { .kind = ETCD_OP_PUT,
			.key = key,
			.key_len = klen,
			.value = value,
			.value_len = value_len,
			.lease = lease };
	etcd_op get = { .kind = ETCD_OP_RANGE, .key = key, .key_len = klen };
	etcd_txn_result res = { 0 };
	etcd_status st = { 0 };
	int rc = tw__cl_note(c, tw__etcd_txn(client, &absent, 1, &put, 1, &get, 1, &res, &st), &st);
	if (rc == TW_OK && res.succeeded) {
		rc = 1;
	} else if (rc == TW_OK) {
		const etcd_range_result *r = res.count == 1 ? &res.results[0].range : NULL;
		rc = r && r->count == 1 && r->kvs[0].value_len == value_len &&
				     (value_len == 0 ||
				      memcmp(r->kvs[0].value, value, value_len) == 0) ?
			     0 :
			     2;
	}
	tw__etcd_txn_result_free(&res);
	return rc;
}
