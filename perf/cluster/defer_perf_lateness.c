/*
 * perf/cluster/defer_perf_lateness.c - `defer_perf lateness`: how late deferred tasks start
 * beside local one-shots due at the same instants, and how soon a task due now starts.
 *
 * Each replica's producer thread defers its share of --tasks over --seconds, each due 2 to 4 s
 * ahead (an absolute due_ms), and adds to its own engine a local one-shot whose first_due_ns
 * is that instant on CLOCK_MONOTONIC: the twins are spread over the same engines as the
 * deferred tasks' owners, and fire on the same wheels. Lateness is start minus due, on the
 * wall clock (against due_ms) and on the monotonic clock (against the run's due_ns; for a
 * deferred task also the library's start_lateness_ns). Before that, the machine's floor: a
 * thread alone on a 1 ms timerfd grid (measure/wake_floor). After it, tasks deferred with due
 * now: the time from tw_cluster_defer's return to its handler's start.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defer_perf.h"
#include "wake_floor.h"

#define LAT_GROUPS 16

struct lat_sample {
	atomic_int runs;  /* handler starts (a second one would be a duplicate) */
	atomic_int done;  /* the first start's figures are written */
	int64_t due_ms;   /* the deferred task's due */
	int64_t wall_ns;  /* start minus due on the wall clock */
	int64_t mono_ns;  /* start minus due_ns, taken in the handler */
	int64_t lib_ns;   /* tw_cluster_task.start_lateness_ns */
	atomic_int local; /* the twin ran */
	int64_t local_wall_ns, local_mono_ns;
	int64_t returned_ns; /* due-now tasks: monotonic time tw_cluster_defer returned */
	int64_t started_ns;  /* due-now tasks: monotonic time the handler started */
};

static struct lat_sample *lat;
static unsigned lat_n, now_n;
static atomic_uint errors;

static unsigned index_of(const tw_cluster_task *t)
{
	uint32_t i = UINT32_MAX;
	if (t->payload_len == sizeof i)
		memcpy(&i, t->payload, sizeof i);
	return i;
}

static int on_deferred(const tw_cluster_task *t, void *arg)
{
	int64_t mono = dp_mono_ns(), wall = dp_wall_ns();
	(void)arg;
	unsigned i = index_of(t);
	if (i >= lat_n)
		return 0;
	struct lat_sample *s = &lat[i];
	if (atomic_fetch_add(&s->runs, 1))
		return 0;
	s->wall_ns = wall - t->due_ms * 1000000;
	s->mono_ns = mono - (int64_t)t->due_ns;
	s->lib_ns = t->start_lateness_ns;
	atomic_store(&s->done, 1);
	return 0;
}

static int on_local(const tw_fire *f, void *arg)
{
	int64_t mono = dp_mono_ns(), wall = dp_wall_ns();
	struct lat_sample *s = arg;
	s->local_mono_ns = mono - (int64_t)f->due_ns;
	s->local_wall_ns = wall - s->due_ms * 1000000;
	atomic_store(&s->local, 1);
	return 0;
}

static int on_now(const tw_cluster_task *t, void *arg)
{
	int64_t mono = dp_mono_ns();
	(void)arg;
	unsigned i = index_of(t);
	if (i >= lat_n || i < lat_n - now_n)
		return 0;
	if (!atomic_fetch_add(&lat[i].runs, 1)) {
		lat[i].started_ns = mono;
		atomic_store(&lat[i].done, 1);
	}
	return 0;
}

