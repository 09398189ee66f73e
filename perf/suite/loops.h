/*
 * loops.h - timers on a real-clock loop, the same job for tickwheel and for
 * each peer event loop, so that heartbeats, burst and idle run one code path
 * over all of them. A peer is a single-threaded loop that runs its callbacks
 * itself; tickwheel runs them on its executors while run_until() waits.
 */
#ifndef TICKWHEEL_PERF_LOOPS_H
#define TICKWHEEL_PERF_LOOPS_H

#include "suite.h"

#include <stddef.h>
#include <stdint.h>

/* Timer `timer` started a run at start_ns (CLOCK_MONOTONIC); `skipped` due
 * firings were skipped since its previous run (always 0 for the peers). May be
 * called from several threads at once for different timers (tickwheel), never
 * twice at once for one timer. */
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
	/* A loop for `timers` timers, none armed. NULL after saying why on stderr. */
	void *(*create)(size_t timers, loop_fire_fn fire, void *ctx,
			const struct suite_options *opt);
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

extern const struct loop_impl tickwheel_loop;
/* tickwheel with TW_ON_WHEEL_THREAD tasks; run as a peer (--peers tickwheel-wheel-thread). */
extern const struct loop_impl tickwheel_wheel_thread_loop;
#ifdef HAVE_LIBUV
extern const struct loop_impl libuv_loop;
#endif
#ifdef HAVE_LIBEVENT
extern const struct loop_impl libevent_loop;
#endif
#ifdef HAVE_LIBEV
extern const struct loop_impl libev_loop;
#endif

/* tickwheel first, then every peer built in; NULL-terminated. */
enum { SUITE_LOOPS_MAX = 5 }; /* tickwheel and the peers, at most */
extern const struct loop_impl *const suite_loops[];

#endif
