/*
 * wheel_fire.c - the wheel thread hands out due firings: the executor each
 * goes to, a firing that overlaps its task's run or finds no room, the
 * periods a stalled task skipped, a calendar task's next fire time, the runs
 * of TW_ON_WHEEL_THREAD tasks, and the reaping of a task whose retention is
 * over.
 */
#include "wheel_round.h"

enum { KICK_BATCH = 64 }; /* firings handed out between wake-ups of the executors */

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
 * shows it: perf/results/HISTORY.md, "Figures moved out of the code").
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
void tw__wheel_plan_round(struct tw_engine *e)
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

/* Lock held, wheel thread: n firings of the task skipped for one reason (REC_SKIP_*), the
 * first due at due_ns (0: not known), counted for the task, for the engine and for the
 * task's next run, and recorded. */
static void skip(struct tw_engine *e, struct tw_task *task, unsigned reason, uint64_t due_ns,
		 uint64_t n)
{
	struct task_cold *cold = task_cold(task);
	if (reason == REC_SKIP_OVERLAP) {
		task_skip(task, &cold->skipped_overlap, n);
		bump_by(&e->skipped_overlap, n);
	} else if (reason == REC_SKIP_OVERLOAD) {
		task_skip(task, &cold->skipped_overload, n);
		bump_by(&e->skipped_overload, n);
	} else {
		task_skip(task, &cold->skipped_missed, n);
		bump_by(&e->skipped_missed, n);
	}
	tw__engine_note_skip(e, task, reason, due_ns, n);
}

enum dispatched {
	DISPATCHED, /* queued to an executor */
	SKIPPED,    /* counted as skipped (periodic tasks only) */
	RERUN,      /* runs right after the task's own run returns (task->rerun) */
	NO_ROOM,    /* a one-shot's: every queue is full, it waits in the ready list */
};

/* Lock held: a firing comes due while one of the task is in flight (serial tasks). */
static enum dispatched overlapping(struct tw_engine *e, struct tw_task *task, uint64_t due_ns,
				   bool periodic)
{
	TASK_LOCKED(task);
	uint8_t traits = atomic_load_explicit(&task->traits, memory_order_relaxed);
	if (periodic && !(traits & TRAIT_RUN_LATE)) {
		skip(e, task, REC_SKIP_OVERLAP, due_ns, 1);
		return SKIPPED;
	}
	if (task->rerun) /* one firing waits at most: the older is skipped */
		skip(e, task, REC_SKIP_OVERLAP, 0, 1);
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
			skip(e, task, REC_SKIP_OVERLOAD, due_ns, 1);
			return SKIPPED;
		}
		if (!concurrent || (traits & TRAIT_QUEUED))
			return overlapping(e, task, due_ns, periodic);
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
		skip(e, task, REC_SKIP_OVERLOAD, due_ns, 1);
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
		skip(e, task, REC_SKIP_MISSED, 0, missed);
	/* TW_RUN_LATE: the due of the firing that may wait for the task's run (run_firing.h) */
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
		skip(e, task, REC_SKIP_MISSED, due, missed);
		due += missed * period;
	}
	enum dispatched what = dispatch(e, task, due, period != 0, state);
	if (period) {
		atomic_store_explicit(&task->due_ns, due + period, memory_order_relaxed);
		file_task(e, task, tw__engine_tick_of(e, due + period), FILED_DUE);
		return true;
	}
	if (what == NO_ROOM)
		return false;
	/* A one-shot's firing that runs after its own run keeps its due there (run_firing.h). */
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
void tw__wheel_hand_out_ready(struct tw_engine *e, uint64_t target, uint64_t n)
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

void tw__wheel_fire_due(struct tw_engine *e, uint64_t target)
{
	struct wheel_entry *entry;
	/* Executors start on a crowded tick while the rest is handed out. */
	for (unsigned n = 1; (entry = wheel_expire(&e->wheel, target)); n++) {
		wheel_prefetch(&e->wheel); /* a task's line 0 holds its entry */
		hand_out(e, task_of_entry(entry), target);
		if (n % KICK_BATCH == 0)
			tw__executors_kick(e);
	}
}
