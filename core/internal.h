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
/* liburcu's switch to its inline fast paths: a reserved name, but liburcu's, not ours. */
#define _LGPL_SOURCE /* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */
#include <urcu/urcu-memb.h>
#include <urcu/wfcqueue.h>

#define NS_PER_MS UINT64_C(1000000)
/* A firing waits this long behind its executor's run before another executor takes it. */
#define HOLD_NS NS_PER_MS

/* Wheel-side status of a task, under its lock. */
enum task_filing {
	FILED_NONE,  /* not in the wheel */
	FILED_DUE,   /* in the wheel for its next firing */
	FILED_REAP,  /* ended; in the wheel until its retention runs out */
	FILED_READY, /* due, in the engine's ready list (wheel_thread.c) */
};

/* The due of a task set to TW_NEVER: a due that never comes, so never filed. */
#define DUE_NEVER UINT64_MAX

/*
 * A task is 64 + 8 + 80 = 152 bytes in three parts, stored in three arrays
 * per chunk of the slot table (task.c): a cache-line-aligned hot part, struct
 * tw_task; its mail link; and a cold part, struct task_cold. The other two
 * are found from the hot one, and the hot one from its mail link, by address
 * arithmetic alone (task_cold(), task_mail_link(), task_of_mail_link()).
 *
 * The hot part is all that the wheel thread reads or writes to cascade,
 * expire and hand out a firing, and all that an application thread reads or
 * writes to look a task up and postpone it: at a million firings a second
 * each firing costs one cache miss there, and a postpone at a random id one.
 * To fit, the period and the delay are kept in 31 bits, or, from 2^31 ms
 * (24.8 days) on, with WIDE_BIT set and the bits above in the cold part; the
 * skips since the last run move to the cold part behind a flag. Filed in the
 * wheel, the entry's own due is the tick the task is filed at.
 *
 * Why arrays, not 160-byte records: 160 B per task is the target, and a
 * chunk's allocation adds to it (a partly used last chunk, the directory), so
 * the task has to be smaller than 160 B; a record of 152 bytes would let the
 * hot line straddle two cache lines. The hot array keeps every hot line whole
 * and aligned. The mail link has an array of its own because the wheel thread
 * goes from a link back to its task for every mail: with 8-byte links that is
 * a shift, where from inside the cold part it would be a division; the
 * 80-byte cold part is reached from the hot one with a shift and an add
 * (80 = 64 + 64 / 4). Each costs 3 to 5 register instructions, no load.
 * The cold part is what an executor touches per run (first 44 bytes: at most
 * two cache lines, both prefetched), then what only skips, failures, queries
 * and wide values touch.
 *
 * The slot's generation and index are not stored while it is live: the id
 * holds both. A reaped slot keeps its id in the union, a free one its
 * generation (task.c).
 */
#define WIDE_BIT (UINT32_C(1) << 31) /* the period or delay has bits in the cold part */

struct tw_task {
	union {                           /* each member serves one phase of the slot's life */
		struct wheel_entry entry; /* filed in the wheel: wheel thread only */
		struct cds_wfcq_node to_release; /* queued to an executor to call release */
		struct {
			struct tw_task *next, *prev; /* FILED_READY: wheel thread only */
		} ready;
		struct {
			struct rcu_head rcu; /* reaped: waiting for a grace period */
			struct tw_engine *engine;
			tw_id id; /* the id it had: its index and generation */
		} reaped;
		struct {
			uint32_t next_free;  /* free: list link, slot index + 1 */
			uint32_t generation; /* of the slot's last id, 0 = never used */
		} free;
	};
	_Atomic uint64_t id;        /* 0 while the slot is free */
	_Atomic uint64_t due_ns;    /* ideal next due; 0 = none */
	_Atomic uint32_t period_ms; /* low 31 bits; WIDE_BIT: see task_period_ms */
	uint32_t delay_ms;          /* for resuming a one-shot; low 31 bits, WIDE_BIT; under lock */
	_Atomic uint32_t running;   /* runs dispatched and not yet returned */
	atomic_flag lock;
	_Atomic uint8_t state; /* tw_state */
	uint8_t filing : 2;    /* enum task_filing; under lock, these bits */
	bool mailed : 1;
	bool released : 1;
	bool delay_pending : 1;  /* set_delay while paused */
	bool release_queued : 1; /* an executor has yet to call release */
	bool skipped : 1;        /* skipped_since_run is not 0 */
	bool rerun : 1;          /* a firing came due during its own run: runs after it */
	_Atomic uint8_t traits;  /* TRAIT_*, read without the lock by tw_get */
} __attribute__((aligned(64)));

