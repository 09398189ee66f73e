/*
 * cluster/cluster.h - the replica's record and what its files share.
 *
 * Threads: the keeper (cluster/lease.c) renews the lease and owns lease_deadline_ns; the
 * worker (cluster/balance.c) reads members and owners, takes and hands back groups, and
 * claims fire times ahead; the engine's executors run the jobs (cluster/run.c) and claim a
 * fire time at its due when the worker did not. Each thread has an etcd client of its own;
 * executors and tw_cluster_add share run_client under run_lock. Everything else the threads
 * share is under lock, which is never held across a request to etcd.
 */
#ifndef TW_CLUSTER_CLUSTER_H
#define TW_CLUSTER_CLUSTER_H

#include <pthread.h>
#include <stdatomic.h>

#include "defer.h"
#include "etcd.h"
#include "tickwheel_cluster.h"

#define CL_KEY_MAX 512
/* Fire times a job may hold claimed ahead; more are claimed as these run. */
#define CL_CLAIM_RING 64
/* Claims of a job older than this (and than 10 periods) are deleted by later claims. */
#define CL_CLAIM_RETENTION_MS 60000
/* The worker's round: members and owners read, groups taken or handed back, claims made. */
#define CL_ROUND_MS 100
/* What a missed-fire count walks at most (a calendar job far behind). */
#define CL_COUNT_MAX 100000

struct cl_job {
	struct tw_cluster *cluster;
	struct cl_job *next;
	char name[TW_NAME_MAX + 1];
	unsigned group;
	uint64_t period_ms, phase_ms;
	tw_cron *cron;
	char *cron_text;
	tw_cluster_callback callback;
	void *arg;
	void (*release)(void *arg);
	unsigned misfire;
	tw_id task;
	bool cancelled;
	/* Under the cluster's lock: */
	int64_t pending_fire_ms; /* the fire time the local task's next run stands for */
	int64_t claimed_upto_ms; /* fire times up to it were claimed (or given up) */
	int64_t claimed[CL_CLAIM_RING];
	uint64_t claimed_token[CL_CLAIM_RING];
	unsigned nclaimed;
	uint64_t missed;          /* reported by the next run */
	int64_t claiming_upto_ms; /* the worker's claim of fire times up to it is under way */
	int64_t catchup_fire_ms;  /* a takeover's run for a missed fire time, claimed; 0: none */
	int64_t last_run_fire_ms; /* the fire time of the latest run started here; 0: none */
	unsigned refs;            /* the worker's hold across a request; freed at 0 once released */
	bool released;
};

struct cl_group {
	uint64_t token; /* the owner key's create revision; 0: not owned */
	bool draining;  /* over our share: no more claims, handed back once they ran */
};

struct tw_cluster {
	tw_engine *engine;
	char *endpoints[TW_CLUSTER_ENDPOINTS_MAX];
	size_t nendpoints;
	char prefix[129];
	char member[TW_CLUSTER_MEMBER_MAX + 1];
	unsigned ttl_s, groups, timeout_ms, claim_ahead_ms, fence_margin_ms;
	void (*log)(int level, const char *message, void *log_arg);
	void *log_arg;

	etcd_client *keeper_client, *worker_client, *run_client;
	pthread_mutex_t run_lock; /* run_client */

	pthread_mutex_t lock;
	pthread_cond_t released; /* a job was released (leave waits for all) */
	pthread_cond_t claimed;  /* the worker's claim request answered */
	struct cl_job *jobs;
	unsigned live_jobs; /* added and not yet released */
	struct cl_group *group;
	int64_t lease_id;
	bool was_fenced, was_connected;
	tw_cluster_counters stats;

	atomic_int_least64_t lease_deadline_ns; /* CLOCK_MONOTONIC; past it minus the margin:
						 * fenced */
	/* stop ends both threads; stop_worker the worker alone (leave keeps the lease renewed
	 * until it has handed its groups back). */
	atomic_bool stop, stop_worker, leaving;
	/* While leaving: the jobs as they were released, for the hand-back. */
	struct cl_job_name *left;
	size_t nleft, left_cap;
	pthread_t keeper, worker;
	bool keeper_started, worker_started;
	/* A member (lease, member key, threads): set by the join, or by tw_cluster_attach for a
	 * replica that joined with attach_later; attaching is held by the attach under way. */
	atomic_bool attached, attaching;
	/* Sleeps of the threads, cut short by leave. */
	pthread_mutex_t sleep_lock;
	pthread_cond_t wake;
	struct cl_defer *defer; /* deferred tasks (cluster/defer.h) */
};

