/*
 * stress_engine.c - concurrency stress test of the engine, on the real clock.
 *
 * A plain main(): Criterion does not run under ThreadSanitizer here.
 *
 * Phase 1 (churn): application threads apply random operations to a shared
 * array of task slots while tasks fire every 1-20 ms on executor threads.
 * Callbacks reschedule, pause and cancel themselves, act on other slots, add
 * tasks, sometimes fail or run slowly (over 1 ms: stuck, run_limit_ms); some
 * tasks are TW_CONCURRENT, some serial ones TW_ON_WHEEL_THREAD (the slow ones
 * are moved to the executors by the budget guard). It ends
 * with tw_engine_stop (drained) and tw_engine_destroy.
 * Then the same churn on the manual clock, two application threads advancing it.
 * Then one name added and cancelled in a loop while another thread finds it and reads it:
 * tw_get shows every task found by that name with it, and the table grows under tw_find.
 * Phase 2 (teardown): rounds in which, while callbacks that sleep a few ms
 * are running, the engine is either stopped as application threads go on
 * calling the API, then destroyed; or destroyed outright.
 *
 * Every task's arg is a record that checks, as it goes and at the end:
 *  - release is called exactly once for a task that tw_add accepted, never
 *    during or before one of its runs;
 *  - no run starts after tw_cancel returned 0 for its task. A run "starts"
 *    when the engine counts it (tw_fire.run): right after tw_cancel returns,
 *    tw_get reads the task's run count R; any run numbered above R was
 *    counted after tw_cancel had returned. A run that was already counted
 *    may still be going, and is allowed;
 *  - runs of a serial task never overlap; fire.id is the task's id; no run
 *    starts before its due time, or after tw_engine_stop returned TW_OK;
 *  - every return code is one the API documents for the situation;
 *  - tw_list, from application threads and callbacks, visits only ids that
 *    tw_add handed out, each once, and without TW_LIST_ENDED only live tasks;
 *    a nonzero answer of its visitor stops it and is what it returns.
 *
 * Usage: stress_engine [seconds of phase 1, default 3]. The environment can
 * set STRESS_SECONDS (the same), STRESS_ROUNDS (teardown rounds of phase 2,
 * default 6), STRESS_SEED (the random seed; timing still differs from run
 * to run) and STRESS_LOOSE_CANCEL=1 (let the firings that were already
 * handed to executors when tw_cancel returned start; see cancelled()).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../test_util.h"
#include "tickwheel.h"

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
	SLOTS = 256, /* the shared array of tasks the operations pick from */
	APP_THREADS = 4,
	MAX_LIVE = 600,   /* callbacks stop adding tasks beyond this many live ones */
	MAX_REPORTS = 30, /* violations printed in full */
	REC_MAGIC = 0x5715e55,
};

/* How a task's callback behaves; chosen at random when it is added. */
enum {
	K_FAIL = 1 << 0,        /* fails one run in three */
	K_ALWAYS_FAIL = 1 << 1, /* fails every run: paused after max_failures */
	K_SLOW = 1 << 2,        /* sleeps in some runs (phase 2: in every run) */
	K_SELF = 1 << 3,        /* reschedules, re-periods, pauses or cancels itself */
	K_OTHER = 1 << 4,       /* operates on a random slot, adding tasks to empty ones */
	K_SPAWN = 1 << 5,       /* adds one-shot tasks of its own */
};

enum end_mode {
	END_DRAIN,       /* join the application threads, stop with a drain, destroy */
	END_STOP_RACING, /* stop while callbacks sleep and operations go on, then destroy */
	END_DESTROY,     /* destroy while callbacks sleep, without stopping first */
};

struct phase;

struct rec {
	/* Written before tw_add, read-only after. Plain on purpose: TSan then
	 * checks that the engine orders tw_add before the callback and release. */
	int magic;
	unsigned kind;
	bool concurrent;
	bool on_wheel; /* TW_ON_WHEEL_THREAD (the budget guard may move it off) */
	struct phase *ph;
	/* shared */
	_Atomic tw_id id;   /* 0 until tw_add returned */
	_Atomic int add_rc; /* INT_MIN until tw_add returned */
	_Atomic unsigned releases;
	_Atomic unsigned cancels_ok;  /* tw_cancel calls that returned TW_OK */
	_Atomic uint64_t cancel_runs; /* runs allowed after tw_cancel returned TW_OK */
	_Atomic uint64_t calls, fails, max_run;
	_Atomic unsigned in_progress;
};

struct phase {
	const char *name;
	enum end_mode end;
	double seconds;
	unsigned executors, queue_capacity;
	unsigned slow_pct, slow_min_us, slow_max_us; /* K_SLOW runs: how often, how long */
	uint64_t run_limit_ms; /* runs longer are stuck: reported, and spare executors start */
	bool manual;           /* the manual clock: two application threads advance it */
	_Atomic unsigned advancers;
	bool check_late_release;
	tw_engine *engine;
	struct rec *pool;
	size_t pool_size;
	_Atomic size_t pool_used;
	_Atomic(struct rec *) slot[SLOTS];
	_Atomic bool app_stop;  /* application threads finish */
	_Atomic bool stopping;  /* tw_engine_stop or destroy is about to be called */
	_Atomic bool drained;   /* tw_engine_stop returned TW_OK */
	_Atomic bool destroyed; /* tw_engine_destroy returned */
	_Atomic uint64_t ops, adds, add_shutdown, pool_full, lost_slot, cancels;
	_Atomic uint64_t late_releases, log_warnings, running_at_stop;
	_Atomic long live;    /* tasks added and not released; approximate */
	_Atomic tw_id *known; /* ids tw_add handed out: an open-addressing set */
	size_t known_mask;
	_Atomic uint64_t walks, visits;
	_Atomic uint64_t name_taken, finds; /* tw_add's TW_EEXIST, tw_find's TW_OK */
};

