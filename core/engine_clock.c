/*
 * engine_clock.c - the engine's coarse clock, read from its record alone (its
 * other clocks and its 1 ms grid are inline, in engine.h).
 */
#include "engine.h"

/* Out of line, so that the default path pays only for the test. */
uint64_t tw__engine_coarse_now_ns(const struct tw_engine *e)
{
	struct timespec ts;
	/* Cannot fail: the clock exists (clock_getres found it at create) and ts is ours. */
	(void)clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + e->coarse_slack_ns;
}
