/*
 * test_wheel_random.c - seeded differential test of the wheel against a
 * reference model.
 *
 * The model keeps, for every timer, whether it is pending, its due tick and
 * the sequence number of its last add or reschedule. The wheel must hand out
 * exactly what the model says: the pending timer with the smallest
 * (due, sequence) whose due tick is within the target, at its due tick.
 *
 * TW_SEED=<n> replays a single seed (as printed on failure) instead of the
 * built-in list, e.g.
 *   TW_SEED=1 build/tests/test_wheel_random --filter='wheel_random/mixed*'
 * and TW_OPS=<n> sets the number of operations per seed and profile (with
 * TW_OPS=k+1 a replay of a failure at op k stops right after it). --verbose
 * shows what each run covered.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../test_env.h"
#include "../test_util.h"
#include "reference_model.h"
#include "wheel.h"

#define POW2(n) (UINT64_C(1) << (n))

static const uint64_t SECOND = 1000;
static const uint64_t HOUR = 3600 * 1000;
static const uint64_t DAY = 24 * 3600 * 1000;
/* Keeps every due computed as now + delay far from overflow. */
static const uint64_t TIME_CEILING = POW2(60);

/* ---- random numbers: splitmix64, small and good enough ---- */

struct rng {
	uint64_t state;
};

static uint64_t rng_next(struct rng *r)
{
	return test_rng_next(&r->state);
}

/* Uniform enough in [0, n); the modulo bias does not matter here. */
static uint64_t rng_below(struct rng *r, uint64_t n)
{
	return n == 0 ? 0 : rng_next(r) % n;
}

static bool rng_per_mille(struct rng *r, unsigned chance)
{
	return rng_below(r, 1000) < chance;
}

/* ---- one run: a wheel and the model driven by one seed ---- */

struct profile {
	const char *name;
	size_t n_timers;
	size_t ops_per_seed;
	unsigned advance_per_mille;  /* of top-level operations */
	unsigned add_bias_per_mille; /* of changes: pick a timer not pending */
	unsigned remove_per_mille;   /* of operations on a pending timer */
	unsigned in_loop_per_mille;  /* of hand-outs followed by changes */
	unsigned check_every;        /* operations between tw__wheel_check calls */
	uint64_t (*random_due)(struct rng *r, uint64_t now);
	uint64_t (*random_step)(struct rng *r);
};

struct timer {
	struct wheel_entry entry;
	uint32_t id;
};

struct run {
	const struct profile *profile;
	uint64_t seed;
	size_t op;
	struct rng rng;
	struct wheel wheel;
	struct timer timers[MAX_TIMERS];
	struct model model;
	/* to tell that a run exercised what it should (--verbose shows them) */
	size_t handouts;
	size_t live_sum;
	size_t live_max;
};

/* Static: too big for a worker's stack, and each test runs in its own worker. */
static struct run the_run;