static _Atomic unsigned long violations;
static bool loose_cancel; /* STRESS_LOOSE_CANCEL: firings handed out before tw_cancel may run */
static uint64_t base_seed;
static _Atomic uint64_t seed_counter;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void fail(const char *fmt, ...)
{
	unsigned long n = atomic_fetch_add(&violations, 1);
	if (n >= MAX_REPORTS)
		return;
	va_list ap;
	va_start(ap, fmt);
	flockfile(stderr);
	fprintf(stderr, "stress: FAIL: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	funlockfile(stderr);
	va_end(ap);
}

/* ---- helpers ---- */

static void sleep_us(unsigned us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };
	nanosleep(&ts, NULL);
}

/* One generator per thread, executors included; seeded on first use. */
static _Thread_local uint64_t rng_state;
static _Thread_local bool rng_seeded;

static unsigned rnd(unsigned n)
{
	if (!rng_seeded) {
		rng_state = base_seed ^
			    (atomic_fetch_add(&seed_counter, 1) * UINT64_C(0x2545f4914f6cdd1d));
		rng_seeded = true;
	}
	return (unsigned)(test_rng_next(&rng_state) % n);
}

static void atomic_max(_Atomic uint64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
	while (v > cur && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

static void atomic_min(_Atomic uint64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
	while (v < cur && !atomic_compare_exchange_weak(a, &cur, v))
		;
}

static const char *rc_name(int rc)
{
	return rc ? tw_strerror(rc) : "TW_OK";
}

/* ESHUTDOWN is right only once the test began to stop the engine. */
static bool shutdown_ok(struct phase *ph, int rc)
{
	return rc == -TW_ESHUTDOWN && atomic_load(&ph->stopping);
}

/* ---- ids handed out, for tw_list's visitors ---- */

static size_t id_hash(struct phase *ph, tw_id id)
{
	return (size_t)((id * UINT64_C(0x9e3779b97f4a7c15)) >> 20) & ph->known_mask;
}

static void know_id(struct phase *ph, tw_id id)
{
	for (size_t h = id_hash(ph, id), n = 0; n <= ph->known_mask;
	     h = (h + 1) & ph->known_mask, n++) {
		tw_id empty = 0;
		if (atomic_compare_exchange_strong(&ph->known[h], &empty, id) || empty == id)
			return;
	}
	fail("%s: the set of known ids is full", ph->name);
}

static bool id_known(struct phase *ph, tw_id id)
{
	for (size_t h = id_hash(ph, id), n = 0; n <= ph->known_mask;
	     h = (h + 1) & ph->known_mask, n++) {
		tw_id k = atomic_load_explicit(&ph->known[h], memory_order_relaxed);
		if (k == id)
			return true;
		if (!k)
			return false;
	}
	return false;
}

/* ---- tasks ---- */

static int callback(const tw_fire *fire, void *arg);
static void release(void *arg);

static struct rec *rec_new(struct phase *ph, unsigned kind, bool concurrent)
{
	size_t i = atomic_fetch_add(&ph->pool_used, 1);
	if (i >= ph->pool_size) {
		atomic_fetch_add(&ph->pool_full, 1);
		return NULL;
	}
	struct rec *r = &ph->pool[i];
	r->magic = REC_MAGIC;
	r->kind = kind;
	r->concurrent = concurrent;
	r->ph = ph;
	atomic_init(&r->id, 0);
	atomic_init(&r->add_rc, INT_MIN);
	atomic_init(&r->releases, 0);
	atomic_init(&r->cancels_ok, 0);
	atomic_init(&r->cancel_runs, UINT64_MAX);
	atomic_init(&r->calls, 0);
	atomic_init(&r->fails, 0);
	atomic_init(&r->max_run, 0);
	atomic_init(&r->in_progress, 0);
	return r;
}

/* Adds a task; returns its record, or NULL if it was not added. */
static struct rec *add_task(struct phase *ph, unsigned kind, bool one_shot)
{
	struct rec *r = rec_new(ph, kind, !one_shot && rnd(4) == 0);
	if (!r)
		return NULL;
	r->on_wheel = !r->concurrent && rnd(4) == 0;
	/* Some repeat by the calendar, every second (tw_set_period refuses them). */
	bool calendar = !one_shot && rnd(8) == 0;
	tw_task_spec spec = {
		.delay_ms = calendar && rnd(2) ? 0 : 1 + rnd(20),
		.period_ms = one_shot || calendar || rnd(4) == 0 ? 0 : 1 + rnd(20),
		.cron = calendar ? "CRON_TZ=UTC * * * * * *" : NULL,
		.callback = callback,
		.arg = r,
		.release = release,
		.flags = r->concurrent ? TW_CONCURRENT :
			 r->on_wheel   ? TW_ON_WHEEL_THREAD :
					 0,
	};
	/* A few names for many tasks: adds race for them, and lose while a holder is live. */
	char name[8];
	if (rnd(4) == 0) {
		snprintf(name, sizeof name, "n%u", rnd(16));
		spec.name = name;
	}
	atomic_fetch_add(&ph->live, 1);
	tw_id id = 0;
	int rc = tw_add(ph->engine, &spec, &id);
	atomic_store(&r->add_rc, rc);
	if (rc == TW_OK) {
		if (!id)
			fail("tw_add returned TW_OK and id 0");
		atomic_store(&r->id, id);
		know_id(ph, id);
		atomic_fetch_add(&ph->adds, 1);
		return r;
	}
	if (!atomic_load(&r->releases)) /* tw_add may have ended it itself */
		atomic_fetch_sub(&ph->live, 1);
	if (shutdown_ok(ph, rc))
		atomic_fetch_add(&ph->add_shutdown, 1);
	else if (rc == -TW_EEXIST && spec.name)
		atomic_fetch_add(&ph->name_taken, 1);
	else
		fail("%s: tw_add: unexpected %s", ph->name, rc_name(rc));
	return NULL;
}

static unsigned random_kind(void)
{
	unsigned kind = 0;
	if (rnd(4) == 0)
		kind |= K_FAIL;
	if (rnd(20) == 0)
		kind |= K_ALWAYS_FAIL;
	if (rnd(4) == 0)
		kind |= K_SLOW;
	if (rnd(3) == 0)
		kind |= K_SELF;
	if (rnd(4) == 0)
		kind |= K_OTHER;
	if (rnd(10) == 0)
		kind |= K_SPAWN;
	return kind;
}

/* Checks what tw_get said about a task; released_before was read before it. */
static void check_info(struct phase *ph, struct rec *r, tw_id id, const tw_task_info *info,
		       unsigned released_before)
{
	bool ended = info->state == TW_COMPLETED || info->state == TW_STOPPED;
	if (info->state > TW_STOPPED)
		fail("%s: task %" PRIu64 ": tw_get state %d", ph->name, id, (int)info->state);
	if (info->concurrent != r->concurrent)
		fail("%s: task %" PRIu64 ": tw_get concurrent %d, added with %d", ph->name, id,
		     info->concurrent, r->concurrent);
	if (!r->concurrent && info->running > 1)
		fail("%s: serial task %" PRIu64 ": %u runs in progress", ph->name, id,
		     info->running);
	if (info->on_wheel_thread && !r->on_wheel)
		fail("%s: task %" PRIu64 ": on the wheel thread, added without the flag", ph->name,
		     id);
	if (released_before && !ended)
		fail("%s: task %" PRIu64 ": released, but tw_get says state %d", ph->name, id,
		     (int)info->state);
}

/*
 * tw_cancel returned TW_OK: bound the runs of the task from now on. Strict
 * (default): no run starts after tw_cancel returned, so a run numbered above
 * the run count read now started too late. Loose: the firings already handed
 * to executors (counted in tw_task_info.running, which only falls once the
 * task is stopped) may still start, so the bound is the running count read
 * first plus the run count read after it. A task that is already gone
 * (TW_ENOTFOUND) was released, and the release checks cover it.
 */
static void cancelled(struct phase *ph, struct rec *r, tw_id id)
{
	atomic_fetch_add(&ph->cancels, 1);
	if (atomic_fetch_add(&r->cancels_ok, 1))
		fail("%s: task %" PRIu64 ": tw_cancel returned TW_OK twice", ph->name, id);
	tw_task_info first, second;
	int rc = tw_get(ph->engine, id, &first);
	if (rc == TW_OK && first.state != TW_STOPPED)
		fail("%s: task %" PRIu64 ": state %d right after tw_cancel returned", ph->name, id,
		     (int)first.state);
	if (rc == TW_OK && !loose_cancel)
		atomic_min(&r->cancel_runs, first.runs);
	if (rc == TW_OK && loose_cancel && (rc = tw_get(ph->engine, id, &second)) == TW_OK)
		atomic_min(&r->cancel_runs, second.runs + first.running);
	if (rc != TW_OK && rc != -TW_ENOTFOUND && !shutdown_ok(ph, rc))
		fail("%s: tw_get after tw_cancel: unexpected %s", ph->name, rc_name(rc));
}

/* tw_set_delay_many on id and on the tasks of three other random slots
 * (which may be gone, or empty: id 0); returns what it answered for id. */
static int set_delay_many(struct phase *ph, tw_id id)
{
	tw_id ids[4] = { id };
	for (int k = 1; k < 4; k++) {
		struct rec *other = atomic_load(&ph->slot[rnd(SLOTS)]);
		ids[k] = other ? atomic_load(&other->id) : 0;
	}
	int results[4];
	int rc = tw_set_delay_many(ph->engine, ids, 4, 1 + rnd(20), results);
	if (rc == -TW_ESHUTDOWN)
		return rc; /* results untouched; the caller judges the code */
	int first = TW_OK;
	for (int k = 0; k < 4; k++) {
		if (results[k] != TW_OK && results[k] != -TW_ESTATE && results[k] != -TW_ENOTFOUND)
			fail("%s: tw_set_delay_many: id %" PRIu64 ": unexpected %s", ph->name,
			     ids[k], rc_name(results[k]));
		if (results[k] != TW_OK && first == TW_OK)
			first = results[k];
	}
	if (rc != first)
		fail("%s: tw_set_delay_many answered %s, its first failure was %s", ph->name,
		     rc_name(rc), rc_name(first));
	return results[0];
}

enum { WALK_STOP = 7, WALK_UNKNOWN = 16 };

struct walk {
	struct phase *ph;
	unsigned flags;
	size_t visits, stop_at;      /* stop_at: answer WALK_STOP at this visit (0: never) */
	tw_id unknown[WALK_UNKNOWN]; /* ids not (yet) known when visited */
	size_t unknowns;
};

static int list_visit(tw_id id, const tw_task_info *info, void *ctx)
{
	struct walk *w = ctx;
	w->visits++;
	if (!id_known(w->ph, id) && w->unknowns < WALK_UNKNOWN)
		w->unknown[w->unknowns++] = id;
	if (info->state > TW_STOPPED ||
	    (!(w->flags & TW_LIST_ENDED) && info->state >= TW_COMPLETED))
		fail("%s: tw_list (flags %u) visited task %" PRIu64 " in state %d", w->ph->name,
		     w->flags, id, (int)info->state);
	if (!memchr(info->name, '\0', sizeof info->name) ||
	    (info->name[0] && (info->name[0] != 'n' || strlen(info->name) > 3)))
		fail("%s: tw_list: task %" PRIu64 " has a name never given", w->ph->name, id);
	if (!info->concurrent && info->running > 1)
		fail("%s: tw_list: serial task %" PRIu64 ": %u runs in progress", w->ph->name, id,
		     info->running);
	/* Sometimes the visitor reads the task it visits, or walks again inside the walk. */
	tw_task_info again;
	int rc = rnd(8) ? TW_OK : tw_get(w->ph->engine, id, &again);
	if (rc != TW_OK && rc != -TW_ENOTFOUND && !shutdown_ok(w->ph, rc))
		fail("%s: tw_get in a tw_list visitor: unexpected %s", w->ph->name, rc_name(rc));
	return w->visits == w->stop_at ? WALK_STOP : 0;
}

/* tw_list over the engine; each id it visited must be one that tw_add handed out. A task is
 * visible to the walk from inside tw_add: an id not known yet is known once every tw_add
 * going on returned, so it is looked up again for a while. */
static int list_tasks(struct phase *ph)
{
	struct walk w = { .ph = ph,
			  .flags = rnd(2) ? TW_LIST_ENDED : 0,
			  .stop_at = rnd(4) ? 0 : 1 + rnd(200) };
	int rc = tw_list(ph->engine, w.flags, list_visit, &w);
	int want = w.stop_at && w.visits == w.stop_at ? WALK_STOP : 0;
	if (rc != want)
		fail("%s: tw_list answered %d after %zu visits, wanted %d", ph->name, rc, w.visits,
		     want);
	atomic_fetch_add(&ph->walks, 1);
	atomic_fetch_add(&ph->visits, w.visits);
	char name[8];
	snprintf(name, sizeof name, "n%u", rnd(16));
	tw_id found;
	rc = tw_find(ph->engine, name, &found);
	if (rc == TW_OK)
		atomic_fetch_add(&ph->finds, 1);
	else if (rc != -TW_ENOTFOUND)
		fail("%s: tw_find: unexpected %s", ph->name, rc_name(rc));
	uint64_t deadline = test_now_ns() + UINT64_C(5000000000);
	for (size_t i = 0; i < w.unknowns; i++) {
		while (!id_known(ph, w.unknown[i]) && test_now_ns() < deadline)
			sleep_us(100);
		if (!id_known(ph, w.unknown[i]))
			fail("%s: tw_list visited id %" PRIu64 ", which tw_add never handed out",
			     ph->name, w.unknown[i]);
	}
	return TW_OK;
}

/* One random operation on a random slot, from an application thread or a callback. */
static void slot_op(struct phase *ph)
{
	atomic_fetch_add_explicit(&ph->ops, 1, memory_order_relaxed);
	unsigned i = rnd(SLOTS);
	struct rec *r = atomic_load(&ph->slot[i]);
	if (!r) {
		struct rec *added = add_task(ph, random_kind(), false);
		struct rec *empty = NULL;
		if (added && !atomic_compare_exchange_strong(&ph->slot[i], &empty, added)) {
			/* another thread filled the slot meanwhile: end this task */
			atomic_fetch_add(&ph->lost_slot, 1);
			tw_id id = atomic_load(&added->id);
			int rc = tw_cancel(ph->engine, id);
			if (rc == TW_OK)
				cancelled(ph, added, id);
			else if (rc != -TW_ESTATE && !shutdown_ok(ph, rc))
				fail("%s: tw_cancel of a new task: unexpected %s", ph->name,
				     rc_name(rc));
		}
		return;
	}
	tw_id id = atomic_load(&r->id);
	unsigned op = rnd(100);
	const char *name;
	bool gone = false; /* the task has ended: free the slot */
	int rc;
	if (op < 33) {
		name = "tw_get";
		unsigned released = atomic_load(&r->releases);
		tw_task_info info;
		rc = tw_get(ph->engine, id, &info);
		if (rc == TW_OK) {
			check_info(ph, r, id, &info, released);
			gone = info.state == TW_COMPLETED || info.state == TW_STOPPED;
		}
	} else if (op < 40) {
		name = "tw_set_delay";
		rc = tw_set_delay(ph->engine, id, 1 + rnd(20));
		gone = rc == -TW_ESTATE;
	} else if (op < 45) {
		name = "tw_set_delay_many";
		rc = set_delay_many(ph, id);
		gone = rc == -TW_ESTATE;
	} else if (op < 53) {
		name = "tw_set_period";
		rc = tw_set_period(ph->engine, id, rnd(8) ? 1 + rnd(20) : 0);
		gone = rc == -TW_ESTATE;
	} else if (op < 61) {
		name = "tw_pause";
		rc = tw_pause(ph->engine, id);
	} else if (op < 91) {
		name = "tw_resume";
		rc = tw_resume(ph->engine, id);
	} else if (op < 97) {
		name = "tw_cancel";
		rc = tw_cancel(ph->engine, id);
		if (rc == TW_OK)
			cancelled(ph, r, id);
		gone = rc == TW_OK || rc == -TW_ESTATE;
	} else if (op < 99) {
		name = "tw_stats";
		tw_engine_stats stats;
		rc = tw_stats(ph->engine, &stats);
	} else {
		name = "tw_list";
		rc = list_tasks(ph);
	}
	if (rc == -TW_ENOTFOUND)
		gone = true;
	else if (rc != TW_OK && rc != -TW_ESTATE && !shutdown_ok(ph, rc))
		fail("%s: %s(%" PRIu64 "): unexpected %s", ph->name, name, id, rc_name(rc));
	if (rc == -TW_ESTATE && !strcmp(name, "tw_get"))
		fail("%s: tw_get returned TW_ESTATE", ph->name);
	if (gone)
		atomic_compare_exchange_strong(&ph->slot[i], &r, NULL);
}

/* An operation of a callback on its own task, which cannot be gone mid-run. */
static void self_op(struct phase *ph, struct rec *r, tw_id id)
{
	unsigned op = rnd(20);
	const char *name;
	int rc;
	if (op < 8) {
		name = "tw_set_delay";
		rc = tw_set_delay(ph->engine, id, 1 + rnd(20));
	} else if (op < 14) {
		name = "tw_set_period";
		rc = tw_set_period(ph->engine, id, 1 + rnd(20));
	} else if (op < 16) {
		name = "tw_pause";
		rc = tw_pause(ph->engine, id);
	} else {
		name = "tw_cancel";
		rc = tw_cancel(ph->engine, id);
		if (rc == TW_OK)
			cancelled(ph, r, id);
	}
	if (rc != TW_OK && rc != -TW_ESTATE && !shutdown_ok(ph, rc))
		fail("%s: %s on its own task %" PRIu64 " during its run: %s", ph->name, name, id,
		     rc_name(rc));
}

static int callback(const tw_fire *fire, void *arg)
{
	uint64_t entered = test_now_ns();
	struct rec *r = arg;
	if (r->magic != REC_MAGIC) {
		fail("callback: arg %p is not a record", arg);
		return 0;
	}
	struct phase *ph = r->ph;
	if (atomic_load(&ph->drained))
		fail("%s: task %" PRIu64 " run %" PRIu64
		     " started after tw_engine_stop returned TW_OK",
		     ph->name, fire->id, fire->run);
	if (atomic_load(&r->releases))
		fail("%s: task %" PRIu64 " run %" PRIu64 " started after its release", ph->name,
		     fire->id, fire->run);
	tw_id id = atomic_load(&r->id);
	if (id && id != fire->id)
		fail("%s: fire.id %" PRIu64 " for the record of task %" PRIu64, ph->name, fire->id,
		     id);
	uint64_t cancel_runs = atomic_load(&r->cancel_runs);
	if (fire->run > cancel_runs)
		fail("%s: task %" PRIu64 " run %" PRIu64
		     " started after tw_cancel returned (%" PRIu64 " runs allowed)",
		     ph->name, fire->id, fire->run, cancel_runs);
	if (!fire->run)
		fail("%s: task %" PRIu64 ": tw_fire.run 0", ph->name, fire->id);
	if (!ph->manual && entered < fire->due_ns) /* manual time is not the real clock */
		fail("%s: task %" PRIu64 " run %" PRIu64 ": %" PRIu64 " ns before its due time",
		     ph->name, fire->id, fire->run, fire->due_ns - entered);
	if (atomic_fetch_add(&r->in_progress, 1) && !r->concurrent)
		fail("%s: runs of serial task %" PRIu64 " overlap", ph->name, fire->id);
	atomic_max(&r->max_run, fire->run);
	atomic_fetch_add_explicit(&r->calls, 1, memory_order_relaxed);

	if ((r->kind & K_SLOW) && rnd(100) < ph->slow_pct)
		sleep_us(ph->slow_min_us + rnd(ph->slow_max_us - ph->slow_min_us + 1));
	if ((r->kind & K_SELF) && rnd(2) == 0)
		self_op(ph, r, fire->id);
	if (r->kind & K_OTHER)
		for (unsigned n = 1 + rnd(2); n; n--)
			slot_op(ph);
	if ((r->kind & K_SPAWN) && rnd(4) == 0 && atomic_load(&ph->live) < MAX_LIVE)
		add_task(ph, rnd(2) ? K_FAIL : K_SLOW, true);
	int rc = (r->kind & K_ALWAYS_FAIL) || ((r->kind & K_FAIL) && rnd(3) == 0);
	if (rc)
		atomic_fetch_add_explicit(&r->fails, 1, memory_order_relaxed);

	atomic_fetch_sub(&r->in_progress, 1);
	if (atomic_load(&r->releases))
		fail("%s: task %" PRIu64 " released during run %" PRIu64, ph->name, fire->id,
		     fire->run);
	return rc;
}

static void release(void *arg)
{
	struct rec *r = arg;
	if (r->magic != REC_MAGIC) {
		fail("release: arg %p is not a record", arg);
		return;
	}
	struct phase *ph = r->ph;
	tw_id id = atomic_load(&r->id);
	if (atomic_fetch_add(&r->releases, 1))
		fail("%s: task %" PRIu64 " released twice", ph->name, id);
	if (atomic_load(&r->in_progress))
		fail("%s: task %" PRIu64 " released while its callback runs", ph->name, id);
	if (atomic_load(&ph->destroyed))
		fail("%s: task %" PRIu64 " released after tw_engine_destroy returned", ph->name,
		     id);
	if (ph->check_late_release && atomic_load(&ph->drained))
		atomic_fetch_add(&ph->late_releases, 1);
	atomic_fetch_sub(&ph->live, 1);
}

static void log_message(int level, const char *message, void *arg)
{
	struct phase *ph = arg;
	if (level == TW_LOG_ERROR && !(ph->run_limit_ms && strstr(message, "run_limit_ms")))
		fail("%s: engine logged an error: %s", ph->name, message);
	else
		atomic_fetch_add_explicit(&ph->log_warnings, 1, memory_order_relaxed);
}

/* ---- phases ---- */

/* The manual clock's driver: advances it and sometimes waits for the runs, while the other
 * threads operate on the tasks (tw_advance and the wheel thread meet under the engine's lock:
 * this is what found tw_advance reading advance_done outside it). */
static void advance_clock(struct phase *ph)
{
	while (!atomic_load(&ph->app_stop)) {
		int rc = tw_advance(ph->engine, 1 + rnd(2));
		if (rc && !shutdown_ok(ph, rc))
			fail("%s: tw_advance: %s", ph->name, rc_name(rc));
		if (rnd(16) == 0 && (rc = tw_quiesce(ph->engine)) != TW_OK)
			fail("%s: tw_quiesce: %s", ph->name, rc_name(rc));
		sleep_us(50 + rnd(200));
	}
}

static void *app_main(void *arg)
{
	struct phase *ph = arg;
	if (ph->manual && atomic_fetch_add(&ph->advancers, 1) < 2) {
		advance_clock(ph);
		return NULL;
	}
	while (!atomic_load(&ph->app_stop)) {
		for (unsigned n = 0; n < 8; n++)
			slot_op(ph);
		sleep_us(200 + rnd(400)); /* tasks live long enough to fire often */
	}
	return NULL;
}

struct totals {
	uint64_t ops, runs, tasks;
};

static int compare_ids(const void *a, const void *b)
{
	tw_id x = *(const tw_id *)a, y = *(const tw_id *)b;
	return (x > y) - (x < y);
}

/* After tw_engine_destroy: every record's story must add up. */
static void verify(struct phase *ph, struct totals *sum, uint64_t engine_runs,
		   uint64_t engine_fails, bool engine_counts)
{
	size_t used = atomic_load(&ph->pool_used);
	if (used > ph->pool_size)
		used = ph->pool_size;
	uint64_t calls = 0, fails = 0, added = 0, shutdown_released = 0;
	tw_id *ids = malloc((used ? used : 1) * sizeof *ids);
	if (!ids) {
		fail("out of memory");
		return;
	}
	for (size_t i = 0; i < used; i++) {
		struct rec *r = &ph->pool[i];
		int rc = atomic_load(&r->add_rc);
		unsigned releases = atomic_load(&r->releases);
		tw_id id = atomic_load(&r->id);
		calls += atomic_load(&r->calls);
		fails += atomic_load(&r->fails);
		if (rc == TW_OK) {
			ids[added++] = id;
			if (releases != 1)
				fail("%s: task %" PRIu64 " released %u times", ph->name, id,
				     releases);
		} else if (rc == -TW_ESHUTDOWN) {
			/* tw_add may have ended the task itself, or not taken it */
			shutdown_released += releases;
			if (releases > 1)
				fail("%s: task refused by tw_add released %u times", ph->name,
				     releases);
		} else if (releases) {
			fail("%s: task refused by tw_add (%s) released %u times", ph->name,
			     rc_name(rc), releases);
		}
		if (atomic_load(&r->in_progress))
			fail("%s: task %" PRIu64 ": callback still running after destroy", ph->name,
			     id);
		uint64_t cancel_runs = atomic_load(&r->cancel_runs),
			 max_run = atomic_load(&r->max_run);
		if (max_run > cancel_runs)
			fail("%s: task %" PRIu64 " ran %" PRIu64 " times, %" PRIu64
			     " allowed once tw_cancel returned",
			     ph->name, id, max_run, cancel_runs);
	}
	qsort(ids, added, sizeof *ids, compare_ids);
	for (size_t i = 1; i < added; i++)
		if (ids[i] == ids[i - 1])
			fail("%s: id %" PRIu64 " handed out twice", ph->name, ids[i]);
	free(ids);
	if (engine_counts && (engine_runs != calls || engine_fails != fails))
		fail("%s: after a drained stop the engine counts %" PRIu64 " runs and %" PRIu64
		     " failures, callbacks saw %" PRIu64 " and %" PRIu64,
		     ph->name, engine_runs, engine_fails, calls, fails);
	if (atomic_load(&ph->late_releases))
		fail("%s: %" PRIu64 " releases came after tw_engine_stop returned TW_OK", ph->name,
		     atomic_load(&ph->late_releases));
	if (atomic_load(&ph->pool_full))
		printf("stress:   %s: record pool full, %" PRIu64 " adds skipped\n", ph->name,
		       atomic_load(&ph->pool_full));
	printf("stress:   %s: %" PRIu64 " ops, %" PRIu64 " runs (%" PRIu64 " failed), %" PRIu64
	       " tasks, %" PRIu64 " cancels, %" PRIu64 " adds refused at shutdown (%" PRIu64
	       " of them released)\n",
	       ph->name, atomic_load(&ph->ops), calls, fails, added, atomic_load(&ph->cancels),
	       atomic_load(&ph->add_shutdown), shutdown_released);
	sum->ops += atomic_load(&ph->ops);
	sum->runs += calls;
	sum->tasks += added;
}

/* Before stopping: how many tasks have a run going (phase 2 wants some). */
static void note_running(struct phase *ph)
{
	tw_engine_stats stats;
	if (tw_stats(ph->engine, &stats) == TW_OK)
		atomic_store(&ph->running_at_stop, stats.tasks_running);
}

static void run_phase(struct phase *ph, struct totals *sum)
{
	uint64_t t0 = test_now_ns();
	ph->pool = calloc(ph->pool_size, sizeof *ph->pool);
	for (ph->known_mask = 1023; ph->known_mask < 2 * ph->pool_size;)
		ph->known_mask = ph->known_mask * 2 + 1;
	ph->known = calloc(ph->known_mask + 1, sizeof *ph->known);
	if (!ph->pool || !ph->known) {
		fail("out of memory");
		free(ph->pool);
		free(ph->known);
		return;
	}
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = ph->executors;
	cfg.queue_capacity = ph->queue_capacity;
	cfg.max_failures = 4;
	cfg.slow_run_ms = 1;
	cfg.retain_ms = 20; /* ended tasks vanish, and their slots are reused, quickly */
	cfg.run_limit_ms = ph->run_limit_ms;
	cfg.manual_clock = ph->manual;
	cfg.log = log_message;
	cfg.log_arg = ph;
	int rc = tw_engine_create(&cfg, &ph->engine);
	if (rc) {
		fail("%s: tw_engine_create: %s", ph->name, rc_name(rc));
		free(ph->pool);
		free(ph->known);
		return;
	}
	for (unsigned i = 0; i < SLOTS; i++)
		atomic_store(&ph->slot[i], add_task(ph, random_kind(), false));

	pthread_t apps[APP_THREADS];
	for (unsigned i = 0; i < APP_THREADS; i++)
		if (pthread_create(&apps[i], NULL, app_main, ph)) {
			fprintf(stderr, "stress: pthread_create failed\n");
			exit(1);
		}
	sleep_us((unsigned)(ph->seconds * 1e6));

	tw_engine_stats stats = { 0 };
	bool counts = false;
	if (ph->end == END_DRAIN) {
		atomic_store(&ph->app_stop, true);
		for (unsigned i = 0; i < APP_THREADS; i++)
			pthread_join(apps[i], NULL);
		atomic_store(&ph->stopping, true);
		rc = tw_engine_stop(ph->engine, 10000);
		if (rc == TW_OK) {
			atomic_store(&ph->drained, true);
			/* every task ended, and no run is going: all released */
			size_t used = atomic_load(&ph->pool_used);
			uint64_t pending = 0;
			for (size_t i = 0; i < used && i < ph->pool_size; i++)
				pending += atomic_load(&ph->pool[i].add_rc) == TW_OK &&
					   !atomic_load(&ph->pool[i].releases);
			if (pending)
				fail("%s: tw_engine_stop returned TW_OK with %" PRIu64
				     " tasks not released yet",
				     ph->name, pending);
			rc = tw_stats(ph->engine, &stats);
			counts = rc == TW_OK;
			/* The counts by state are kept as tasks move, from every thread: after a
			 * drained stop every task is ended, so each count must be back to 0. */
			if (counts && (stats.tasks_live || stats.tasks_waiting ||
				       stats.tasks_running || stats.tasks_paused))
				fail("%s: after the stop, %" PRIu64 " live tasks counted (%" PRIu64
				     " waiting, %" PRIu64 " running, %" PRIu64 " paused)",
				     ph->name, stats.tasks_live, stats.tasks_waiting,
				     stats.tasks_running, stats.tasks_paused);
		} else {
			fail("%s: tw_engine_stop(10 s drain): %s", ph->name, rc_name(rc));
		}
		tw_engine_destroy(ph->engine);
	} else if (ph->end == END_STOP_RACING) {
		note_running(ph);
		atomic_store(&ph->stopping, true);
		rc = tw_engine_stop(ph->engine, rnd(3));
		if (rc == TW_OK)
			atomic_store(&ph->drained, true);
		else if (rc != -TW_ETIMEDOUT)
			fail("%s: tw_engine_stop: %s", ph->name, rc_name(rc));
		atomic_store(&ph->app_stop, true);
		for (unsigned i = 0; i < APP_THREADS; i++)
			pthread_join(apps[i], NULL);
		tw_engine_destroy(ph->engine);
	} else {
		atomic_store(&ph->app_stop, true);
		for (unsigned i = 0; i < APP_THREADS; i++)
			pthread_join(apps[i], NULL);
		note_running(ph);
		atomic_store(&ph->stopping, true);
		tw_engine_destroy(ph->engine);
	}
	atomic_store(&ph->destroyed, true);
	verify(ph, sum, stats.runs, stats.failures, counts);
	if (counts)
		printf("stress:   %s: engine skipped %" PRIu64 " (overlap) %" PRIu64
		       " (overload) %" PRIu64 " (missed), %" PRIu64 " slow runs, %" PRIu64
		       " stuck, %" PRIu64 " spare executors, %" PRIu64 " warnings logged\n",
		       ph->name, stats.skipped_overlap, stats.skipped_overload,
		       stats.skipped_missed, stats.slow_runs, stats.stuck_runs,
		       stats.spare_executors, atomic_load(&ph->log_warnings));
	else
		printf("stress:   %s: %" PRIu64 " tasks had a run going when stopped\n", ph->name,
		       atomic_load(&ph->running_at_stop));
	printf("stress:   %s: %" PRIu64 " tw_list walks, %" PRIu64 " tasks visited\n", ph->name,
	       atomic_load(&ph->walks), atomic_load(&ph->visits));
	printf("stress:   %s: %" PRIu64 " adds refused for a live name, %" PRIu64 " names found\n",
	       ph->name, atomic_load(&ph->name_taken), atomic_load(&ph->finds));
	printf("stress:   %s: %.2f s\n", ph->name, (double)(test_now_ns() - t0) / 1e9);
	free(ph->pool);
	free(ph->known);
}

/*
 * One name, added and cancelled in a loop by one thread while another finds it and reads it:
 * a task found by its name is shown with that name (tw_get shows a task's name as long as it
 * shows the task). The cancelled tasks are kept (retain_ms), so the table grows throughout,
 * while tw_find reads it.
 */
struct name_race {
	tw_engine *engine;
	_Atomic bool stop;
	_Atomic uint64_t adds, hits, nameless;
};

static int idle_callback(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 0;
}

static void *name_adder(void *arg)
{
	enum { MAX_ADDS = 200000 }; /* kept 5 s each: about 80 MB with their names */
	struct name_race *r = arg;
	while (!atomic_load(&r->stop) && atomic_load(&r->adds) < MAX_ADDS) {
		tw_task_spec spec = { .delay_ms = 60000, .callback = idle_callback, .name = "nm" };
		tw_id id;
		int rc = tw_add(r->engine, &spec, &id);
		if (rc == -TW_EEXIST)
			continue;
		if (rc != TW_OK) {
			fail("names: tw_add: unexpected %s", rc_name(rc));
			break;
		}
		atomic_fetch_add(&r->adds, 1);
		rc = tw_cancel(r->engine, id);
		if (rc != TW_OK)
			fail("names: tw_cancel of the task just added: %s", rc_name(rc));
	}
	return NULL;
}

static void *name_finder(void *arg)
{
	struct name_race *r = arg;
	while (!atomic_load(&r->stop)) {
		tw_id id;
		if (tw_find(r->engine, "nm", &id) != TW_OK)
			continue;
		tw_task_info info;
		if (tw_get(r->engine, id, &info) != TW_OK)
			continue; /* forgotten meanwhile */
		atomic_fetch_add(&r->hits, 1);
		if (strcmp(info.name, "nm")) {
			atomic_fetch_add(&r->nameless, 1);
			fail("names: task %" PRIu64
			     " found as \"nm\", tw_get shows state %d, name \"%s\"",
			     id, (int)info.state, info.name);
		}
	}
	return NULL;
}

static void run_name_race(double seconds)
{
	enum { MIN_ADDS = 120000 };
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	struct name_race r = { 0 };
	int rc = tw_engine_create(&cfg, &r.engine);
	if (rc != TW_OK) {
		fail("names: tw_engine_create: %s", rc_name(rc));
		return;
	}
	pthread_t adder, finder;
	if (pthread_create(&adder, NULL, name_adder, &r) ||
	    pthread_create(&finder, NULL, name_finder, &r)) {
		fail("names: pthread_create failed");
		abort();
	}
	/* At least the adds that grow the table's directory a few times over (it doubles from
	 * 16 chunks of 1724 tasks), however slow the build: TSan saw that race there. */
	uint64_t t0 = test_now_ns(), least_ns = (uint64_t)(seconds * 1e9),
		 most_ns = UINT64_C(30000000000);
	while (test_now_ns() - t0 < most_ns &&
	       (test_now_ns() - t0 < least_ns || atomic_load(&r.adds) < MIN_ADDS))
		sleep_us(10000);
	atomic_store(&r.stop, true);
	pthread_join(adder, NULL);
	pthread_join(finder, NULL);
	tw_engine_destroy(r.engine);
	printf("stress:   names: %" PRIu64 " adds, %" PRIu64 " found and shown, %" PRIu64
	       " without their name\n",
	       atomic_load(&r.adds), atomic_load(&r.hits), atomic_load(&r.nameless));
}

int main(int argc, char **argv)
{
	double seconds = 3;
	const char *arg = argc > 1 ? argv[1] : getenv("STRESS_SECONDS");
	if (arg && (seconds = strtod(arg, NULL)) <= 0) {
		fprintf(stderr, "usage: %s [seconds > 0]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0); /* lines in order with the reports on stderr */
	const char *seed = getenv("STRESS_SEED");
	base_seed = seed ? strtoull(seed, NULL, 0) : test_now_ns();
	const char *loose = getenv("STRESS_LOOSE_CANCEL");
	loose_cancel = loose && *loose && strcmp(loose, "0");
	printf("stress: seed %" PRIu64 ", %.1f s of churn%s\n", base_seed, seconds,
	       loose_cancel ? ", loose cancel check" : "");

	const char *rounds_env = getenv("STRESS_ROUNDS");
	unsigned rounds = rounds_env ? (unsigned)strtoul(rounds_env, NULL, 0) : 6;

	struct totals sum = { 0 };
	struct phase churn = {
		.name = "churn",
		.end = END_DRAIN,
		.seconds = seconds,
		.executors = 3,
		.queue_capacity = 16, /* small: some firings are skipped for overload */
		.slow_pct = 10,
		.slow_min_us = 100,
		.slow_max_us = 2000,
		/* Runs over 1 ms hold up the firings queued behind them (taken by another
		 * executor) and are stuck: every path of the watch, spares included. */
		.run_limit_ms = 1,
		.check_late_release = true,
		.pool_size = (size_t)(65536 + (seconds < 60 ? seconds : 60) * 20000),
	};
	run_phase(&churn, &sum);
	struct phase manual = {
		.name = "manual-clock",
		.end = END_DRAIN,
		.seconds = seconds / 2,
		.executors = 2,
		.queue_capacity = 16,
		.slow_pct = 10,
		.slow_min_us = 100,
		.slow_max_us = 2000,
		.manual = true,
		.check_late_release = true,
		.pool_size = (size_t)(65536 + (seconds < 60 ? seconds : 60) * 10000),
	};
	run_phase(&manual, &sum);
	run_name_race(seconds / 3);
	for (unsigned round = 0; round < rounds; round++) {
		struct phase teardown = {
			.name = round % 2 ? "destroy-while-running" : "stop-while-running",
			.end = round % 2 ? END_DESTROY : END_STOP_RACING,
			.seconds = 0.2,
			.executors = 2,
			.queue_capacity = 64,
			.slow_pct = 100,
			.slow_min_us = 2000,
			.slow_max_us = 6000,
			.pool_size = 1u << 16,
		};
		run_phase(&teardown, &sum);
	}
	unsigned long n = atomic_load(&violations);
	if (n) {
		printf("stress: %lu violations (first %u printed on stderr)\n", n, MAX_REPORTS);
		return 1;
	}
	printf("stress: %" PRIu64 " ops, %" PRIu64 " runs, %" PRIu64 " tasks, all released once\n",
	       sum.ops, sum.runs, sum.tasks);
	return 0;
}
