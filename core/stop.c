/*
 * stop.c - the end of an engine: stop, destroy, quiesce, what a stuck run or
 * a callback changes about them, and the engine freed once its threads are gone.
 *
 * A stop ends every task at once and releases each that has no run going:
 * firings queued but not started are taken out of the rings and dropped, so
 * a stuck run holds back only its own task. Destroy waits for the runs still
 * going, except those past run_limit_ms: their executors are abandoned, and
 * the engine is freed by whoever lets go of it last (tw__engine_unref). From
 * a callback, destroy is completed by that callback's executor once it
 * returns (tw__engine_destroy_deferred), or by the wheel thread for one of its own.
 */
#include "alloc.h"
#include "calendar_tasks.h"
#include "lifecycle.h"

#include <unistd.h>

/* Stop, for one task: it ends now, and is released unless a run is going. */
static void stop_task(struct tw_task *task, void *ctx)
{
	struct tw_engine *e = ctx;
	/* seq_cst: pairs with tw_add's publication of the id (see there). */
	if (!atomic_load_explicit(&task->id, memory_order_seq_cst))
		return;
	tw__task_lock(task);
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	struct after_unlock after = { 0 };
	if (atomic_load_explicit(&task->id, memory_order_relaxed)) {
		if (state != TW_COMPLETED && state != TW_STOPPED)
			tw__task_end(&e->api_ends, task, state, TW_STOPPED, true);
		atomic_store_explicit(&task->due_ns, 0, memory_order_relaxed);
		tw__task_end_if_idle(e, task, NULL, &after);
	}
	tw__task_unlock(task);
	after_unlock_run(after);
}

/* Runs going on executors whose run has passed run_limit_ms: not waited for by destroy. */
static uint64_t stuck_runs_now(struct tw_engine *e)
{
	if (!e->cfg.run_limit_ms)
		return 0;
	uint64_t limit = e->cfg.run_limit_ms < TW_MAX_DELAY_MS ? e->cfg.run_limit_ms * NS_PER_MS :
								 TW_MAX_DELAY_MS * NS_PER_MS;
	uint64_t now = monotonic_ns(), stuck = 0;
	unsigned running = executors_running(e);
	for (unsigned i = 0; i < running; i++) {
		uint64_t start =
			atomic_load_explicit(&e->executors[i].run_start_ns, memory_order_acquire);
		stuck += start && now > start && now - start >= limit;
	}
	return stuck;
}

/*
 * Waits until no run is in progress but the caller's own (except), and, with
 * skip_stuck, those past run_limit_ms; or until deadline_ns (0: forever). An
 * executor that runs dry bumps drain_signal if it sees a waiter; a waiter
 * counts itself in before it looks (see run_finished).
 */
static bool wait_runs(struct tw_engine *e, uint64_t deadline_ns, uint64_t except, bool skip_stuck)
{
	bool drained = false;
	atomic_fetch_add_explicit(&e->drain_waiters, 1, memory_order_seq_cst);
	for (;;) {
		uint32_t signal = atomic_load_explicit(&e->drain_signal, memory_order_seq_cst);
		uint64_t stuck = skip_stuck ? stuck_runs_now(e) : 0;
		if ((drained = tw__runs_idle(e, except + stuck)))
			break;
		uint64_t now = monotonic_ns();
		if (deadline_ns && now >= deadline_ns)
			break;
		/* A run may cross run_limit_ms while nothing else moves: look again then. */
		uint64_t left = skip_stuck && e->cfg.run_limit_ms ? NS_PER_MS : 0;
		if (deadline_ns && (!left || deadline_ns - now < left))
			left = deadline_ns - now;
		struct timespec wait = { .tv_sec = (time_t)(left / 1000000000u),
					 .tv_nsec = (long)(left % 1000000000u) };
		tw__futex_wait(&e->drain_signal, signal, left ? &wait : NULL);
	}
	atomic_fetch_sub_explicit(&e->drain_waiters, 1, memory_order_relaxed);
	return drained;
}

/* The part of a stop that does not wait: no firing and no new operation after it, every
 * task ended, and released if no run of it is going. -TW_ESHUTDOWN if a stop came first. */
static int stop_firing(struct tw_engine *e)
{
	if (atomic_fetch_or(&e->stopping, HALT_STOPPED) & HALT_STOPPED)
		return -TW_ESHUTDOWN;
	tw__rcu_ensure_registered();
	tw__wheel_thread_join(e);     /* no firing after this */
	pthread_mutex_lock(&e->lock); /* tw_advance() callers stop waiting */
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	tw__table_for_each(&e->table, stop_task, e);
	tw__executors_drop_queued(e);
	return TW_OK;
}

