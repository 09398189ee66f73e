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
 */
#include "calendar.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

enum { KICK_BATCH = 64 }; /* firings handed out between wake-ups of the executors */

static struct tw_task *task_of_entry(struct wheel_entry *entry)
{
	return (struct tw_task *)((char *)entry - offsetof(struct tw_task, entry));
}

/*
 * The ready list: tasks whose due has come and whose firing is not handed out
 * yet, oldest first, linked through the task's entry while out of the wheel.
 * A one-shot waits there when every executor's queue is full; on the manual
 * clock, so does a task that came due between two tw_advance calls.
 */
static void ready_link(struct tw_engine *e, struct tw_task *task, struct tw_task *prev,
		       struct tw_task *next)
{
	task->ready.prev = prev;
	task->ready.next = next;
	*(prev ? &prev->ready.next : &e->ready_head) = task;
	*(next ? &next->ready.prev : &e->ready_tail) = task;
	e->ready_count++;
	task->filing = FILED_READY;
}

static void ready_append(struct tw_engine *e, struct tw_task *task)
{
	ready_link(e, task, e->ready_tail, NULL);
}

static void ready_remove(struct tw_engine *e, struct tw_task *task)
{
	struct tw_task *next = task->ready.next, *prev = task->ready.prev;
	if (prev)
		prev->ready.next = next;
	else
		e->ready_head = next;
	if (next)
		next->ready.prev = prev;
	else
		e->ready_tail = prev;
	e->ready_count--;
	if (e->ready_owed > e->ready_count)
		e->ready_owed = e->ready_count; /* an owed one left the list another way */
	wheel_entry_init(&task->entry);         /* the links were the entry's */
	task->filing = FILED_NONE;
}

/* Takes the task out of the wheel or the ready list, wherever it is filed. */
static void unfile(struct tw_engine *e, struct tw_task *task)
{
	if (task->filing == FILED_READY)
		ready_remove(e, task);
	else if (task->filing != FILED_NONE)
		tw__wheel_remove(&e->wheel, &task->entry);
	task->filing = FILED_NONE;
}

static void file_task(struct tw_engine *e, struct tw_task *task, uint64_t tick,
		      enum task_filing why)
{
	WHEEL_THREAD_ONLY();
	if (task->filing == FILED_READY)
		ready_remove(e, task);
	if (task->filing != FILED_NONE)
		tw__wheel_reschedule(&e->wheel, &task->entry, tick);
	else
		tw__wheel_add(&e->wheel, &task->entry, tick);
	task->filing = why;
}

static bool fire(struct tw_engine *e, struct tw_task *task, uint64_t target);

/*
 * Reaping a task costs a lock, a store and a call_rcu, and a million tasks
 * cancelled at once end within a few rounds: filed in one tick, they would be
 * reaped in one round while every firing due waits. The ticks of reaping are
 * filled up to REAPS_PER_TICK each, the rest going to the ticks after: a task
 * may be kept a little longer than retain_ms, never less. Not on the manual
 * clock, where tw_advance(retain_ms + 1) reaps every task ended before it.
 */
enum { REAPS_PER_TICK = 1024 };

static __attribute__((noinline)) uint64_t reaping_tick(struct tw_engine *e, uint64_t earliest)
{
	if (earliest > e->reap_tick) {
		e->reap_tick = earliest;
		e->reaps_in_tick = 0;
	} else if (e->reaps_in_tick >= REAPS_PER_TICK) {
		e->reap_tick++;
		e->reaps_in_tick = 0;
	}
	e->reaps_in_tick++;
	return e->reap_tick;
}

/*
 * Lock held. Makes the wheel agree with what the task now wants. A due the
 * wheel has already passed (the mail came in while it advanced) goes to the
 * ready list, handed out this round (on the manual clock: by the next
 * tw_advance): re-filing it would make it wait for the next tick.
 */
