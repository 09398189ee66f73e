/*
 * cluster/metrics.c - tw_cluster_metrics_write: the replica's counters in Prometheus's text
 * exposition format 0.0.4, with the options and rules of the core's tw_metrics_write.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

#define TW_CLUSTER_API __attribute__((visibility("default")))

struct text {
	char *buf;
	size_t len, cap;
	bool failed;
};

static void add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct text *t, const char *fmt, ...)
{
	for (int round = 0; round < 2 && !t->failed; round++) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->failed = true;
			return;
		}
		if ((size_t)n < t->cap - t->len) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = (t->cap + (size_t)n + 256) * 2;
		char *b = realloc(t->buf, cap);
		if (!b) {
			t->failed = true;
			return;
		}
		t->buf = b;
		t->cap = cap;
	}
}

static bool name_ok(const char *s, bool colons, bool empty_ok)
{
	if (!*s)
		return empty_ok;
	for (size_t i = 0; s[i]; i++) {
		char ch = s[i];
		bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
			     (colons && ch == ':');
		if (!alpha && !(i > 0 && ch >= '0' && ch <= '9'))
			return false;
	}
	return true;
}

/* The caller's labels as `name="value",` pieces, escaped; NULL on a bad label. */
static char *labels_text(const char *const *labels)
{
	struct text t = { 0 };
	add(&t, "%s", "");
	for (size_t i = 0; labels && labels[i]; i += 2) {
		const char *name = labels[i], *value = labels[i + 1];
		if (!value || !name_ok(name, false, false) || strncmp(name, "__", 2) == 0 ||
		    !strcmp(name, "le") || !strcmp(name, "kind"))
			goto bad;
		for (size_t k = 0; k < i; k += 2)
			if (!strcmp(labels[k], name))
				goto bad;
		add(&t, "%s=\"", name);
		for (const char *p = value; *p; p++)
			add(&t, "%s",
			    *p == '\\' ? "\\\\" :
			    *p == '"'  ? "\\\"" :
			    *p == '\n' ? "\\n" :
					 (char[2]){ *p, 0 });
		add(&t, "\",");
	}
	if (!t.failed)
		return t.buf;
bad:
	free(t.buf);
	return NULL;
}

static void family(struct text *t, const char *prefix, const char *name, const char *type,
		   const char *help)
{
	add(t, "# HELP %s%s %s\n# TYPE %s%s %s\n", prefix, name, help, prefix, name, type);
}

/* name{labels,extra} value: the caller's labels first, the trailing comma dropped. */
static void sample(struct text *t, const char *prefix, const char *name, const char *labels,
		   const char *extra, const char *value)
{
	size_t ll = strlen(labels);
	if (!ll && !extra)
		add(t, "%s%s %s\n", prefix, name, value);
	else if (!extra)
		add(t, "%s%s{%.*s} %s\n", prefix, name, (int)ll - 1, labels, value);
	else
		add(t, "%s%s{%s%s} %s\n", prefix, name, labels, extra, value);
}

static void one(struct text *t, const char *prefix, const char *labels, const char *name,
		const char *type, const char *help, uint64_t v)
{
	char num[24];
	(void)snprintf(num, sizeof num, "%" PRIu64, v);
	family(t, prefix, name, type, help);
	sample(t, prefix, name, labels, NULL, num);
}

