/*
 * impl_libev.c - libev timers (a 4-ary heap of {due, watcher} pairs, the due
 * time cached next to the pointer) behind the benchmark's timer_impl
 * interface.
 *
 * add = ev_timer_set + ev_timer_start, cancel = ev_timer_stop, reschedule
 * and reset = set the watcher's repeat to the new delay and ev_timer_again,
 * the idiom libev's documentation recommends for timeouts that keep being
 * pushed back (it adjusts the heap in place instead of stop + start).
 * Expiry: one ev_run(EVRUN_NOWAIT) once every timer is due.
 */
#include "bench.h"

#include <ev.h>
#include <stdio.h>
#include <stdlib.h>

struct libev_set {
	struct ev_loop *loop;
	size_t fired;
	ev_timer *timers;
};

static void count_firing(struct ev_loop *loop, ev_timer *timer, int revents)
{
	struct libev_set *s = timer->data;
	(void)loop;
	(void)revents;
	s->fired++;
}

static void *libev_set_create(size_t n)
{
	struct libev_set *s = malloc(sizeof *s);
	if (s == NULL)
		return NULL;
	s->timers = malloc(n * sizeof *s->timers);
	s->loop = ev_loop_new(EVFLAG_AUTO);
	if (s->timers == NULL || s->loop == NULL) {
		if (s->loop != NULL)
			ev_loop_destroy(s->loop);
		free(s->timers);
		free(s);
		return NULL;
	}
	s->fired = 0;
	for (size_t i = 0; i < n; i++) {
		ev_timer_init(&s->timers[i], count_firing, 0., 0.);
		s->timers[i].data = s;
	}
	return s;
}

static void libev_set_destroy(void *set)
{
	struct libev_set *s = set;
	ev_loop_destroy(s->loop); /* no timer is active any more */
	free(s->timers);
	free(s);
}

static void libev_set_add(void *set, const uint32_t *order, const uint32_t *delay_ms, size_t n)
{
	struct libev_set *s = set;
	for (size_t i = 0; i < n; i++) {
		ev_timer *timer = &s->timers[order[i]];
		ev_timer_set(timer, delay_ms[i] * 1e-3, 0.);
		ev_timer_start(s->loop, timer);
	}
}

static void libev_set_cancel(void *set, const uint32_t *order, size_t n)
{
	struct libev_set *s = set;
	for (size_t i = 0; i < n; i++)
		ev_timer_stop(s->loop, &s->timers[order[i]]);
}

static void libev_set_reschedule(void *set, const uint32_t *order, const uint32_t *delay_ms,
				 size_t n)
{
	struct libev_set *s = set;
	for (size_t i = 0; i < n; i++) {
		ev_timer *timer = &s->timers[order[i]];
		timer->repeat = delay_ms[i] * 1e-3;
		ev_timer_again(s->loop, timer);
	}
}

static void libev_set_reset(void *set, const uint32_t *order, size_t n, uint32_t delay_ms)
{
	struct libev_set *s = set;
	ev_tstamp repeat = delay_ms * 1e-3;
	for (size_t i = 0; i < n; i++) {
		ev_timer *timer = &s->timers[order[i]];
		timer->repeat = repeat;
		ev_timer_again(s->loop, timer);
	}
}

static void libev_set_expiry_arm(void *set, const uint32_t *order, const uint32_t *delay_ms,
				 size_t n, uint32_t max_delay_ms)
{
	struct libev_set *s = set;
	ev_now_update(s->loop);
	libev_set_add(set, order, delay_ms, n);
	monotonic_sleep_until(monotonic_now_ns() + (uint64_t)(max_delay_ms + 5) * 1000000u);
}

static size_t libev_set_expire_all(void *set)
{
	struct libev_set *s = set;
	s->fired = 0;
	ev_run(s->loop, EVRUN_NOWAIT);
	return s->fired;
}

static const char *libev_version(void)
{
	static char text[32];
	snprintf(text, sizeof text, "%d.%d", ev_version_major(), ev_version_minor());
	return text;
}

const struct timer_impl libev_impl = {
	.name = "libev",
	.version = libev_version,
	.real_clock = true,
	.handle_size = sizeof(ev_timer),
	.create = libev_set_create,
	.destroy = libev_set_destroy,
	.add = libev_set_add,
	.cancel = libev_set_cancel,
	.reschedule = libev_set_reschedule,
	.reset = libev_set_reset,
	.expiry_arm = libev_set_expiry_arm,
	.expire_all = libev_set_expire_all,
};