static inline __attribute__((always_inline)) void reconcile(struct tw_engine *e,
							    struct tw_task *task)
{
	TASK_LOCKED(task);
	WHEEL_THREAD_ONLY();
	if (task->released) {
		/* Not reaped before an executor has made its release call, nor while a firing
		 * dropped by a cancel still waits in a ring (it points to the task). Kept
		 * retain_ms whole: the reaping tick comes after retain_ms more ticks have passed. */
		if (task->filing != FILED_REAP && !task->release_queued &&
		    !atomic_load_explicit(&task->running, memory_order_relaxed)) {
			uint64_t keep = e->cfg.retain_ms < TW_MAX_DELAY_MS ? e->cfg.retain_ms :
									     TW_MAX_DELAY_MS;
			if (task->filing == FILED_READY)
				ready_remove(e, task);
			/* from its end, which it noted if it was taken in late */
			uint64_t now = wheel_now(&e->wheel);
			uint64_t ended =
				task_end_tick(task, e->take_in_tick > now ? e->take_in_tick : now);
			uint64_t tick = ended + keep + 1;
			if (tick <= now)
				tick = now + 1;
			file_task(e, task, e->cfg.manual_clock ? tick : reaping_tick(e, tick),
				  FILED_REAP);
		}
		return;
	}
	uint64_t due = atomic_load_explicit(&task->due_ns, memory_order_relaxed);
	if (!task_wants_due(task, due)) {
		if (task->filing == FILED_DUE || task->filing == FILED_READY)
			unfile(e, task);
		return;
	}
	uint64_t tick = tw__engine_tick_of(e, due);
	if (tick <= wheel_now(&e->wheel)) {
		if (task->filing != FILED_READY) {
			unfile(e, task);
			ready_append(e, task);
		}
	} else if (task->filing == FILED_NONE || task->filing == FILED_READY ||
		   tick < wheel_entry_due(&task->entry)) {
		file_task(e, task, tick, FILED_DUE);
	}
}

/* Inlined into the mailbox's loop, where it runs once per change. */
static inline __attribute__((always_inline)) void take_mail(struct tw_task *task, void *ctx)
{
	struct tw_engine *e = ctx;
	tw__task_lock(task);
	task->mailed = false;
	reconcile(e, task);
	tw__task_unlock(task);
}

/*
 * Mail read in one round on the real clock, at most: a million adds or
 * cancels in a burst would otherwise be filed in one round, and every firing
 * due meanwhile would wait for the lot. The rest waits in the backlog, read
 * first the next round, which comes at once (the thread does not sleep on a
 * backlog), after the round's firings are handed out.
 */
enum { MAIL_PER_ROUND = 2048 };

/*
 * Takes in what the executors mailed (ended tasks) and, with changes, the
 * mailbox, in the order it was mailed. On the manual clock the mailbox waits
 * for the next tw_advance, and is then read whole, so that the place a change
 * gets does not depend on when this thread woke: the changes made between two
 * advances are filed in the order they were made, a task changed twice
 * meanwhile at the place of its first change.
 *
 * On the real clock the wheel thread never waits for a mailer: one preempted
 * halfway through queueing leaves a link unset, and liburcu's blocking reads
 * then sleep 10 ms. A read that would block stops there; false says so, and
 * the rest is read the next round.
 */
static bool read_mail(struct tw_engine *e, bool changes)
{
	unsigned running = executors_running(e);
	for (unsigned i = 0; i < running; i++)
		tw__executor_take_ended(&e->executors[i], take_mail, e);
	if (!changes)
		return true;
	if (e->cfg.manual_clock) {
		struct __cds_wfcq_head head;
		struct cds_wfcq_tail tail;
		struct cds_wfcq_node *node, *next;
		__cds_wfcq_init(&head, &tail);
		if (__cds_wfcq_splice_blocking(&head, &tail, &e->mail_head, &e->mail_tail) ==
		    CDS_WFCQ_RET_SRC_EMPTY)
			return true;
		__cds_wfcq_for_each_blocking_safe (&head, &tail, node, next) {
			struct tw_task *task = task_of_mail_link(node);
			HANDOVER_ACQUIRE(task);
			take_mail(task, e);
		}
		return true;
	}
	if (__cds_wfcq_splice_nonblocking(&e->backlog_head, &e->backlog_tail, &e->mail_head,
					  &e->mail_tail) == CDS_WFCQ_RET_WOULDBLOCK)
		return false;
	for (unsigned budget = MAIL_PER_ROUND; budget; budget--) {
		struct cds_wfcq_node *node =
			__cds_wfcq_dequeue_nonblocking(&e->backlog_head, &e->backlog_tail);
		if (node == CDS_WFCQ_WOULDBLOCK)
			return false;
		if (!node)
			break;
		struct tw_task *task = task_of_mail_link(node);
		HANDOVER_ACQUIRE(task);
		take_mail(task, e);
	}
	return true;
}

static bool backlog_empty(struct tw_engine *e)
{
	return cds_wfcq_empty(&e->backlog_head, &e->backlog_tail);
}

