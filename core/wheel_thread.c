/*
 * wheel_thread.c - the one thread that owns the wheel.
 *
 * It sleeps in epoll on two descriptors: a CLOCK_MONOTONIC timerfd armed
 * with TFD_TIMER_ABSTIME on the engine's 1 ms grid for the next tick the
 * wheel may have work at (never armed while nothing is due), and an eventfd
 * that the mailbox rings when it goes from empty to not empty. Each round it
 * applies mailed changes, advances the wheel to the current tick in one go
 * (however many ticks passed: a stall is caught up at once), hands due
 * firings to the executors and re-arms.
 *
 * Postponing a task needs no work here: the API thread records the later due
 * and the entry is re-filed when its old tick comes round.
 *
 * This file is the round's order; its parts are wheel_mail.c, wheel_fire.c and
 * wheel_sleep.c (wheel_round.h).
 */
#include "wheel_round.h"

#include <errno.h>
#include <sched.h>
#include <sys/prctl.h>

static uint64_t current_tick(struct tw_engine *e)
{
	uint64_t now = tw__engine_now_ns(e);
	return now > e->epoch_ns ? (now - e->epoch_ns) / NS_PER_MS : 0;
}

/* Manual clock: tells the tw_advance() callers their advance is dispatched. */
static uint64_t advance_asked(struct tw_engine *e)
{
	pthread_mutex_lock(&e->lock);
	uint64_t asked = e->advance_asked;
	pthread_mutex_unlock(&e->lock);
	return asked;
}

static void advance_done(struct tw_engine *e, uint64_t asked)
{
	pthread_mutex_lock(&e->lock);
	e->advance_done = asked;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
}
/* Manual clock, the round's firings out: what is in the ready list now is due by the
 * advance asked (0: none), which is told done. Returns epoll_wait's timeout. */
static int manual_round_end(struct tw_engine *e, uint64_t asked)
{
	if (asked)
		e->ready_owed = e->ready_count;
	/* Before the advance is told done: a tw_quiesce after it must see it. */
	atomic_store_explicit(&e->ready_due, e->ready_owed, memory_order_release);
	if (asked)
		advance_done(e, asked);
	return tw__wheel_manual_timeout_ms(e);
}

static void thread_setup(void)
{
#ifndef NDEBUG
	tw__note_wheel_thread();
#endif
	tw__rcu_ensure_registered();
	/* without /proc too (prctl); tw__wheel_thread_start names it through /proc at once */
	(void)pthread_setname_np(pthread_self(), "tw-wheel");
	/* Without the least slack the kernel may defer each wake-up by up to 50 us; a refusal
	 * costs precision, not correctness. */
	(void)prctl(PR_SET_TIMERSLACK, 1UL);
}

static void *wheel_main(void *arg)
{
	struct tw_engine *e = arg;
	uint64_t armed = ARM_NONE;
	thread_setup();
	uint64_t handled = 0; /* manual clock: the last tw_advance whose firings are out */
	uint64_t round_start = monotonic_ns();
	while (!atomic_load(&e->wheel_quit)) {
		uint64_t asked = e->cfg.manual_clock ? advance_asked(e) : 0;
		/* On the manual clock firings happen only for a tw_advance; between two, mail
		 * is filed and what comes due waits in the ready list. */
		bool advancing = !e->cfg.manual_clock || asked != handled;
		uint64_t target = advancing ? current_tick(e) : wheel_now(&e->wheel);
		tw__wheel_plan_round(e);
		/* + 1: a task may end while the round reads its mail, on the next tick */
		e->take_in_tick = e->cfg.manual_clock ? 0 : target + 1;
		bool mail_read = tw__wheel_read_mail(e, advancing);
		if (!advancing && e->ready_owed) /* due by an advance, waiting for room */
			tw__wheel_hand_out_ready(e, target, e->ready_owed);
		if (advancing) {
			tw__wheel_hand_out_ready(e, target, UINT64_MAX);
			tw__wheel_fire_due(e, target);
		}
		tw__executors_kick(e);
		tw__watch_executors(e);
		int timeout_ms = -1;
		if (e->cfg.manual_clock) {
			timeout_ms = manual_round_end(e, advancing ? asked : 0);
			handled = advancing ? asked : handled;
		} else {
			atomic_store_explicit(&e->ready_due, e->ready_count, memory_order_release);
			uint64_t until = UINT64_MAX;
			timeout_ms = tw__wheel_arm_for_next(e, &armed, &until);
			if (!mail_read)
				(void)sched_yield(); /* let the mailer finish; always succeeds */
			if (!tw__wheel_backlog_empty(e) || !tw__wheel_may_sleep(e, until))
				continue; /* mail came in during the round: take it in first */
		}
		if (atomic_load(&e->wheel_quit))
			break; /* stopped by a TW_ON_WHEEL_THREAD callback: do not wait */
		uint64_t round_end = monotonic_ns();
		bump_by(&e->wheel_busy_ns, round_end - round_start);
		tw__wheel_wait(e, timeout_ms);
		atomic_store_explicit(&e->sleeps_until, 0, memory_order_seq_cst); /* awake */
		round_start = monotonic_ns();
	}
	if (atomic_load_explicit(&e->destroy_by, memory_order_acquire) == wheel_runner(e)) {
		/* Destroy was called in a callback of ours: complete it; nobody joins this
		 * thread then. */
		(void)pthread_detach(pthread_self()); /* fails only for a joined thread */
		e->wheel_thread_started = false;
		e->finish_destroy(e, NULL);
	}
	return NULL;
}

int tw__wheel_thread_start(struct tw_engine *e)
{
	int err = pthread_create(&e->wheel_thread, NULL, wheel_main, e);
	if (err)
		return err == EAGAIN ? -TW_ERESOURCE : -TW_ENOMEM;
	/* Named here, so that it is once tw_engine_create returns (through /proc), and by
	 * itself as it starts (through prctl, which needs no /proc). */
	(void)pthread_setname_np(e->wheel_thread, "tw-wheel");
	e->wheel_thread_started = true;
	return TW_OK;
}

void tw__wheel_thread_join(struct tw_engine *e)
{
	if (!e->wheel_thread_started)
		return;
	atomic_store(&e->wheel_quit, true);
	if (pthread_equal(pthread_self(), e->wheel_thread))
		return; /* a stop in a TW_ON_WHEEL_THREAD callback: destroy joins it */
	tw__engine_wake(e);
	int err = pthread_join(e->wheel_thread, NULL);
	if (err)
		tw__engine_log(e, TW_LOG_ERROR, "joining the wheel thread: %s", tw__strerror(err));
	e->wheel_thread_started = false;
}
