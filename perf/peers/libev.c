/*
 * libev.c - libev under test, both halves of peer.h.
 *
 * The benchmark's batches: libev timers (a 4-ary heap of {due, watcher}
 * pairs, the due time cached next to the pointer). add = ev_timer_set +
 * ev_timer_start, cancel = ev_timer_stop, reschedule and reset = set the
 * watcher's repeat to the new delay and ev_timer_again, the idiom libev's
 * documentation recommends for timeouts that keep being pushed back (it
 * adjusts the heap in place instead of stop + start). Expiry: one
 * ev_run(EVRUN_NOWAIT) once every timer is due.
 *
 * The loop: ev_timer, its repeat for periodic timers. run_until() runs the
 * loop one iteration at a time (EVRUN_ONCE) until a one-shot deadline timer
 * ends it; a wake-up is an iteration in which anything but that deadline
 * timer fired, or nothing did.
 */
#include "peer.h"

#include <ev.h>
#include <stdbool.h>
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

struct libev_state {
	struct ev_loop *loop;
	loop_fire_fn fire;
	void *ctx;
	size_t count;
	ev_timer *timers;
	ev_timer deadline;
	bool done;
	uint64_t fired, wakeups;
};

static void run_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	uint64_t start = monotonic_now_ns();
	struct libev_state *s = w->data;
	(void)loop;
	(void)revents;
	s->fired++;
	s->fire(s->ctx, (size_t)(w - s->timers), start, 0);
}

static void deadline_reached(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct libev_state *s = w->data;
	(void)loop;
	(void)revents;
	s->done = true;
}

static void *libev_create(size_t timers, loop_fire_fn fire, void *ctx, unsigned executors)
{
	(void)executors;
	struct libev_state *s = calloc(1, sizeof *s);
	if (s)
		s->timers = calloc(timers ? timers : 1, sizeof *s->timers);
	if (s && s->timers)
		s->loop = ev_loop_new(EVFLAG_AUTO);
	if (!s || !s->timers || !s->loop) {
		fprintf(stderr, "tw-perf: libev: %s\n",
			s && s->timers ? "ev_loop_new failed" : "out of memory");
		if (s)
			free(s->timers);
		free(s);
		return NULL;
	}
	for (size_t i = 0; i < timers; i++) {
		ev_timer_init(&s->timers[i], run_timer, 0., 0.);
		s->timers[i].data = s;
	}
	ev_timer_init(&s->deadline, deadline_reached, 0., 0.);
	s->deadline.data = s;
	s->fire = fire;
	s->ctx = ctx;
	s->count = timers;
	return s;
}

/* Seconds from the loop's now to at_ns. The clock is read before the loop's
 * now is refreshed, so the timer lands at or after at_ns, never before. */
static ev_tstamp after_of(struct libev_state *s, uint64_t at_ns)
{
	uint64_t now = monotonic_now_ns();
	ev_now_update(s->loop);
	return at_ns > now ? (double)(at_ns - now) / 1e9 : 0.;
}

static int libev_arm(void *loop, size_t timer, uint64_t first_due_ns, uint64_t period_ms)
{
	struct libev_state *s = loop;
	ev_timer *w = &s->timers[timer];
	ev_timer_set(w, after_of(s, first_due_ns), (double)period_ms / 1e3);
	ev_timer_start(s->loop, w);
	return 0;
}

static void libev_run_until(void *loop, uint64_t deadline_ns)
{
	struct libev_state *s = loop;
	s->done = false;
	ev_timer_set(&s->deadline, after_of(s, deadline_ns), 0.);
	ev_timer_start(s->loop, &s->deadline);
	while (!s->done) {
		uint64_t fired = s->fired;
		ev_run(s->loop, EVRUN_ONCE);
		s->wakeups += s->fired != fired || !s->done;
	}
}

static uint64_t libev_wakeups(void *loop)
{
	struct libev_state *s = loop;
	return s->wakeups;
}

static void libev_destroy(void *loop)
{
	struct libev_state *s = loop;
	for (size_t i = 0; i < s->count; i++)
		ev_timer_stop(s->loop, &s->timers[i]);
	ev_timer_stop(s->loop, &s->deadline);
	ev_loop_destroy(s->loop);
	free(s->timers);
	free(s);
}

const struct loop_impl libev_loop = {
	.name = "libev",
	.differs = "ev_timer repeat is drift-free (next due = previous due + repeat; once that "
		   "is past, now: the phase is lost, nothing counted); epoll_wait in whole ms "
		   "rounded up; one thread runs every callback",
	.create = libev_create,
	.arm = libev_arm,
	.run_until = libev_run_until,
	.wakeups = libev_wakeups,
	.destroy = libev_destroy,
};
