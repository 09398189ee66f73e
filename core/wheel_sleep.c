/*
 * wheel_sleep.c - the wheel thread's sleep: a CLOCK_MONOTONIC timerfd armed
 * on the engine's 1 ms grid for the next tick with work (early after a long
 * sleep, spinning the rest, and telling the executor likely to get that tick's
 * first firing to wake for it), epoll on it, the mailbox's eventfd and the
 * wall clock's timerfd; on the manual clock, epoll's timeout alone.
 */
#include "wheel_round.h"

#include <errno.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* The timerfd's state when arming it failed: the next pass arms it again. */
#define ARM_FAILED (UINT64_MAX - 1)

/*
 * A lone task would wait for the wheel thread's late wake-up after a long sleep on top of
 * the timer's own latency (handover.h, wake_lead_next). So after a sleep of
 * LONG_SLEEP_TICKS or more the timerfd is armed wake_lead_ns early, and the thread spins
 * until the tick (wait_for_work). Nothing starts before its tick either way.
 */
enum { LONG_SLEEP_TICKS = 10 };

/* Arms the timerfd for the tick (UINT64_MAX: disarms it), early by wake_lead_ns if early;
 * false if the kernel refused. */
static bool arm(struct tw_engine *e, uint64_t tick, bool early)
{
	struct itimerspec at = { 0 };
	e->early_tick_ns = 0;
	if (tick != UINT64_MAX) {
		uint64_t ns = e->epoch_ns + tick * NS_PER_MS;
		if (early) {
			if (!e->wake_lead_ns)
				e->wake_lead_ns = START_WAKE_LEAD_NS;
			e->early_tick_ns = ns;
			ns -= e->wake_lead_ns;
		}
		at.it_value.tv_sec = (time_t)(ns / 1000000000u);
		at.it_value.tv_nsec = (long)(ns % 1000000000u);
	}
	return timerfd_settime(e->timer_fd, TFD_TIMER_ABSTIME, &at, NULL) == 0;
}

/* Woken by the timerfd armed early: learns how late that wake-up came, and spins until the
 * tick, unless the wake-up came after it. */
static void spin_to_tick(struct tw_engine *e)
{
	uint64_t tick_ns = e->early_tick_ns, armed_ns = tick_ns - e->wake_lead_ns;
	uint64_t now = monotonic_ns();
	e->wake_lead_ns = wake_lead_next(e->wake_lead_ns, now > armed_ns ? now - armed_ns : 0);
	while (now < tick_ns) {
		caa_cpu_relax();
		now = monotonic_ns();
	}
	e->early_tick_ns = 0;
}

/*
 * An executor woken by the wheel thread's futex wake-up after a long sleep comes late, and
 * irregularly so, after the wheel thread's own wake-up. Told of the tick ahead (wake_at_ns),
 * it wakes on its own timer, early by its own lead, while the wheel thread wakes on its
 * timerfd, and polls its ring for the firing (executor.c, ahead_of_tick). The executor to tell
 * is the one executor_for will choose for the first firing of the tick that is not for the
 * wheel thread: executor 0 for a serial task (plan_round fills from it), the next in turn for
 * a concurrent one. A guess that comes out wrong costs that executor's bounded spin.
 */
enum { PEEK_ENTRIES = 8 }; /* a tick's entries looked at, at most */

static struct executor *prewake_for(struct tw_engine *e, uint64_t tick)
{
	unsigned n = 0, running = executors_running(e);
	for (const struct wheel_entry *entry = wheel_first_at(&e->wheel, tick); entry;
	     entry = wheel_next_at(entry)) {
		if (++n > PEEK_ENTRIES) /* a crowded tick fills executor 0 first */
			return &e->executors[0];
		struct tw_task *task = task_of_entry((struct wheel_entry *)entry);
		tw__task_lock(task);
		bool fires = task->filing == FILED_DUE; /* not a reaping */
		tw__task_unlock(task);
		uint8_t traits = atomic_load_explicit(&task->traits, memory_order_relaxed);
		if (!fires || (traits & TRAIT_ON_WHEEL))
			continue;
		if (running > 1 && (traits & TRAIT_CONCURRENT))
			return &e->executors[e->next_executor % running];
		return &e->executors[0];
	}
	return NULL;
}

/* Arming for the tick (UINT64_MAX: none), early if early: tells the executor to wake for it
 * if one is likely to get a firing there, and the one told before that it need not. */
static void plan_prewake(struct tw_engine *e, uint64_t tick, bool early)
{
	struct executor *x = early && tick != UINT64_MAX ? prewake_for(e, tick) : NULL;
	uint64_t at = x ? e->epoch_ns + tick * NS_PER_MS : 0;
	struct executor *told = e->prewoken;
	if (x == told && at == e->prewake_ns)
		return;
	uint64_t before = x == told ? e->prewake_ns : 0;
	if (told && told != x) /* it wakes for it, finds 0 and sleeps on: no need to wake it */
		atomic_store_explicit(&told->wake_at_ns, 0, memory_order_release);
	e->prewoken = x;
	e->prewake_ns = at;
	if (!x)
		return;
	atomic_store_explicit(&e->wheel_cpu, sched_getcpu(), memory_order_relaxed);
	atomic_store_explicit(&x->wake_at_ns, at, memory_order_release);
	/* It sleeps without a limit, or until before less its lead: woken now, it sleeps again
	 * for the new time, unless its sleep ends before that anyway. */
	if (!(before && before <= at && before > monotonic_ns()))
		tw__executor_wake(x);
}

