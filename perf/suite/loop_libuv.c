/*
 * loop_libuv.c - the loops.h timers on a libuv loop (uv_timer_t, its repeat
 * for periodic timers). run_until() runs the loop one iteration at a time
 * (UV_RUN_ONCE) until a one-shot deadline timer ends it; a wake-up is an
 * iteration in which anything but that deadline timer fired, or nothing did.
 */
#include "loop_measure.h"
#include "loops.h"
#include "measure.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

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

static void *libuv_create(size_t timers, loop_fire_fn fire, void *ctx,
			  const struct suite_options *opt)
{
	(void)opt;
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
