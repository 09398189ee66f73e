/*
 * engine.h - the engine's record, shared by its threads, and what reads it
 * alone: its clock (engine_clock.c) and its log (log.c). Uses task.h.
 *
 * Threads and what they own:
 *  - the wheel thread owns struct wheel and every task's wheel entry; it
 *    files, re-files and hands out firings, and applies mailed changes;
 *  - executor threads run callbacks and account for them;
 *  - any application thread calls the API, which changes a task under its
 *    small lock and mails the task to the wheel thread when the wheel must act.
 * Every task field that tw_get() reads without the lock is atomic.
 */
#ifndef TICKWHEEL_CORE_ENGINE_H
#define TICKWHEEL_CORE_ENGINE_H

#include "names.h"
#include "record.h"
#include "task.h"

struct executor; /* handover.h */

/* A task's firing: its due and the skips its run reports. */
struct firing {
	struct tw_task *task;
	uint64_t due_ns;
	uint64_t skipped;
};

struct tw_engine {
	tw_config cfg;
	/* executor_count, then room for the spares, then the wheel thread's runner (wheel_runner) */
	struct executor *executors;
	unsigned executor_count;                     /* configured */
	unsigned executor_slots;                     /* configured + cfg.spare_executors */
	_Atomic unsigned executors_running;          /* started: configured + spares so far */
	struct tw_engine *next_engine, *prev_engine; /* the live engines (fork.c) */
	/* wheel thread only */
	struct wheel wheel __attribute__((aligned(64)));
	unsigned next_executor; /* turns for concurrent tasks */
	unsigned filling;       /* the executor being filled this round */
	uint32_t room;          /* serial firings it may still take, or ROOM_UNKNOWN */
	uint64_t round_ns;      /* the clock when this round began */
	uint64_t watch_ns;      /* when to look at the executors again; 0: no need */
	/* After a long sleep the timerfd is armed wake_lead_ns before the tick (at
	 * early_tick_ns - wake_lead_ns) and the thread spins the rest: early_tick_ns, 0 when
	 * armed on the tick itself (wheel_sleep.c, arm_for_next) */
	uint64_t early_tick_ns, wake_lead_ns;
	/* and tells the executor that will likely get that tick's first firing to wake for it
	 * too (its wake_at_ns): which, and the time it was told; NULL and 0 when none was */
	struct executor *prewoken;
	uint64_t prewake_ns;
	struct firing wheel_run; /* a TW_ON_WHEEL_THREAD firing to run once the task is unlocked */
	bool wheel_run_pending;
	struct tw_task *ready_head, *ready_tail; /* due, not yet handed out: FIFO */
	/* mail taken from the mailbox and not yet read: at most MAIL_PER_ROUND a round */
	struct __cds_wfcq_head backlog_head;
	struct cds_wfcq_tail backlog_tail;
	uint64_t reap_tick;     /* the latest tick an ended task is filed at for reaping */
	uint32_t reaps_in_tick; /* and how many are filed there (REAPS_PER_TICK at most) */
	/* Real clock: a tick no task taken in this round ended after, unless it noted its end
	 * (task_note_end_tick); the wheel may lag the clock after a sleep. 0: wheel_now. */
	uint64_t take_in_tick;
	uint64_t ready_count;       /* tasks in the ready list */
	uint64_t ready_owed;        /* manual clock: of those, at its head, the ones due by the last
			      * tw_advance (the rest came due after it: they wait for the next) */
	_Atomic uint64_t ready_due; /* published: firings due and not handed out (tw_quiesce) */
	struct task_table table __attribute__((aligned(64)));
	struct tw_names names;
	pthread_t wheel_thread;
	bool wheel_thread_started;
	int timer_fd, wake_fd, epoll_fd;
	uint64_t epoch_ns; /* tick 0 of the wheel, on the 1 ms grid */
	_Atomic uint64_t manual_now_ns;
	uint64_t coarse_slack_ns; /* cfg.coarse_clock: two ticks of CLOCK_MONOTONIC_COARSE */
	uint64_t slow_run_ns;     /* cfg.slow_run_ms, saturated */
	uint64_t wheel_budget_ns; /* cfg.wheel_run_budget_us, saturated */
	/* lifecycle */
	_Atomic uint8_t stopping; /* HALT_*: refuse operations, stop firing */
	_Atomic bool wheel_quit;
	/* record.h; set at create. The hooks test recording: a compare with memory, where a
	 * test of the pointer would load it into a register first, one instruction more. */
	bool recording;
	struct tw_recorder *recorder; /* NULL: not recording */
	pthread_mutex_t lock;         /* tw_advance handshakes, stop */
	pthread_cond_t cond;
	uint64_t advance_asked, advance_done; /* under lock */
	/* Under lock: tw_advance calls inside; the engine is not freed before they left (a
	 * callback of the advance may destroy it: they wake by the stop, and go). */
	unsigned advance_callers;
	/* waiting for runs to finish: stop, destroy, quiesce */
	_Atomic uint32_t drain_waiters;
	_Atomic uint32_t drain_signal; /* futex word, bumped when an executor runs dry */
	/* what application threads write */
	_Atomic uint64_t tasks_added __attribute__((aligned(64))); /* with max_tasks only */
	struct end_counts api_ends;
	/* firings waiting for their task's run that calls dropped: tw_pause and tw_cancel
	 * (missed), tw_set_period (overlap); any thread's, added atomically */
	_Atomic uint64_t api_skipped_missed, api_skipped_overlap;
	/* mailbox to the wheel thread: many producers, one consumer */
	struct cds_wfcq_tail mail_tail __attribute__((aligned(64)));
	/* the tick the wheel thread sleeps until (UINT64_MAX: none), 0 while it is awake or
	 * being woken; never set with the manual clock (handover.c, tw__task_mail) */
	_Atomic uint64_t sleeps_until;
	struct __cds_wfcq_head mail_head __attribute__((aligned(64)));
	/* the wheel thread's counters */
	_Atomic uint64_t wakeups, skipped_overlap, skipped_overload, skipped_missed, stuck_runs;
	_Atomic uint64_t wheel_busy_ns; /* in rounds, from waking up to waiting again */
	_Atomic uint64_t over_budget_runs, moved_off_wheel; /* TW_ON_WHEEL_THREAD's guard */
	_Atomic int wheel_cpu; /* the CPU it armed its early wake-up on, or woke early on */
	struct end_counts wheel_ends;
	/* firings taken out of the rings by a stop, not by an executor (added to done) */
	_Atomic uint64_t stop_done;
	/* tw_engine_destroy called in a callback: that callback's executor (or the wheel thread,
	 * for its wheel_runner) completes it */
	_Atomic(struct executor *) destroy_by;
	/* executors left with a stuck run by tw_engine_destroy; the last frees the engine */
	_Atomic unsigned abandoned;
	/* The lifecycle's (lifecycle.h), for an executor thread: it completes a destroy begun
	 * in its callback, and lets go of the engine when it leaves. Set at create. */
	void (*finish_destroy)(struct tw_engine *e, struct executor *x);
	void (*unref)(struct tw_engine *e);
	/* calendar tasks (calendar_tasks.h): their records, for the re-planning walk */
	pthread_mutex_t calendar_lock;
	struct calendar *calendars; /* under calendar_lock */
	int wall_fd; /* the CLOCK_REALTIME timerfd that tells of a set clock; -1: none */
	_Atomic int64_t manual_wall_offset_ns; /* manual clock: wall-clock time - engine time */
};

