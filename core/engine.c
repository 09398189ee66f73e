/*
 * engine.c - creating and freeing an engine, and its statistics.
 */
#include "alloc.h"
#include "calendar.h"
#include "lifecycle.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

static void config_defaults(tw_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->queue_capacity = 4096;
	cfg->max_failures = 10;
	cfg->slow_run_ms = 100;
	cfg->retain_ms = 5000;
	cfg->spare_executors = 2;
	cfg->wheel_run_budget_us = 50;
}

void tw_config_init_sized(tw_config *cfg, size_t size)
{
	if (!cfg)
		return;
	tw_config defaults;
	config_defaults(&defaults);
	tw__struct_out(cfg, size, &defaults, sizeof defaults);
}

const char *tw_strerror(int code)
{
	static const char *const names[] = {
		[TW_OK] = "success",
		[TW_EINVAL] = "invalid argument",
		[TW_ENOTFOUND] = "no such task",
		/* Also tw_advance's answer on an engine without the manual clock. */
		[TW_ESTATE] = "not allowed in the current state (of the task, or of the engine)",
		[TW_ERANGE] = "delay or period out of range",
		[TW_ENOMEM] = "out of memory",
		[TW_ESHUTDOWN] = "engine is stopped",
		[TW_ELIMIT] = "too many live tasks",
		[TW_ETIMEDOUT] = "runs still in progress at the drain limit",
		[TW_ECALLBACK] = "not allowed inside a callback",
		[TW_EFORKED] = "engine belongs to the parent process (fork)",
		[TW_ERESOURCE] = "the system refused a thread or a file descriptor",
		[TW_ENOSPACE] = "buffer too small",
		[TW_EWRITE] = "the writer callback failed",
		[TW_ESYNTAX] = "not a valid cron expression",
		[TW_ENOZONE] = "unknown or unreadable time zone",
		[TW_ENOMATCH] = "the schedule has no fire time within the search bound",
		[TW_EEXIST] = "a live task has that name already",
		[TW_EIO] = "a system call on the snapshot file failed (errno says which)",
		[TW_ECORRUPT] = "the snapshot is truncated or corrupted",
		[TW_EVERSION] = "the snapshot is of another format version",
		[TW_ENOTSNAPSHOT] = "the file is not a snapshot",
	};
	/* Both signs name a code; 0u - code stays defined for INT_MIN. */
	unsigned index = code < 0 ? 0u - (unsigned)code : (unsigned)code;
	if (index < sizeof names / sizeof names[0])
		return names[index];
	return "unknown error";
}

static int open_descriptors(struct tw_engine *e)
{
	e->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	e->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (e->timer_fd < 0 || e->wake_fd < 0 || e->epoll_fd < 0)
		return errno == ENOMEM ? -TW_ENOMEM : -TW_ERESOURCE; /* EMFILE, ENFILE */
	if (!e->cfg.manual_clock)
		tw__wall_watch_open(e);
	int fds[] = { e->timer_fd, e->wake_fd, e->wall_fd };
	for (unsigned i = 0; i < 3 && fds[i] >= 0; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = fds[i] };
		if (epoll_ctl(e->epoll_fd, EPOLL_CTL_ADD, fds[i], &ev))
			return errno == ENOSPC ? -TW_ERESOURCE : -TW_ENOMEM; /* max_user_watches */
	}
	return TW_OK;
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