static void give_back(struct rcu_head *head)
{
	struct tw_task *task = caa_container_of(head, struct tw_task, reaped.rcu);
	HANDOVER_ACQUIRE(task);
	after_grace_period();
	tw__table_give_back(&task->reaped.engine->table, task);
}

/* The executor of a serial task's runs when every executor is full (see
 * executor_for) and of any task's release call; its neighbours in the table
 * go to the same one (see TASKS_PER_EXECUTOR_BLOCK). */
static struct executor *home_executor(struct tw_engine *e, struct tw_task *task)
{
	uint32_t index = id_index(atomic_load_explicit(&task->id, memory_order_relaxed));
	return &e->executors[index / TASKS_PER_EXECUTOR_BLOCK % e->executor_count];
}

/*
 * Serial firings fill one executor until what it has queued reaches FILL_NS
 * of work, then the next. Each executor woken costs a futex wake-up and a
 * context switch, which cost more than a short callback: a light round is
 * better run by one executor than split (tw-perf heartbeats' CPU per run
 * shows it: perf/README.md, "Figures moved out of the code").
 */
enum {
	FILL_NS = 200000,          /* the lateness one executor's queue may add */
	FIRING_OVERHEAD_NS = 1000, /* an executor's own work per firing, roughly */
};
/* Not an enumerator: ISO C limits those to int's range. */
#define ROOM_UNKNOWN UINT32_MAX /* the executor being filled is not looked at yet */

/* How many serial firings x may still take this round. */
static uint32_t room_of(struct executor *x)
{
	uint64_t queued = atomic_load_explicit(&x->tail, memory_order_relaxed) -
			  atomic_load_explicit(&x->head, memory_order_relaxed);
	uint64_t cost =
		atomic_load_explicit(&x->run_ns_average, memory_order_relaxed) + FIRING_OVERHEAD_NS;
	uint64_t fits = FILL_NS / cost;
	return fits > queued ? (uint32_t)(fits - queued) : 0;
}

/* A round fills the executors from the first; each is looked at (its queue,
 * its run times: another core's lines) only when the round reaches it. */
static void plan_round(struct tw_engine *e)
{
	e->filling = 0;
	e->room = ROOM_UNKNOWN;
	e->round_ns = 0; /* read when first needed (held_this_round) */
}

/* Whether x's run has held it HOLD_NS by this round; the clock is read once a round, and
 * only if some executor is in a run. */
static bool held_this_round(struct tw_engine *e, struct executor *x)
{
	if (!atomic_load_explicit(&x->run_start_ns, memory_order_relaxed))
		return false;
	if (!e->round_ns)
		e->round_ns = monotonic_ns();
	return executor_held(x, e->round_ns);
}

/* The task's home, or the first executor that is not held up by a long run (the home when
 * every one is: the watch then takes it elsewhere). */
static struct executor *home_or_free(struct tw_engine *e, struct tw_task *task)
{
	struct executor *home = home_executor(e, task);
	if (!held_this_round(e, home))
		return home;
	unsigned running = executors_running(e);
	for (unsigned i = 0; i < running; i++)
		if (!held_this_round(e, &e->executors[i]))
			return &e->executors[i];
	return home;
}

/* Serial tasks go to the first executor with room this round, or to their
 * home when all are full; concurrent ones take turns on all, so that their
 * runs can overlap. An executor whose run has lasted HOLD_NS gets none. A
 * serial task never runs twice at once wherever it runs: its running count,
 * under its lock, says if a run is going (dispatch). */
static struct executor *executor_for(struct tw_engine *e, struct tw_task *task, bool concurrent)
{
	unsigned running = executors_running(e);
	if (running <= 1) /* nothing to choose (and never none: the engine starts with them) */
		return &e->executors[0];
	if (concurrent) {
		for (unsigned tries = 0; tries < running; tries++) {
			struct executor *x = &e->executors[e->next_executor++ % running];
			if (!held_this_round(e, x))
				return x;
		}
		return &e->executors[e->next_executor++ % running];
	}
	for (; e->filling < running; e->filling++, e->room = ROOM_UNKNOWN) {
		struct executor *x = &e->executors[e->filling];
		if (e->room == ROOM_UNKNOWN)
			e->room = held_this_round(e, x) ? 0 : room_of(x);
		if (e->room) {
			e->room--;
			return x;
		}
	}
	return home_or_free(e, task);
}

/* Lock held, wheel thread: n firings of the task skipped for one reason,
 * counted for the task, for the engine and for the task's next run. */