enum {
	TRAIT_CONCURRENT = 1,         /* immutable while live */
	TRAIT_PAUSED_BY_FAILURES = 2, /* under lock */
	TRAIT_RUN_LATE = 4,           /* TW_RUN_LATE; immutable while live */
	TRAIT_QUEUED = 8,             /* under lock: a firing of it waits in a ring, not taken */
	TRAIT_STUCK = 16,             /* under lock: that run is past run_limit_ms */
	TRAIT_DROP = 32, /* under lock: the queued firing was dropped and counted (pause, cancel) */
	/* under lock: the firing task->rerun stands for is a one-shot's */
	TRAIT_ONESHOT_RERUN = 64,
};

_Static_assert(sizeof(struct tw_task) == 64, "the hot part is one cache line");

/*
 * Who may touch what, checked in debug builds: each thread keeps the task
 * locks it holds (task.c), so TASK_LOCKED(task) aborts when the calling thread
 * does not hold that task's lock, and WHEEL_THREAD_ONLY() when it is not the
 * wheel thread. With NDEBUG (release builds) they check nothing and cost
 * nothing.
 */
#ifndef NDEBUG
void tw__task_assert_locked(const struct tw_task *task, const char *where);
void tw__assert_wheel_thread(const char *where);
#define TASK_LOCKED(task)   tw__task_assert_locked(task, __func__)
#define WHEEL_THREAD_ONLY() tw__assert_wheel_thread(__func__)
#else
#define TASK_LOCKED(task)   ((void)(task))
#define WHEEL_THREAD_ONLY() ((void)0)
#endif

/*
 * The skip counters are 32 bits and saturate at UINT32_MAX (2^32 - 1 skips of
 * one task for one reason; at a firing a millisecond, 49 days of them): the
 * 64-bit counters did not fit in 160 bytes. tw_task_info reports them as they
 * are; the engine-wide counters (tw_stats) are 64 bits and exact.
 */
struct task_cold {
	/* what an executor touches per run */
	tw_callback callback;
	void *arg;
	_Atomic uint64_t runs;
	/* the last finished run's and the largest, in us (tw_task_info: us_of_ns) */
	_Atomic uint32_t last_run_us, longest_run_us, last_lateness_us, max_lateness_us;
	_Atomic uint32_t consecutive_failures;
	/* failures, release, queries, skips, wide values */
	_Atomic uint32_t failures;
	void (*release)(void *arg);
	_Atomic uint32_t slow_runs;
	_Atomic uint32_t skipped_overlap, skipped_overload, skipped_missed; /* saturating */
	uint32_t skipped_since_run; /* under lock (saturating) */
	uint16_t period_hi;         /* period_ms >> 31 while WIDE_BIT; under lock */
	uint16_t delay_hi;          /* delay_ms >> 31 while WIDE_BIT; under lock */
};

_Static_assert(sizeof(struct task_cold) == 80, "the cold part is 80 bytes");
_Static_assert(offsetof(struct task_cold, failures) == 44, "an executor's run: 44 bytes");
_Static_assert((TW_MAX_DELAY_MS >> 31) <= UINT16_MAX, "wide values fit");

