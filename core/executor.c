/*
 * executor.c - the threads that run callbacks: each takes firings from its
 * own ring (handover.c fills it), runs them, accounts for failures and slow
 * runs, and ends tasks whose last run it was. An idle executor sleeps on a
 * futex until the wheel thread kicks it.
 */
#include "alloc.h"
#include "internal.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Thread_local struct tw_engine *executing_for; /* set on executor threads */

bool tw__engine_on_executor(const struct tw_engine *e)
{
	return executing_for == e;
}

void tw__futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct timespec *timeout)
{
	/* EAGAIN (the word changed), EINTR and ETIMEDOUT all mean "look again", which every
	 * caller does in a loop; nothing else can happen with a word of our own. */
	(void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, timeout, NULL,
		      0);
}

void tw__futex_wake_all(_Atomic uint32_t *word)
{
	/* Cannot fail for an aligned word of this process. */
	(void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static bool pop(struct executor *x, struct firing *f)
{
	uint64_t head = atomic_load_explicit(&x->head, memory_order_relaxed);
	/* The wheel thread's tail is read only when the ring looks empty. */
	if (head == x->tail_seen) {
		x->tail_seen = atomic_load_explicit(&x->tail, memory_order_acquire);
		if (head == x->tail_seen)
			return false;
	}
	*f = x->ring[head & x->mask];
	atomic_store_explicit(&x->head, head + 1, memory_order_release);
	/* Two runs ahead: the task's hot line and cold lines. One run ahead: what
	 * its callback will most likely touch first, its arg, read from the cold
	 * line fetched one pop ago. */
	if (head + 2 < x->tail_seen) {
		struct tw_task *after_next = x->ring[(head + 2) & x->mask].task;
		struct task_cold *cold = task_cold(after_next);
		__builtin_prefetch(after_next, 1);
		__builtin_prefetch(cold, 1);
		__builtin_prefetch(&cold->consecutive_failures, 1);
	}
	if (head + 1 < x->tail_seen) {
		void *arg = task_cold(x->ring[(head + 1) & x->mask].task)->arg;
		if (arg) /* for reading: many tasks may share one arg */
			__builtin_prefetch(arg, 0);
	}
	return true;
}

static void note_lateness(struct executor *x, uint64_t late_ns)
{
	uint64_t us = late_ns / 1000;
	unsigned bucket = us ? 64 - (unsigned)__builtin_clzll(us) : 0;
	if (bucket >= TW_LATENESS_BUCKETS)
		bucket = TW_LATENESS_BUCKETS - 1;
	bump(&x->lateness[bucket]);
	if (late_ns > atomic_load_explicit(&x->lateness_max_ns, memory_order_relaxed))
		atomic_store_explicit(&x->lateness_max_ns, late_ns, memory_order_relaxed);
}

/* Lock held: accounts for a run that returned rc after took_ns. Returns the
 * failures in a row if this one paused the task (to be logged once the lock
 * is let go: the log hook is user code), else 0. */
static uint32_t account(struct executor *x, struct tw_task *task, struct task_cold *cold, int rc,
			uint64_t took_ns)
{
	struct tw_engine *e = x->engine;
	atomic_store_explicit(&cold->last_run_ns, took_ns, memory_order_relaxed);
	if (took_ns > atomic_load_explicit(&cold->longest_run_ns, memory_order_relaxed))
		atomic_store_explicit(&cold->longest_run_ns, took_ns, memory_order_relaxed);
	if (took_ns > e->slow_run_ns) {
		bump32(&cold->slow_runs);
		bump(&x->slow_runs);
	}
	if (!rc) {
		if (atomic_load_explicit(&cold->consecutive_failures, memory_order_relaxed))
			atomic_store_explicit(&cold->consecutive_failures, 0, memory_order_relaxed);
		return 0;
	}
	bump32(&cold->failures);
	bump(&x->failures);
	uint32_t row = bump32(&cold->consecutive_failures);
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if (e->cfg.max_failures && row >= e->cfg.max_failures &&
	    (state == TW_WAITING || state == TW_RUNNING)) {
		atomic_store_explicit(&task->state, TW_PAUSED, memory_order_relaxed);
		task_set_paused_by_failures(task, true);
		return row;
	}
	return 0;
}

/* Lock held: a run ended; the task waits again, completes, or stays put. */
static void run_ended(struct executor *x, struct tw_task *task, struct after_unlock *after)
{
	struct tw_engine *e = x->engine;
	uint32_t left = atomic_load_explicit(&task->running, memory_order_relaxed) - 1;
	atomic_store_explicit(&task->running, left, memory_order_relaxed);
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if (state == TW_RUNNING && !left) {
		if (atomic_load_explicit(&task->due_ns, memory_order_relaxed)) {
			atomic_store_explicit(&task->state, TW_WAITING, memory_order_relaxed);
		} else {
			tw__task_end(&x->ends, task, TW_COMPLETED);
			state = TW_COMPLETED;
		}
	}
	if (state == TW_COMPLETED || state == TW_STOPPED)
		tw__task_end_if_idle(e, task, x, after);
}

/*
 * Lock held: may this queued firing start? Not once the task was paused or
 * ended, nor once the engine stops: whoever paused or cancelled it was told
 * that no new run starts. A firing that does not start counts as skipped.
 */
static bool may_start(struct tw_engine *e, struct tw_task *task, const struct firing *f)
{
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if (!atomic_load_explicit(&e->stopping, memory_order_relaxed) &&
	    (state == TW_WAITING || state == TW_RUNNING))
		return true;
	bump_skips(&task_cold(task)->skipped_missed, 1);
	add_skipped(task, f->skipped + 1);
	return false;
}

/*
 * One handed firing or release call is over. An executor that runs dry wakes
 * whoever waits for runs to finish: the seq_cst store and load pair with the
 * waiter's (wait_runs), so that either it sees this run done or this sees it.
 */
static void run_finished(struct executor *x)
{
	struct tw_engine *e = x->engine;
	uint64_t done = atomic_load_explicit(&x->done, memory_order_relaxed) + 1;
	/* Not dry while the ring holds a firing: its end will look again. */
	if (atomic_load_explicit(&x->head, memory_order_relaxed) != x->tail_seen) {
		atomic_store_explicit(&x->done, done, memory_order_release);
		return;
	}
	atomic_store_explicit(&x->done, done, memory_order_seq_cst);
	if (atomic_load_explicit(&e->drain_waiters, memory_order_seq_cst)) {
		atomic_fetch_add_explicit(&e->drain_signal, 1, memory_order_seq_cst);
		tw__futex_wake_all(&e->drain_signal);
	}
}

bool tw__runs_idle(struct tw_engine *e)
{
	for (;;) {
		uint64_t before = 0, after = 0;
		bool idle = true;
		for (unsigned i = 0; i < e->executor_count; i++) {
			struct executor *x = &e->executors[i];
			/* done first: it never passes handed, so a match means idle */
			uint64_t done = atomic_load_explicit(&x->done, memory_order_seq_cst);
			uint64_t handed = atomic_load_explicit(&x->handed, memory_order_seq_cst);
			idle = idle && done == handed;
			before += handed;
		}
		if (!idle)
			return false;
		/* Nothing handed over during the scan: all were idle at its end. */
		for (unsigned i = 0; i < e->executor_count; i++)
			after +=
				atomic_load_explicit(&e->executors[i].handed, memory_order_seq_cst);
		if (after == before)
			return true;
	}
}

static void run(struct executor *x, const struct firing *f)
{
	struct tw_engine *e = x->engine;
	struct tw_task *task = f->task;
	struct task_cold *cold = task_cold(task);
	tw__task_lock(task);
	bool starts = may_start(e, task, f);
	tw_fire fire = {
		.id = atomic_load_explicit(&task->id, memory_order_relaxed),
		.due_ns = f->due_ns,
		.run = starts ? bump(&cold->runs) : 0,
		.skipped = f->skipped,
	};
	tw__task_unlock(task);
	int rc = 0;
	uint64_t took = 0;
	if (starts) {
		uint64_t start = monotonic_ns();
		uint64_t now = e->cfg.manual_clock ? tw__engine_now_ns(e) : start;
		note_lateness(x, now > f->due_ns ? now - f->due_ns : 0);
		bump(&x->runs);
		rc = cold->callback(&fire, cold->arg);
		took = monotonic_ns() - start;
		uint64_t average = atomic_load_explicit(&x->run_ns_average, memory_order_relaxed);
		atomic_store_explicit(&x->run_ns_average, average - average / 16 + took / 16,
				      memory_order_relaxed);
	} else {
		bump(&x->dropped);
	}
	tw__task_lock(task);
	uint32_t paused_after = starts ? account(x, task, cold, rc, took) : 0;
	struct after_unlock after = { 0 };
	run_ended(x, task, &after);
	tw__task_unlock(task);
	if (paused_after)
		tw__engine_log(e, TW_LOG_WARNING, "task %llu paused after %u failures in a row",
			   (unsigned long long)fire.id, paused_after);
	after_unlock_run(after);
	run_finished(x);
}

/* Calls the release of one-shots that ended without a run, then lets the
 * wheel thread reap them (not before: the call reads the task). */
static void run_releases(struct executor *x)
{
	struct cds_wfcq_node *node;
	if (cds_wfcq_empty(&x->releases_head, &x->releases_tail))
		return;
	while ((node = cds_wfcq_dequeue_blocking(&x->releases_head, &x->releases_tail))) {
		struct tw_task *task = caa_container_of(node, struct tw_task, to_release);
		HANDOVER_ACQUIRE(task);
		struct task_cold *cold = task_cold(task);
		if (cold->release)
			cold->release(cold->arg);
		tw__task_lock(task);
		task->release_queued = false;
		bool wake = tw__task_mail(x->engine, task);
		tw__task_unlock(task);
		if (wake)
			tw__engine_wake(x->engine);
		run_finished(x);
	}
}

static bool idle(struct executor *x)
{
	return atomic_load(&x->head) == atomic_load(&x->tail) &&
	       cds_wfcq_empty(&x->releases_head, &x->releases_tail);
}

static void pin(struct executor *x)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET((int)(x->index % (unsigned)(cpus > 0 ? cpus : 1)), &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof set, &set))
		tw__engine_log(x->engine, TW_LOG_WARNING, "could not pin executor %u", x->index);
}

