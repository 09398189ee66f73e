/*
 * engine_create.c - creating an engine, and its configuration's defaults.
 */
#include "alloc.h"
#include "calendar_tasks.h"
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

/* Every default of tw_config, written here alone. Where 0 means "the default" (the queue's
 * capacity, the wheel-run budget, the executors: one per CPU), settle_config puts it in. */
enum {
	DEFAULT_QUEUE_CAPACITY = 4096,
	DEFAULT_MAX_FAILURES = 10,
	DEFAULT_SLOW_RUN_MS = 100,
	DEFAULT_RETAIN_MS = 5000,
	DEFAULT_SPARE_EXECUTORS = 2,
	DEFAULT_WHEEL_RUN_BUDGET_US = 50,
};

static void config_defaults(tw_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->queue_capacity = DEFAULT_QUEUE_CAPACITY;
	cfg->max_failures = DEFAULT_MAX_FAILURES;
	cfg->slow_run_ms = DEFAULT_SLOW_RUN_MS;
	cfg->retain_ms = DEFAULT_RETAIN_MS;
	cfg->spare_executors = DEFAULT_SPARE_EXECUTORS;
	cfg->wheel_run_budget_us = DEFAULT_WHEEL_RUN_BUDGET_US;
	cfg->record_buffer_kib = 1024; /* record.c's default, also for 0 */
}

/* A configuration as given (defaults where the caller's struct is shorter), with the zeros
 * that stand for a default replaced: -TW_EINVAL for one out of range. */
static int settle_config(tw_config *config, const tw_config *cfg, size_t size)
{
	config_defaults(config);
	if (cfg && tw__struct_in(config, sizeof *config, cfg, size))
		return -TW_EINVAL;
	if (config->executors > TW_MAX_EXECUTORS || config->spare_executors > TW_MAX_EXECUTORS ||
	    config->queue_capacity > TW_MAX_QUEUE_CAPACITY)
		return -TW_EINVAL;
	if (!config->queue_capacity)
		config->queue_capacity = DEFAULT_QUEUE_CAPACITY;
	if (!config->wheel_run_budget_us)
		config->wheel_run_budget_us = DEFAULT_WHEEL_RUN_BUDGET_US;
	if (!config->executors) { /* one per CPU */
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		config->executors = cpus > 0 ? (unsigned)cpus : 1;
	}
	return TW_OK;
}

void tw_config_init_sized(tw_config *cfg, size_t size)
{
	if (!cfg)
		return;
	tw_config defaults;
	config_defaults(&defaults);
	tw__struct_out(cfg, size, &defaults, sizeof defaults);
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

/* The engine's clocks: its epoch on the 1 ms grid, the manual clock's time and wall-clock
 * time, the coarse clock's slack; and the limits in ns. */
static void init_clocks(struct tw_engine *e)
{
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
	e->wheel_budget_ns = e->cfg.wheel_run_budget_us > UINT64_MAX / 1000 ?
				     UINT64_MAX :
				     e->cfg.wheel_run_budget_us * 1000;
	struct timespec coarse_tick;
	if (e->cfg.coarse_clock && !e->cfg.manual_clock &&
	    !clock_getres(CLOCK_MONOTONIC_COARSE, &coarse_tick))
		e->coarse_slack_ns = 2 * ((uint64_t)coarse_tick.tv_sec * 1000000000u +
					  (uint64_t)coarse_tick.tv_nsec);
}

/* The record's locks; false if one could not be made (none is then left made). */
static bool init_locks(struct tw_engine *e)
{
	if (pthread_mutex_init(&e->lock, NULL))
		return false;
	if (pthread_cond_init(&e->cond, NULL)) {
		pthread_mutex_destroy(&e->lock);
		return false;
	}
	if (pthread_mutex_init(&e->calendar_lock, NULL)) {
		pthread_cond_destroy(&e->cond);
		pthread_mutex_destroy(&e->lock);
		return false;
	}
	return true;
}

/* The executors' slots (the one past them counts the wheel thread's runs: wheel_runner),
 * zeroed, so that a failure after this joins (none) and frees them whatever failed. */
static int alloc_executors(struct tw_engine *e)
{
	e->executor_count = e->cfg.executors; /* never 0: settled */
	e->executor_slots = e->executor_count + e->cfg.spare_executors;
	size_t bytes = (e->executor_slots + 1) * sizeof *e->executors;
	e->executors = tw__alloc(bytes);
	if (!e->executors) {
		e->executor_slots = 0; /* none to join or free */
		return -TW_ENOMEM;
	}
	memset(e->executors, 0, bytes);
	return TW_OK;
}

/* Everything that can fail once the record and its executors' slots are there, in order;
 * the first failure stops it, and one cleanup (stop, join, free) undoes whatever was done. */
static int start_engine(struct tw_engine *e)
{
	int rc = tw__table_init(&e->table);
	if (rc == TW_OK && e->cfg.reserve_tasks)
		rc = tw__table_reserve(&e->table, e->cfg.reserve_tasks);
	if (rc == TW_OK)
		rc = tw__names_init(&e->names);
	if (rc == TW_OK)
		rc = open_descriptors(e);
	if (rc == TW_OK)
		rc = tw__fork_watch(e);
	if (rc == TW_OK) /* before the threads: they read e->recorder */
		rc = tw__record_open(&e->recorder, &(struct record_setup){
							   &e->cfg, e->executor_count,
							   e->executor_slots, &e->manual_now_ns });
	e->recording = e->recorder != NULL;
	if (rc == TW_OK)
		rc = tw__executors_start(e);
	if (rc == TW_OK)
		rc = tw__wheel_thread_start(e);
	return rc;
}

int tw_engine_create_sized(const tw_config *cfg, size_t size, tw_engine **out)
{
	if (!out)
		return -TW_EINVAL;
	*out = NULL;
	tw_config config;
	int rc = settle_config(&config, cfg, size);
	if (rc == TW_OK)
		rc = tw__rcu_init();
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
	__cds_wfcq_init(&e->mail_head, &e->mail_tail);
	__cds_wfcq_init(&e->backlog_head, &e->backlog_tail);
	init_clocks(e);
	tw__wheel_init(&e->wheel, 0);
	if (!init_locks(e)) {
		tw__free(e, sizeof *e); /* nothing else is made yet */
		return -TW_ENOMEM;
	}
	rc = alloc_executors(e);
	if (rc == TW_OK)
		rc = start_engine(e);
	if (rc != TW_OK) {
		/* The one cleanup: tw__engine_free undoes what was made and skips what was not
		 * (the executors' slots are there, or its own frees are of NULL). */
		int err = errno; /* -TW_EIO's (the recording's file), kept through the cleanup */
		atomic_store(&e->stopping, HALT_STOPPED);
		tw__executors_join(e, NULL);
		tw__engine_free(e);
		errno = err;
		return rc;
	}
	*out = e;
	return TW_OK;
}
