/*
 * libuv.c - libuv under test, both halves of peer.h.
 *
 * The benchmark's batches: libuv timers (a binary min-heap intrusive in
 * uv_timer_t). add = uv_timer_start, cancel = uv_timer_stop, reschedule and
 * reset = uv_timer_start on an active handle (libuv stops and restarts it).
 * Delays are relative to the loop's cached time, refreshed only by
 * expiry_arm(). Expiry: one uv_run(UV_RUN_NOWAIT) once every timer is due.
 *
 * The loop: uv_timer_t, its repeat for periodic timers. run_until() runs the
 * loop one iteration at a time (UV_RUN_ONCE) until a one-shot deadline timer
 * ends it; a wake-up is an iteration in which anything but that deadline
 * timer fired, or nothing did.
 */
#include "peer.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

struct libuv_set {
	uv_loop_t loop;
	size_t n;
	size_t fired;
	uv_timer_t *timers;
};

static void count_firing(uv_timer_t *timer)
{
	struct libuv_set *s = timer->data;
	s->fired++;
}

static void *libuv_set_create(size_t n)
{
	struct libuv_set *s = malloc(sizeof *s);
	if (s == NULL)
		return NULL;
	s->timers = malloc(n * sizeof *s->timers);
	if (s->timers == NULL || uv_loop_init(&s->loop) != 0) {
		free(s->timers);
		free(s);
		return NULL;
	}
	s->n = n;
	s->fired = 0;
	for (size_t i = 0; i < n; i++) {
		uv_timer_init(&s->loop, &s->timers[i]);
		s->timers[i].data = s;
	}
	return s;
}

static void libuv_set_destroy(void *set)
{
	struct libuv_set *s = set;
	for (size_t i = 0; i < s->n; i++)
		uv_close((uv_handle_t *)&s->timers[i], NULL);
	uv_run(&s->loop, UV_RUN_DEFAULT); /* completes the closes */
	uv_loop_close(&s->loop);
	free(s->timers);
	free(s);
}

static void libuv_set_add(void *set, const uint32_t *order, const uint32_t *delay_ms, size_t n)
{
	struct libuv_set *s = set;
	for (size_t i = 0; i < n; i++)
		uv_timer_start(&s->timers[order[i]], count_firing, delay_ms[i], 0);
}

static void libuv_set_cancel(void *set, const uint32_t *order, size_t n)
{
	struct libuv_set *s = set;
	for (size_t i = 0; i < n; i++)
		uv_timer_stop(&s->timers[order[i]]);
}

static void libuv_set_reset(void *set, const uint32_t *order, size_t n, uint32_t delay_ms)
{
	struct libuv_set *s = set;
	for (size_t i = 0; i < n; i++)
		uv_timer_start(&s->timers[order[i]], count_firing, delay_ms, 0);
}

static void libuv_set_expiry_arm(void *set, const uint32_t *order, const uint32_t *delay_ms,
				 size_t n, uint32_t max_delay_ms)
{
	struct libuv_set *s = set;
	uv_update_time(&s->loop);
	libuv_set_add(set, order, delay_ms, n);
	/* the last timer was armed relative to the time refreshed above */
	monotonic_sleep_until(monotonic_now_ns() + (uint64_t)(max_delay_ms + 5) * 1000000u);
}

static size_t libuv_set_expire_all(void *set)
{
	struct libuv_set *s = set;
	s->fired = 0;
	uv_run(&s->loop, UV_RUN_NOWAIT);
	return s->fired;
}

static const char *libuv_version(void)
{
	return uv_version_string();
}

const struct timer_impl libuv_impl = {
	.name = "libuv",
	.version = libuv_version,
	.real_clock = true,
	.handle_size = sizeof(uv_timer_t),
	.create = libuv_set_create,
	.destroy = libuv_set_destroy,
	.add = libuv_set_add,
	.cancel = libuv_set_cancel,
	.reschedule = libuv_set_add, /* uv_timer_start restarts an active timer */
	.reset = libuv_set_reset,
	.expiry_arm = libuv_set_expiry_arm,
	.expire_all = libuv_set_expire_all,
};

