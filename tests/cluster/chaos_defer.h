/*
 * tests/cluster/chaos_defer.h - the chaos test's deferred tasks, shared by the replicas'
 * producers and handlers (chaos_producer.c) and the checker (chaos_defer_check.c).
 *
 * The driver hands each replica its plan in TW_CHAOS_DEFER_PLAN: "START_MS END_MS TOTAL SEED":
 * the replica defers about TOTAL tasks between those wall-clock times from three producer
 * threads (two of single defers, cancels and moves, one of batches), less what falls in the
 * times it is down or what it could not make in time. No plan: nothing is deferred, and the
 * handlers are still registered.
 *
 * A task's key is "<kind>.r<replica>.<pid>.<thread><seq>": unique across the run, and its kind
 * can be read from it. Kinds:
 *   ok      the handler succeeds (it works a while for some, so that a pause lands in it);
 *   flaky   its payload is "fail=K": the handler fails for attempts 1 to K, then succeeds;
 *   doomed  the handler always fails; few attempts: it must end in the dead letters.
 *
 * Each replica appends to LOG.defer, one write() per line, every time in CLOCK_REALTIME ns:
 *   D NS KEY DUE_MS BATCH TRY      before a defer call (BATCH 0: tw_cluster_defer; else the
 *                                  batch's number; TRY 1 for the first call of that spec)
 *   d NS KEY CODE                  its answer for that key (CHAOS_NOT_STORED: the batch was
 *                                  refused for another key, so this one was not stored)
 *   C NS KEY / c NS KEY RC         before a cancel / its answer
 *   M NS KEY DUE_MS / m NS KEY RC  before a move to DUE_MS / its answer
 *   S NS KEY ATTEMPT TOKEN DUE_MS GROUP   a handler's start
 *   E NS KEY ATTEMPT RC            its return
 *   L NS LEVEL MESSAGE             a line of the library's log
 */
#ifndef TW_TESTS_CHAOS_DEFER_H
#define TW_TESTS_CHAOS_DEFER_H

#define CHAOS_DEFERS_PER_30S 20000
/* Retries back off briefly, so that a failed task's next attempts come within the run. */
#define CHAOS_FLAKY_BACKOFF_MS  150
#define CHAOS_FLAKY_ATTEMPTS    10
#define CHAOS_DOOMED_BACKOFF_MS 100
/* After the faults, how long every task deferred may take to end, all replicas alive. */
#define CHAOS_DEFER_DRAIN_MS 15000
#define CHAOS_NOT_STORED     1

#include <stdbool.h>
#include <stdint.h>

#include "tickwheel_cluster.h"

/* The replica's side (chaos_producer.c). Each returns 0, or -1 with the reason on stderr. */
int chaos_defer_open(const char *log_path);
/* A tw_cluster_config.log: the library's lines into LOG.defer. */
void chaos_defer_library_log(int level, const char *message, void *arg);
int chaos_defer_handle(tw_cluster *c);
/* Starts the producers when TW_CHAOS_DEFER_PLAN is set; replica is this replica's number. */
int chaos_defer_start(tw_cluster *c, int replica);
/* Stops the producers (their calls going on return first) and joins them. */
void chaos_defer_stop(void);
/* What this replica's producers made, for LOG.stats. */
void chaos_defer_totals(uint64_t *defers, uint64_t *cancels, uint64_t *moves);

/* The checker's side (chaos_defer_check.c). */
struct chaos_fault {
	const char *what;
	int replica; /* -1 - m: etcd member m */
	int64_t at_ms, window_end_ms;
	bool owner_lost; /* the replica's groups went to others: a takeover */
};

/* Until etcd holds no live task, at most drain_ms; the live tasks left, or -1 when etcd could
 * not be read. */
long chaos_defer_drain(const char *const *endpoints, const char *prefix, unsigned drain_ms);
/* Reads every replica's LOG.defer under dir and the dead letters from etcd, proves the
 * promises and prints the figures; the failures found. */
unsigned chaos_defer_check(const char *dir, int replicas, const struct chaos_fault *faults,
			   int nfaults, int64_t t0_ms, const char *const *endpoints,
			   const char *prefix);

#endif
