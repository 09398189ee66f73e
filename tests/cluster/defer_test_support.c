/*
 * tests/cluster/defer_test_support.c - see defer_test_support.h.
 */
#include "defer_test_support.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cluster_test_support.h"

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct task_run runs[160];
	size_t n;
	size_t dropped; /* runs beyond the array: a test that sees any fails */
	unsigned entered;
	bool open;
} rec = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

int note_task(const tw_cluster_task *t, void *arg)
{
	const struct behaviour *b = arg;
	int64_t start = wall_ms();
	struct timespec mono;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	struct task_run *r = NULL;
	pthread_mutex_lock(&rec.lock);
	if (rec.n < sizeof rec.runs / sizeof rec.runs[0]) {
		r = &rec.runs[rec.n++];
		snprintf(r->key, sizeof r->key, "%s", t->key);
		snprintf(r->kind, sizeof r->kind, "%s", t->kind);
		r->payload_len = t->payload_len;
		if (t->payload_len <= sizeof r->payload && t->payload_len)
			memcpy(r->payload, t->payload, t->payload_len);
		r->attempt = t->attempt;
		r->max_attempts = t->max_attempts;
		r->group = t->group;
		r->token = t->token;
		r->due_ms = t->due_ms;
		r->due_ns = t->due_ns;
		r->start_lateness_ns = t->start_lateness_ns;
		r->start_mono_ns = (int64_t)mono.tv_sec * 1000000000 + mono.tv_nsec;
		r->start_ms = start;
		r->end_ms = 0;
		r->replica = b->replica;
	} else {
		rec.dropped++;
	}
	if (b->block) {
		rec.entered++;
		pthread_cond_broadcast(&rec.cond);
		while (!rec.open)
			pthread_cond_wait(&rec.cond, &rec.lock);
	}
	int code = b->succeed_at && t->attempt >= b->succeed_at ? 0 : b->fail_code;
	if (r)
		r->end_ms = wall_ms();
	pthread_mutex_unlock(&rec.lock);
	return code;
}

void record_reset(void)
{
	pthread_mutex_lock(&rec.lock);
	rec.n = 0;
	rec.dropped = 0;
	rec.entered = 0;
	rec.open = false;
	pthread_mutex_unlock(&rec.lock);
}

size_t runs_of(const char *key)
{
	size_t k = 0;
	pthread_mutex_lock(&rec.lock);
	for (size_t i = 0; i < rec.n; i++)
		k += !key || strcmp(rec.runs[i].key, key) == 0;
	k += rec.dropped;
	pthread_mutex_unlock(&rec.lock);
	return k;
}

bool run_of(const char *key, size_t nth, struct task_run *out)
{
	bool found = false;
	pthread_mutex_lock(&rec.lock);
	for (size_t i = 0; i < rec.n && !found; i++)
		if (strcmp(rec.runs[i].key, key) == 0 && nth-- == 0) {
			*out = rec.runs[i];
			found = true;
		}
	pthread_mutex_unlock(&rec.lock);
	return found;
}

unsigned blocked_entered(void)
{
	pthread_mutex_lock(&rec.lock);
	unsigned n = rec.entered;
	pthread_mutex_unlock(&rec.lock);
	return n;
}

void gate_open(void)
{
	pthread_mutex_lock(&rec.lock);
	rec.open = true;
	pthread_cond_broadcast(&rec.cond);
	pthread_mutex_unlock(&rec.lock);
}

size_t early_runs(struct task_run *first)
{
	size_t k = 0;
	pthread_mutex_lock(&rec.lock);
	for (size_t i = 0; i < rec.n; i++)
		if (rec.runs[i].start_ms < rec.runs[i].due_ms && k++ == 0)
			*first = rec.runs[i];
	pthread_mutex_unlock(&rec.lock);
	return k;
}

tw_cluster_defer_spec task_spec(const char *kind, const char *key, int64_t due_ms,
				uint64_t delay_ms)
{
	tw_cluster_defer_spec s = {
		.kind = kind, .key = key, .due_ms = due_ms, .delay_ms = delay_ms
	};
	return s;
}

tw_cluster_counters stats(tw_cluster *c)
{
	tw_cluster_counters s;
	memset(&s, 0, sizeof s);
	tw_cluster_stats(c, &s);
	return s;
}

