/*
 * tickwheel.c - tickwheel under test, the loop's half of peer.h, on the
 * public API: one engine, each timer a serial task whose callback reports its
 * start; run_until() only sleeps, since the engine fires on its own threads.
 * The loop "tickwheel-wheel-thread" is the same with TW_ON_WHEEL_THREAD tasks.
 * The benchmark's half is the wheel itself (wheel.c), below the engine.
 */
#include "tickwheel.h"
#include "peer.h"

#include <stdio.h>
#include <stdlib.h>

struct tw_loop;

struct tw_timer {
	struct tw_loop *loop; /* the index is this slot's place in loop->timers */
};

struct tw_loop {
	tw_engine *engine;
	loop_fire_fn fire;
	void *ctx;
	size_t count;
	unsigned flags; /* of every task */
	struct tw_timer *timers;
};

static int run_timer(const tw_fire *fire, void *arg)
{
	uint64_t start = monotonic_now_ns();
	struct tw_timer *t = arg;
	t->loop->fire(t->loop->ctx, (size_t)(t - t->loop->timers), start, fire->skipped);
	return 0;
}

static void *tw_loop_create_with(size_t timers, loop_fire_fn fire, void *ctx, unsigned executors,
				 unsigned flags)
{
	struct tw_loop *l = calloc(1, sizeof *l);
	if (l)
		l->timers = calloc(timers ? timers : 1, sizeof *l->timers);
	if (!l || !l->timers) {
		fprintf(stderr, "tw-perf: tickwheel: out of memory for %zu timers\n", timers);
		free(l);
		return NULL;
	}
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = executors;
	int rc = tw_engine_create(&cfg, &l->engine);
	if (rc) {
		fprintf(stderr, "tw-perf: tickwheel: tw_engine_create: %s\n", tw_strerror(rc));
		free(l->timers);
		free(l);
		return NULL;
	}
	for (size_t i = 0; i < timers; i++)
		l->timers[i].loop = l;
	l->fire = fire;
	l->ctx = ctx;
	l->count = timers;
	l->flags = flags;
	return l;
}

static void *tw_loop_create(size_t timers, loop_fire_fn fire, void *ctx, unsigned executors)
{
	return tw_loop_create_with(timers, fire, ctx, executors, 0);
}

static void *tw_loop_create_wheel_thread(size_t timers, loop_fire_fn fire, void *ctx,
					 unsigned executors)
{
	return tw_loop_create_with(timers, fire, ctx, executors, TW_ON_WHEEL_THREAD);
}

/* The delay from the engine's now (its 1 ms grid, rounded up) to the grid
 * tick at or after first_due_ns. */
static uint64_t delay_to(uint64_t first_due_ns, uint64_t now_ns)
{
	uint64_t tick = ceil_ms_ns(now_ns), due = ceil_ms_ns(first_due_ns);
	return due > tick ? (due - tick) / NS_PER_MS : 0;
}

static int tw_loop_arm(void *loop, size_t timer, uint64_t first_due_ns, uint64_t period_ms)
{
	struct tw_loop *l = loop;
	uint64_t before = monotonic_now_ns();
	tw_task_spec spec = { .delay_ms = delay_to(first_due_ns, before),
			      .period_ms = period_ms,
			      .callback = run_timer,
			      .arg = &l->timers[timer],
			      .flags = l->flags };
	tw_id id;
	int rc = tw_add(l->engine, &spec, &id);
	/* The engine reads its own now: if the grid ticked in between, the due
	 * came out 1 ms late, for every run of a periodic task. Set it again. */
	for (int tries = 0; !rc && tries < 3; tries++) {
		uint64_t after = monotonic_now_ns();
		if (ceil_ms_ns(after) == ceil_ms_ns(before))
			break;
		tw_task_info info;
		if (tw_get(l->engine, id, &info) || info.next_due_ns <= ceil_ms_ns(first_due_ns))
			break;
		before = after;
		rc = tw_set_delay(l->engine, id, delay_to(first_due_ns, before));
	}
	if (rc) {
		fprintf(stderr, "tw-perf: tickwheel: arming timer %zu: %s\n", timer,
			tw_strerror(rc));
		return -1;
	}
	return 0;
}

static void tw_loop_run_until(void *loop, uint64_t deadline_ns)
{
	(void)loop;
	monotonic_sleep_until(deadline_ns);
}

static uint64_t tw_loop_wakeups(void *loop)
{
	struct tw_loop *l = loop;
	tw_engine_stats s;
	return tw_stats(l->engine, &s) ? 0 : s.wheel_wakeups;
}

static void tw_loop_skips(void *loop, struct loop_skips *out)
{
	struct tw_loop *l = loop;
	tw_engine_stats s;
	*out = (struct loop_skips){ 0 };
	if (tw_stats(l->engine, &s) == TW_OK)
		*out = (struct loop_skips){ s.skipped_overlap, s.skipped_overload,
					    s.skipped_missed };
}

static void tw_loop_destroy(void *loop)
{
	struct tw_loop *l = loop;
	tw_engine_stop(l->engine, 1000);
	tw_engine_destroy(l->engine);
	free(l->timers);
	free(l);
}

const struct loop_impl tickwheel_loop = {
	.name = "tickwheel",
	.differs = "the reference: dues on a 1 ms grid, a periodic due = previous due + period "
		   "(no drift), callbacks on executor threads, a firing that cannot run is "
		   "skipped and counted, never queued",
	.create = tw_loop_create,
	.arm = tw_loop_arm,
	.run_until = tw_loop_run_until,
	.wakeups = tw_loop_wakeups,
	.skips = tw_loop_skips,
	.destroy = tw_loop_destroy,
};

const struct loop_impl tickwheel_wheel_thread_loop = {
	.name = "tickwheel-wheel-thread",
	.differs = "tickwheel with TW_ON_WHEEL_THREAD tasks: callbacks on the wheel thread, no "
		   "hand-over to an executor",
	.create = tw_loop_create_wheel_thread,
	.arm = tw_loop_arm,
	.run_until = tw_loop_run_until,
	.wakeups = tw_loop_wakeups,
	.skips = tw_loop_skips,
	.destroy = tw_loop_destroy,
};
