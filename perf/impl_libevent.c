/*
 * impl_libevent.c - libevent timers (a binary min-heap of event pointers)
 * behind the benchmark's timer_impl interface.
 *
 * add = evtimer_add, cancel = evtimer_del, reschedule and reset = evtimer_add
 * on a pending event (libevent takes it out of the heap and files it again).
 * The base is a default event_base_new(): its timers read the coarse
 * monotonic clock, and no common-timeout queues are set up. Expiry: one
 * event_base_loop(EVLOOP_NONBLOCK | EVLOOP_ONCE) once every timer is due.
 */
#include "bench.h"

#include <event2/event.h>
#include <event2/event_struct.h>
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