struct behaviour succeeds = { .replica = 0, .succeed_at = 1 };
struct behaviour succeeds_b = { .replica = 1, .succeed_at = 1 };
struct behaviour blocks = { .replica = 0, .succeed_at = 1, .block = true };
struct behaviour always_fails = { .replica = 0, .succeed_at = 0, .fail_code = 7 };
struct behaviour fails_once = { .replica = 0, .succeed_at = 2, .fail_code = 3 };
struct behaviour fails_b = { .replica = 1, .succeed_at = 0, .fail_code = 9 };

struct replica replica_join(const char *member, const char *prefix, unsigned groups)
{
	struct replica r = { new_engine(), NULL };
	cr_assert_eq(join(r.e, member, prefix, groups, &r.c), TW_OK, "%s did not join", member);
	return r;
}

void replica_leave(struct replica *r)
{
	tw_cluster_leave(r->c);
	tw_engine_destroy(r->e);
	r->c = NULL;
}

void two_replicas(struct two *p, const char *prefix)
{
	p->a = replica_join("a", prefix, 4);
	p->b = replica_join("b", prefix, 4);
	cr_assert_eq(tw_cluster_handle(p->a.c, "ok", note_task, &succeeds), TW_OK);
	cr_assert_eq(tw_cluster_handle(p->b.c, "ok", note_task, &succeeds_b), TW_OK);
	bool ok;
	WAIT_UNTIL(ok, stats(p->a.c).groups_owned == 2 && stats(p->b.c).groups_owned == 2, 10000);
	cr_assert(ok, "the groups did not settle two and two");
	tw_cluster_view *v;
	cr_assert_eq(tw_cluster_view_read(etcd_harness_endpoints(etcd), prefix, 0, &v), TW_OK);
	cr_assert_eq(v->groups, 4);
	for (unsigned g = 0; g < 4; g++) {
		const char *o = v->group[g].owner;
		cr_assert(o && (!strcmp(o, "a") || !strcmp(o, "b")), "group %u: owner %s", g,
			  o ? o : "none");
		p->owner[g] = !strcmp(o, "b");
		p->token[g] = v->group[g].token;
	}
	tw_cluster_view_free(v);
}

void key_owned_by(const struct two *p, int owner, const char *stem, int nth, char *out, size_t cap)
{
	for (int i = 0;; i++) {
		snprintf(out, cap, "%s-%d", stem, i);
		if (p->owner[tw_cluster_group_of(out, 4)] == owner && nth-- == 0)
			return;
	}
}

void expect_never_early(void)
{
	struct task_run first;
	size_t n = early_runs(&first);
	cr_expect_eq(n, 0, "%zu runs began before their due; %s attempt %u %" PRId64 " ms early", n,
		     first.key, first.attempt, first.due_ms - first.start_ms);
}

void wait_runs(const char *key, size_t n, unsigned ms)
{
	bool ok;
	WAIT_UNTIL(ok, runs_of(key) >= n, ms);
	cr_assert_eq(runs_of(key), n, "%s ran %zu times, expected %zu", key ? key : "(all)",
		     runs_of(key), n);
}

struct task_run the_run(const char *key, size_t nth)
{
	struct task_run r;
	cr_assert(run_of(key, nth, &r), "%s has no run %zu", key, nth);
	return r;
}

int defer_at(tw_cluster *c, const char *kind, const char *key, int64_t due_ms)
{
	tw_cluster_defer_spec s = task_spec(kind, key, due_ms, 0);
	return tw_cluster_defer(c, &s);
}

tw_cluster_task_list *task_read(const char *prefix, const char *key)
{
	tw_cluster_task_list *l = NULL;
	cr_assert_eq(tw_cluster_task_read(etcd_harness_endpoints(etcd), prefix, 0, key, &l), TW_OK);
	return l;
}

tw_cluster_task_list *dead_read(const char *prefix)
{
	tw_cluster_task_list *l = NULL;
	cr_assert_eq(tw_cluster_dead_read(etcd_harness_endpoints(etcd), prefix, 0, NULL, 0, &l),
		     TW_OK);
	return l;
}

void task_list_free(tw_cluster_task_list *l)
{
	if (l)
		tw_cluster_task_list_free(l);
}

int requeue(const char *prefix, const char *key, int64_t due_ms)
{
	return tw_cluster_requeue(etcd_harness_endpoints(etcd), prefix, 0, key, due_ms);
}
