/*
 * impl_libuv.c - libuv timers (a binary min-heap intrusive in uv_timer_t)
 * behind the benchmark's timer_impl interface.
 *
 * add = uv_timer_start, cancel = uv_timer_stop, reschedule and reset =
 * uv_timer_start on an active handle (libuv stops and restarts it). Delays
 * are relative to the loop's cached time, refreshed only by expiry_arm().
 * Expiry: one uv_run(UV_RUN_NOWAIT) once every timer is due.
 */
#include "bench.h"

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
