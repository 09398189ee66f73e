/*
 * internal.h - the engine's shared structures. Not installed; users include
 * api/tickwheel.h only.
 *
 * Threads and what they own:
 *  - the wheel thread owns struct wheel and every task's wheel entry; it
 *    files, re-files and hands out firings, and applies mailed changes;
 *  - executor threads run callbacks and account for them;
 *  - any application thread calls the API, which changes a task under its
 *    small lock and mails the task to the wheel thread when the wheel must act.
 * Every task field that tw_get() reads without the lock is atomic.
 */
#ifndef TICKWHEEL_CORE_INTERNAL_H
#define TICKWHEEL_CORE_INTERNAL_H

#include "tickwheel.h"
#include "wheel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#define _LGPL_SOURCE
#include <urcu/urcu-memb.h>
#include <urcu/wfcqueue.h>

#define NS_PER_MS UINT64_C(1000000)

/* Wheel-side status of a task, under its lock. */
enum task_filing {
	FILED_NONE, /* not in the wheel */
	FILED_DUE,  /* in the wheel for its next firing */
	FILED_REAP, /* ended; in the wheel until its retention runs out */
};

/*
 * 192 bytes, cache-line aligned, in three lines by who touches them how often.
 *
 * Line 0 is all that the wheel thread reads or writes to cascade, expire and
 * hand out a firing, and all that an application thread reads or writes to
 * look a task up and postpone it: at a million firings a second each firing
 * costs one cache miss there, and a postpone at a random id one. To fit, the
 * period and the delay are kept in 32 bits, or, from 2^32 - 1 ms (49 days)
 * on, in 64 bits on line 2 with WIDE_MS here; the skips since the last run
 * move to line 2 behind a flag. Filed in the wheel, the entry's own due is
 * the tick the task is filed at.
 *
 * Line 1 is the rest of what an executor touches per run, line 2 what only
 * skips, queries and slot reuse touch.
 */
enum { WIDE_MS = UINT32_MAX }; /* the period or delay is in its 64-bit field */

struct tw_task {
	/* line 0: the wheel thread's and the API's fast path */
	union {                           /* each member serves one phase of the slot's life */
		struct wheel_entry entry; /* filed in the wheel: wheel thread only */
		struct cds_wfcq_node to_release; /* queued to an executor to call release */
		struct {
			struct rcu_head rcu; /* reaped: waiting for a grace period */
			struct tw_engine *engine;
		} reaped;
		uint32_t next_free; /* free: list link, slot index + 1 */
	};
	_Atomic uint64_t id;        /* 0 while the slot is free */
	_Atomic uint64_t due_ns;    /* ideal next due; 0 = none */
	_Atomic uint32_t period_ms; /* or WIDE_MS: see period_wide_ms */
	uint32_t delay_ms;          /* for resuming a one-shot (or WIDE_MS); under lock */
	_Atomic uint32_t running;   /* runs dispatched and not yet returned */
	atomic_flag lock;
	_Atomic uint8_t state; /* tw_state */
	uint8_t filing : 2;    /* enum task_filing; under lock, these bits */
	bool mailed : 1;
	bool released : 1;
	bool delay_pending : 1;  /* set_delay while paused */
	bool release_queued : 1; /* an executor has yet to call release */
	bool skipped : 1;        /* skipped_since_run is not 0 */
	bool concurrent;         /* immutable while live */
	/* line 1: the executors' */
	tw_callback callback;
	void *arg;
	void (*release)(void *arg);
	struct cds_wfcq_node mail; /* queued to the wheel thread while mailed */
	_Atomic uint64_t runs, last_run_ns, longest_run_ns;
	_Atomic uint32_t consecutive_failures;
	/* line 2: skips, failures, wide values, the slot */
	_Atomic uint64_t skipped_overlap, skipped_overload, skipped_missed;
	_Atomic uint64_t period_wide_ms;
	uint64_t delay_wide_ms; /* under lock */
	_Atomic uint32_t failures, slow_runs;
	uint32_t skipped_since_run; /* under lock */
	uint32_t generation;        /* of this slot; ids carry it */
	uint32_t index;             /* of this slot in the table */
	_Atomic bool paused_by_failures;
} __attribute__((aligned(64)));

