/*
 * tests/cluster/cluster_test_support.h - what the suites of libtickwheel-cluster's API share:
 * a 3-member etcd per test (the suite's .init and .fini, so it is stopped also when a test
 * fails), engines, replicas joined with short TTLs, and time.
 */
#ifndef TW_TESTS_CLUSTER_TEST_SUPPORT_H
#define TW_TESTS_CLUSTER_TEST_SUPPORT_H

#include <stdint.h>

#include "etcd_harness.h"
#include "tickwheel_cluster.h"

extern etcd_harness *etcd;

/* A suite's .init and .fini: the test's etcd. */
void start_etcd(void);
void stop_etcd(void);

void sleep_ms(unsigned ms);
/* CLOCK_REALTIME and CLOCK_MONOTONIC in ms. */
int64_t wall_ms(void);
int64_t mono_ms(void);

/* An engine of two executors (asserts that it was made). */
tw_engine *new_engine(void);
/* Joins etcd's members as member under prefix: TTL 2 s, claims 500 ms ahead, requests
 * limited to 1 s, so that takeovers take seconds, not tens. */
int join(tw_engine *e, const char *member, const char *prefix, unsigned groups, tw_cluster **out);
/* join, with tw_cluster_config.attach_later as given. */
int join_attaching(tw_engine *e, const char *member, const char *prefix, unsigned groups,
		   bool attach_later, tw_cluster **out);

#endif
