/*
 * wheel_demo - the timing wheel driven by the real clock for about three seconds.
 *
 * Tick k of the wheel is t0 + k ms of CLOCK_MONOTONIC, t0 being on a whole millisecond.
 * The loop sleeps with clock_nanosleep(TIMER_ABSTIME) until the tick tw__wheel_next_expiry()
 * names, then hands out everything due up to the current tick. Periodic timers are re-added
 * at their previous due tick plus the period, so they never drift by the wake-up latency.
 * A "session" timeout is pushed back by every 250 ms heartbeat, three times, before it fires;
 * one one-shot is cancelled before it is due. The exit status is 1 if any timer fired early,
 * fired at another tick than planned, or fired after being cancelled (meson runs it as a test).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

#include "../test_util.h"
#include "wheel.h"

#define RUN_TICKS 3000 /* ms */

struct timer {
	struct wheel_entry entry; /* first member: the entry's address is the timer's */
	const char *name;
	uint64_t period; /* ms; 0 for a one-shot */
	uint64_t first;  /* first due tick (of a one-shot: the planned one) */
};

enum { HB100, HB250, HB400, SESSION, ONCE, FAR, CANCELLED, NTIMERS };

static struct timer timers[NTIMERS] = {
	[HB100] = { .name = "heartbeat-100", .period = 100, .first = 100 },
	[HB250] = { .name = "heartbeat-250", .period = 250, .first = 250 },
	[HB400] = { .name = "heartbeat-400", .period = 400, .first = 400 },
	[SESSION] = { .name = "session-timeout", .first = 600 },
	[ONCE] = { .name = "one-shot", .first = 1234 },
	[FAR] = { .name = "one-shot-far", .first = 2999 },
	[CANCELLED] = { .name = "cancelled", .first = 2000 },
};

static int64_t t0; /* ns of CLOCK_MONOTONIC at tick 0 */

/* Sleeps until tick on the 1 ms grid. */
static void sleep_until_tick(uint64_t tick)
{
	int64_t ns = t0 + (int64_t)tick * (int64_t)NS_PER_MS;
	struct timespec ts = { .tv_sec = ns / 1000000000LL, .tv_nsec = ns % 1000000000LL };
	int rc;

	do {
		rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	} while (rc == EINTR);
	if (rc != 0) {
		fprintf(stderr, "wheel_demo: clock_nanosleep failed (%d)\n", rc);
		exit(1);
	}
}

/* Whole ticks elapsed since t0. */
static uint64_t current_tick(void)
{
	int64_t ns = (int64_t)test_now_ns() - t0;

	return ns > 0 ? (uint64_t)(ns / (int64_t)NS_PER_MS) : 0;
}

int main(void)
{
	static struct wheel w;
	uint64_t fires = 0, wakeups = 0, idle_wakeups = 0, skipped = 0, errors = 0;
	double max_late = 0.0, sum_late = 0.0;
	int resets_left = 3;

	/* Timer slack would add ~50 us to every clock_nanosleep wake-up. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);

	t0 = ((int64_t)test_now_ns() / (int64_t)NS_PER_MS + 2) * (int64_t)NS_PER_MS;
	tw__wheel_init(&w, 0);
	for (int i = 0; i < NTIMERS; i++) {
		wheel_entry_init(&timers[i].entry);
		tw__wheel_add(&w, &timers[i].entry, timers[i].first);
	}
	printf("wheel_demo: %zu timers, %d ms on a 1 ms grid of CLOCK_MONOTONIC\n", wheel_count(&w),
	       RUN_TICKS);
	printf("%8s %11s %9s  %s\n", "due", "actual(ms)", "late(ms)", "timer");
	sleep_until_tick(0);

	while (wheel_now(&w) < RUN_TICKS) {
		uint64_t next = tw__wheel_next_expiry(&w);
		uint64_t target;
		uint64_t fired_here = 0;
		struct wheel_entry *e;

		if (next > RUN_TICKS)
			next = RUN_TICKS;
		sleep_until_tick(next);
		wakeups++;
		target = current_tick();
		if (target > RUN_TICKS)
			target = RUN_TICKS;

		while ((e = wheel_expire(&w, target)) != NULL) {
			struct timer *t = (struct timer *)e;
			uint64_t due = wheel_now(&w);
			double at = (double)((int64_t)test_now_ns() - t0) / (int64_t)NS_PER_MS;
			double late = at - (double)due;

			fires++;
			fired_here++;
			sum_late += late;
			if (late > max_late)
				max_late = late;
			printf("%8" PRIu64 " %11.2f %9.2f  %s\n", due, at, late, t->name);
			if (late < 0.0 || t == &timers[CANCELLED] ||
			    (t->period ? due % t->period != 0 : due != t->first)) {
				printf("error: %s fired at the wrong time\n", t->name);
				errors++;
			}

			if (t->period) {
				/* Fixed rate: previous due + period, skipping missed periods. */
				uint64_t again = due + t->period;

				while (again <= target) {
					again += t->period;
					skipped++;
				}
				tw__wheel_add(&w, e, again);
			}
			if (t == &timers[HB250] && resets_left > 0) {
				resets_left--;
				timers[SESSION].first = due + 600;
				tw__wheel_reschedule(&w, &timers[SESSION].entry, due + 600);
				printf("%8s %11s %9s  %s pushed back to tick %" PRIu64 "\n", "", "",
				       "", timers[SESSION].name, due + 600);
			}
			if (t == &timers[ONCE] && wheel_entry_pending(&timers[CANCELLED].entry)) {
				tw__wheel_remove(&w, &timers[CANCELLED].entry);
				printf("%8s %11s %9s  %s removed before tick %d\n", "", "", "",
				       timers[CANCELLED].name, 2000);
			}
		}
		if (fired_here == 0)
			idle_wakeups++;
	}

	printf("summary: %" PRIu64 " fires, max lateness %.2f ms, mean lateness %.3f ms, "
	       "%" PRIu64 " wake-ups (%" PRIu64 " without a fire), %" PRIu64
	       " missed periods skipped, %zu timers still pending\n",
	       fires, max_late, fires ? sum_late / (double)fires : 0.0, wakeups, idle_wakeups,
	       skipped, wheel_count(&w));
	return errors ? 1 : 0;
}
