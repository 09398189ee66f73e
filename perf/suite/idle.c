/*
 * idle.c - `tw-perf idle`: one 200 ms periodic timer for S seconds (default
 * 10), on tickwheel and then on each peer loop: how often the loop wakes up
 * (tickwheel: the wheel thread's wake-ups from tw_stats; a peer: its loop
 * iterations, see peer.h) and how much CPU the whole process takes.
 */
#include "loop_measure.h"
#include "measure.h"
#include "peer.h"
#include "suite.h"

#include <stdatomic.h>
#include <stdio.h>

enum { PERIOD_MS = 200 };

static void on_fire(void *ctx, size_t timer, uint64_t start_ns, uint64_t skipped)
{
	(void)timer;
	(void)start_ns;
	(void)skipped;
	atomic_fetch_add_explicit((_Atomic uint64_t *)ctx, 1, memory_order_relaxed);
}

static int run_one(const struct loop_impl *impl, const struct suite_options *opt, double seconds,
		   struct report *r)
{
	_Atomic uint64_t runs = 0;
	void *loop = impl->create(1, on_fire, (void *)&runs, opt->executors);
	if (!loop)
		return 2;
	uint64_t first = ceil_ms_ns(monotonic_now_ns()) + PERIOD_MS * NS_PER_MS;
	if (impl->arm(loop, 0, first, PERIOD_MS)) {
		impl->destroy(loop);
		return 2;
	}
	/* after arming: the engine's wake-ups to take the new task are set-up */
	uint64_t t0 = monotonic_now_ns(), w0 = impl->wakeups(loop);
	double cpu0 = process_cpu_seconds();
	/* the end half a period off any due, so every loop gets the same runs */
	impl->run_until(loop, first + (uint64_t)(seconds * 1e9) - PERIOD_MS / 2 * NS_PER_MS);
	double cpu = process_cpu_seconds() - cpu0;
	double wall = (double)(monotonic_now_ns() - t0) / 1e9;
	uint64_t wakeups = impl->wakeups(loop) - w0;
	impl->destroy(loop);
	report_add(r, impl->name, "wakeups_per_second", (double)wakeups / wall, "1/s",
		   BETTER_LOWER);
	report_add(r, impl->name, "cpu_percent", 100 * cpu / wall, "%", BETTER_LOWER);
	report_add(r, impl->name, "runs", (double)atomic_load(&runs), "runs", BETTER_NEITHER);
	return 0;
}

int scenario_idle(const struct suite_options *opt, struct report *r)
{
	double seconds = opt->seconds > 0 ? opt->seconds : opt->quick ? 3 : 10;
	report_param(r, "seconds", seconds);
	report_param(r, "period_ms", PERIOD_MS);
	report_param(r, "executors", opt->executors);
	const struct loop_impl *impls[SUITE_LOOPS_MAX];
	size_t n = loops_wanted(opt, impls);
	for (size_t k = 0; k < n; k++) {
		int rc = run_one(impls[k], opt, seconds, r);
		if (rc)
			return rc;
	}
	report_target(r, "wakeups_per_second", "<=", 6);
	report_target(r, "cpu_percent", "<=", 0.1);
	for (size_t k = 1; k < n; k++)
		report_note(r, "%s: %s", impls[k]->name, impls[k]->differs);
	report_note(r, "a peer's wake-ups: its loop iterations, not counting those that only "
		       "ended the run; CPU from getrusage, all threads");
	return 0;
}
