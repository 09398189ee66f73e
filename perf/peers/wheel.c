/*
 * wheel.c - the tickwheel timing wheel behind the benchmark's half of
 * peer.h (timer_impl), on the wheel's internals rather than the engine's
 * API. Time is virtual: "now" is wheel_now(), and expiry advances it to the
 * latest due tick in one loop of wheel_expire() calls.
 */
#include "wheel.h"
#include "peer.h"

#include <stdlib.h>

struct wheel_set {
	struct wheel wheel;
	uint64_t expiry_target; /* the tick expire_all() advances to */
	struct wheel_entry *entries;
};

static void *wheel_set_create(size_t n)
{
	struct wheel_set *s = malloc(sizeof *s);
	if (s == NULL)
		return NULL;
	s->entries = malloc(n * sizeof *s->entries);
	if (s->entries == NULL) {
		free(s);
		return NULL;
	}
	tw__wheel_init(&s->wheel, 0);
	s->expiry_target = 0;
	for (size_t i = 0; i < n; i++)
		wheel_entry_init(&s->entries[i]);
	return s;
}

static void wheel_set_destroy(void *set)
{
	struct wheel_set *s = set;
	free(s->entries);
	free(s);
}

static void wheel_set_add(void *set, const uint32_t *order, const uint32_t *delay_ms, size_t n)
{
	struct wheel_set *s = set;
	uint64_t now = wheel_now(&s->wheel);
	for (size_t i = 0; i < n; i++)
		tw__wheel_add(&s->wheel, &s->entries[order[i]], now + delay_ms[i]);
}

static void wheel_set_cancel(void *set, const uint32_t *order, size_t n)
{
	struct wheel_set *s = set;
	for (size_t i = 0; i < n; i++)
		tw__wheel_remove(&s->wheel, &s->entries[order[i]]);
}

static void wheel_set_reschedule(void *set, const uint32_t *order, const uint32_t *delay_ms,
				 size_t n)
{
	struct wheel_set *s = set;
	uint64_t now = wheel_now(&s->wheel);
	for (size_t i = 0; i < n; i++)
		tw__wheel_reschedule(&s->wheel, &s->entries[order[i]], now + delay_ms[i]);
}

static void wheel_set_reset(void *set, const uint32_t *order, size_t n, uint32_t delay_ms)
{
	struct wheel_set *s = set;
	uint64_t due = wheel_now(&s->wheel) + delay_ms;
	for (size_t i = 0; i < n; i++)
		tw__wheel_reschedule(&s->wheel, &s->entries[order[i]], due);
}

static void wheel_set_expiry_arm(void *set, const uint32_t *order, const uint32_t *delay_ms,
				 size_t n, uint32_t max_delay_ms)
{
	struct wheel_set *s = set;
	s->expiry_target = wheel_now(&s->wheel) + max_delay_ms;
	wheel_set_add(set, order, delay_ms, n);
}

static size_t wheel_set_expire_all(void *set)
{
	struct wheel_set *s = set;
	size_t fired = 0;
	while (wheel_expire(&s->wheel, s->expiry_target) != NULL)
		fired++;
	return fired;
}

static const char *wheel_version(void)
{
	return "tickwheel (this tree)";
}

const struct timer_impl wheel_impl = {
	.name = "wheel",
	.version = wheel_version,
	.real_clock = false,
	.handle_size = sizeof(struct wheel_entry),
	.create = wheel_set_create,
	.destroy = wheel_set_destroy,
	.add = wheel_set_add,
	.cancel = wheel_set_cancel,
	.reschedule = wheel_set_reschedule,
	.reset = wheel_set_reset,
	.expiry_arm = wheel_set_expiry_arm,
	.expire_all = wheel_set_expire_all,
};