/* Fails the test with what it takes to replay it: profile, seed, operation. */
static void fail_run(const struct run *run, int line, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

static void fail_run(const struct run *run, int line, const char *format, ...)
{
	char message[512];
	va_list args;
	va_start(args, format);
	vsnprintf(message, sizeof message, format, args);
	va_end(args);
	cr_assert_fail("profile %s, op %zu, now %" PRIu64 " (line %d): %s\n"
		       "replay with TW_SEED=%" PRIu64,
		       run->profile->name, run->op, run->model.now, line, message, run->seed);
}

#define expect(run, condition, ...)                             \
	do {                                                    \
		if (!(condition))                               \
			fail_run((run), __LINE__, __VA_ARGS__); \
	} while (0)

static struct timer *timer_of(struct wheel_entry *e)
{
	return (struct timer *)((char *)e - offsetof(struct timer, entry));
}

/* The wheel agrees with the model about one timer and the totals. */
static void expect_agreement(struct run *run, uint32_t id)
{
	const struct model_timer *mt = &run->model.timer[id];
	const struct wheel_entry *e = &run->timers[id].entry;
	expect(run, wheel_entry_pending(e) == mt->pending,
	       "timer %" PRIu32 " pending %d, model says %d", id, wheel_entry_pending(e),
	       mt->pending);
	if (mt->pending)
		expect(run, wheel_entry_due(e) == mt->due,
		       "timer %" PRIu32 " due %" PRIu64 ", model says %" PRIu64, id,
		       wheel_entry_due(e), mt->due);
	expect(run, wheel_count(&run->wheel) == run->model.count, "count %zu, model says %zu",
	       wheel_count(&run->wheel), run->model.count);
	expect(run, wheel_now(&run->wheel) == run->model.now,
	       "now %" PRIu64 ", model says %" PRIu64, wheel_now(&run->wheel), run->model.now);
}

static void expect_next_expiry_bounds(struct run *run)
{
	uint64_t next = tw__wheel_next_expiry(&run->wheel);
	const struct model_key *first = model_earliest(&run->model);
	if (first == NULL) {
		expect(run, next == UINT64_MAX, "next expiry %" PRIu64 " on an empty wheel", next);
		return;
	}
	expect(run, next >= run->model.now, "next expiry %" PRIu64 " before now", next);
	expect(run, next <= first->due,
	       "next expiry %" PRIu64 " after the earliest due %" PRIu64 " (timer %" PRIu32 ")",
	       next, first->due, first->id);
	if (run->model.count == 1)
		expect(run, next == first->due,
		       "next expiry %" PRIu64 " for a single entry due %" PRIu64, next, first->due);
}

static void expect_full_agreement(struct run *run)
{
	expect(run, tw__wheel_check(&run->wheel), "tw__wheel_check failed");
	for (uint32_t id = 0; id < run->model.n_timers; id++)
		expect_agreement(run, id);
}

static void file_timer(struct run *run, uint32_t id, uint64_t due)
{
	struct wheel_entry *e = &run->timers[id].entry;
	/* tw__wheel_add wants a timer that is not pending; reschedule takes both */
	if (!wheel_entry_pending(e) && rng_per_mille(&run->rng, 500))
		tw__wheel_add(&run->wheel, e, due);
	else
		tw__wheel_reschedule(&run->wheel, e, due);
	model_file(&run->model, id, due);
	expect_agreement(run, id);
}

static void remove_timer(struct run *run, uint32_t id)
{
	tw__wheel_remove(&run->wheel, &run->timers[id].entry);
	model_remove(&run->model, id);
	expect_agreement(run, id);
}

/* A random timer; with the profile's add bias, one that is not pending. */
static uint32_t pick_timer(struct run *run)
{
	uint32_t n = (uint32_t)run->model.n_timers;
	uint32_t id = (uint32_t)rng_below(&run->rng, n);
	if (!rng_per_mille(&run->rng, run->profile->add_bias_per_mille))
		return id;
	for (uint32_t probe = 0; probe < n; probe++) {
		uint32_t candidate = (id + probe) % n;
		if (!run->model.timer[candidate].pending)
			return candidate;
	}
	return id;
}

/* Adds, refiles or removes one random timer. */
static void change_random_timer(struct run *run)
{
	uint32_t id = pick_timer(run);
	if (run->model.timer[id].pending &&
	    rng_per_mille(&run->rng, run->profile->remove_per_mille))
		remove_timer(run, id);
	else
		file_timer(run, id, run->profile->random_due(&run->rng, run->model.now));
}

/* Changes made between two wheel_expire() calls, around the timer in hand. */
static void change_from_inside_the_loop(struct run *run, uint32_t in_hand, uint64_t target)
{
	struct rng *r = &run->rng;
	uint64_t now = run->model.now;
	switch (rng_below(r, 5)) {
	case 0: /* refile the one in hand soon, often within this advance */
		file_timer(run, in_hand, now + rng_below(r, 70));
		break;
	case 1: /* refile the one in hand anywhere */
		file_timer(run, in_hand, run->profile->random_due(r, now));
		break;
	case 2: /* file any timer somewhere up to the target */
		file_timer(run, (uint32_t)rng_below(r, run->model.n_timers),
			   now + rng_below(r, target - now + 2));
		break;
	default:
		change_random_timer(run);
		break;
	}
}

static uint64_t pick_target(struct run *run)
{
	struct rng *r = &run->rng;
	uint64_t now = run->model.now;
	unsigned pick = (unsigned)rng_below(r, 1000);
	if (pick < 10) /* backwards: time must not move */
		return now - rng_below(r, now < 5000 ? now + 1 : 5000);
	if (pick < 100) { /* wake up when the wheel says so, as an event loop */
		uint64_t next = tw__wheel_next_expiry(&run->wheel);
		return next - now < DAY ? next : now + DAY;
	}
	uint64_t target = now + run->profile->random_step(r);
	return target < TIME_CEILING ? target : now + 1;
}

/* One advance: the wheel and the model must hand out the same timers, in
 * the same order, at the same ticks. */
static void advance(struct run *run)
{
	uint64_t target = pick_target(run);
	for (;;) {
		struct wheel_entry *e = wheel_expire(&run->wheel, target);
		int64_t expected = model_expire(&run->model, target);
		if (e == NULL) {
			expect(run, expected == NO_TIMER,
			       "nothing handed out advancing to %" PRIu64
			       ", model expects timer %" PRId64 " due %" PRIu64,
			       target, expected, run->model.now);
			expect(run, wheel_now(&run->wheel) == run->model.now,
			       "now %" PRIu64 " after advancing to %" PRIu64
			       ", model says %" PRIu64,
			       wheel_now(&run->wheel), target, run->model.now);
			return;
		}
		uint32_t id = timer_of(e)->id;
		expect(run, expected != NO_TIMER,
		       "timer %" PRIu32 " handed out at %" PRIu64 " (due %" PRIu64
		       "), model expects nothing up to %" PRIu64,
		       id, wheel_now(&run->wheel), wheel_entry_due(e), target);
		expect(run, id == (uint32_t)expected,
		       "timer %" PRIu32 " handed out at %" PRIu64 ", model expects timer %" PRId64
		       " due %" PRIu64 " (seq %" PRIu64 "); wheel's timer is due %" PRIu64
		       " (seq %" PRIu64 ")",
		       id, wheel_now(&run->wheel), expected, run->model.now,
		       run->model.timer[expected].seq, run->model.timer[id].due,
		       run->model.timer[id].seq);
		expect(run, wheel_now(&run->wheel) == run->model.now,
		       "timer %" PRIu32 " handed out at %" PRIu64 ", due %" PRIu64, id,
		       wheel_now(&run->wheel), run->model.now);
		expect(run, wheel_entry_due(e) == run->model.now,
		       "handed-out timer %" PRIu32 " says due %" PRIu64, id, wheel_entry_due(e));
		expect_agreement(run, id);
		run->handouts++;

		if (rng_per_mille(&run->rng, run->profile->in_loop_per_mille)) {
			unsigned changes = 1 + (unsigned)rng_below(&run->rng, 3);
			for (unsigned i = 0; i < changes; i++)
				change_from_inside_the_loop(run, id, target);
		}
		/* also mid-advance, where entries of the current tick may wait */
		expect_next_expiry_bounds(run);
	}
}

static uint64_t start_time(struct rng *r)
{
	switch (rng_below(r, 4)) {
	case 0:
		return 0;
	case 1:
		return 12345;
	case 2:
		return POW2(33) + 77;
	default:
		return rng_next(r) >> 12; /* anywhere below 2^52 */
	}
}

static void run_seed(struct run *run, const struct profile *profile, uint64_t seed, size_t ops)
{
	run->profile = profile;
	run->seed = seed;
	run->op = 0;
	run->handouts = 0;
	run->live_sum = 0;
	run->live_max = 0;
	run->rng.state = seed;
	uint64_t start = start_time(&run->rng);
	tw__wheel_init(&run->wheel, start);
	model_init(&run->model, start, profile->n_timers);
	for (uint32_t id = 0; id < profile->n_timers; id++) {
		wheel_entry_init(&run->timers[id].entry);
		run->timers[id].id = id;
	}

	for (run->op = 0; run->op < ops; run->op++) {
		if (rng_per_mille(&run->rng, profile->advance_per_mille))
			advance(run);
		else
			change_random_timer(run);
		expect_next_expiry_bounds(run);
		run->live_sum += run->model.count;
		if (run->model.count > run->live_max)
			run->live_max = run->model.count;
		if (run->op % profile->check_every == 0)
			expect_full_agreement(run);
	}
	expect_full_agreement(run);
	cr_log_info("%s TW_SEED=%" PRIu64 ": %zu ops from tick %" PRIu64 " to %" PRIu64
		    ", %zu hand-outs, %zu live on average, %zu at most",
		    profile->name, seed, ops, start, run->model.now, run->handouts,
		    ops ? run->live_sum / ops : 0, run->live_max);
	/* guards against a generator that stopped exercising hand-outs */
	expect(run, run->handouts > ops / 20, "only %zu hand-outs", run->handouts);
}

static void run_profile(const struct profile *profile)
{
	static const uint64_t fixed_seeds[] = { 20250101, 1, 0xdeadbeef, 987654321 };
	const char *replay = getenv("TW_SEED");
	size_t ops = (size_t)env_u64("TW_OPS", profile->ops_per_seed);
	cr_assert_leq(profile->n_timers, MAX_TIMERS);

	if (replay != NULL && *replay != '\0') {
		run_seed(&the_run, profile, env_u64("TW_SEED", 0), ops);
		return;
	}
	for (size_t i = 0; i < sizeof fixed_seeds / sizeof fixed_seeds[0]; i++)
		run_seed(&the_run, profile, fixed_seeds[i], ops);
}

/* ---- due times and steps ---- */

/* A tick on or next to a slot boundary of a random level. */
static uint64_t near_boundary(struct rng *r, uint64_t now)
{
	unsigned bits = WHEEL_LEVEL_SHIFT(1 + (unsigned)rng_below(r, WHEEL_LEVELS - 1));
	if (rng_per_mille(r, 100))
		bits = 41 + (unsigned)rng_below(r, 2);
	uint64_t width = POW2(bits);
	uint64_t boundary = (now / width + 1 + rng_below(r, 2)) * width;
	return boundary - 1 + rng_below(r, 3);
}

static uint64_t huge_due(struct rng *r, uint64_t now)
{
	switch (rng_below(r, 4)) {
	case 0:
		return UINT64_MAX - rng_below(r, 3);
	case 1:
		return POW2(63) + rng_below(r, 1000);
	case 2:
		return now + POW2(40) + rng_below(r, POW2(43)); /* past the wheel's span */
	default:
		return rng_next(r); /* anything, the past included */
	}
}

static uint64_t mixed_due(struct rng *r, uint64_t now)
{
	unsigned pick = (unsigned)rng_below(r, 1000);
	if (pick < 250)
		return now + rng_below(r, 71);
	if (pick < 450)
		return now + rng_below(r, 2 * SECOND + 1);
	if (pick < 650)
		return now + rng_below(r, HOUR + 1);
	if (pick < 850)
		return now + rng_below(r, 5 * DAY);
	if (pick < 910)
		return near_boundary(r, now);
	if (pick < 940) /* at or before now: due at the next tick */
		return now - rng_below(r, (now < DAY ? now : DAY) + 1);
	return huge_due(r, now);
}

static uint64_t mixed_step(struct rng *r)
{
	unsigned pick = (unsigned)rng_below(r, 10000);
	if (pick < 200)
		return 0;
	if (pick < 6000)
		return 1 + rng_below(r, 8);
	if (pick < 8500)
		return 1 + rng_below(r, 70);
	if (pick < 9750)
		return 1 + rng_below(r, 2 * SECOND);
	if (pick < 9970)
		return 1 + rng_below(r, HOUR);
	if (pick < 9995)
		return 1 + rng_below(r, 3 * DAY);
	return 1 + rng_below(r, POW2(38));
}

/* Few distinct ticks, many entries each: stresses same-tick order. */
static uint64_t tie_due(struct rng *r, uint64_t now)
{
	unsigned pick = (unsigned)rng_below(r, 1000);
	if (pick < 450)
		return now + rng_below(r, 8);
	if (pick < 750) {
		/* the first tick of the next window of level 1, 2 or 3 */
		uint64_t width = POW2(WHEEL_LEVEL_SHIFT(1 + (unsigned)rng_below(r, 3)));
		return (now / width + 1) * width + rng_below(r, 2);
	}
	if (pick < 900)
		return now + rng_below(r, 70);
	if (pick < 950)
		return now - rng_below(r, (now < 100 ? now : 100) + 1);
	return now + rng_below(r, 40000);
}

static uint64_t tie_step(struct rng *r)
{
	unsigned pick = (unsigned)rng_below(r, 1000);
	if (pick < 30)
		return 0;
	if (pick < 800)
		return 1 + rng_below(r, 4);
	if (pick < 970)
		return 1 + rng_below(r, 40);
	return 1 + rng_below(r, 3000);
}

/* Crowds a few ticks on boundaries of the upper levels and beyond the
 * wheel's span (2^41 ticks), and travels to them in steps of every size. */
static uint64_t far_due(struct rng *r, uint64_t now)
{
	/* slot widths of levels 2 to 4, level spans, and beyond the wheel */
	static const unsigned boundary_bits[] = { 19, 20, 27, 28, 35, 36, 41, 42 };
	enum { N_BITS = sizeof boundary_bits / sizeof boundary_bits[0] };
	unsigned pick = (unsigned)rng_below(r, 1000);
	if (pick < 450) {
		unsigned bits = boundary_bits[rng_below(r, N_BITS)];
		return (((now >> bits) + 1 + rng_below(r, 2)) << bits) + rng_below(r, 3);
	}
	if (pick < 600)
		return now + POW2(41) + rng_below(r, POW2(42));
	if (pick < 800)
		return now + rng_below(r, POW2(36));
	if (pick < 900)
		return now + rng_below(r, 71);
	return huge_due(r, now);
}

static uint64_t far_step(struct rng *r)
{
	unsigned pick = (unsigned)rng_below(r, 1000);
	if (pick < 50)
		return 0;
	if (pick < 350)
		return 1 + rng_below(r, 70);
	if (pick < 550)
		return 1 + rng_below(r, POW2(20));
	if (pick < 900)
		return 1 + rng_below(r, POW2(33));
	return 1 + rng_below(r, POW2(36));
}

/*
 * The engine's main use: heartbeats 100-500 ms out and bursts 1-4 s out, on
 * both sides of level 0's span (4096 ticks), round its ring, and across the
 * windows of level 1 (2048 ticks) that cascade into it; a few for minutes.
 */
static uint64_t heartbeat_due(struct rng *r, uint64_t now)
{
	unsigned pick = (unsigned)rng_below(r, 1000);
	uint64_t window = POW2(WHEEL_LEVEL_SHIFT(1));
	if (pick < 450)
		return now + 100 + rng_below(r, 401);
	if (pick < 700)
		return now + SECOND + rng_below(r, 3 * SECOND + 1);
	if (pick < 800) /* on a window boundary of level 1, up to three ahead */
		return (now / window + 1 + rng_below(r, 3)) * window - 1 + rng_below(r, 3);
	if (pick < 900)
		return now + rng_below(r, 70);
	if (pick < 970)
		return now + 4000 + rng_below(r, 200); /* level 0's span */
	return now + rng_below(r, 20 * 60 * SECOND);
}

static uint64_t heartbeat_step(struct rng *r)
{
	unsigned pick = (unsigned)rng_below(r, 1000);
	if (pick < 20)
		return 0;
	if (pick < 600)
		return 1 + rng_below(r, 8);
	if (pick < 970)
		return 1 + rng_below(r, 100);
	return 1 + rng_below(r, 3 * SECOND);
}

/* Thousands of live timers, due times from now to the far future. */
static const struct profile mixed_profile = {
	.name = "mixed",
	.n_timers = MAX_TIMERS,
	.ops_per_seed = 1500000,
	.advance_per_mille = 120,
	.add_bias_per_mille = 750,
	.remove_per_mille = 300,
	.in_loop_per_mille = 100,
	.check_every = 4096,
	.random_due = mixed_due,
	.random_step = mixed_step,
};

/* Thousands of timers a few seconds out, as the engine keeps them. */
static const struct profile heartbeat_profile = {
	.name = "heartbeats",
	.n_timers = MAX_TIMERS,
	.ops_per_seed = 600000,
	.advance_per_mille = 60,
	.add_bias_per_mille = 600,
	.remove_per_mille = 200,
	.in_loop_per_mille = 100,
	.check_every = 4096,
	.random_due = heartbeat_due,
	.random_step = heartbeat_step,
};

/* Hundreds of timers crowding a few ticks at a time, small steps. */
static const struct profile ties_profile = {
	.name = "ties",
	.n_timers = 1024,
	.ops_per_seed = 500000,
	.advance_per_mille = 150,
	.add_bias_per_mille = 300,
	.remove_per_mille = 250,
	.in_loop_per_mille = 150,
	.check_every = 2048,
	.random_due = tie_due,
	.random_step = tie_step,
};

/* Hundreds of timers crowding ticks beyond the span, large steps. */
static const struct profile far_profile = {
	.name = "far",
	.n_timers = 1024,
	.ops_per_seed = 500000,
	.advance_per_mille = 300,
	.add_bias_per_mille = 500,
	.remove_per_mille = 200,
	.in_loop_per_mille = 150,
	.check_every = 2048,
	.random_due = far_due,
	.random_step = far_step,
};

/* At most three timers: next expiry must be exact whenever only one is left. */
static const struct profile sparse_profile = {
	.name = "sparse",
	.n_timers = 3,
	.ops_per_seed = 250000,
	.advance_per_mille = 400,
	.add_bias_per_mille = 0,
	.remove_per_mille = 300,
	.in_loop_per_mille = 300,
	.check_every = 64,
	.random_due = mixed_due,
	.random_step = mixed_step,
};

Test(wheel_random, mixed_scales_against_the_model, .timeout = 300)
{
	run_profile(&mixed_profile);
}

Test(wheel_random, heartbeats_and_bursts_against_the_model, .timeout = 300)
{
	run_profile(&heartbeat_profile);
}

Test(wheel_random, crowded_ticks_against_the_model, .timeout = 300)
{
	run_profile(&ties_profile);
}

Test(wheel_random, far_crowded_ticks_against_the_model, .timeout = 300)
{
	run_profile(&far_profile);
}

Test(wheel_random, few_entries_against_the_model, .timeout = 300)
{
	run_profile(&sparse_profile);
}
