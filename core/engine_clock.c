/*
 * engine_clock.c - the engine's time (its 1 ms grid, the manual and the coarse
 * clock) and its log, read from its record alone.
 */
#include "engine.h"

#include <stdarg.h>
#include <stdio.h>

uint64_t tw__engine_now_ns(const struct tw_engine *e)
{
	if (e->cfg.manual_clock)
		return atomic_load_explicit(&e->manual_now_ns, memory_order_acquire);
	return monotonic_ns();
}

/* "now" for a delay asked by a caller with coarse_clock (see tickwheel.h);
 * out of line, so that the default path pays only for the test. */
static __attribute__((noinline)) uint64_t coarse_now_ns(const struct tw_engine *e)
{
	struct timespec ts;
	/* Cannot fail: the clock exists (clock_getres found it at create) and ts is ours. */
	(void)clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + e->coarse_slack_ns;
}

uint64_t tw__engine_call_now_ns(const struct tw_engine *e)
{
	return e->coarse_slack_ns ? coarse_now_ns(e) : tw__engine_now_ns(e);
}

/*
 * The due of a delay counted from now_ns, rounded up to the engine's 1 ms
 * grid: a due on the grid is fired at its own tick, so its lateness is the
 * engine's alone, and rounding up never shortens a delay (it may add < 1 ms).
 */
uint64_t tw__engine_due_at_ns(const struct tw_engine *e, uint64_t now_ns, uint64_t delay_ms)
{
	return e->epoch_ns + (tw__engine_tick_of(e, now_ns) + delay_ms) * NS_PER_MS;
}

uint64_t tw__engine_tick_of(const struct tw_engine *e, uint64_t due_ns)
{
	return due_ns > e->epoch_ns ? (due_ns - e->epoch_ns + NS_PER_MS - 1) / NS_PER_MS : 0;
}

void tw__engine_log(const struct tw_engine *e, int level, const char *fmt, ...)
{
	if (!e->cfg.log)
		return;
	char message[256];
	va_list ap;
	va_start(ap, fmt);
	/* A longer message is cut to fit; the formats are the library's own, with nothing in
	 * them that can fail to convert. */
	(void)vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	e->cfg.log(level, message, e->cfg.log_arg);
}
