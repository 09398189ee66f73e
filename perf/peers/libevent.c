/*
 * libevent.c - libevent under test, both halves of peer.h.
 *
 * The benchmark's batches: libevent timers (a binary min-heap of event
 * pointers). add = evtimer_add, cancel = evtimer_del, reschedule and reset =
 * evtimer_add on a pending event (libevent takes it out of the heap and files
 * it again). The base is a default event_base_new(): its timers read the
 * coarse monotonic clock, and no common-timeout queues are set up. Expiry:
 * one event_base_loop(EVLOOP_NONBLOCK | EVLOOP_ONCE) once every timer is due.
 *
 * The loop: timeout events, EV_PERSIST for periodic timers. run_until() runs
 * the base one round at a time (EVLOOP_ONCE) until a one-shot deadline event
 * ends it; a wake-up is a round in which anything but that deadline event
 * fired, or nothing did.
 *
 * The loop's base asks for EVENT_BASE_FLAG_PRECISE_TIMER: by default
 * libevent reads CLOCK_MONOTONIC_COARSE, which moves in 4 ms steps on this
 * kernel, and sleeps in whole ms; the flag gives it the fine clock and a
 * timerfd.
 *
 * EV_PERSIST takes its period from the timeout given to event_add, so a
 * timer whose first due is not one period away starts as a one-shot to its
 * first due and turns persistent in that first callback, from the round's
 * cached now.
 */
#include "peer.h"

#include <event2/event.h>
#include <event2/event_struct.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

struct libevent_set {
	struct event_base *base;
	size_t fired;
	struct event *events;
};

static void count_firing(evutil_socket_t fd, short what, void *arg)
{
	struct libevent_set *s = arg;
	(void)fd;
	(void)what;
	s->fired++;
}

static void *libevent_set_create(size_t n)
{
	struct libevent_set *s = malloc(sizeof *s);
	if (s == NULL)
		return NULL;
	s->events = malloc(n * sizeof *s->events);
	s->base = event_base_new();
	if (s->events == NULL || s->base == NULL) {
		if (s->base != NULL)
			event_base_free(s->base);
		free(s->events);
		free(s);
		return NULL;
	}
	s->fired = 0;
	for (size_t i = 0; i < n; i++)
		evtimer_assign(&s->events[i], s->base, count_firing, s);
	return s;
}

static void libevent_set_destroy(void *set)
{
	struct libevent_set *s = set;
	event_base_free(s->base); /* no event is pending any more */
	free(s->events);
	free(s);
}

static struct timeval timeval_of_ms(uint32_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
	return tv;
}

static void libevent_set_add(void *set, const uint32_t *order, const uint32_t *delay_ms, size_t n)
{
	struct libevent_set *s = set;
	for (size_t i = 0; i < n; i++) {
		struct timeval tv = timeval_of_ms(delay_ms[i]);
		evtimer_add(&s->events[order[i]], &tv);
	}
}

static void libevent_set_cancel(void *set, const uint32_t *order, size_t n)
{
	struct libevent_set *s = set;
	for (size_t i = 0; i < n; i++)
		evtimer_del(&s->events[order[i]]);
}

static void libevent_set_reset(void *set, const uint32_t *order, size_t n, uint32_t delay_ms)
{
	struct libevent_set *s = set;
	struct timeval tv = timeval_of_ms(delay_ms);
	for (size_t i = 0; i < n; i++)
		evtimer_add(&s->events[order[i]], &tv);
}

static void libevent_set_expiry_arm(void *set, const uint32_t *order, const uint32_t *delay_ms,
				    size_t n, uint32_t max_delay_ms)
{
	/* outside the loop each evtimer_add reads the clock itself */
	libevent_set_add(set, order, delay_ms, n);
	/* + 15 ms: the coarse clock lags by up to a scheduler tick */
	monotonic_sleep_until(monotonic_now_ns() + (uint64_t)(max_delay_ms + 15) * 1000000u);
}

static size_t libevent_set_expire_all(void *set)
{
	struct libevent_set *s = set;
	s->fired = 0;
	event_base_loop(s->base, EVLOOP_NONBLOCK | EVLOOP_ONCE);
	return s->fired;
}

static const char *libevent_version(void)
{
	return event_get_version();
}

const struct timer_impl libevent_impl = {
	.name = "libevent",
	.version = libevent_version,
	.real_clock = true,
	.handle_size = sizeof(struct event),
	.create = libevent_set_create,
	.destroy = libevent_set_destroy,
	.add = libevent_set_add,
	.cancel = libevent_set_cancel,
	.reschedule = libevent_set_add, /* evtimer_add re-files a pending event */
	.reset = libevent_set_reset,
	.expiry_arm = libevent_set_expiry_arm,
	.expire_all = libevent_set_expire_all,
};

struct libevent_state;