static void *executor_main(void *arg)
{
	struct executor *x = arg;
	struct firing f;
	executing_for = x->engine;
	if (x->engine->cfg.pin_executors)
		pin(x);
	for (;;) {
		uint32_t signal = atomic_load(&x->signal);
		run_releases(x); /* first: a ring that never empties must not hold them */
		if (pop(x, &f)) {
			run(x, &f);
			continue;
		}
		if (atomic_load(&x->quit) && idle(x))
			break;
		atomic_store(&x->sleeping, true);
		if (idle(x) && !atomic_load(&x->quit))
			tw__futex_wait(&x->signal, signal, NULL);
		atomic_store(&x->sleeping, false);
	}
	return NULL;
}

static unsigned round_up_pow2(unsigned n)
{
	unsigned p = 1;
	while (p < n && p < (1u << 30))
		p <<= 1;
	return p;
}

int tw__executors_start(struct tw_engine *e)
{
	unsigned capacity = e->cfg.queue_capacity ? e->cfg.queue_capacity : 4096;
	unsigned size = round_up_pow2(capacity);
	capacity = capacity < size ? capacity : size;
	for (unsigned i = 0; i < e->executor_count; i++) {
		struct executor *x = &e->executors[i];
		x->engine = e;
		x->index = i;
		x->mask = size - 1;
		x->capacity = capacity;
		cds_wfcq_init(&x->releases_head, &x->releases_tail);
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): the ring holds pointers to tasks */
		x->ended = tw__alloc(ENDED_RING * sizeof *x->ended);
		x->ring = tw__alloc(size * sizeof *x->ring);
		if (!x->ring || !x->ended) {
			tw__free(x->ring, size * sizeof *x->ring);
			x->ring = NULL;
			return -TW_ENOMEM;
		}
		if (pthread_create(&x->thread, NULL, executor_main, x)) {
			tw__free(x->ring, size * sizeof *x->ring);
			x->ring = NULL;
			return -TW_ENOMEM;
		}
	}
	return TW_OK;
}

/* Lets every executor finish what it holds, then joins it. */
void tw__executors_join(struct tw_engine *e)
{
	for (unsigned i = 0; i < e->executor_count; i++) {
		struct executor *x = &e->executors[i];
		if (x->ring) {
			atomic_store(&x->quit, true);
			tw__executor_wake(x);
			int err = pthread_join(x->thread, NULL);
			if (err) /* a thread of ours that cannot be joined: say so, go on */
				tw__engine_log(e, TW_LOG_ERROR, "joining executor %u: %s", i,
					       tw__strerror(err));
			tw__free(x->ring, (x->mask + 1) * sizeof *x->ring);
			x->ring = NULL;
			cds_wfcq_destroy(&x->releases_head, &x->releases_tail);
		}
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): the ring holds pointers to tasks */
		tw__free(x->ended, ENDED_RING * sizeof *x->ended);
		x->ended = NULL;
	}
}