static void skip(struct tw_task *task, _Atomic uint32_t *task_count, _Atomic uint64_t *engine_count,
		 uint64_t n)
{
	task_skip(task, task_count, n);
	bump_by(engine_count, n);
}

enum dispatched {
	DISPATCHED, /* queued to an executor */
	SKIPPED,    /* counted as skipped (periodic tasks only) */
	RERUN,      /* runs right after the task's own run returns (task->rerun) */
	NO_ROOM,    /* a one-shot's: every queue is full, it waits in the ready list */
};

/* Lock held: a firing comes due while one of the task is in flight (serial tasks). */
static enum dispatched overlapping(struct tw_engine *e, struct tw_task *task, bool periodic)
{
	TASK_LOCKED(task);
	struct task_cold *cold = task_cold(task);
	uint8_t traits = atomic_load_explicit(&task->traits, memory_order_relaxed);
	if (periodic && !(traits & TRAIT_RUN_LATE)) {
		skip(task, &cold->skipped_overlap, &e->skipped_overlap, 1);
		return SKIPPED;
	}
	if (task->rerun) /* one firing waits at most: the older is skipped */
		skip(task, &cold->skipped_overlap, &e->skipped_overlap, 1);
	task->rerun = true;
	task_put_traits(task, periodic ? 0 : TRAIT_ONESHOT_RERUN,
			periodic ? TRAIT_ONESHOT_RERUN : 0);
	return RERUN;
}

/* Lock held. Queues a firing; says what became of it. */
static enum dispatched dispatch(struct tw_engine *e, struct tw_task *task, uint64_t due_ns,
				bool periodic, uint8_t state)
{
	TASK_LOCKED(task);
	WHEEL_THREAD_ONLY();
	uint8_t traits = atomic_load_explicit(&task->traits, memory_order_relaxed);
	bool concurrent = traits & TRAIT_CONCURRENT;
	if (atomic_load_explicit(&task->running, memory_order_relaxed)) {
		/* Its previous firing still waits for an executor (serial or concurrent
		 * alike): a periodic task's is an overload, not an overlap; a one-shot's waits
		 * for that run. A task never has two firings waiting. */
		if (periodic && (traits & TRAIT_QUEUED)) {
			skip(task, &task_cold(task)->skipped_overload, &e->skipped_overload, 1);
			return SKIPPED;
		}
		if (!concurrent || (traits & TRAIT_QUEUED))
			return overlapping(e, task, periodic);
	}
	struct firing f = { .task = task,
			    .due_ns = due_ns,
			    .skipped = task->skipped ? task_cold(task)->skipped_since_run : 0 };
	if (traits & TRAIT_ON_WHEEL) {
		/* Runs once the task's lock is let go (run_on_wheel): one a round at a time.
		 * The run starts on the cold part, as an executor's does (its pop fetches it
		 * ahead): fetch it now, while the firing is filed. */
		__builtin_prefetch(task_cold(task), 1);
		__builtin_prefetch(&task_cold(task)->consecutive_failures, 1);
		e->wheel_run = f;
		e->wheel_run_pending = true;
		count_handed(wheel_runner(e));
	} else if (!tw__executor_push(executor_for(e, task, concurrent), &f)) {
		if (!periodic)
			return NO_ROOM;
		skip(task, &task_cold(task)->skipped_overload, &e->skipped_overload, 1);
		return SKIPPED;
	}
	/* The lock is held: the executor counts the run's end only after this. */
	bump32(&task->running);
	task_put_traits(task, TRAIT_QUEUED, 0);
	take_skipped(task);
	if (state == TW_WAITING) {
		atomic_store_explicit(&task->state, TW_RUNNING, memory_order_relaxed);
		tally_step(&e->wheel_ends, TW_WAITING, TW_RUNNING);
	}
	return DISPATCHED;
}

/* A calendar task's firing: the due it stands for, and the ns to its next due (which
 * tw__calendar_fire always gives). Returned in two registers: fire() takes the address of
 * none of its locals. */
struct calendar_firing {
	uint64_t due, period;
};

/* Lock held: a calendar task's firing (fire()) comes at tick target. It stands for the latest
 * fire time passed, those before it skipped as missed, as a periodic task's periods; its next
 * due comes from its schedule, given as a period so that fire() goes on as for a periodic
 * task: a periodic task's path stays what it was, a one-shot's has one test more. */