struct libevent_timer {
	struct event ev;
	struct libevent_state *s;
	uint64_t period_ms;
};

struct libevent_state {
	struct event_base *base;
	loop_fire_fn fire;
	void *ctx;
	size_t count;
	struct libevent_timer *timers;
	struct event deadline;
	bool done;
	uint64_t fired, wakeups;
};

static struct timeval timeval_of_ns(uint64_t ns)
{
	uint64_t us = (ns + 999) / 1000;
	struct timeval tv = { .tv_sec = (time_t)(us / 1000000),
			      .tv_usec = (suseconds_t)(us % 1000000) };
	return tv;
}

static void run_timer(evutil_socket_t fd, short what, void *arg);

static void turn_persistent(struct libevent_timer *t)
{
	struct timeval period = timeval_of_ns(t->period_ms * NS_PER_MS);
	event_assign(&t->ev, t->s->base, -1, EV_PERSIST, run_timer, t);
	event_add(&t->ev, &period);
}

static void run_timer(evutil_socket_t fd, short what, void *arg)
{
	uint64_t start = monotonic_now_ns();
	struct libevent_timer *t = arg;
	(void)fd;
	(void)what;
	if (t->period_ms && !(event_get_events(&t->ev) & EV_PERSIST))
		turn_persistent(t);
	t->s->fired++;
	t->s->fire(t->s->ctx, (size_t)(t - t->s->timers), start, 0);
}

static void deadline_reached(evutil_socket_t fd, short what, void *arg)
{
	struct libevent_state *s = arg;
	(void)fd;
	(void)what;
	s->done = true;
}

static struct event_base *precise_base(void)
{
	struct event_config *cfg = event_config_new();
	if (!cfg)
		return NULL;
	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	struct event_base *base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	return base;
}

static void *libevent_create(size_t timers, loop_fire_fn fire, void *ctx, unsigned executors)
{
	(void)executors;
	struct libevent_state *s = calloc(1, sizeof *s);
	if (s)
		s->timers = calloc(timers ? timers : 1, sizeof *s->timers);
	if (s && s->timers)
		s->base = precise_base();
	if (!s || !s->timers || !s->base) {
		fprintf(stderr, "tw-perf: libevent: %s\n",
			s && s->timers ? "event_base_new_with_config failed" : "out of memory");
		if (s)
			free(s->timers);
		free(s);
		return NULL;
	}
	for (size_t i = 0; i < timers; i++) {
		s->timers[i].s = s;
		evtimer_assign(&s->timers[i].ev, s->base, run_timer, &s->timers[i]);
	}
	evtimer_assign(&s->deadline, s->base, deadline_reached, s);
	s->fire = fire;
	s->ctx = ctx;
	s->count = timers;
	return s;
}

/* The timeout from the base's now to at_ns, rounded up to the us. Outside the
 * loop the base reads the clock itself, after this read: never early. */
static struct timeval timeout_of(uint64_t at_ns)
{
	uint64_t now = monotonic_now_ns();
	return timeval_of_ns(at_ns > now ? at_ns - now : 0);
}

static int libevent_arm(void *loop, size_t timer, uint64_t first_due_ns, uint64_t period_ms)
{
	struct libevent_state *s = loop;
	struct libevent_timer *t = &s->timers[timer];
	t->period_ms = period_ms;
	struct timeval tv = timeout_of(first_due_ns);
	if (event_add(&t->ev, &tv)) {
		fprintf(stderr, "tw-perf: libevent: event_add failed\n");
		return -1;
	}
	return 0;
}

static void libevent_run_until(void *loop, uint64_t deadline_ns)
{
	struct libevent_state *s = loop;
	s->done = false;
	struct timeval tv = timeout_of(deadline_ns);
	event_add(&s->deadline, &tv);
	while (!s->done) {
		uint64_t fired = s->fired;
		event_base_loop(s->base, EVLOOP_ONCE);
		s->wakeups += s->fired != fired || !s->done;
	}
}

static uint64_t libevent_wakeups(void *loop)
{
	struct libevent_state *s = loop;
	return s->wakeups;
}

static void libevent_destroy(void *loop)
{
	struct libevent_state *s = loop;
	for (size_t i = 0; i < s->count; i++)
		event_del(&s->timers[i].ev);
	event_del(&s->deadline);
	event_base_free(s->base);
	free(s->timers);
	free(s);
}

const struct loop_impl libevent_loop = {
	.name = "libevent",
	.differs = "EV_PERSIST re-arms from the previous scheduled time, before the callback "
		   "(drift-free; from now once that is past: the phase is lost, nothing "
		   "counted); first run a one-shot, then persistent from that round's cached "
		   "now; precise-timer base; one thread runs every callback",
	.create = libevent_create,
	.arm = libevent_arm,
	.run_until = libevent_run_until,
	.wakeups = libevent_wakeups,
	.destroy = libevent_destroy,
};