/*
 * A chunk of the slot table is one allocation of TABLE_CHUNK_ALIGN bytes'
 * alignment: TABLE_CHUNK_SLOTS hot parts, as many mail links, as many cold
 * parts. 1077 slots of 152 bytes fill jemalloc's 160 KiB size class (1024
 * slots of 152 bytes would take 160 KiB too: 160 bytes a task). Slot indexes
 * keep a power-of-two stride per chunk (TABLE_CHUNK_BITS), so an id is split
 * with a shift and a mask; the indexes from TABLE_CHUNK_SLOTS to the next
 * chunk are never used. The alignment (above the chunk's size) lets each part
 * find its chunk by masking its own address.
 *
 * Neighbours share cache lines in the mail and cold arrays (8 links, or 4
 * cold parts in 5 lines), so the cold parts start on a line and tasks get
 * their home executor (which runs them when every executor is full) by
 * blocks of TASKS_PER_EXECUTOR_BLOCK neighbours: otherwise each run would
 * write lines that the other executors write too (bench-engine heartbeats
 * shows it in the lateness: perf/README.md, "Figures moved out of the code").
 */
enum {
	TABLE_CHUNK_BITS = 11,
	TABLE_CHUNK_MASK = (1 << TABLE_CHUNK_BITS) - 1, /* a slot's place in its chunk */
	TABLE_CHUNK_SLOTS = 1077,
	TABLE_CHUNK_MAIL = TABLE_CHUNK_SLOTS * 64, /* offset of the mail links */
	TABLE_CHUNK_COLD =
		(TABLE_CHUNK_MAIL + TABLE_CHUNK_SLOTS * 8 + 63) / 64 * 64, /* cold parts */
	TABLE_CHUNK_BYTES = TABLE_CHUNK_COLD + TABLE_CHUNK_SLOTS * 80,
	TABLE_CHUNK_ALIGN = 1 << 18,
	TASKS_PER_EXECUTOR_BLOCK = 8, /* 8 mail links, 8 cold parts: whole lines */
};
_Static_assert(TASKS_PER_EXECUTOR_BLOCK * 8 % 64 == 0 && TASKS_PER_EXECUTOR_BLOCK * 80 % 64 == 0,
	       "a block's mail links and cold parts fill whole lines");

_Static_assert(TABLE_CHUNK_SLOTS <= 1 << TABLE_CHUNK_BITS, "a chunk's slots have indexes");
_Static_assert(TABLE_CHUNK_BYTES <= 160 * 1024, "a chunk fills 160 KiB");
_Static_assert(TABLE_CHUNK_BYTES <= TABLE_CHUNK_ALIGN, "a chunk is found by masking");
_Static_assert(sizeof(struct cds_wfcq_node) == 8, "mail links are 8 bytes");

/* Of a hot part: its offset in its chunk, 64 times its slot. */
static inline uintptr_t task_offset(const struct tw_task *task)
{
	return (uintptr_t)task & (TABLE_CHUNK_ALIGN - 1);
}

/*
 * The parts' addresses are computed as integers on purpose: gcc then folds link - offset into
 * a mask, where the same sum on a char * costs task_of_mail_link one more instruction.
 * NOLINTBEGIN(performance-no-int-to-ptr)
 */

/* chunk + TABLE_CHUNK_COLD + slot * 80 = task + TABLE_CHUNK_COLD + slot * 16 */
static inline struct task_cold *task_cold(const struct tw_task *task)
{
	return (struct task_cold *)((uintptr_t)task + TABLE_CHUNK_COLD + (task_offset(task) >> 2));
}

/* Queued to the wheel thread while the task is mailed. */
static inline struct cds_wfcq_node *task_mail_link(const struct tw_task *task)
{
	uintptr_t offset = task_offset(task);
	return (struct cds_wfcq_node *)((uintptr_t)task - offset + TABLE_CHUNK_MAIL +
					(offset >> 3));
}

static inline struct tw_task *task_of_mail_link(const struct cds_wfcq_node *link)
{
	uintptr_t offset = (uintptr_t)link & (TABLE_CHUNK_ALIGN - 1);
	return (struct tw_task *)((uintptr_t)link - offset + ((offset - TABLE_CHUNK_MAIL) << 3));
}
/* NOLINTEND(performance-no-int-to-ptr) */