static __attribute__((noinline)) struct calendar_firing
calendar_firing(struct tw_engine *e, struct tw_task *task, uint64_t due, uint64_t target)
{
	uint64_t fire_due, missed;
	uint64_t next = tw__calendar_fire(e, task, due, e->epoch_ns + target * NS_PER_MS, &fire_due,
					  &missed);
	if (missed)
		skip(task, &task_cold(task)->skipped_missed, &e->skipped_missed, missed);
	/* TW_RUN_LATE: the due of the firing that may wait for the task's run (run.h) */
	task_calendar(task)->rerun_due = fire_due;
	return (struct calendar_firing){ .due = fire_due, .period = next - fire_due };
}

/*
 * Lock held; the task came out of the wheel or the ready list while the wheel
 * is being advanced to tick target. Fires it, or re-files it if it was
 * postponed. A periodic task that fell behind by whole periods (a stall)
 * counts them as skipped and runs once, for its latest due: no burst, and it
 * stays in phase. False when a one-shot found no room: it stays due, and the
 * caller puts it in (or leaves it at the head of) the ready list.
 */
static bool fire(struct tw_engine *e, struct tw_task *task, uint64_t target)
{
	TASK_LOCKED(task);
	uint64_t due = atomic_load_explicit(&task->due_ns, memory_order_relaxed);
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if (!due || due == DUE_NEVER || (state != TW_WAITING && state != TW_RUNNING))
		return true; /* paused or ended meanwhile: dropped here, lazily */
	uint64_t tick = tw__engine_tick_of(e, due);
	if (tick > wheel_now(&e->wheel)) {
		file_task(e, task, tick, FILED_DUE);
		return true;
	}
	/* the field read once: a calendar task has one, but no period */
	uint32_t low = atomic_load_explicit(&task->period_ms, memory_order_relaxed);
	uint64_t period = period_of_field(task, low) * NS_PER_MS;
	if (__builtin_expect(!period && low, 0)) { /* no period, but a period field: a calendar */
		struct calendar_firing f = calendar_firing(e, task, due, target);
		due = f.due;
		period = f.period;
	}
	uint64_t target_ns = e->epoch_ns + target * NS_PER_MS;
	if (period && target_ns - due >= period) {
		uint64_t missed = (target_ns - due) / period;
		due += missed * period;
		skip(task, &task_cold(task)->skipped_missed, &e->skipped_missed, missed);
	}
	enum dispatched what = dispatch(e, task, due, period != 0, state);
	if (period) {
		atomic_store_explicit(&task->due_ns, due + period, memory_order_relaxed);
		file_task(e, task, tw__engine_tick_of(e, due + period), FILED_DUE);
		return true;
	}
	if (what == NO_ROOM)
		return false;
	/* A one-shot's firing that runs after its own run keeps its due there (run.c). */
	if (what != RERUN)
		atomic_store_explicit(&task->due_ns, 0, memory_order_relaxed);
	return true;
}

/* Runs the TW_ON_WHEEL_THREAD firing dispatch just took, if any; no task lock held. The
 * executors are woken for what they got first, so that the callback holds up none of it. */
static inline void run_on_wheel(struct tw_engine *e)
{
	if (__builtin_expect(!e->wheel_run_pending, 1))
		return;
	e->wheel_run_pending = false;
	tw__executors_kick(e);
	tw__run_on_wheel_thread(e, &e->wheel_run);
}

static void hand_out(struct tw_engine *e, struct tw_task *task, uint64_t target)
{
	tw__task_lock(task);
	enum task_filing filing = task->filing;
	task->filing = FILED_NONE;
	if (filing == FILED_REAP) {
		/* Retention is over: the id stops answering, and the slot is
		 * reused once no reader can still be looking at it. */
		task->reaped.id = atomic_load_explicit(&task->id, memory_order_relaxed);
		/* The id first: a reader that finds the name gone then finds the id gone too
		 * (task_read_info reads the name before it checks the id). */
		atomic_store_explicit(&task->id, 0, memory_order_release);
		tw__name_forget(&e->names, task->reaped.id);
		task->reaped.engine = e;
		tw__task_unlock(task);
		HANDOVER_RELEASE(task);
		urcu_memb_call_rcu(&task->reaped.rcu, give_back);
		return;
	}
	if (!fire(e, task, target))
		ready_append(e, task);
	tw__task_unlock(task);
	run_on_wheel(e);
}

/* Hands out up to n of what the ready list holds, oldest first, until a one-shot finds every
 * queue full: it and those behind it wait for the next round. */