_Static_assert(offsetof(struct tw_task, callback) == 64, "line 0 is one cache line");
_Static_assert(sizeof(struct tw_task) == 192, "three cache lines");

/*
 * Add to a counter that one thread at a time writes (its owner, or whoever
 * holds the task's lock) and others only read: no locked read-modify-write.
 * They return the new value.
 */
static inline uint64_t bump_by(_Atomic uint64_t *counter, uint64_t n)
{
	n += atomic_load_explicit(counter, memory_order_relaxed);
	atomic_store_explicit(counter, n, memory_order_relaxed);
	return n;
}

static inline uint64_t bump(_Atomic uint64_t *counter)
{
	return bump_by(counter, 1);
}

static inline uint32_t bump32(_Atomic uint32_t *counter)
{
	uint32_t n = atomic_load_explicit(counter, memory_order_relaxed) + 1;
	atomic_store_explicit(counter, n, memory_order_relaxed);
	return n;
}

/* Lock held: n more firings skipped since the last run (saturating). */
static inline void add_skipped(struct tw_task *task, uint64_t n)
{
	uint64_t total = task->skipped_since_run + n;
	task->skipped_since_run = total < UINT32_MAX ? (uint32_t)total : UINT32_MAX;
	task->skipped = task->skipped_since_run != 0;
}

/* Lock held: the skips a run reports, which it then clears. */
static inline uint64_t take_skipped(struct tw_task *task)
{
	if (!task->skipped)
		return 0;
	uint64_t n = task->skipped_since_run;
	task->skipped_since_run = 0;
	task->skipped = false;
	return n;
}

/* Readable without the lock: the wide value is stored before WIDE_MS. */
static inline uint64_t task_period_ms(const struct tw_task *task)
{
	uint32_t ms = atomic_load_explicit(&task->period_ms, memory_order_acquire);
	return ms != WIDE_MS ? ms :
			       atomic_load_explicit(&task->period_wide_ms, memory_order_relaxed);
}