static inline bool task_concurrent(const struct tw_task *task)
{
	return atomic_load_explicit(&task->traits, memory_order_relaxed) & TRAIT_CONCURRENT;
}

/* Lock held: sets or clears a trait (one writer at a time; tw_get reads without the lock). */
static inline void task_set_trait(struct tw_task *task, uint8_t trait, bool on)
{
	TASK_LOCKED(task);
	uint8_t traits = atomic_load_explicit(&task->traits, memory_order_relaxed);
	uint8_t want = on ? traits | trait : traits & (uint8_t)~trait;
	if (want != traits)
		atomic_store_explicit(&task->traits, want, memory_order_relaxed);
}

static inline void task_set_paused_by_failures(struct tw_task *task, bool paused)
{
	task_set_trait(task, TRAIT_PAUSED_BY_FAILURES, paused);
}

/* Lock held: sets or clears traits without looking first (one store, for the executor's
 * path per run). */
static inline void task_put_traits(struct tw_task *task, uint8_t set, uint8_t clear)
{
	TASK_LOCKED(task);
	uint8_t traits = atomic_load_explicit(&task->traits, memory_order_relaxed);
	atomic_store_explicit(&task->traits, (uint8_t)((traits | set) & ~clear),
			      memory_order_relaxed);
}

static inline bool task_has_trait(const struct tw_task *task, uint8_t trait)
{
	return atomic_load_explicit(&task->traits, memory_order_relaxed) & trait;
}

/* A duration kept in a task's 32 bits: microseconds, rounded up, saturating. */
static inline uint32_t us_of_ns(uint64_t ns)
{
	return ns > UINT64_C(1000) * UINT32_MAX ? UINT32_MAX : (uint32_t)((ns + 999) / 1000);
}

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

/* A 32-bit count plus n, stopping at UINT32_MAX. */
static inline uint32_t add_saturating(uint32_t count, uint64_t n)
{
	uint64_t total = count + n;
	return total < UINT32_MAX ? (uint32_t)total : UINT32_MAX;
}

/* bump_by for a task's skip counter, which stops at UINT32_MAX. */
static inline void bump_skips(_Atomic uint32_t *counter, uint64_t n)
{
	atomic_store_explicit(
		counter, add_saturating(atomic_load_explicit(counter, memory_order_relaxed), n),
		memory_order_relaxed);
}

/* Lock held: n more firings skipped since the last run. */
static inline void add_skipped(struct tw_task *task, uint64_t n)
{
	TASK_LOCKED(task);
	struct task_cold *cold = task_cold(task);
	cold->skipped_since_run = add_saturating(cold->skipped_since_run, n);
	task->skipped = cold->skipped_since_run != 0;
}

/* Lock held: the skips a run reports, which it then clears. */
static inline uint64_t take_skipped(struct tw_task *task)
{
	TASK_LOCKED(task);
	if (!task->skipped)
		return 0;
	struct task_cold *cold = task_cold(task);
	uint64_t n = cold->skipped_since_run;
	cold->skipped_since_run = 0;
	task->skipped = false;
	return n;
}

/* A period or delay of 31 bits or more: WIDE_BIT and its low 31 bits in the
 * hot part, its bits above in the cold part. */
static inline uint64_t wide_ms(uint32_t low, uint16_t high)
{
	return (uint64_t)high << 31 | (low & ~WIDE_BIT);
}

/* Lock held, or readers of a task that cannot change (tw_get takes the lock
 * for a wide period: its two halves are only consistent under it). */
static inline uint64_t task_period_ms(const struct tw_task *task)
{
	uint32_t ms = atomic_load_explicit(&task->period_ms, memory_order_relaxed);
	return ms & WIDE_BIT ? wide_ms(ms, task_cold(task)->period_hi) : ms;
}

