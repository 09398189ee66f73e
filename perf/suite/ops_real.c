/*
 * ops_real.c - request timeouts on the real clock, for `tw-perf ops`: a server arms a 30 s
 * timeout per request and cancels it when the answer comes, one request every 50 us, on an
 * engine with nothing else to do (its wheel thread sleeps until the first timeout's due).
 * The manual-clock figures leave out what the real clock adds: the clock reads, and any
 * wake-up of the sleeping wheel thread a change causes (an eventfd write in the caller and a
 * round of the wheel thread). Figures: ns per pair in the caller's calls, wake-ups per pair.
 */
#include "measure.h"
#include "ops.h"
#include "tickwheel.h"

enum {
	REAL_PAIRS = 20000,
	REAL_GAP_NS = 50000,     /* one request every 50 us */
	REAL_TIMEOUT_MS = 30000, /* cancelled long before it comes */
};

static int never_runs(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 0;
}

int ops_request_timeouts_real(struct real_figures *out)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	tw_engine *e;
	if (tw_engine_create(&cfg, &e) != TW_OK)
		return -1;
	tw_task_spec spec = { .delay_ms = REAL_TIMEOUT_MS, .callback = never_runs };
	tw_engine_stats before, after;
	int rc = tw_stats(e, &before);
	uint64_t in_calls = 0, next = monotonic_now_ns();
	for (size_t i = 0; rc == TW_OK && i < REAL_PAIRS; i++) {
		next += REAL_GAP_NS;
		monotonic_sleep_until(next);
		tw_id id;
		uint64_t t0 = monotonic_now_ns();
		rc = tw_add(e, &spec, &id);
		if (rc == TW_OK)
			rc = tw_cancel(e, id);
		in_calls += monotonic_now_ns() - t0;
	}
	if (rc == TW_OK)
		rc = tw_stats(e, &after);
	tw_engine_destroy(e);
	if (rc != TW_OK)
		return -1;
	out->pair_ns = (double)in_calls / REAL_PAIRS;
	out->wakeups_per_pair = (double)(after.wheel_wakeups - before.wheel_wakeups) / REAL_PAIRS;
	return 0;
}