static void put_all(struct text *t, const char *p, const char *l, const tw_cluster_counters *s)
{
	one(t, p, l, "members", "gauge", "Live members this replica saw last.", s->members);
	one(t, p, l, "groups_owned", "gauge", "Groups this replica owns.", s->groups_owned);
	one(t, p, l, "jobs", "gauge", "Cluster jobs defined on this replica.", s->jobs);
	one(t, p, l, "fenced", "gauge", "1 while the replica fences itself.", s->fenced);
	one(t, p, l, "connected", "gauge", "1 when the last etcd request was answered.",
	    s->connected);
	one(t, p, l, "runs_total", "counter", "Cluster runs started here.", s->runs);
	one(t, p, l, "claims_total", "counter", "Fire times claimed here.", s->claims);
	one(t, p, l, "claims_ahead_total", "counter", "Fire times claimed before their due.",
	    s->claims_ahead);
	one(t, p, l, "claims_lost_total", "counter",
	    "Claims refused: another owner or claim, or no longer the owner.", s->claims_lost);
	one(t, p, l, "not_owner_total", "counter",
	    "Fire times that came due here while another replica owned the group.", s->not_owner);
	one(t, p, l, "missed_total", "counter", "Fire times missed at takeovers and self-fences.",
	    s->missed);
	one(t, p, l, "takeovers_total", "counter", "Groups taken from an owner that was gone.",
	    s->takeovers);
	one(t, p, l, "acquisitions_total", "counter", "Groups taken, takeovers included.",
	    s->acquisitions);
	one(t, p, l, "releases_total", "counter", "Groups handed back.", s->releases);
	one(t, p, l, "self_fences_total", "counter",
	    "Times the lease could not be confirmed in time.", s->self_fences);
	one(t, p, l, "leases_lost_total", "counter", "Leases found expired.", s->leases_lost);
	one(t, p, l, "etcd_requests_total", "counter", "Requests sent to etcd.", s->etcd_requests);
	one(t, p, l, "failures_total", "counter", "Cluster runs whose callback returned nonzero.",
	    s->failures);
	one(t, p, l, "defers_total", "counter", "Tasks deferred by this replica.", s->defers);
	one(t, p, l, "defer_pending", "gauge", "Deferred tasks of the owned groups held here.",
	    s->defer_pending);
	one(t, p, l, "defer_inflight", "gauge", "Deferred tasks' handlers running here.",
	    s->defer_inflight);
	one(t, p, l, "defer_unhandled", "gauge",
	    "Deferred tasks held here whose kind has no handler here.", s->defer_unhandled);
	one(t, p, l, "defer_runs_total", "counter", "Deferred tasks' handlers started here.",
	    s->defer_runs);
	one(t, p, l, "defer_failures_total", "counter",
	    "Deferred tasks' handlers that returned nonzero.", s->defer_failures);
	one(t, p, l, "defer_retries_total", "counter",
	    "Failed deferred tasks put back for another attempt.", s->defer_retries);
	one(t, p, l, "defer_dead_total", "counter", "Deferred tasks moved to the dead letters.",
	    s->defer_dead);
	one(t, p, l, "defer_reclaims_total", "counter",
	    "Deferred tasks claimed here that a lost owner had claimed.", s->defer_reclaims);
	one(t, p, l, "defer_claim_requests_total", "counter",
	    "Claim transactions of deferred tasks.", s->defer_claim_requests);
	one(t, p, l, "defer_loaded_total", "counter", "Deferred tasks read at group loads.",
	    s->defer_loaded);
	one(t, p, l, "defer_overdue_total", "counter",
	    "Deferred tasks already due when a group load read them.", s->defer_overdue);
	static const char *const kinds[] = { "connect", "timeout",   "http", "grpc",
					     "parse",   "compacted", "lease" };
	family(t, p, "etcd_errors_total", "counter", "Failed etcd requests, by kind.");
	for (int i = 0; i < 7; i++) {
		char extra[32], num[24];
		(void)snprintf(extra, sizeof extra, "kind=\"%s\"", kinds[i]);
		(void)snprintf(num, sizeof num, "%" PRIu64, s->etcd_errors[i]);
		sample(t, p, "etcd_errors_total", l, extra, num);
	}
	/* Bucket i counts latencies below 2^i us (the last: the rest), cumulated here. */
	family(t, p, "claim_latency_seconds", "histogram",
	       "Claim transactions: request sent to answer.");
	uint64_t cum = 0;
	for (int i = 0; i < 19; i++) {
		char extra[40], num[24];
		cum += s->claim_latency_us[i];
		(void)snprintf(extra, sizeof extra, "le=\"%.6f\"", (double)(1u << i) / 1e6);
		(void)snprintf(num, sizeof num, "%" PRIu64, cum);
		sample(t, p, "claim_latency_seconds_bucket", l, extra, num);
	}
	char num[32];
	cum += s->claim_latency_us[19];
	(void)snprintf(num, sizeof num, "%" PRIu64, cum);
	sample(t, p, "claim_latency_seconds_bucket", l, "le=\"+Inf\"", num);
	(void)snprintf(num, sizeof num, "%.9f", (double)s->claim_latency_sum_ns / 1e9);
	sample(t, p, "claim_latency_seconds_sum", l, NULL, num);
	(void)snprintf(num, sizeof num, "%" PRIu64, cum);
	sample(t, p, "claim_latency_seconds_count", l, NULL, num);
}

TW_CLUSTER_API int tw_cluster_metrics_write_sized(tw_cluster *c, const tw_metrics_options *user,
						  size_t size, tw_metrics_writer write, void *ctx)
{
	if (!c || !write || (user && size == 0))
		return -TW_EINVAL;
	tw_metrics_options opt = { 0 };
	if (user) {
		memcpy(&opt, user, size < sizeof opt ? size : sizeof opt);
		for (size_t i = sizeof opt; i < size; i++)
			if (((const uint8_t *)user)[i])
				return -TW_EINVAL;
	}
	const char *prefix = opt.prefix ? opt.prefix : "tickwheel_cluster_";
	if (!name_ok(prefix, true, true))
		return -TW_EINVAL;
	char *labels = labels_text(opt.labels);
	if (!labels)
		return -TW_EINVAL;
	tw_cluster_counters s;
	tw_cluster_stats(c, &s);
	struct text t = { 0 };
	put_all(&t, prefix, labels, &s);
	free(labels);
	int rc = t.failed ? -TW_ENOMEM : TW_OK;
	/* Pieces of at most 4 KiB, as the core's writer gets them. */
	for (size_t at = 0; rc == TW_OK && at < t.len; at += 4096) {
		size_t n = t.len - at < 4096 ? t.len - at : 4096;
		if (write(ctx, t.buf + at, n) != 0)
			rc = -TW_EWRITE;
	}
	free(t.buf);
	return rc;
}