struct producer {
	pthread_t thread;
	struct dp_replica *r;
	unsigned first, count, step; /* tasks first, first + step, ... */
	unsigned seconds;
	bool now;
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	int64_t t0 = dp_mono_ns();
	uint32_t rnd = 2463534242u ^ p->first;
	for (unsigned k = 0; k < p->count; k++) {
		int64_t at = t0 + (int64_t)p->seconds * 1000000000 * k / p->count;
		int64_t wait = at - dp_mono_ns();
		if (wait > 0)
			dp_sleep_ms((unsigned)(wait / 1000000));
		uint32_t i = p->first + k * p->step;
		char key[32];
		snprintf(key, sizeof key, "%s-%06u", p->now ? "now" : "lat", i);
		rnd ^= rnd << 13, rnd ^= rnd >> 17, rnd ^= rnd << 5;
		tw_cluster_defer_spec s = { .kind = p->now ? "now" : "lat",
					    .key = key,
					    .payload = &i,
					    .payload_len = sizeof i };
		int64_t wall = dp_wall_ns(), mono = dp_mono_ns();
		if (!p->now) {
			s.due_ms = wall / 1000000 + 2000 + rnd % 2000;
			lat[i].due_ms = s.due_ms;
			tw_task_spec t = { .callback = on_local,
					   .arg = &lat[i],
					   .first_due_ns =
						   (uint64_t)(mono + s.due_ms * 1000000 - wall) };
			tw_id id;
			if (tw_add(p->r->e, &t, &id) != TW_OK)
				atomic_fetch_add(&errors, 1);
		}
		int rc = tw_cluster_defer(p->r->c, &s);
		if (p->now)
			lat[i].returned_ns = dp_mono_ns();
		if (rc != TW_OK) {
			fprintf(stderr, "defer_perf: defer %s: %s\n", key, tw_cluster_strerror(rc));
			atomic_fetch_add(&errors, 1);
		}
	}
	return NULL;
}

/* Runs one producer per replica over tasks [first, first + count); 0 or -1. */
static int produce_all(struct dp_replica *r, unsigned nr, unsigned first, unsigned count,
		       unsigned seconds, bool now)
{
	struct producer p[8];
	for (unsigned k = 0; k < nr; k++) {
		p[k] = (struct producer){ .r = &r[k],
					  .first = first + k,
					  .step = nr,
					  .count = (count - k + nr - 1) / nr,
					  .seconds = seconds,
					  .now = now };
		if (pthread_create(&p[k].thread, NULL, produce, &p[k])) {
			fprintf(stderr, "defer_perf: pthread_create failed\n");
			for (unsigned j = 0; j < k; j++)
				pthread_join(p[j].thread, NULL);
			return -1;
		}
	}
	for (unsigned k = 0; k < nr; k++)
		pthread_join(p[k].thread, NULL);
	return 0;
}

static unsigned ran(unsigned first, unsigned count)
{
	unsigned n = 0;
	for (unsigned i = first; i < first + count; i++)
		n += atomic_load(&lat[i].done);
	return n;
}

static void report(unsigned ahead)
{
	int64_t *w = malloc(sizeof(int64_t) * ahead), *m = malloc(sizeof(int64_t) * ahead),
		*l = malloc(sizeof(int64_t) * ahead), *lw = malloc(sizeof(int64_t) * ahead),
		*lm = malloc(sizeof(int64_t) * ahead), *d = malloc(sizeof(int64_t) * now_n),
		*pair = malloc(sizeof(int64_t) * ahead);
	if (!w || !m || !l || !lw || !lm || !d || !pair) {
		fprintf(stderr, "defer_perf: out of memory\n");
		goto out;
	}
	size_t n = 0, nl = 0, nd = 0, np = 0, dup = 0;
	for (unsigned i = 0; i < ahead; i++) {
		/* A stall of the machine delays a task and its twin, due at the same instant,
		 * alike: their difference is the deferred task's own cost, less the noise. */
		if (atomic_load(&lat[i].done) && atomic_load(&lat[i].local))
			pair[np++] = lat[i].wall_ns - lat[i].local_wall_ns;
		if (atomic_load(&lat[i].done)) {
			w[n] = lat[i].wall_ns, m[n] = lat[i].mono_ns, l[n++] = lat[i].lib_ns;
			dup += atomic_load(&lat[i].runs) > 1;
		}
		if (atomic_load(&lat[i].local))
			lw[nl] = lat[i].local_wall_ns, lm[nl++] = lat[i].local_mono_ns;
	}
	for (unsigned i = ahead; i < lat_n; i++)
		if (atomic_load(&lat[i].done))
			d[nd++] = lat[i].started_ns - lat[i].returned_ns;
	dp_pcts("deferred_wall_lateness", w, n);
	dp_pcts("deferred_mono_lateness", m, n);
	dp_pcts("deferred_lib_start_lateness", l, n);
	dp_pcts("local_wall_lateness", lw, nl);
	dp_pcts("local_mono_lateness", lm, nl);
	if (n && nl) {
		size_t p50 = (n - 1) / 2, p99 = (size_t)(0.99 * (double)(n - 1));
		size_t q50 = (nl - 1) / 2, q99 = (size_t)(0.99 * (double)(nl - 1));
		dp_fig("deferred_minus_local_wall_p50_us", (double)((w[p50] - lw[q50]) / 1000));
		dp_fig("deferred_minus_local_wall_p99_us", (double)((w[p99] - lw[q99]) / 1000));
		dp_fig("deferred_minus_local_mono_p50_us", (double)((m[p50] - lm[q50]) / 1000));
		dp_fig("deferred_minus_local_mono_p99_us", (double)((m[p99] - lm[q99]) / 1000));
	}
	dp_pcts("paired_deferred_minus_twin", pair, np);
	dp_fig("deferred_duplicates", (double)dup);
	dp_pcts("due_now_return_to_start", d, nd);
out:
	free(w), free(m), free(l), free(lw), free(lm), free(d), free(pair);
}