static inline void task_set_period_ms(struct tw_task *task, uint64_t ms)
{
	if (ms < WIDE_MS) {
		atomic_store_explicit(&task->period_ms, (uint32_t)ms, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&task->period_wide_ms, ms, memory_order_relaxed);
	atomic_store_explicit(&task->period_ms, WIDE_MS, memory_order_release);
}

/* Lock held, both. */
static inline uint64_t task_delay_ms(const struct tw_task *task)
{
	return task->delay_ms != WIDE_MS ? task->delay_ms : task->delay_wide_ms;
}

static inline void task_set_delay_ms(struct tw_task *task, uint64_t ms)
{
	task->delay_ms = ms < WIDE_MS ? (uint32_t)ms : WIDE_MS;
	if (ms >= WIDE_MS)
		task->delay_wide_ms = ms;
}

/* Ids: slot index in the low 32 bits, the slot's generation (>= 1) above. */
static inline uint32_t id_index(tw_id id)
{
	return (uint32_t)id;
}

static inline tw_id make_id(uint32_t generation, uint32_t index)
{
	return (uint64_t)generation << 32 | index;
}

/* ---- task table: task.c ---- */

enum { TABLE_CHUNK_BITS = 10, TABLE_CHUNK = 1 << TABLE_CHUNK_BITS };

struct task_dir {
	size_t capacity;                 /* chunk pointers room */
	_Atomic size_t chunks;           /* published chunks */
	struct tw_task *_Atomic chunk[]; /* each TABLE_CHUNK tasks */
};

struct task_table {
	struct task_dir *dir; /* RCU-protected */
	pthread_mutex_t lock; /* allocation, free list, growth */
	uint32_t free_head;   /* slot index + 1, 0 = empty */
	uint32_t used;        /* slots ever handed out */
};

int table_init(struct task_table *t);
void table_fini(struct task_table *t);
/* Takes a free slot (lock held inside); NULL when out of memory. */
struct tw_task *table_take(struct task_table *t, int *error);
/* Returns a reaped slot for reuse; call after a grace period. */
void table_give_back(struct task_table *t, struct tw_task *task);
/* The task with this id, or NULL. Call inside an RCU read-side section. */
struct tw_task *table_find(struct task_table *t, tw_id id);
/* The slot that id names, whatever it now holds, or NULL: its address only,
 * for a prefetch. Call inside an RCU read-side section. */
struct tw_task *table_slot(struct task_table *t, tw_id id);
/* Calls fn on every slot of every chunk; not inside a read-side section. */
void table_for_each(struct task_table *t, void (*fn)(struct tw_task *, void *), void *ctx);

/* ---- executors: executor.c ---- */

struct firing {
	struct tw_task *task;
	uint64_t due_ns;
	uint64_t skipped;
};

/* Tasks ended, counted by the thread that ended them. */
struct end_counts {
	_Atomic uint64_t completed, stopped;
};

/* Tasks an executor may have mailed and the wheel thread not yet taken in;
 * beyond, it mails through the engine's mailbox. */
enum { ENDED_RING = 4096 };

/*
 * Grouped by writer, a cache line each, so that handing a firing over writes
 * no line the executor writes per run, and the other way round. Runs in
 * progress are handed - done, summed over the executors when asked
 * (runs_idle), not one engine-wide counter that both sides write per run.
 */
struct executor {
	struct tw_engine *engine;
	pthread_t thread;
	unsigned index;
	uint32_t mask;     /* ring size (a power of two) - 1 */
	uint32_t capacity; /* firings it may hold: queue_capacity */
	struct firing *ring;
	/* the wheel thread's */
	_Atomic uint64_t tail __attribute__((aligned(64)));
	_Atomic uint64_t handed; /* firings and release calls handed over, ever */
	uint64_t head_seen;      /* head when last read: the ring has room up to it */
	bool kick;               /* got firings since the last kick */
	/* this executor's */
	_Atomic uint64_t head __attribute__((aligned(64)));
	_Atomic uint64_t done; /* of the handed, those finished */
	uint64_t tail_seen;    /* tail when last read: firings up to it are there */
	_Atomic uint64_t runs, failures, slow_runs, dropped;
	struct end_counts ends;
	_Atomic uint64_t lateness_max_ns;
	_Atomic uint64_t lateness[TW_LATENESS_BUCKETS];
	struct tw_task **ended; /* ENDED_RING tasks to reap, mailed by this executor */
	_Atomic uint64_t ended_tail;
	uint64_t ended_head_seen;
	/* the wheel thread's, read by the executor once per task it mails */
	_Atomic uint64_t ended_head __attribute__((aligned(64)));
	/* both: sleeping and waking, release calls */
	_Atomic uint32_t signal __attribute__((aligned(64))); /* futex word */
	_Atomic bool sleeping;
	_Atomic bool quit;
	struct cds_wfcq_head releases_head; /* tasks whose release to call */
	struct cds_wfcq_tail releases_tail;
};

int executors_start(struct tw_engine *e);
/* Wheel thread: queues one firing, false when the executor's queue is full. */
bool executor_push(struct executor *x, const struct firing *f);
/* Wheel thread: has the executor call an ended task's release (user code). */
void executor_push_release(struct executor *x, struct tw_task *task);
/* Executor x, lock held: mails an ended task through x's own ring. */
void executor_mail_ended(struct executor *x, struct tw_task *task);
/* Wheel thread: takes in what executor x mailed; calls take on each, locked. */
void executor_take_ended(struct executor *x, void (*take)(struct tw_task *, void *), void *ctx);
/* Wheel thread: wakes the executors that got firings since the last call. */
void executors_kick(struct tw_engine *e);
void executors_join(struct tw_engine *e);
/* Whether no run was in progress, at one instant during the call. */
bool runs_idle(struct tw_engine *e);

/* ---- the engine ---- */

struct tw_engine {
	tw_config cfg;
	struct executor *executors;
	unsigned executor_count;
	/* wheel thread only */
	struct wheel wheel __attribute__((aligned(64)));
	unsigned next_executor; /* turns for concurrent tasks */
	struct task_table table __attribute__((aligned(64)));
	pthread_t wheel_thread;
	bool wheel_thread_started;
	int timer_fd, wake_fd, epoll_fd;
	uint64_t epoch_ns; /* tick 0 of the wheel, on the 1 ms grid */
	_Atomic uint64_t manual_now_ns;
	uint64_t coarse_slack_ns; /* cfg.coarse_clock: two ticks of CLOCK_MONOTONIC_COARSE */
	uint64_t slow_run_ns;     /* cfg.slow_run_ms, saturated */
	/* lifecycle */
	_Atomic bool stopping; /* refuse operations, stop firing */
	_Atomic bool wheel_quit;
	pthread_mutex_t lock; /* tw_advance handshakes, stop */
	pthread_cond_t cond;
	uint64_t advance_asked, advance_done; /* under lock */
	/* waiting for runs to finish: stop, destroy, quiesce */
	_Atomic uint32_t drain_waiters;
	_Atomic uint32_t drain_signal; /* futex word, bumped when an executor runs dry */
	/* what application threads write */
	_Atomic uint64_t tasks_added __attribute__((aligned(64))); /* with max_tasks only */
	struct end_counts api_ends;
	/* mailbox to the wheel thread: many producers, one consumer */
	struct cds_wfcq_tail mail_tail __attribute__((aligned(64)));
	struct __cds_wfcq_head mail_head __attribute__((aligned(64)));
	/* the wheel thread's counters */
	_Atomic uint64_t wakeups, skipped_overlap, skipped_overload, skipped_missed;
	struct end_counts wheel_ends;
};

static inline uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The engine's time: monotonic_ns(), or the manual clock. */
uint64_t engine_now_ns(const struct tw_engine *e);
uint64_t engine_tick_of(const struct tw_engine *e, uint64_t due_ns); /* first tick >= due */
/* "now" for a delay a caller asks for: engine_now_ns(), or the coarse clock
 * with its slack (tw_config.coarse_clock). */
uint64_t engine_call_now_ns(const struct tw_engine *e);
uint64_t engine_due_at_ns(const struct tw_engine *e, uint64_t now_ns, uint64_t delay_ms);
void engine_log(const struct tw_engine *e, int level, const char *fmt, ...);

/* Wheel thread: wheel.c of core. */
int wheel_thread_start(struct tw_engine *e);
void wheel_thread_join(struct tw_engine *e);
/* Asks the wheel thread to look at task (lock held by the caller). */
void task_mail(struct tw_engine *e, struct tw_task *task);
void engine_wake(struct tw_engine *e);

/* Task life: task.c */
void task_lock(struct tw_task *task);
void task_unlock(struct tw_task *task);
/* Under lock: an ended task with no run going is released now: mails it for
 * reaping (through executor x's ring if not NULL) and returns the release
 * call to make once the lock is dropped. */
struct release_call {
	void (*fn)(void *arg);
	void *arg;
};
struct release_call task_end_if_idle(struct tw_engine *e, struct tw_task *task, struct executor *x);
/* Under lock: the task ends (TW_COMPLETED or TW_STOPPED); counted in the
 * ending thread's counts. */
void task_end(struct end_counts *counts, struct tw_task *task, tw_state end);
/* Tasks ended so far: every thread's counts summed. */
void ends_total(struct tw_engine *e, uint64_t *completed, uint64_t *stopped);

static inline void release_call_run(struct release_call call)
{
	if (call.fn)
		call.fn(call.arg);
}

/* executor.c */
bool engine_on_executor(const struct tw_engine *e);
void futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct timespec *timeout);
void futex_wake_all(_Atomic uint32_t *word);

/*
 * liburcu 0.13's queues and grace periods are inline assembly and membarrier,
 * invisible to ThreadSanitizer: these tell it about the ordering they give
 * (release before handing an object over, acquire on taking it).
 */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define HANDOVER_RELEASE(p) __tsan_release(p)
#define HANDOVER_ACQUIRE(p) __tsan_acquire(p)
#else
#define HANDOVER_RELEASE(p) ((void)(p))
#define HANDOVER_ACQUIRE(p) ((void)(p))
#endif

/* RCU: rcu.c. Registers the calling thread with liburcu once. */
void rcu_ensure_registered(void);

/* Read-side sections, with what a grace period orders told to TSan. */
extern char rcu_grace_token;

static inline void read_section_begin(void)
{
	rcu_ensure_registered();
	urcu_memb_read_lock();
}

static inline void read_section_end(void)
{
	HANDOVER_RELEASE(&rcu_grace_token);
	urcu_memb_read_unlock();
}

/* After a grace period: every read section that could see the old is over. */
static inline void after_grace_period(void)
{
	HANDOVER_ACQUIRE(&rcu_grace_token);
}

#endif