/* keys.c */
int tw__cl_key(const struct tw_cluster *c, char *buf, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
unsigned tw__cl_hash(const char *s);
bool tw__cl_member_name_ok(const char *s, size_t max);
/* Puts key = value (under lease, 0: none) if the key is absent, in one transaction that reads
 * it otherwise: 1 put; 0 present with that value; 2 present with another; < 0 a code. */
int tw__cl_create(struct tw_cluster *c, etcd_client *client, const char *key, const void *value,
		  size_t value_len, int64_t lease);

/* time */
int64_t tw__cl_mono_ns(void);
int64_t tw__cl_wall_ms(void);
int64_t tw__cl_wall_ns(void);

/* log.c: a line to cfg.log and the error counted by kind. */
void tw__cl_log(struct tw_cluster *c, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Counts a request and its outcome; returns the cluster code for a failed one. */
int tw__cl_note(struct tw_cluster *c, int rc, const etcd_status *st);
/* A watch's end, counted by kind: a stream that ends or breaks says nothing of whether etcd
 * answers requests, so the connected state is left alone. */
void tw__cl_note_stream_end(struct tw_cluster *c, const etcd_status *st);
bool tw__cl_fenced(struct tw_cluster *c, int64_t now_ns);
/* The same, counting and logging a change (tw_cluster_counters.self_fences). */
bool tw__cl_fence_check(struct tw_cluster *c, int64_t now_ns);
/* Sleeps ms, cut short by leave (worker: also when only the worker is told to stop). */
void tw__cl_sleep(struct tw_cluster *c, unsigned ms, bool worker);

/* schedule.c: fire times, pure. */
int64_t tw__cl_next_fire(const struct cl_job *j, int64_t after_ms);
uint64_t tw__cl_count_fires(const struct cl_job *j, int64_t after_ms, int64_t upto_ms);
int64_t tw__cl_latest_fire(const struct cl_job *j, int64_t after_ms, int64_t upto_ms);
int tw__cl_schedule_text(const struct cl_job *j, char *buf, size_t cap);

/* claim.c */
/* Whether the claim key of (job, fire) holds this replica's claim with token: a claim whose
 * answer was lost (a timeout after etcd applied it). 1 yes, 0 no, < 0 a code. */
int tw__cl_own_claim(struct tw_cluster *c, etcd_client *client, const struct cl_job *j,
		     int64_t fire, uint64_t token);
/* Claims fires[0..n) of jobs[0..n) in group g with token, one transaction; 1: claimed, 0:
 * refused (not owner, or one of them claimed), < 0: a cluster code. */
int tw__cl_claim(struct tw_cluster *c, etcd_client *client, unsigned g, uint64_t token,
		 struct cl_job *const *jobs, const int64_t *fires, size_t n);

/* lease.c */
int tw__cl_lease_take(struct tw_cluster *c, etcd_client *client);
void *tw__cl_keeper_main(void *arg);

/* balance.c */
void *tw__cl_worker_main(void *arg);
void tw__cl_take_group(struct tw_cluster *c, unsigned g, uint64_t token, bool takeover);
/* A job's name and group, copied for a hand-back after the job is gone. */
struct cl_job_name {
	unsigned group;
	int64_t last_run_fire_ms; /* claims after it and after now go back to the taker */
	char name[TW_NAME_MAX + 1];
};
/* Hands groups back (their owner keys deleted, the hand-back recorded for the taker); with
 * jobs, also their claims after now. Stops at the first unavailable answer. */
int tw__cl_hand_back(struct tw_cluster *c, etcd_client *client, const unsigned *groups, size_t n,
		     const struct cl_job_name *jobs, size_t njobs);

/* run.c */
int tw__cl_run(const tw_fire *fire, void *arg);
void tw__cl_job_release(void *arg);
int tw__cl_arm(struct cl_job *j, int64_t fire_ms);
/* Drops the worker's hold on a job; frees it if it was released meanwhile. Under lock. */
void tw__cl_job_put(struct cl_job *j);

#endif