/* Lock held, or the task not yet published. */
static inline void task_set_period_ms(struct tw_task *task, uint64_t ms)
{
	if (ms >= WIDE_BIT)
		task_cold(task)->period_hi = (uint16_t)(ms >> 31);
	atomic_store_explicit(&task->period_ms,
			      ms < WIDE_BIT ? (uint32_t)ms : (uint32_t)ms | WIDE_BIT,
			      memory_order_relaxed);
}

/* Lock held, both. TW_NEVER is kept as a wide delay whose high part is UINT16_MAX, above
 * any delay accepted (TW_MAX_DELAY_MS >> 31 is 4096). */
static inline uint64_t task_delay_ms(const struct tw_task *task)
{
	if (!(task->delay_ms & WIDE_BIT))
		return task->delay_ms;
	uint16_t high = task_cold(task)->delay_hi;
	return high == UINT16_MAX ? TW_NEVER : wide_ms(task->delay_ms, high);
}

static inline void task_set_delay_ms(struct tw_task *task, uint64_t ms)
{
	if (ms < WIDE_BIT) {
		task->delay_ms = (uint32_t)ms;
		return;
	}
	task->delay_ms = (uint32_t)ms | WIDE_BIT;
	task_cold(task)->delay_hi = ms == TW_NEVER ? UINT16_MAX : (uint16_t)(ms >> 31);
}

/* Ids: slot index in the low 32 bits, the slot's generation (>= 1) above. */
static inline uint32_t id_index(tw_id id)
{
	return (uint32_t)id;
}

static inline uint32_t id_generation(tw_id id)
{
	return (uint32_t)(id >> 32);
}

static inline tw_id make_id(uint32_t generation, uint32_t index)
{
	return (uint64_t)generation << 32 | index;
}

/* ---- task table: task.c ---- */

struct task_dir {
	size_t capacity;                 /* chunk pointers room */
	_Atomic size_t chunks;           /* published chunks */
	struct tw_task *_Atomic chunk[]; /* each TABLE_CHUNK_SLOTS tasks, then their other parts */
};

struct task_table {
	struct task_dir *dir; /* RCU-protected; read by every operation */
	/* Written by every add and every slot given back: on a line of their own,
	 * so that the lookups' line stays shared in every reader's cache. */
	pthread_mutex_t lock __attribute__((aligned(64))); /* allocation, free list, growth */
	uint32_t free_head;                                /* slot index + 1, 0 = empty */
	uint32_t used;                                     /* slots ever handed out */
};

int tw__table_init(struct task_table *t);
void tw__table_fini(struct task_table *t);
/* What the table holds: its directory and chunks (tw_stats' memory_bytes). */
uint64_t tw__table_bytes(struct task_table *t);
/* Takes a free slot (lock held inside) and makes its next id, *id; NULL when
 * out of memory or ids. */
struct tw_task *tw__table_take(struct task_table *t, tw_id *id, int *error);
/* Returns a reaped slot (its id in reaped.id) for reuse; call after a grace
 * period. */
void tw__table_give_back(struct task_table *t, struct tw_task *task);
/* The task with this id, or NULL. Call inside an RCU read-side section. */
struct tw_task *tw__table_find(struct task_table *t, tw_id id);
/* The slot that id names, whatever it now holds, or NULL: its address only,
 * for a prefetch. Call inside an RCU read-side section. */
struct tw_task *tw__table_slot(struct task_table *t, tw_id id);
/* Chunk i's TABLE_CHUNK_SLOTS slots, or NULL past the last chunk; not inside a read-side
 * section. Chunks are never moved or freed before the engine: read them outside one. */
struct tw_task *tw__table_chunk(struct task_table *t, size_t i);
/* Calls fn on every slot of every chunk; not inside a read-side section. */
void tw__table_for_each(struct task_table *t, void (*fn)(struct tw_task *, void *), void *ctx);

/* ---- executors: executor.c ---- */

struct firing {
	struct tw_task *task;
	uint64_t due_ns;
	uint64_t skipped;
};

/* A firing in a ring: one producer, the wheel thread; many consumers, the owner and the
 * executors that take firings held up behind its run (they claim a slot by moving head), so
 * a slot may be read while the producer reuses it: the claim then fails, and the copy is
 * dropped. Atomic fields make that read well-defined. */
