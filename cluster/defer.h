/*
 * cluster/defer.h - deferred tasks: how they are stored in etcd (pure codecs) and the
 * replica's record of the tasks it holds.
 *
 * Keys under the prefix P:
 *   P/defer/t/<group %04u>/<key>  the task:  "tw1 <kind> <due_ms> <attempts> <max> <backoff>\n"
 *                                             followed by the payload's bytes
 *   P/defer/c/<group %04u>/<key>  its claim: "<attempt> <member> <token>"; present from the
 *                                             owner's claim to the write after its handler
 *   P/defer/done/<key>            a tombstone, for CL_TOMBSTONE_S after a success or cancel
 *   P/dead/<key>                  a dead letter: the task's header with " <last_code>"
 *                                             before its newline, then the payload
 * <attempts> counts the attempts that ended; a claim's <attempt> is the one it starts. One
 * watch over P/defer/ follows both the tasks and the claims; a task and its claim are always
 * written together, in one transaction.
 */
#ifndef TW_CLUSTER_DEFER_H
#define TW_CLUSTER_DEFER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd.h"
#include "tickwheel_cluster.h"

#define CL_DEFAULT_ATTEMPTS   5
#define CL_DEFAULT_BACKOFF_MS 1000
/* How long a key stays taken after its task's handler succeeded (P/defer/done/<key>, under a
 * lease): a defer whose answer was lost and that etcd applies late finds it and makes no
 * second task. */
#define CL_TOMBSTONE_S 60
/* The longest record header: "tw1 " kind and five numbers, with spaces and the newline. */
#define CL_RECORD_HEAD_MAX (4 + TW_CLUSTER_KIND_MAX + 6 * 21 + 1)

struct cl_record {
	char kind[TW_CLUSTER_KIND_MAX + 1];
	int64_t due_ms;
	unsigned attempts, max_attempts, backoff_ms;
	bool dead;              /* a dead letter: last_code is part of it */
	int last_code;          /* dead: the last attempt's handler return */
	const uint8_t *payload; /* decode: points into the value decoded */
	size_t payload_len;
};

struct cl_claim_value {
	unsigned attempt;
	char member[TW_CLUSTER_MEMBER_MAX + 1];
	uint64_t token;
};

bool tw__cl_kind_ok(const char *kind);
bool tw__cl_task_key_ok(const char *key);
/* The value of r (header and payload), malloc'ed, in *out; < 0 a code. */
int tw__cl_record_encode(const struct cl_record *r, uint8_t **out, size_t *len);
/* 0, or -1 when the value is not a record (an operator's own key under the prefix). */
int tw__cl_record_decode(const uint8_t *value, size_t len, struct cl_record *r);
int tw__cl_claim_encode(const struct cl_claim_value *v, char *buf, size_t cap);
int tw__cl_claim_decode(const uint8_t *value, size_t len, struct cl_claim_value *v);
/* The wait after failed attempt n (1, 2, ...): backoff * 2^(n - 1), capped. */
int64_t tw__cl_backoff_ms(unsigned backoff_ms, unsigned failed);

/*
 * The tasks this replica holds: every task of the groups it owns, each with a local task in
 * the engine (a one-shot kept alive by re-arming it, TW_NEVER when it waits for nothing).
 * A held task moves HELD -> CLAIMING -> CLAIMED -> RUNNING -> DONE and leaves the map when
 * its completion is written; the local task's alarm is claim_ahead_ms before the due while
 * HELD, the due itself while CLAIMED.
 *
 * Threads: the loader (defer_load.c) reads a group when it is taken and follows P/defer/
 * with a watch; the defer worker (defer_work.c) sends the claims and the completions, a few
 * tasks per transaction; executors fire the local tasks (defer_run.c). All of it is under
 * cl_defer.lock, which is taken before the cluster's lock when both are, and is never held
 * across a request to etcd. The engine's release of a local task may come inline from
 * tw_cancel under that lock: it only drops an atomic reference.
 */
struct tw_cluster;

enum cl_task_state { CL_HELD, CL_CLAIMING, CL_CLAIMED, CL_RUNNING, CL_DONE, CL_GONE };

struct cl_task {
	struct cl_task *hnext; /* the map's chain */
	struct cl_task *qnext; /* the claim or done queue */
	atomic_uint refs;      /* the map, the local task, a queue */
	struct cl_defer *defer;
	enum cl_task_state state;
	unsigned group;
	bool unhandled;  /* counted in defer_unhandled: no handler of its kind here */
	bool local_live; /* its local task was added and not cancelled */
	tw_id local;
	struct cl_record rec;    /* as last read; payload NULL */
	int64_t mod_rev;         /* the task key's mod revision as last read */
	int64_t other_claim_rev; /* a claim not ours (a lost owner's): its mod revision */
	unsigned other_claim_attempt;
	uint64_t token;    /* our claim's token; 0 when not ours */
	int64_t claim_rev; /* our claim key's mod revision */
	unsigned attempt;  /* our claim's attempt */
	uint8_t *payload;  /* while claimed by us */
	size_t payload_len;
	int result; /* DONE: the handler's return */
	char key[];
};

struct cl_kind {
	struct cl_kind *next;
	tw_cluster_handler handler;
	void *arg;
	char name[TW_CLUSTER_KIND_MAX + 1];
};

struct cl_defer_stats {
	uint64_t defers, runs, failures, retries, dead, reclaims, claim_requests, loaded;
	uint64_t load_ms_last, inflight, unhandled, overdue;
};

