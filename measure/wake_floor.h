/*
 * wake_floor.h - what this machine's wake-ups alone give: one thread waiting
 * on an absolute 1 ms grid of a CLOCK_MONOTONIC timerfd with 1 ns of timer
 * slack, as the engine's wheel thread does, and doing nothing else. No timer
 * engine can fire more precisely than the kernel wakes it, so the tools show
 * this floor next to their own figures: a run on a noisy machine says so.
 */
#ifndef TICKWHEEL_MEASURE_WAKE_FLOOR_H
#define TICKWHEEL_MEASURE_WAKE_FLOOR_H

#include <stddef.h>
#include <stdint.h>

struct report;

struct wake_floor {
	uint64_t wakes;                                           /* wake-ups measured */
	double lateness_p50_us, lateness_p99_us, lateness_max_us; /* wake-up minus grid time */
	/* Deviations of the time between two wake-ups p ms apart from p, pooled
	 * over every whole p from lo_ms to hi_ms (as tasks of period p see them). */
	uint64_t intervals, intervals_over_1ms;
	double interval_sd_us, interval_worst_us;
	double interval_off_p50_us, interval_off_p99_us; /* of |interval - p| */
	uint64_t step_ms; /* the grid's step: 1, or a lone task's period (wake_floor_every) */
	/* The thread's CPU time per wake-up (its timerfd_settime, its read, and what the
	 * kernel charges it for going to sleep and waking): what a wake-up costs here. */
	double cpu_per_wakeup_us;
	/* What waking a second thread by futex at each wake-up adds, the waker's and the
	 * woken thread's CPU together (wake_floor_handover; 0 until it is measured): the
	 * least a hand-over from one thread to another costs here. */
	double handover_cpu_us;
	double handover_woken_cpu_us; /* the woken thread's share of it */
	uint64_t handovers;
};

/* Measures for `seconds` (at least 2 x hi_ms of them) in the calling thread,
 * whose timer slack it restores. 0, or -1 with errno set. */
int wake_floor_measure(double seconds, uint64_t lo_ms, uint64_t hi_ms, struct wake_floor *out);
/*
 * The same for a thread that sleeps as long as a lone task of period_ms does: it
 * wakes `wakes` times on an absolute grid period_ms apart from first_ns on, and its
 * intervals are consecutive wake-ups. A CPU idle that long wakes more slowly than one
 * woken every millisecond, so this is the floor a lone heartbeat is judged against;
 * measured in its own thread beside the run, it sees the machine the run sees.
 * Its timer slack is 1 ns meanwhile, then restored. 0, or -1 with errno set.
 */
int wake_floor_every(uint64_t first_ns, uint64_t period_ms, size_t wakes, struct wake_floor *out);
/*
 * The same grid as wake_floor_measure for `seconds`, where each wake-up also wakes a
 * second thread waiting on a futex, as a timer loop handing its firings to a worker does:
 * sets out->handover_cpu_us to the CPU per wake-up of both threads less
 * out->cpu_per_wakeup_us, so call it after wake_floor_measure. 0, or -1 with errno set.
 */
int wake_floor_handover(double seconds, struct wake_floor *out);
/* Its figures as a column of their own, named impl, and a note saying what it is. */
void wake_floor_report(struct report *r, const char *impl, const struct wake_floor *f);

#endif