struct ring_slot {
	_Atomic(struct tw_task *) task;
	_Atomic uint64_t due_ns;
	_Atomic uint64_t skipped;
};

/* Tasks ended, counted by the thread that ended them. */
struct end_counts {
	_Atomic uint64_t completed, stopped;
	/* Tasks moved into each live state (TW_WAITING, TW_RUNNING, TW_PAUSED) minus those moved
	 * out, modulo 2^64, by this counter's writers: summed over all of them, the tasks in each
	 * state (tw_stats), without walking the table. */
	_Atomic uint64_t in_state[TW_PAUSED + 1];
};

/* Lock held: a task's state changes from `from` to `to`; counted in c, by its one writer
 * (shared: by any thread, with an atomic add). A state past TW_PAUSED, or NO_STATE, is none
 * of the live ones. */
#define NO_STATE UINT8_MAX
static inline void tally_move(struct end_counts *c, uint8_t from, uint8_t to, bool shared)
{
	if (from == to)
		return;
	if (from <= TW_PAUSED) {
		if (shared)
			atomic_fetch_sub_explicit(&c->in_state[from], 1, memory_order_relaxed);
		else
			atomic_store_explicit(
				&c->in_state[from],
				atomic_load_explicit(&c->in_state[from], memory_order_relaxed) - 1,
				memory_order_relaxed);
	}
	if (to <= TW_PAUSED) {
		if (shared)
			atomic_fetch_add_explicit(&c->in_state[to], 1, memory_order_relaxed);
		else
			atomic_store_explicit(
				&c->in_state[to],
				atomic_load_explicit(&c->in_state[to], memory_order_relaxed) + 1,
				memory_order_relaxed);
	}
}

/* One writer's tally: a task moved from one live state to another (no test, no reload). */
static inline void tally_step(struct end_counts *c, uint8_t from, uint8_t to)
{
	bump_by(&c->in_state[from], UINT64_MAX); /* - 1, modulo 2^64 */
	bump(&c->in_state[to]);
}

/* Lock held: sets the task's state and counts the move. */
static inline void task_move(struct tw_task *task, struct end_counts *c, uint8_t to, bool shared)
{
	TASK_LOCKED(task);
	uint8_t from = atomic_load_explicit(&task->state, memory_order_relaxed);
	atomic_store_explicit(&task->state, to, memory_order_relaxed);
	tally_move(c, from, to, shared);
}

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
	_Atomic uint64_t run_start_ns; /* of the run going on; 0: none */
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
	struct cds_wfcq_head releases_head; /* tasks whose release to call */
	struct cds_wfcq_tail releases_tail;
};

/* Allocates every executor's rings, spares' included; starts the configured ones. */
int tw__executors_start(struct tw_engine *e);
/* Wheel thread: starts the next spare executor; false when there is none left to start. */
bool tw__executor_start_spare(struct tw_engine *e);
/* Lets every started executor but self and the abandoned finish what it holds, joins it. */
void tw__executors_join(struct tw_engine *e, struct executor *self);
void tw__executors_free(struct tw_engine *e);
/* Stop: takes every queued firing out of the rings and drops it (tw__drop_taken). */
void tw__executors_drop_queued(struct tw_engine *e);
/* stop.c: a firing taken out of a ring by a stop: counted missed, the task's count of
 * firings in flight lowered, the task released if that was its last. */
void tw__drop_taken(struct tw_engine *e, const struct firing *f);
/* Wakes the threads that wait for runs to finish (wait_runs), if any. */
void tw__drain_signal(struct tw_engine *e);
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
/* Wheel thread: takes in what executor x mailed; calls take on each, locked. */
void tw__executor_take_ended(struct executor *x, void (*take)(struct tw_task *, void *), void *ctx);
/* Wheel thread: wakes the executors that got firings since the last call. */
void tw__executors_kick(struct tw_engine *e);
/* Wakes x if it sleeps (its signal moves either way). */
void tw__executor_wake(struct executor *x);
/* Whether at most except runs were in progress, at one instant during the call. */
bool tw__runs_idle(struct tw_engine *e, uint64_t except);

