/*
 * loop_libev.c - the loops.h timers on a libev loop (ev_timer, its repeat for
 * periodic timers). run_until() runs the loop one iteration at a time
 * (EVRUN_ONCE) until a one-shot deadline timer ends it; a wake-up is an
 * iteration in which anything but that deadline timer fired, or nothing did.
 */
#include "loop_measure.h"
#include "loops.h"
#include "measure.h"

#include <ev.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

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

static void *libev_create(size_t timers, loop_fire_fn fire, void *ctx,
			  const struct suite_options *opt)
{
	(void)opt;
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