int tw_engine_create_sized(const tw_config *cfg, size_t size, tw_engine **out)
{
	if (!out)
		return -TW_EINVAL;
	*out = NULL;
	tw_config config;
	config_defaults(&config);
	if (cfg && tw__struct_in(&config, sizeof config, cfg, size))
		return -TW_EINVAL;
	if (config.executors > TW_MAX_EXECUTORS || config.spare_executors > TW_MAX_EXECUTORS ||
	    config.queue_capacity > TW_MAX_QUEUE_CAPACITY)
		return -TW_EINVAL;
	int rc = tw__rcu_init();
	if (rc)
		return rc;
	tw__rcu_ensure_registered();
	struct tw_engine *e = tw__alloc(sizeof *e);
	if (!e)
		return -TW_ENOMEM;
	memset(e, 0, sizeof *e);
	e->cfg = config;
	e->timer_fd = e->wake_fd = e->epoll_fd = e->wall_fd = -1;
	e->finish_destroy = tw__engine_destroy_deferred;
	e->unref = tw__engine_unref;
	if (pthread_mutex_init(&e->lock, NULL)) {
		tw__free(e, sizeof *e);
		return -TW_ENOMEM;
	}
	if (pthread_cond_init(&e->cond, NULL)) {
		pthread_mutex_destroy(&e->lock);
		tw__free(e, sizeof *e);
		return -TW_ENOMEM;
	}
	if (pthread_mutex_init(&e->calendar_lock, NULL)) {
		pthread_cond_destroy(&e->cond);
		pthread_mutex_destroy(&e->lock);
		tw__free(e, sizeof *e);
		return -TW_ENOMEM;
	}
	__cds_wfcq_init(&e->mail_head, &e->mail_tail);
	__cds_wfcq_init(&e->backlog_head, &e->backlog_tail);
	uint64_t now = monotonic_ns();
	e->epoch_ns = now - now % NS_PER_MS;
	atomic_init(&e->manual_now_ns, e->epoch_ns); /* manual time starts on the grid */
	/* The manual clock's wall-clock time starts at the wall clock's now. */
	struct timespec wall; /* cannot fail: the clock exists and wall is ours */
	(void)clock_gettime(CLOCK_REALTIME, &wall);
	atomic_init(&e->manual_wall_offset_ns,
		    (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec - (int64_t)e->epoch_ns);
	e->slow_run_ns = e->cfg.slow_run_ms > UINT64_MAX / NS_PER_MS ?
				 UINT64_MAX :
				 e->cfg.slow_run_ms * NS_PER_MS;
	if (!e->cfg.wheel_run_budget_us)
		e->cfg.wheel_run_budget_us = 50;
	e->wheel_budget_ns = e->cfg.wheel_run_budget_us > UINT64_MAX / 1000 ?
				     UINT64_MAX :
				     e->cfg.wheel_run_budget_us * 1000;
	struct timespec coarse_tick;
	if (e->cfg.coarse_clock && !e->cfg.manual_clock &&
	    !clock_getres(CLOCK_MONOTONIC_COARSE, &coarse_tick))
		e->coarse_slack_ns = 2 * ((uint64_t)coarse_tick.tv_sec * 1000000000u +
					  (uint64_t)coarse_tick.tv_nsec);
	tw__wheel_init(&e->wheel, 0);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	e->executor_count = e->cfg.executors ? e->cfg.executors : (unsigned)(cpus > 0 ? cpus : 1);
	e->executor_slots = e->executor_count + e->cfg.spare_executors;
	/* The slot past the executors' counts the wheel thread's runs (wheel_runner). */
	e->executors = tw__alloc((e->executor_slots + 1) * sizeof *e->executors);
	/* Zeroed at once: the failure path below joins (none) and frees them whatever failed. */
	if (e->executors)
		memset(e->executors, 0, (e->executor_slots + 1) * sizeof *e->executors);
	rc = e->executors ? tw__table_init(&e->table) : -TW_ENOMEM;
	if (rc == TW_OK && e->cfg.reserve_tasks)
		rc = tw__table_reserve(&e->table, e->cfg.reserve_tasks);
	if (rc == TW_OK)
		rc = tw__names_init(&e->names);
	if (rc == TW_OK)
		rc = open_descriptors(e);
	if (rc == TW_OK)
		rc = tw__fork_watch(e);
	if (rc == TW_OK)
		rc = tw__executors_start(e);
	if (rc == TW_OK)
		rc = tw__wheel_thread_start(e);
	if (rc != TW_OK) {
		atomic_store(&e->stopping, HALT_STOPPED);
		if (e->executors) {
			tw__executors_join(e, NULL);
			tw__engine_free(e);
		} else {
			pthread_mutex_destroy(&e->calendar_lock);
			pthread_mutex_destroy(&e->lock);
			pthread_cond_destroy(&e->cond);
			tw__free(e, sizeof *e);
		}
		return rc;
	}
	*out = e;
	return TW_OK;
}

int tw_advance(tw_engine *e, uint64_t ms)
{
	if (!e)
		return -TW_EINVAL;
	if (engine_forked(e))
		return -TW_EFORKED;
	if (!e->cfg.manual_clock)
		return -TW_ESTATE;
	if (ms > TW_MAX_DELAY_MS)
		return -TW_ERANGE;
	if (atomic_load(&e->stopping))
		return halted_code(e);
	if (tw__engine_on_wheel_run(e))
		return -TW_ECALLBACK; /* it would wait for the thread it runs on */
	pthread_mutex_lock(&e->lock);
	/* Time stays where now + the longest delay still fits 64 bits of ns. */
	uint64_t now = atomic_load_explicit(&e->manual_now_ns, memory_order_relaxed);
	if (ms * NS_PER_MS > UINT64_MAX - TW_MAX_DELAY_MS * NS_PER_MS - now) {
		pthread_mutex_unlock(&e->lock);
		return -TW_ERANGE;
	}
	atomic_store_explicit(&e->manual_now_ns, now + ms * NS_PER_MS, memory_order_release);
	uint64_t asked = ++e->advance_asked;
	e->advance_callers++;
	tw__engine_wake(e);
	while (e->advance_done < asked && !atomic_load(&e->stopping))
		pthread_cond_wait(&e->cond, &e->lock);
	bool done =
		e->advance_done >= asked; /* read under the lock the wheel thread writes it in */
	if (--e->advance_callers == 0 && atomic_load(&e->stopping))
		pthread_cond_broadcast(&e->cond); /* a destroy waits for the last to leave */
	pthread_mutex_unlock(&e->lock);
	return done ? TW_OK : -TW_ESHUTDOWN;
}

static void gather_stats(tw_engine *e, tw_engine_stats *out)
{
	memset(out, 0, sizeof *out);
	uint64_t in_state[TW_PAUSED + 1];
	tw__states_total(e, in_state); /* counted as tasks move: no walk over the table */
	out->tasks_waiting = in_state[TW_WAITING];
	out->tasks_running = in_state[TW_RUNNING];
	out->tasks_paused = in_state[TW_PAUSED];
	out->tasks_live = out->tasks_waiting + out->tasks_running + out->tasks_paused;
	tw__ends_total(e, &out->tasks_completed, &out->tasks_stopped);
	out->skipped_overlap =
		atomic_load(&e->skipped_overlap) + atomic_load(&e->api_skipped_overlap);
	out->skipped_overload = atomic_load(&e->skipped_overload);
	out->skipped_missed = atomic_load(&e->skipped_missed) + atomic_load(&e->api_skipped_missed);
	out->wheel_wakeups = atomic_load(&e->wakeups);
	out->stuck_runs = atomic_load(&e->stuck_runs);
	unsigned running = executors_running(e);
	out->spare_executors = running > e->executor_count ? running - e->executor_count : 0;
	out->executors = running;
	out->wheel_busy_ns = atomic_load(&e->wheel_busy_ns);
	out->over_budget_runs = atomic_load(&e->over_budget_runs);
	out->tasks_moved_off_wheel_thread = atomic_load(&e->moved_off_wheel);
	/* The wheel runner counts as an executor but for its queue, which it has not, and its
	 * busy time, which is the wheel thread's. */
	for (unsigned i = 0; i <= running; i++) {
		struct executor *x = run_counter(e, i, running);
		out->failures += atomic_load(&x->failures);
		out->slow_runs += atomic_load(&x->slow_runs);
		out->skipped_missed += atomic_load(&x->dropped);
		for (unsigned b = 0; b < TW_LATENESS_BUCKETS; b++) {
			uint64_t runs = atomic_load(&x->lateness[b]);
			out->lateness_us[b] += runs;
			out->lateness_count += runs;
		}
		out->lateness_sum_ns += atomic_load(&x->lateness_sum_ns);
		uint64_t max = atomic_load(&x->lateness_max_ns);
		if (max > out->lateness_max_ns)
			out->lateness_max_ns = max;
		if (x->on_wheel_thread) {
			for (unsigned b = 0; b < TW_LATENESS_BUCKETS; b++)
				out->wheel_thread_runs += atomic_load(&x->lateness[b]);
			continue;
		}
		out->executor_busy_ns += atomic_load(&x->busy_ns);
		out->queued += tw__executor_queued(x);
	}
	out->runs = out->lateness_count; /* each run started counts in one bucket */
	const struct executor *x0 = &e->executors[0];
	uint64_t per_executor = sizeof *x0 + ENDED_RING * sizeof(struct tw_task *) +
				((uint64_t)x0->mask + 1) * sizeof *x0->ring;
	out->memory_bytes =
		sizeof *e + tw__table_bytes(&e->table) + e->executor_slots * per_executor;
}

int tw_executor_stats_sized(tw_engine *e, unsigned index, tw_executor_info *out, size_t size)
{
	if (!e || !out)
		return -TW_EINVAL;
	if (engine_forked(e))
		return -TW_EFORKED;
	if (index >= executors_running(e))
		return -TW_ENOTFOUND;
	struct executor *x = &e->executors[index];
	uint64_t runs = 0;
	for (unsigned b = 0; b < TW_LATENESS_BUCKETS; b++)
		runs += atomic_load_explicit(&x->lateness[b], memory_order_relaxed);
	uint64_t start = atomic_load_explicit(&x->run_start_ns, memory_order_acquire);
	uint64_t now = start ? monotonic_ns() : 0;
	tw_executor_info stats = {
		.queued = tw__executor_queued(x),
		.queued_max = atomic_load_explicit(&x->queued_max, memory_order_relaxed),
		.busy_ns = atomic_load_explicit(&x->busy_ns, memory_order_relaxed),
		.runs = runs,
		.run_ns = start && now > start ? now - start : 0,
		.spare = x->spare,
	};
	tw__struct_out(out, size, &stats, sizeof stats);
	return TW_OK;
}

int tw_stats_sized(tw_engine *e, tw_engine_stats *out, size_t size)
{
	if (!e || !out)
		return -TW_EINVAL;
	if (engine_forked(e))
		return -TW_EFORKED;
	if (size == sizeof *out) {
		gather_stats(e, out);
	} else {
		tw_engine_stats stats;
		gather_stats(e, &stats);
		tw__struct_out(out, size, &stats, sizeof stats);
	}
	return TW_OK;
}