/* ---- the engine ---- */

struct tw_engine {
	tw_config cfg;
	struct executor *executors;                  /* executor_count, then room for the spares */
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
	struct tw_task *ready_head, *ready_tail; /* due, not yet handed out: FIFO */
	uint64_t ready_count;                    /* tasks in the ready list */
	uint64_t ready_owed;        /* manual clock: of those, at its head, the ones due by the last
			      * tw_advance (the rest came due after it: they wait for the next) */
	_Atomic uint64_t ready_due; /* published: firings due and not handed out (tw_quiesce) */
	struct task_table table __attribute__((aligned(64)));
	pthread_t wheel_thread;
	bool wheel_thread_started;
	int timer_fd, wake_fd, epoll_fd;
	uint64_t epoch_ns; /* tick 0 of the wheel, on the 1 ms grid */
	_Atomic uint64_t manual_now_ns;
	uint64_t coarse_slack_ns; /* cfg.coarse_clock: two ticks of CLOCK_MONOTONIC_COARSE */
	uint64_t slow_run_ns;     /* cfg.slow_run_ms, saturated */
	/* lifecycle */
	_Atomic uint8_t stopping; /* HALT_*: refuse operations, stop firing */
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
	/* firings waiting for their task's run that calls dropped: tw_pause and tw_cancel
	 * (missed), tw_set_period (overlap); any thread's, added atomically */
	_Atomic uint64_t api_skipped_missed, api_skipped_overlap;
	/* mailbox to the wheel thread: many producers, one consumer */
	struct cds_wfcq_tail mail_tail __attribute__((aligned(64)));
	struct __cds_wfcq_head mail_head __attribute__((aligned(64)));
	/* the wheel thread's counters */
	_Atomic uint64_t wakeups, skipped_overlap, skipped_overload, skipped_missed, stuck_runs;
	_Atomic uint64_t wheel_busy_ns; /* in rounds, from waking up to waiting again */
	struct end_counts wheel_ends;
	/* firings taken out of the rings by a stop, not by an executor (added to done) */
	_Atomic uint64_t stop_done;
	/* tw_engine_destroy called in a callback: that callback's executor completes it */
	_Atomic(struct executor *) destroy_by;
	/* executors left with a stuck run by tw_engine_destroy; the last frees the engine */
	_Atomic unsigned abandoned;
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

/* fork.c: every live engine is known, so that a fork's child can mark them all. */
int tw__fork_watch(struct tw_engine *e);
void tw__fork_unwatch(struct tw_engine *e);

/* Executors started so far; the spares come after the configured ones. */
static inline unsigned executors_running(const struct tw_engine *e)
{
	return atomic_load_explicit(&e->executors_running, memory_order_acquire);
}

static inline uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The engine's time: monotonic_ns(), or the manual clock. */
uint64_t tw__engine_now_ns(const struct tw_engine *e);
uint64_t tw__engine_tick_of(const struct tw_engine *e, uint64_t due_ns); /* first tick >= due */
/* "now" for a delay a caller asks for: tw__engine_now_ns(), or the coarse clock
 * with its slack (tw_config.coarse_clock). */
uint64_t tw__engine_call_now_ns(const struct tw_engine *e);
uint64_t tw__engine_due_at_ns(const struct tw_engine *e, uint64_t now_ns, uint64_t delay_ms);
void tw__engine_log(const struct tw_engine *e, int level, const char *fmt, ...);
const char *tw__strerror(int err);

/* Wheel thread: wheel_thread.c. */
int tw__wheel_thread_start(struct tw_engine *e);
/* Wheel thread, after each round: watch.c. */
void tw__watch_executors(struct tw_engine *e);
void tw__wheel_thread_join(struct tw_engine *e);
/* Asks the wheel thread to look at task (lock held by the caller). True when
 * the wheel thread must be woken, by tw__engine_wake once the lock is dropped: a
 * write to an eventfd, a system call no other thread should spin behind. */
__attribute__((warn_unused_result)) bool tw__task_mail(struct tw_engine *e, struct tw_task *task);
void tw__engine_wake(struct tw_engine *e);

/* Task life: task.c */
void tw__task_lock(struct tw_task *task);
void tw__task_unlock(struct tw_task *task);
/* What a thread owes once it drops a task's lock: the user's release call,
 * and a wake-up of the wheel thread (tw__task_mail). */
struct after_unlock {
	void (*release)(void *arg);
	void *arg;
	struct tw_engine *wake;
};
/* Under lock: an ended task with no run going is released now: mails it for
 * reaping (through executor x's ring if not NULL) and adds the release call
 * and any wake-up to *after. */
void tw__task_end_if_idle(struct tw_engine *e, struct tw_task *task, struct executor *x,
			  struct after_unlock *after);
/* Under lock: the task ends (TW_COMPLETED or TW_STOPPED) from its live state `from`; counted
 * in the ending thread's counts (shared: any thread's, atomically). */
void tw__task_end(struct end_counts *counts, struct tw_task *task, uint8_t from, tw_state end,
		  bool shared);
/* The tasks in each live state now: every writer's tallies summed (tw_stats). */
void tw__states_total(struct tw_engine *e, uint64_t in_state[TW_PAUSED + 1]);
/* Tasks ended so far: every thread's counts summed. */
void tw__ends_total(struct tw_engine *e, uint64_t *completed, uint64_t *stopped);

/* Lock held: the wheel thread is woken once it is dropped, if tw__task_mail says so. */
static inline void mail_after_unlock(struct tw_engine *e, struct tw_task *task,
				     struct after_unlock *after)
{
	TASK_LOCKED(task);
	if (tw__task_mail(e, task))
		after->wake = e;
}

static inline void after_unlock_run(struct after_unlock after)
{
	if (after.wake)
		tw__engine_wake(after.wake);
	if (after.release)
		after.release(after.arg);
}

/* executor.c */
bool tw__engine_on_executor(const struct tw_engine *e);
/* The executor of e that the calling thread is, or NULL. */
struct executor *tw__current_executor(const struct tw_engine *e);
/* engine.c: tw_engine_destroy called in a callback on x, completed once it returned. */
void tw__engine_destroy_deferred(struct tw_engine *e, struct executor *x);
/* stop.c: one holder of the engine (destroy, an abandoned executor) lets go; the last
 * frees it. */
void tw__engine_unref(struct tw_engine *e);
/* engine.c: frees what the engine holds once its threads are gone. */
void tw__engine_free(struct tw_engine *e);
void tw__futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct timespec *timeout);
void tw__futex_wake_all(_Atomic uint32_t *word);

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

/*
 * abi.c: a struct of the caller's size in or out. tw__struct_in keeps dst's
 * own values past src_size and refuses (-TW_EINVAL) a longer src whose extra
 * bytes are not all zero; tw__struct_out zeroes dst past what src has.
 */
int tw__struct_in(void *dst, size_t dst_size, const void *src, size_t src_size);
void tw__struct_out(void *dst, size_t dst_size, const void *src, size_t src_size);

/* RCU: rcu.c. Registers the calling thread with liburcu once. */
void tw__rcu_ensure_registered(void);
/* Before the first engine: -TW_ENOMEM if the thread-exit hook could not be made. */
int tw__rcu_init(void);

/* Read-side sections, with what a grace period orders told to TSan. */
extern char tw__rcu_grace_token;

static inline void read_section_begin(void)
{
	tw__rcu_ensure_registered();
	urcu_memb_read_lock();
}

static inline void read_section_end(void)
{
	HANDOVER_RELEASE(&tw__rcu_grace_token);
	urcu_memb_read_unlock();
}

/* After a grace period: every read section that could see the old is over. */
static inline void after_grace_period(void)
{
	HANDOVER_ACQUIRE(&tw__rcu_grace_token);
}

#endif
