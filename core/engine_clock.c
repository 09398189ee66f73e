/*
 * engine_clock.c - the engine's coarse clock and its log, read from its record
 * alone (its other clocks and its 1 ms grid are inline, in engine.h).
 */
#include "engine.h"

#include <stdarg.h>
#include <stdio.h>

/* Out of line, so that the default path pays only for the test. */
uint64_t tw__engine_coarse_now_ns(const struct tw_engine *e)
{
	struct timespec ts;
	/* Cannot fail: the clock exists (clock_getres found it at create) and ts is ours. */
	(void)clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + e->coarse_slack_ns;
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
