/*
 * handover.h - what passes between threads: the firings queued to each
 * executor's ring, the release calls, the tasks an executor hands back, and
 * the wheel thread's mailbox of changed tasks (handover.c). Uses engine.h.
 */
#ifndef TICKWHEEL_CORE_HANDOVER_H
#define TICKWHEEL_CORE_HANDOVER_H

#include "engine.h"

/* A firing waits this long behind its executor's run before another executor takes it. */
#define HOLD_NS NS_PER_MS

/*
 * A thread that slept long wakes late: its CPU left its idle state and its caches went cold.
 * The wheel thread, and an executor told of the tick its next firing is likely at, arm their
 * wake-up that much early (the lead) and spin the rest. The lead follows how late such
 * wake-ups come (a moving average, 1/8 per wake-up, plus WAKE_MARGIN_NS), at most
 * MAX_WAKE_LEAD_NS, so the spin costs at most that per long sleep.
 */
enum {
	START_WAKE_LEAD_NS = 50000,
	WAKE_MARGIN_NS = 10000,
	MAX_WAKE_LEAD_NS = 200000,
};

/* The lead after a wake-up armed lead early came late_ns after it was armed for. */
static inline uint64_t wake_lead_next(uint64_t lead, uint64_t late_ns)
{
	uint64_t next = lead - lead / 8 + (late_ns + WAKE_MARGIN_NS) / 8;
	return next < MAX_WAKE_LEAD_NS ? next : MAX_WAKE_LEAD_NS;
}

/* A firing in a ring: one producer, the wheel thread; many consumers, the owner and the
 * executors that take firings held up behind its run (they claim a slot by moving head), so
 * a slot may be read while the producer reuses it: the claim then fails, and the copy is
 * dropped. Atomic fields make that read well-defined. */
struct ring_slot {
	_Atomic(struct tw_task *) task;
	_Atomic uint64_t due_ns;
	_Atomic uint64_t skipped;
};

/* Tasks an executor may have mailed and the wheel thread not yet taken in;
 * beyond, it mails through the engine's mailbox. */
enum { ENDED_RING = 4096 };

/*
 * Grouped by writer, a cache line each, so that handing a firing over writes
 * no line the executor writes per run, and the other way round. Runs in
 * progress are handed - done, summed over the executors when asked
 * (tw__runs_idle), not one engine-wide counter that both sides write per run.
 */
struct executor {
	struct tw_engine *engine;
	pthread_t thread;
	unsigned index;
	uint32_t mask;     /* ring size (a power of two) - 1 */
	uint32_t capacity; /* firings it may hold: queue_capacity */
	bool spare;        /* started while every executor was stuck (cfg.spare_executors) */
	bool started;      /* its thread runs (creator, wheel thread, destroy: one at a time) */
	bool abandoned;    /* left to finish a stuck run after tw_engine_destroy */
	/* The wheel thread's runner of TW_ON_WHEEL_THREAD firings: no thread, ring or queue of
	 * its own; its counters count those runs as an executor's count its own. */
	bool on_wheel_thread;
	struct ring_slot *ring;
	/* the wheel thread's */
	_Atomic uint64_t tail __attribute__((aligned(64)));
	_Atomic uint64_t handed; /* firings and release calls handed over, ever */
	uint64_t head_seen;      /* head when last read: the ring has room up to it */
	bool kick;               /* got firings since the last kick */
	/* this executor's (head: and the takers') */
	_Atomic uint64_t head __attribute__((aligned(64)));
	_Atomic uint64_t done;         /* firings and release calls it finished, its own or taken */
	uint64_t tail_seen;            /* tail when last read: firings up to it are there */
	uint64_t wake_lead_ns;         /* how early it wakes for wake_at_ns (0: not yet set) */
	uint64_t woke_for_ns;          /* the wake_at_ns it last woke for */
	_Atomic uint64_t prewakes;     /* times it woke for a wake_at_ns (and polled, if in time) */
	_Atomic uint64_t run_start_ns; /* of the run going on; 0: none */
	/* Its thread's: when its last run ended, while it goes straight on to the next; 0 once
	 * it did anything else (run_firing). */
	uint64_t last_end_ns;
	_Atomic(struct tw_task *) run_task;            /* that run's task */
	_Atomic uint64_t failures, slow_runs, dropped; /* runs: the lateness buckets' sum */
	_Atomic uint64_t busy_ns;                      /* in callbacks, ever */
	_Atomic uint64_t queued_max;     /* the most firings its ring held when it took one */
	_Atomic uint64_t run_ns_average; /* of its callbacks, moving (1/16 per run) */
	struct end_counts ends;
	_Atomic uint64_t lateness_max_ns, lateness_sum_ns;
	_Atomic uint64_t lateness[TW_LATENESS_BUCKETS]; /* each run started counts in one */
	struct tw_task **ended; /* ENDED_RING tasks to reap, mailed by this executor */
	_Atomic uint64_t ended_tail;
	uint64_t ended_head_seen;
	/* the wheel thread's, read by the executor once per task it mails */
	_Atomic uint64_t ended_head __attribute__((aligned(64)));
	uint64_t stuck_start_ns; /* run_start_ns of the run last reported stuck */
	/* both: sleeping and waking, release calls */
	_Atomic uint32_t signal __attribute__((aligned(64))); /* futex word */
	_Atomic bool sleeping;
	_Atomic bool quit;
	_Atomic bool help; /* the watch saw firings held up: look at the others' rings */
	/* The wheel thread's: the time of the tick it will likely hand this executor a firing
	 * at, after a long sleep (0: none); the executor wakes for it on its own timer. */
	_Atomic uint64_t wake_at_ns;
	struct cds_wfcq_head releases_head; /* tasks whose release to call */
	struct cds_wfcq_tail releases_tail;
};