/* Whole ms from now until the tick, rounded up: epoll_wait's timeout when the timerfd
 * could not be armed, so that firing goes on, less precisely, rather than stopping. */
static int ms_until(struct tw_engine *e, uint64_t tick)
{
	if (tick == UINT64_MAX)
		return -1;
	uint64_t due = e->epoch_ns + tick * NS_PER_MS, now = tw__engine_now_ns(e);
	if (due <= now)
		return 0;
	uint64_t ms = (due - now + NS_PER_MS - 1) / NS_PER_MS;
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* Arms the timerfd for the next tick with work if it is not armed for it yet; returns
 * epoll_wait's timeout: -1, or the ms to that tick while the timerfd cannot be armed. */
int tw__wheel_arm_for_next(struct tw_engine *e, uint64_t *armed, uint64_t *until)
{
	uint64_t next = tw__wheel_next_expiry(&e->wheel);
	if (e->ready_head && wheel_now(&e->wheel) + 1 < next)
		next = wheel_now(&e->wheel) + 1; /* one-shots wait for room: look again */
	if (e->watch_ns) {
		uint64_t watch = tw__engine_tick_of(e, e->watch_ns);
		if (watch < next)
			next = watch;
	}
	*until = next;
	if (next == *armed)
		return -1;
	bool early = next != UINT64_MAX && next - wheel_now(&e->wheel) >= LONG_SLEEP_TICKS;
	plan_prewake(e, next, early);
	if (arm(e, next, early)) {
		if (*armed == ARM_FAILED)
			tw__engine_log(e, TW_LOG_WARNING, "timerfd_settime works again");
		*armed = next;
		return -1;
	}
	if (*armed != ARM_FAILED) /* once per failing spell, not per tick */
		tw__engine_log(e, TW_LOG_ERROR,
			       "timerfd_settime: %s; the wheel thread wakes by epoll_wait's "
			       "timeout until it works again",
			       tw__strerror(errno));
	*armed = ARM_FAILED;
	return ms_until(e, next);
}

/* Real clock: says the tick it will sleep until to the mailers (tw__task_mail and the
 * executors' rings of ended tasks), then whether it may sleep: not while mail waits, which
 * may be due before that tick, nor while a ring holds ended tasks, whose executor counted
 * on this look. */
bool tw__wheel_may_sleep(struct tw_engine *e, uint64_t until)
{
	atomic_store_explicit(&e->sleeps_until, until ? until : 1, memory_order_seq_cst);
	/* before the mailbox is looked at (liburcu's barrier: GCC's TSan refuses C11 fences) */
	cmm_smp_mb();
	bool empty = cds_wfcq_empty(&e->mail_head, &e->mail_tail);
	unsigned running = executors_running(e);
	for (unsigned i = 0; empty && i < running; i++)
		empty = !tw__executor_ended_waiting(&e->executors[i]);
	if (empty)
		return true;
	atomic_store_explicit(&e->sleeps_until, 0, memory_order_relaxed);
	return false;
}

void tw__wheel_wait(struct tw_engine *e, int timeout_ms)
{
	struct epoll_event events[3];
	int n = epoll_wait(e->epoll_fd, events, 3, timeout_ms);
	if (n < 0 && errno != EINTR) {
		/* Only a closed or broken epoll descriptor gets here: say so, and do not spin. */
		tw__engine_log(e, TW_LOG_ERROR, "epoll_wait: %s", tw__strerror(errno));
		struct timespec ms = { .tv_nsec = (long)NS_PER_MS };
		(void)nanosleep(&ms, NULL); /* EINTR: a shorter pause is as good */
	}
	bump(&e->wakeups); /* the wheel thread's alone */
	/* The timerfd needs no read: every wake-up by it is followed by a
	 * timerfd_settime (the next due is later), which clears its count. */
	for (int i = 0; i < n; i++) {
		uint64_t count;
		if (events[i].data.fd == e->timer_fd && e->early_tick_ns) {
			/* where an executor woken for the tick too must not spin (executor.c) */
			atomic_store_explicit(&e->wheel_cpu, sched_getcpu(), memory_order_relaxed);
			spin_to_tick(e);
		}
		if (events[i].data.fd == e->wall_fd)
			tw__wall_watch_event(e);
		if (events[i].data.fd != e->wake_fd)
			continue;
		ssize_t got = read(e->wake_fd, &count, sizeof count);
		(void)got; /* non-blocking, nothing left: EAGAIN */
	}
}

/* Manual clock: no timer, so the wait ends in real time for the watch over the executors,
 * and after a millisecond while one-shots of an advance wait for room. */
int tw__wheel_manual_timeout_ms(struct tw_engine *e)
{
	int timeout = e->ready_owed ? 1 : -1;
	if (e->watch_ns) {
		uint64_t now = monotonic_ns();
		uint64_t ms =
			e->watch_ns > now ? (e->watch_ns - now + NS_PER_MS - 1) / NS_PER_MS : 0;
		if (ms > INT32_MAX)
			ms = INT32_MAX;
		if (timeout < 0 || (int)ms < timeout)
			timeout = (int)ms;
	}
	return timeout;
}
