/*
 * perf/cluster/defer_perf.h - what the scenarios of defer_perf (deferred tasks against a
 * 3-member etcd on 127.0.0.1) share: the options, replicas in this process, clocks, figures
 * printed as "name = value" lines, and what etcd and the kernel say of memory.
 */
#ifndef TW_PERF_DEFER_PERF_H
#define TW_PERF_DEFER_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "etcd_harness.h"
#include "tickwheel_cluster.h"

struct dp_opts {
	unsigned seconds;     /* lateness, rate, requests: the measured span */
	unsigned tasks;       /* lateness, capacity, requests: how many tasks */
	unsigned replicas;    /* replicas in this process */
	unsigned threads;     /* rate, capacity: producer threads */
	unsigned group_tasks; /* capacity: the one group of the takeover */
	unsigned payload;     /* capacity: payload bytes per task */
	bool quick;
};

struct dp_replica {
	tw_engine *e;
	tw_cluster *c;
	char member[16];
};

/* Creates an engine (2 executors, no task cap) and joins it under prefix as member; 0, or
 * -1 after saying why. */
int dp_join(struct dp_replica *r, const etcd_harness *h, const char *prefix, const char *member,
	    unsigned groups);
/* Leaves the cluster and destroys the engine; nothing for a replica not joined. */
void dp_leave(struct dp_replica *r);

int64_t dp_mono_ns(void);
int64_t dp_wall_ns(void);
void dp_sleep_ms(unsigned ms);

/* Prints "name = value". */
void dp_fig(const char *name, double value);
/* Sorts v (ns) and prints name_n and name_p50_us, _p99_us, _max_us. */
void dp_pcts(const char *name, int64_t *v, size_t n);

/* The sum of the replicas' counters named by the offset of a uint64_t field. */
uint64_t dp_sum(struct dp_replica *r, unsigned n, size_t field);
#define DP_SUM(r, n, f) dp_sum((r), (n), offsetof(tw_cluster_counters, f))
/* Waits until DP_SUM(defer_pending) is want; the ms it took, or -1 after timeout_ms. */
int64_t dp_wait_pending(struct dp_replica *r, unsigned n, uint64_t want, unsigned timeout_ms);

/* VmRSS of pid (0: this process) in KiB; -1 when unreadable. */
long dp_rss_kib(pid_t pid);
/* etcd's /v3/maintenance/status of one member: dbSize and dbSizeInUse in bytes; 0 or -1. */
int dp_etcd_status(const char *endpoint, int64_t *db_size, int64_t *db_in_use);

int dp_lateness(const struct dp_opts *o, etcd_harness *h);
int dp_rate(const struct dp_opts *o, etcd_harness *h);
int dp_capacity(const struct dp_opts *o, etcd_harness *h);
int dp_requests(const struct dp_opts *o, etcd_harness *h);

#endif