int dp_lateness(const struct dp_opts *o, etcd_harness *h)
{
	unsigned nr = o->replicas, ahead = o->tasks;
	now_n = o->quick ? 30 : o->tasks / 4;
	lat_n = ahead + now_n;
	lat = calloc(lat_n, sizeof *lat);
	struct dp_replica r[8] = { { 0 } };
	int rc = -1;
	if (!lat)
		return -1;
	for (unsigned k = 0; k < nr; k++) {
		char member[16];
		snprintf(member, sizeof member, "r%u", k);
		if (dp_join(&r[k], h, "/defer-perf/", member, LAT_GROUPS) ||
		    tw_cluster_handle(r[k].c, "lat", on_deferred, NULL) != TW_OK ||
		    tw_cluster_handle(r[k].c, "now", on_now, NULL) != TW_OK)
			goto out;
	}
	/* Groups settle among the members before anything is measured. */
	dp_sleep_ms(3000);
	struct wake_floor f;
	if (wake_floor_measure(o->quick ? 1.0 : 3.0, 1, 10, &f) == 0) {
		dp_fig("floor_wake_p50_us", f.lateness_p50_us);
		dp_fig("floor_wake_p99_us", f.lateness_p99_us);
		dp_fig("floor_wake_max_us", f.lateness_max_us);
	}
	printf("# %u tasks deferred 2-4 s ahead over %u s, %u local twins; then %u due now\n",
	       ahead, o->seconds, ahead, now_n);
	if (produce_all(r, nr, 0, ahead, o->seconds, false))
		goto out;
	for (int64_t end = dp_mono_ns() + 15000000000; ran(0, ahead) < ahead && dp_mono_ns() < end;)
		dp_sleep_ms(50);
	/* The due-now tasks, after the others ran: nothing else is due while they run. */
	if (produce_all(r, nr, ahead, now_n, o->quick ? 2 : o->seconds / 2 + 1, true))
		goto out;
	for (int64_t end = dp_mono_ns() + 10000000000;
	     ran(ahead, now_n) < now_n && dp_mono_ns() < end;)
		dp_sleep_ms(20);
	dp_fig("deferred_not_run", (double)(ahead - ran(0, ahead)));
	dp_fig("due_now_not_run", (double)(now_n - ran(ahead, now_n)));
	dp_fig("errors", (double)atomic_load(&errors));
	dp_fig("defer_claim_requests", (double)DP_SUM(r, nr, defer_claim_requests));
	dp_fig("defer_runs", (double)DP_SUM(r, nr, defer_runs));
	report(ahead);
	rc = ran(0, ahead) == ahead && ran(ahead, now_n) == now_n && !atomic_load(&errors) ? 0 : -1;
out:
	for (unsigned k = 0; k < nr; k++)
		dp_leave(&r[k]);
	free(lat);
	return rc;
}
