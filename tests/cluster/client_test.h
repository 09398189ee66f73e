/*
 * tests/cluster/client_test.h - what the client suites share: a 3-member etcd per test
 * (etcd_harness), a client of all its members, and short forms of the calls.
 */
#ifndef TW_TESTS_CLIENT_TEST_H
#define TW_TESTS_CLIENT_TEST_H

#include "etcd_harness.h"
#include "etcd_internal.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The harness and a client of all its members, made by start (a suite's .init) and ended by
 * stop (its .fini, run even when a test fails). */
static etcd_harness *H;
static etcd_client *C;

static inline void start(void)
{
	H = etcd_harness_start(3);
	cr_assert_not_null(H, "etcd did not start (see stderr)");
	etcd_status st;
	cr_assert_eq(tw__etcd_client_create(etcd_harness_endpoints(H), 3, 3000, &C, &st), 0, "%s",
		     st.message);
}

static inline void stop(void)
{
	tw__etcd_client_destroy(C);
	C = NULL;
	etcd_harness_stop(H);
	H = NULL;
}

#define OK(call)                                                                            \
	do {                                                                                \
		etcd_status st_;                                                            \
		etcd_status *st = &st_;                                                     \
		cr_assert_eq((call), 0, "%s: %s: %s", #call, tw__etcd_error_name(st_.kind), \
			     st_.message);                                                  \
	} while (0)

static inline void put_str(etcd_client *c, const char *key, const char *value, int64_t lease,
			   int64_t *rev)
{
	OK(tw__etcd_put(c, key, strlen(key), value, strlen(value), lease, rev, st));
}

static inline void range_str(const char *key, const char *end, int64_t limit, etcd_range_result *r)
{
	etcd_range_req req = { .key = key, .key_len = strlen(key), .limit = limit };
	if (end) {
		req.range_end = end;
		req.range_end_len = strlen(end);
	}
	OK(tw__etcd_range(C, &req, r, st));
}

static inline void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts))
		cr_assert_eq(errno, EINTR);
}

static inline int64_t now_ms(void)
{
	return tw__etcd_now_ms();
}

typedef struct {
	etcd_event_type type[16];
	char key[16][16];
	int64_t rev[16];
	bool prev[16];
	size_t n, stop_after;
	int created, canceled;
	int64_t compact_revision;
} seen;

static inline int collect(const etcd_watch_msg *m, void *arg)
{
	seen *s = arg;
	s->created += m->created;
	s->canceled += m->canceled;
	if (m->compact_revision)
		s->compact_revision = m->compact_revision;
	for (size_t i = 0; i < m->count && s->n < 16; i++, s->n++) {
		s->type[s->n] = m->events[i].type;
		snprintf(s->key[s->n], sizeof(s->key[0]), "%.*s", (int)m->events[i].kv.key_len,
			 (const char *)m->events[i].kv.key);
		s->rev[s->n] = m->events[i].kv.mod_revision;
		s->prev[s->n] = m->events[i].prev_kv.key != NULL;
	}
	return s->stop_after && s->n >= s->stop_after;
}

#endif
