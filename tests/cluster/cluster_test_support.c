/*
 * tests/cluster/cluster_test_support.c - see cluster_test_support.h.
 */
#include "cluster_test_support.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <time.h>

etcd_harness *etcd;

void start_etcd(void)
{
	etcd = etcd_harness_start(3);
	cr_assert_not_null(etcd, "etcd did not start");
}

void stop_etcd(void)
{
	etcd_harness_stop(etcd);
	etcd = NULL;
}

void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int64_t clock_ms(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t wall_ms(void)
{
	return clock_ms(CLOCK_REALTIME);
}

int64_t mono_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

tw_engine *new_engine(void)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 2;
	tw_engine *e;
	cr_assert_eq(tw_engine_create(&cfg, &e), TW_OK);
	return e;
}

int join(tw_engine *e, const char *member, const char *prefix, unsigned groups, tw_cluster **out)
{
	return join_attaching(e, member, prefix, groups, false, out);
}

int join_attaching(tw_engine *e, const char *member, const char *prefix, unsigned groups,
		   bool attach_later, tw_cluster **out)
{
	tw_cluster_config cfg;
	tw_cluster_config_init(&cfg);
	cfg.engine = e;
	cfg.endpoints = etcd_harness_endpoints(etcd);
	cfg.member = member;
	cfg.prefix = prefix;
	cfg.groups = groups;
	cfg.lease_ttl_s = 2;
	cfg.claim_ahead_ms = 500;
	cfg.request_timeout_ms = 1000;
	cfg.attach_later = attach_later;
	return tw_cluster_join(&cfg, out);
}