int tw_engine_stop(tw_engine *e, uint64_t drain_timeout_ms)
{
	if (!e)
		return -TW_EINVAL;
	if (engine_forked(e))
		return -TW_EFORKED;
	int rc = stop_firing(e);
	if (rc != TW_OK)
		return rc;
	/* A callback waits for the other runs, not for its own to return. */
	uint64_t own = tw__engine_on_executor(e) ? 1 : 0;
	uint64_t limit = drain_timeout_ms < TW_MAX_DELAY_MS ? drain_timeout_ms : TW_MAX_DELAY_MS;
	bool drained = wait_runs(e, monotonic_ns() + limit * NS_PER_MS, own, false);
	if (!drained)
		tw__engine_log(e, TW_LOG_WARNING, "stop: runs still in progress after %llu ms",
			       (unsigned long long)drain_timeout_ms);
	return drained ? TW_OK : -TW_ETIMEDOUT;
}

static void close_descriptors(struct tw_engine *e)
{
	int fds[] = { e->timer_fd, e->wake_fd, e->epoll_fd, e->wall_fd };
	for (unsigned i = 0; i < 4; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Frees what the engine holds; its threads are gone (joined, or never started). */
void tw__engine_free(struct tw_engine *e)
{
	tw__fork_unwatch(e);
	tw__record_close(e->recorder, tw__engine_now_ns(e)); /* its END: every run is in */
	/* Reaped slots go back to the table from call_rcu callbacks. */
	urcu_memb_barrier();
	HANDOVER_ACQUIRE(&e->table); /* their writes: TSan does not see the barrier order them */
	tw__table_fini(&e->table);
	tw__calendar_fini(e);
	tw__names_fini(&e->names);
	close_descriptors(e);
	/* A callback of a tw_advance destroyed the engine: the caller, woken by the stop, is
	 * on its way out of tw_advance. */
	pthread_mutex_lock(&e->lock);
	while (e->advance_callers)
		pthread_cond_wait(&e->cond, &e->lock);
	pthread_mutex_unlock(&e->lock);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	tw__executors_free(e);
	tw__free(e->executors, (e->executor_slots + 1) * sizeof *e->executors);
	tw__free(e, sizeof *e);
}

void tw__engine_unref(struct tw_engine *e)
{
	if (atomic_fetch_sub_explicit(&e->abandoned, 1, memory_order_acq_rel) == 1)
		tw__engine_free(e);
}

/*
 * Waits for the runs still going but the stuck ones, joins every executor but
 * self and those left with a stuck run, and lets go of the engine: the last
 * of destroy and the abandoned executors frees it.
 */
static void destroy(struct tw_engine *e, struct executor *self)
{
	tw__wheel_thread_join(e); /* if a TW_ON_WHEEL_THREAD callback stopped the engine */
	wait_runs(e, 0, 0, true); /* never free what a running callback uses */
	unsigned running = executors_running(e);
	uint64_t limit = e->cfg.run_limit_ms * NS_PER_MS, now = monotonic_ns();
	atomic_store_explicit(&e->abandoned, 1, memory_order_relaxed); /* destroy's own hold */
	for (unsigned i = 0; i < running; i++) {
		struct executor *x = &e->executors[i];
		uint64_t start = atomic_load_explicit(&x->run_start_ns, memory_order_acquire);
		bool stuck = e->cfg.run_limit_ms && start && now > start && now - start >= limit;
		if (x != self && !stuck)
			continue;
		x->abandoned = true;
		atomic_fetch_add_explicit(&e->abandoned, 1, memory_order_relaxed);
		atomic_store(&x->quit, true);
		tw__executor_wake(x);
		if (x != self)
			tw__engine_log(e, TW_LOG_WARNING,
				       "destroy: executor %u is left to finish a stuck run", i);
		(void)pthread_detach(x->thread); /* fails only for a thread joined already */
	}
	tw__executors_join(e, self);
	tw__engine_unref(e);
}

void tw_engine_destroy(tw_engine *e)
{
	if (!e || engine_forked(e))
		return; /* a forked child has the parent's copy: not its own to free */
	struct executor *self = tw__current_executor(e);
	if (self) {
		/* The executor completes it once this callback returned (executor_main). */
		stop_firing(e);
		atomic_store_explicit(&e->destroy_by, self, memory_order_release);
		return;
	}
	stop_firing(e); /* -TW_ESHUTDOWN: the user stopped it already */
	destroy(e, NULL);
}

void tw__engine_destroy_deferred(struct tw_engine *e, struct executor *x)
{
	destroy(e, x);
}

int tw_quiesce(tw_engine *e)
{
	if (!e)
		return -TW_EINVAL;
	if (engine_forked(e))
		return -TW_EFORKED;
	if (tw__engine_on_executor(e))
		return -TW_ECALLBACK;
	/* Firings due and waiting for room in the queues are handed out as runs end. ready_due
	 * is read before the runs are waited for: the wheel thread stores it after the round's
	 * hand-outs, so once it reads 0 every due firing is among the runs waited for. Read
	 * after, the last hand-outs could slip in between and still be running. */
	for (;;) {
		bool handed_out = !atomic_load_explicit(&e->ready_due, memory_order_acquire);
		wait_runs(e, 0, 0, false);
		if (handed_out || atomic_load(&e->stopping))
			return TW_OK;
		struct timespec ms = { .tv_nsec = (long)NS_PER_MS };
		(void)nanosleep(&ms, NULL); /* EINTR: a shorter pause is as good */
	}
}
