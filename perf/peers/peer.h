/*
 * peer.h - the one interface every timer library under test implements, each
 * in one file of perf/peers/ (tickwheel.c, libuv.c, libevent.c, libev.c; the
 * wheel's batches in wheel.c, on its internals). A library answers two
 * questions, so the interface has two halves:
 *
 * - struct timer_impl, the benchmark's batches (`tw-perf ops`, callgrind-op):
 *   the cost of one operation on a set of n timers, each measured loop inside
 *   the library's file so that nothing but the call and the loop is timed;
 * - struct loop_impl, timers on a real-clock loop (heartbeats, burst, idle,
 *   blocker): how late a callback starts, how often the loop wakes up.
 *
 * The halves stay apart because they measure different things: the batches
 * the cost of a call, timed around a loop of calls with no callback of the
 * benchmark's own; the loop what a program on the library sees, lateness and
 * wake-ups.
 */
#ifndef TICKWHEEL_PERF_PEER_H
#define TICKWHEEL_PERF_PEER_H

#include "measure.h" /* the clock: monotonic_now_ns(), monotonic_sleep_until() */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The benchmark's half. Timer i is the i-th handle of one array that the
 * library's set allocates in create(); order[] says in which (random)
 * sequence they are touched. Delays are relative to the library's own
 * current time.
 */
struct timer_impl {
	const char *name;
	const char *(*version)(void);
	/* true: a real-clock event loop, whose expiry can only be measured on
	 * timers due within about a second (see expiry_arm) */
	bool real_clock;
	size_t handle_size;
	/* An empty timer set with n handles, all initialised; NULL on failure. */
	void *(*create)(size_t n);
	void (*destroy)(void *set);
	/* Arms timer order[i], which is not armed, delay_ms[i] from now. */
	void (*add)(void *set, const uint32_t *order, const uint32_t *delay_ms, size_t n);
	/* Disarms timer order[i], which is armed. */
	void (*cancel)(void *set, const uint32_t *order, size_t n);
	/* Moves armed timer order[i] to delay_ms[i] from now. */
	void (*reschedule)(void *set, const uint32_t *order, const uint32_t *delay_ms, size_t n);
	/* Moves armed timer order[i] to delay_ms from now (same for all). */
	void (*reset)(void *set, const uint32_t *order, size_t n, uint32_t delay_ms);
	/* Untimed: refreshes the clock, arms every timer as add() does, and
	 * returns once all of them are due (a real-clock loop sleeps until
	 * max_delay_ms after the last one was armed; the wheel only records the
	 * virtual tick to advance to). */
	void (*expiry_arm)(void *set, const uint32_t *order, const uint32_t *delay_ms, size_t n,
			   uint32_t max_delay_ms);
	/* The measured part: hands out every armed timer; returns how many. */
	size_t (*expire_all)(void *set);
};

/*
 * The loop's half: the same job for tickwheel and each peer, so that
 * heartbeats, burst and idle run one code path over all of them. A peer is a
 * single-threaded loop that runs its callbacks itself; tickwheel runs them on
 * its executors while run_until() waits.
 *
 * Timer `timer` started a run at start_ns (CLOCK_MONOTONIC); `skipped` due
 * firings were skipped since its previous run (always 0 for the peers). May be
 * called from several threads at once for different timers (tickwheel), never
 * twice at once for one timer.
 */
typedef void (*loop_fire_fn)(void *ctx, size_t timer, uint64_t start_ns, uint64_t skipped);

/* Due firings a loop skipped rather than run late, by tickwheel's reasons: the
 * task's previous run was still going, the executor's queue was full, the loop
 * fell behind by whole periods (or the firing was dropped unstarted). */
struct loop_skips {
	uint64_t overlap, overload, missed;
};

static inline uint64_t loop_skips_total(const struct loop_skips *s)
{
	return s->overlap + s->overload + s->missed;
}

struct loop_impl {
	const char *name;
	/* One line: what this loop does differently from tickwheel. */
	const char *differs;
	/* A loop for `timers` timers, none armed; tickwheel runs its callbacks on
	 * `executors` threads (0: one per online CPU), a peer on its own. NULL
	 * after saying why on stderr. */
	void *(*create)(size_t timers, loop_fire_fn fire, void *ctx, unsigned executors);
	/* Arms timer i: first due at first_due_ns (CLOCK_MONOTONIC), then every
	 * period_ms (0: once). 0, or -1 after saying why. */
	int (*arm)(void *loop, size_t timer, uint64_t first_due_ns, uint64_t period_ms);
	/* Runs the loop (tickwheel: waits) until deadline_ns. */
	void (*run_until)(void *loop, uint64_t deadline_ns);
	/* Times the loop woke up to fire timers so far (tickwheel: wheel wake-ups). */
	uint64_t (*wakeups)(void *loop);
	/* Due firings it skipped so far rather than run late; NULL: it never skips.
	 * Any thread may ask, a callback of the loop's included. */
	void (*skips)(void *loop, struct loop_skips *out);
	/* Stops every timer and frees the loop. */
	void (*destroy)(void *loop);
};

/* ns rounded up to a whole ms of CLOCK_MONOTONIC, the grid every API here
 * can express a due on. */
static inline uint64_t ceil_ms_ns(uint64_t ns)
{
	return (ns + NS_PER_MS - 1) / NS_PER_MS * NS_PER_MS;
}

/* Each library's halves. */
extern const struct timer_impl wheel_impl;
extern const struct loop_impl tickwheel_loop;
/* tickwheel with TW_ON_WHEEL_THREAD tasks; run as a peer (--peers tickwheel-wheel-thread). */
extern const struct loop_impl tickwheel_wheel_thread_loop;
#ifdef HAVE_LIBUV
extern const struct timer_impl libuv_impl;
extern const struct loop_impl libuv_loop;
#endif
#ifdef HAVE_LIBEVENT
extern const struct timer_impl libevent_impl;
extern const struct loop_impl libevent_loop;
#endif
#ifdef HAVE_LIBEV
extern const struct timer_impl libev_impl;
extern const struct loop_impl libev_loop;
#endif

/* The tables (peers.c), tickwheel first, then every peer built in; NULL-terminated. */
extern const struct timer_impl *const bench_impls[];
const struct timer_impl *bench_find_impl(const char *name);
enum { SUITE_LOOPS_MAX = 5 }; /* tickwheel and the peers, at most */
extern const struct loop_impl *const suite_loops[];

#endif