/* Where the wheel thread's runs are counted: a slot past the executors'. */
static inline struct executor *wheel_runner(const struct tw_engine *e)
{
	return &e->executors[e->executor_slots];
}

/* Whatever counts runs: the running executors (i < running), then the wheel runner
 * (i == running). Sums of runs, ends and states loop i from 0 to running, both included. */
static inline struct executor *run_counter(const struct tw_engine *e, unsigned i, unsigned running)
{
	return i < running ? &e->executors[i] : wheel_runner(e);
}

/* Wheel thread: one more handed over, counted before the executor can see it, so that done
 * never passes handed. */
static inline void count_handed(struct executor *x)
{
	uint64_t handed = atomic_load_explicit(&x->handed, memory_order_relaxed);
	atomic_store_explicit(&x->handed, handed + 1, memory_order_release);
}

/* Wheel thread: queues one firing, false when the executor's queue is full. */
bool tw__executor_push(struct executor *x, const struct firing *f);
/* Reads the firing at *head of x's ring into *f and claims it by moving head on; false when
 * another taker moved head first (*head is then where it is now). */
static inline bool ring_claim(struct executor *x, uint64_t *head, struct firing *f)
{
	const struct ring_slot *slot = &x->ring[*head & x->mask];
	f->task = atomic_load_explicit(&slot->task, memory_order_relaxed);
	f->due_ns = atomic_load_explicit(&slot->due_ns, memory_order_relaxed);
	f->skipped = atomic_load_explicit(&slot->skipped, memory_order_relaxed);
	/* Release: the producer reuses the slot only after it sees head past it. */
	return atomic_compare_exchange_weak_explicit(&x->head, head, *head + 1,
						     memory_order_acq_rel, memory_order_acquire);
}
/* Any thread: claims the oldest firing queued to x, false when none is. */
bool tw__executor_take(struct executor *x, struct firing *f);
/* Firings queued to x and not yet claimed, at one instant. */
uint64_t tw__executor_queued(struct executor *x);
/* Whether x's run going on has lasted HOLD_NS by now: firings queued behind it are
 * taken by other executors and new ones go around it. */
static inline bool executor_held(struct executor *x, uint64_t now_ns)
{
	uint64_t start = atomic_load_explicit(&x->run_start_ns, memory_order_relaxed);
	return start && now_ns > start && now_ns - start >= HOLD_NS;
}
/* Wheel thread: has the executor call an ended task's release (user code). */
void tw__executor_push_release(struct executor *x, struct tw_task *task);
/* Executor x, lock held: mails an ended task through x's own ring; true
 * when the wheel thread must be woken once the lock is dropped (tw__task_mail). */
__attribute__((warn_unused_result)) bool tw__executor_mail_ended(struct executor *x,
								 struct tw_task *task);
/* Wheel thread, after publishing sleeps_until: whether x's ring holds ended tasks. */
bool tw__executor_ended_waiting(struct executor *x);
/* Lock held: ended task `task` was mailed while the wheel thread sleeps until tick `until`
 * (not 0): whether this caller is to wake it (then it claimed the wake-up). */
bool tw__wake_to_take_in(struct tw_engine *e, struct tw_task *task, uint64_t until);
/* Wheel thread: takes in what executor x mailed; calls take on each, locked. */
void tw__executor_take_ended(struct executor *x, void (*take)(struct tw_task *, void *), void *ctx);
/* Wheel thread: wakes the executors that got firings since the last call. */
void tw__executors_kick(struct tw_engine *e);
/* Wakes x if it sleeps (its signal moves either way). */
void tw__executor_wake(struct executor *x);
/* Asks the wheel thread to look at task (lock held by the caller). True when
 * the wheel thread must be woken, by tw__engine_wake once the lock is dropped: a
 * write to an eventfd, a system call no other thread should spin behind. */
__attribute__((warn_unused_result)) bool tw__task_mail(struct tw_engine *e, struct tw_task *task);
/* Wakes the wheel thread (its eventfd); any thread, no task lock held. */
void tw__engine_wake(struct tw_engine *e);
/* Wakes the threads that wait for runs to finish (wait_runs), if any. Inline: an executor
 * that runs dry calls it after each run. */
static inline void drain_signal(struct tw_engine *e)
{
	if (atomic_load_explicit(&e->drain_waiters, memory_order_seq_cst)) {
		atomic_fetch_add_explicit(&e->drain_signal, 1, memory_order_seq_cst);
		tw__futex_wake_all(&e->drain_signal);
	}
}

#endif
