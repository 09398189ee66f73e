/*
 * tests/cluster/defer_test_support.h - the deferred-task suite's record of handler runs, a
 * handler whose behaviour each kind chooses (succeed, fail until an attempt, wait on a gate),
 * and short forms of the calls. Every run of the test's in-process replicas is recorded here;
 * the test's thread asserts on the record, never the handlers.
 */
#ifndef TW_TESTS_DEFER_TEST_SUPPORT_H
#define TW_TESTS_DEFER_TEST_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tickwheel_cluster.h"

/* One handler run, copied from its tw_cluster_task, with the wall clock around it. */
struct task_run {
	char key[TW_CLUSTER_KEY_MAX + 1];
	char kind[TW_CLUSTER_KIND_MAX + 1];
	unsigned char payload[TW_CLUSTER_PAYLOAD_MAX];
	size_t payload_len;
	unsigned attempt, max_attempts, group;
	uint64_t token;
	int64_t due_ms;
	int64_t start_ms, end_ms; /* wall ms when the handler began, and just before it returned */
	uint64_t due_ns;
	int64_t start_lateness_ns;
	int64_t start_mono_ns; /* CLOCK_MONOTONIC when the handler began */
	int replica;
};

/* What the handler does for a kind; passed as tw_cluster_handle's arg. */
struct behaviour {
	int replica;         /* recorded as task_run.replica */
	unsigned succeed_at; /* the first attempt that returns 0; 0: every attempt fails */
	int fail_code;       /* what a failing attempt returns */
	bool block;          /* waits for gate_open() before returning */
};

/* Records the run, then behaves as arg (a struct behaviour) says. */
int note_task(const tw_cluster_task *task, void *arg);

/* Forgets every run, closes the gate. */
void record_reset(void);
/* Runs recorded so far, of key (NULL: of every key). */
size_t runs_of(const char *key);
/* The nth (0, 1, ...) run of key in the order they began; false if there is none. */
bool run_of(const char *key, size_t nth, struct task_run *out);
/* Handlers that entered a blocking behaviour so far. */
unsigned blocked_entered(void);
/* Lets every blocked handler return, and the later ones not wait. */
void gate_open(void);
/* Runs that began before their due_ms on the wall clock (the first such in *first). */
size_t early_runs(struct task_run *first);

/* A task of kind under key due at due_ms (0: delay_ms from now), with no payload. */
tw_cluster_defer_spec task_spec(const char *kind, const char *key, int64_t due_ms,
				uint64_t delay_ms);
tw_cluster_counters stats(tw_cluster *c);

#define TWO_40  ((uint64_t)1 << 40)
#define HOUR_MS 3600000

/* Behaviours of the kinds: replica 0's (a's) unless named _b. */
extern struct behaviour succeeds, succeeds_b, blocks, always_fails, fails_once, fails_b;

struct replica {
	tw_engine *e;
	tw_cluster *c;
};

/* An engine and a member joined under prefix (asserted). */
struct replica replica_join(const char *member, const char *prefix, unsigned groups);
/* Leaves, then destroys the engine. */
void replica_leave(struct replica *r);

/* Two replicas a (replica 0) and b (1) in 4 groups, both handling "ok", settled two and two;
 * owner[g] says which one owns group g, token[g] with which fencing token. */
struct two {
	struct replica a, b;
	int owner[4];
	uint64_t token[4];
};
void two_replicas(struct two *p, const char *prefix);
/* The nth key "stem-i" of a group that owner (0: a, 1: b) owns. */
void key_owned_by(const struct two *p, int owner, const char *stem, int nth, char *out, size_t cap);

/* Expects that no recorded run began before its due on the wall clock. */
void expect_never_early(void);
/* Waits up to ms for key's n-th run (NULL: of all keys), then asserts exactly n so far. */
void wait_runs(const char *key, size_t n, unsigned ms);
/* The nth run of key (asserted). */
struct task_run the_run(const char *key, size_t nth);
int defer_at(tw_cluster *c, const char *kind, const char *key, int64_t due_ms);
/* tw_cluster_task_read of key under prefix, and tw_cluster_dead_read of all under prefix
 * (asserted TW_OK). */
tw_cluster_task_list *task_read(const char *prefix, const char *key);
tw_cluster_task_list *dead_read(const char *prefix);
void task_list_free(tw_cluster_task_list *l);
/* tw_cluster_requeue under prefix. */
int requeue(const char *prefix, const char *key, int64_t due_ms);

/* Polls cond every 10 ms for up to ms milliseconds; ok receives its last value. */
#define WAIT_UNTIL(ok, cond, ms)                               \
	do {                                                   \
		int64_t until_ = mono_ms() + (ms);             \
		while (!((ok) = (cond)) && mono_ms() < until_) \
			sleep_ms(10);                          \
	} while (0)

#endif