/* Why an engine refuses operations (stopping): it was stopped, or this process is a child
 * forked after the engine was created (fork.c marks every engine of the parent). */
enum { HALT_STOPPED = 1, HALT_FORKED = 2 };

static inline bool engine_forked(const struct tw_engine *e)
{
	return atomic_load_explicit(&e->stopping, memory_order_relaxed) & HALT_FORKED;
}

/* The code for an operation refused by a halted engine (stopping is not 0). */
static inline int halted_code(const struct tw_engine *e)
{
	return engine_forked(e) ? -TW_EFORKED : -TW_ESHUTDOWN;
}

/* Executors started so far; the spares come after the configured ones. */
static inline unsigned executors_running(const struct tw_engine *e)
{
	return atomic_load_explicit(&e->executors_running, memory_order_acquire);
}

/*
 * The engine's time and its 1 ms grid (engine_clock.c). Inline: a session reset does little
 * besides, and calls would cost it the overlap of its cache misses (perf/results/HISTORY.md, "A
 * postpone short enough to overlap").
 */

/* The engine's time: monotonic_ns(), or the manual clock. */
static inline uint64_t tw__engine_now_ns(const struct tw_engine *e)
{
	if (e->cfg.manual_clock)
		return atomic_load_explicit(&e->manual_now_ns, memory_order_acquire);
	return monotonic_ns();
}

/* The coarse clock with its slack (tw_config.coarse_clock). */
uint64_t tw__engine_coarse_now_ns(const struct tw_engine *e);

/* "now" for a delay a caller asks for: tw__engine_now_ns(), or the coarse clock. */
static inline uint64_t tw__engine_call_now_ns(const struct tw_engine *e)
{
	return e->coarse_slack_ns ? tw__engine_coarse_now_ns(e) : tw__engine_now_ns(e);
}

/* The first tick at or after due_ns. */
static inline uint64_t tw__engine_tick_of(const struct tw_engine *e, uint64_t due_ns)
{
	return due_ns > e->epoch_ns ? (due_ns - e->epoch_ns + NS_PER_MS - 1) / NS_PER_MS : 0;
}

/*
 * The due of a delay counted from now_ns, rounded up to the engine's 1 ms
 * grid: a due on the grid is fired at its own tick, so its lateness is the
 * engine's alone, and rounding up never shortens a delay (it may add < 1 ms).
 */
static inline uint64_t tw__engine_due_at_ns(const struct tw_engine *e, uint64_t now_ns,
					    uint64_t delay_ms)
{
	return e->epoch_ns + (tw__engine_tick_of(e, now_ns) + delay_ms) * NS_PER_MS;
}

void tw__engine_log(const struct tw_engine *e, int level, const char *fmt, ...);

/* n firings of task skipped for reason (REC_SKIP_*), to the recording if there is one;
 * due_ns the first one's, 0 if not known. The callers count the skip themselves. */
static inline void tw__engine_note_skip(const struct tw_engine *e, const struct tw_task *task,
					unsigned reason, uint64_t due_ns, uint64_t n)
{
	if (__builtin_expect(e->recording, 0)) /* recorder's hook: record.h */
		tw__record_skip(e->recorder, atomic_load_explicit(&task->id, memory_order_relaxed),
				due_ns, reason, n);
}

#endif
