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