struct libuv_state {
	uv_loop_t loop;
	loop_fire_fn fire;
	void *ctx;
	size_t count;
	uv_timer_t *timers;
	uv_timer_t deadline;
	bool done;
	uint64_t fired, wakeups;
};

static void run_timer(uv_timer_t *t)
{
	uint64_t start = monotonic_now_ns();
	struct libuv_state *s = t->data;
	s->fired++;
	s->fire(s->ctx, (size_t)(t - s->timers), start, 0);
}

static void deadline_reached(uv_timer_t *t)
{
	struct libuv_state *s = t->data;
	s->done = true;
}

static void *libuv_create(size_t timers, loop_fire_fn fire, void *ctx, unsigned executors)
{
	(void)executors;
	struct libuv_state *s = calloc(1, sizeof *s);
	if (s)
		s->timers = calloc(timers ? timers : 1, sizeof *s->timers);
	int rc = s && s->timers ? uv_loop_init(&s->loop) : UV_ENOMEM;
	if (rc) {
		fprintf(stderr, "tw-perf: libuv: uv_loop_init: %s\n", uv_strerror(rc));
		if (s)
			free(s->timers);
		free(s);
		return NULL;
	}
	for (size_t i = 0; i < timers; i++) {
		uv_timer_init(&s->loop, &s->timers[i]);
		s->timers[i].data = s;
	}
	uv_timer_init(&s->loop, &s->deadline);
	s->deadline.data = s;
	s->fire = fire;
	s->ctx = ctx;
	s->count = timers;
	return s;
}

/* Whole ms from the loop's now to the first ms at or after at_ns. The loop's
 * now is the clock in ms rounded down, and a timer is due once that reaches
 * its own ms, so it never runs before at_ns. */
static uint64_t timeout_of(struct libuv_state *s, uint64_t at_ns)
{
	uv_update_time(&s->loop);
	uint64_t now_ms = uv_now(&s->loop), at_ms = ceil_ms_ns(at_ns) / NS_PER_MS;
	return at_ms > now_ms ? at_ms - now_ms : 0;
}

static int libuv_arm(void *loop, size_t timer, uint64_t first_due_ns, uint64_t period_ms)
{
	struct libuv_state *s = loop;
	int rc = uv_timer_start(&s->timers[timer], run_timer, timeout_of(s, first_due_ns),
				period_ms);
	if (rc) {
		fprintf(stderr, "tw-perf: libuv: uv_timer_start: %s\n", uv_strerror(rc));
		return -1;
	}
	return 0;
}

static void libuv_run_until(void *loop, uint64_t deadline_ns)
{
	struct libuv_state *s = loop;
	s->done = false;
	uv_timer_start(&s->deadline, deadline_reached, timeout_of(s, deadline_ns), 0);
	while (!s->done) {
		uint64_t fired = s->fired;
		uv_run(&s->loop, UV_RUN_ONCE);
		s->wakeups += s->fired != fired || !s->done;
	}
}

static uint64_t libuv_wakeups(void *loop)
{
	struct libuv_state *s = loop;
	return s->wakeups;
}

static void libuv_destroy(void *loop)
{
	struct libuv_state *s = loop;
	for (size_t i = 0; i < s->count; i++)
		uv_close((uv_handle_t *)&s->timers[i], NULL);
	uv_close((uv_handle_t *)&s->deadline, NULL);
	uv_run(&s->loop, UV_RUN_DEFAULT); /* completes the closes */
	uv_loop_close(&s->loop);
	free(s->timers);
	free(s);
}

const struct loop_impl libuv_loop = {
	.name = "libuv",
	.differs = "re-arms a repeat at the loop's now (whole ms, read once per iteration) + "
		   "repeat, before the callback: every wake-up that lands past its due ms "
		   "shifts the phase, so it drifts by design; one thread runs every callback",
	.create = libuv_create,
	.arm = libuv_arm,
	.run_until = libuv_run_until,
	.wakeups = libuv_wakeups,
	.destroy = libuv_destroy,
};