static void hand_out_ready(struct tw_engine *e, uint64_t target, uint64_t n)
{
	struct tw_task *task;
	for (; n && (task = e->ready_head); n--) {
		tw__task_lock(task);
		uint64_t owed = e->ready_owed;
		ready_remove(e, task);
		bool out = fire(e, task, target);
		if (!out) {
			/* Back at the head, where it was, still owed if it was. */
			ready_link(e, task, NULL, e->ready_head);
			e->ready_owed = owed;
		} else if (owed) {
			e->ready_owed = owed - 1;
		}
		tw__task_unlock(task);
		run_on_wheel(e);
		if (!out)
			return;
	}
}

static uint64_t current_tick(struct tw_engine *e)
{
	uint64_t now = tw__engine_now_ns(e);
	return now > e->epoch_ns ? (now - e->epoch_ns) / NS_PER_MS : 0;
}

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
static int arm_for_next(struct tw_engine *e, uint64_t *armed, uint64_t *until)
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
static bool may_sleep(struct tw_engine *e, uint64_t until)
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

static void wait_for_work(struct tw_engine *e, int timeout_ms)
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
static int manual_timeout_ms(struct tw_engine *e)
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

static void *wheel_main(void *arg)
{
	struct tw_engine *e = arg;
	uint64_t armed = UINT64_MAX;
#ifndef NDEBUG
	tw__note_wheel_thread();
#endif
	tw__rcu_ensure_registered();
	/* without /proc too (prctl); tw__wheel_thread_start names it through /proc at once */
	(void)pthread_setname_np(pthread_self(), "tw-wheel");
	/* Without the least slack the kernel may defer each wake-up by up to 50 us; a refusal
	 * costs precision, not correctness. */
	(void)prctl(PR_SET_TIMERSLACK, 1UL);
	uint64_t handled = 0; /* manual clock: the last tw_advance whose firings are out */
	uint64_t round_start = monotonic_ns();
	while (!atomic_load(&e->wheel_quit)) {
		uint64_t asked = e->cfg.manual_clock ? advance_asked(e) : 0;
		/* On the manual clock firings happen only for a tw_advance; between two, mail
		 * is filed and what comes due waits in the ready list. */
		bool advancing = !e->cfg.manual_clock || asked != handled;
		uint64_t target = advancing ? current_tick(e) : wheel_now(&e->wheel);
		plan_round(e);
		/* + 1: a task may end while the round reads its mail, on the next tick */
		e->take_in_tick = e->cfg.manual_clock ? 0 : target + 1;
		bool mail_read = read_mail(e, advancing);
		if (!advancing && e->ready_owed) /* due by an advance, waiting for room */
			hand_out_ready(e, target, e->ready_owed);
		if (advancing) {
			hand_out_ready(e, target, UINT64_MAX);
			struct wheel_entry *entry;
			/* Executors start on a crowded tick while the rest is handed out. */
			for (unsigned n = 1; (entry = wheel_expire(&e->wheel, target)); n++) {
				wheel_prefetch(&e->wheel); /* a task's line 0 holds its entry */
				hand_out(e, task_of_entry(entry), target);
				if (n % KICK_BATCH == 0)
					tw__executors_kick(e);
			}
		}
		tw__executors_kick(e);
		tw__watch_executors(e);
		int timeout_ms = -1;
		if (e->cfg.manual_clock) {
			/* What is in the ready list now is due by this advance: owed to it. */
			if (advancing)
				e->ready_owed = e->ready_count;
			/* Before the advance is told done: a tw_quiesce after it must see it. */
			atomic_store_explicit(&e->ready_due, e->ready_owed, memory_order_release);
			if (advancing) {
				advance_done(e, asked);
				handled = asked;
			}
			timeout_ms = manual_timeout_ms(e);
		} else {
			atomic_store_explicit(&e->ready_due, e->ready_count, memory_order_release);
			uint64_t until = UINT64_MAX;
			timeout_ms = arm_for_next(e, &armed, &until);
			if (!mail_read)
				(void)sched_yield(); /* let the mailer finish; always succeeds */
			if (!backlog_empty(e) || !may_sleep(e, until))
				continue; /* mail came in during the round: take it in first */
		}
		if (atomic_load(&e->wheel_quit))
			break; /* stopped by a TW_ON_WHEEL_THREAD callback: do not wait */
		uint64_t round_end = monotonic_ns();
		bump_by(&e->wheel_busy_ns, round_end - round_start);
		wait_for_work(e, timeout_ms);
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