struct cl_defer {
	struct tw_cluster *cluster;
	pthread_mutex_t lock;
	pthread_cond_t work;     /* the worker has queued tasks, or is told to stop */
	pthread_cond_t progress; /* a task left the busy states (leave waits on it) */
	struct cl_kind *kinds;
	struct cl_task **buckets;
	size_t nbuckets, count;
	struct cl_task *claim_head, **claim_tail, *done_head, **done_tail;
	struct cl_defer_stats stats;
	uint64_t *loaded_token; /* per group: the owner token it was loaded with; 0: not held */
	int64_t *loaded_rev;    /* per group: the revision of that load */
	int64_t watch_rev;      /* the last revision the watch delivered; 0: none */
	atomic_uint *busy;      /* per group: tasks claimed here and not yet written back */
	/* Per group: a task the engine refused to hold (max_tasks); the group is read again
	 * once refused_ms is a second old. */
	bool *refused;
	int64_t refused_ms;
	atomic_bool reload; /* group ownership changed, or stop: the watch restarts */
	atomic_bool stop, draining;
	/* The lease tombstones are put under (the worker's; a new one every few seconds, never
	 * renewed, so a tombstone outlives its owner); 0: none. */
	pthread_mutex_t tomb_lock;
	int64_t tomb_lease, tomb_granted_ms;
	/* Local tasks not yet released by the engine (leave waits for 0). */
	pthread_mutex_t release_lock;
	pthread_cond_t released;
	size_t live_locals;
	etcd_client *load_client, *watch_client, *work_client;
	/* Clients for calls from any thread (defer, cancel, move): taken and given back. */
	pthread_mutex_t pool_lock;
	etcd_client *pool[8];
	size_t npool;
	pthread_t loader, worker;
	bool loader_started, worker_started;
};

/* defer_hold.c: the map of held tasks and their local tasks. Under lock. */
struct cl_task *tw__cl_task_find(struct cl_defer *d, const char *key);
struct cl_task *tw__cl_task_hold(struct tw_cluster *c, const char *key, unsigned group,
				 const struct cl_record *rec, int64_t mod_rev);
void tw__cl_task_drop(struct tw_cluster *c, struct cl_task *t);
void tw__cl_task_put(struct cl_task *t);
/* Arms the local task at a UTC ms (TW_NEVER for INT64_MAX). */
void tw__cl_task_arm(struct tw_cluster *c, struct cl_task *t, int64_t wall_ms);
/* HELD: the alarm, claim_ahead_ms before the due. */
void tw__cl_task_arm_alarm(struct tw_cluster *c, struct cl_task *t);
void tw__cl_task_enqueue(struct cl_defer *d, struct cl_task *t, bool done);
/* A task leaves the claimed states: the group's busy count and the leave's wait. */
void tw__cl_task_unbusy(struct cl_defer *d, struct cl_task *t);
struct cl_kind *tw__cl_kind_find(struct cl_defer *d, const char *kind);
int tw__cl_task_key(const struct tw_cluster *c, char *buf, char which, unsigned group,
		    const char *key);
/* The user's key of a P/defer/<t|c>/<group>/<key> key: its kind ('t' or 'c'), group and
 * key, or -1 for a key of another form. */
int tw__cl_task_key_parse(const struct tw_cluster *c, const uint8_t *k, size_t len, char *which,
			  unsigned *group, char *key);

/* defer_run.c: a local task's run. */
int tw__cl_task_fire(const tw_fire *fire, void *arg);
void tw__cl_task_release(void *arg);

/* defer_claim.c: claims the queued tasks (the worker's), giving up the queue's references. */
void tw__cl_claim_queued(struct tw_cluster *c, struct cl_task *list);

/* defer_load.c, defer_work.c: the two threads. */
void *tw__cl_loader_main(void *arg);
void *tw__cl_defer_worker_main(void *arg);

/* defer_life.c: set up at join, drained at leave. */
int tw__cl_defer_init(struct tw_cluster *c);
int tw__cl_defer_start(struct tw_cluster *c);
/* Stops the threads tw__cl_defer_start started (an attach that failed after it), so that
 * a later start begins afresh. */
void tw__cl_defer_stop(struct tw_cluster *c);
/* Stops claiming, lets running handlers finish and their results be written, gives back
 * the claims not yet run, stops the threads and removes the local tasks. */
void tw__cl_defer_drain(struct tw_cluster *c);
void tw__cl_defer_free(struct tw_cluster *c);
/* The lease tombstones go under (a success's, a cancel's); 0 when etcd granted none (the
 * write then goes without its tombstone). Any thread; a round trip now and then. */
int64_t tw__cl_tomb_lease(struct tw_cluster *c, etcd_client *client);
void tw__cl_tomb_lease_lost(struct tw_cluster *c);
etcd_client *tw__cl_pool_get(struct tw_cluster *c);
void tw__cl_pool_put(struct tw_cluster *c, etcd_client *client);
/* The worker's hooks: ownership changed; whether a group holds claimed tasks. */
void tw__cl_defer_groups_changed(struct tw_cluster *c);
/* The worker's check (under lock): groups with refused tasks are read again, once a second. */
void tw__cl_defer_retry_refused(struct tw_cluster *c);
bool tw__cl_defer_group_busy(struct tw_cluster *c, unsigned g);

#endif
