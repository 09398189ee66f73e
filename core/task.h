/*
 * task.h - a task's record: its hot part, mail link and cold part, found from
 * one another by address arithmetic; its traits and skip counts; its lock and
 * the debug builds' check of who holds it (task.c); and task_init, which makes
 * the record of a new task. The record's other concerns have headers of their
 * own, included below (each after what it uses), so that task.h gives the whole task:
 * task_delay.h (the period and delay in 31 bits or wide), task_tally.h (tasks
 * counted by state) and task_table.h (ids and the slot table, task_table.c).
 * Uses base.h and the wheel's entry (wheel/wheel.h).
 */
#ifndef TICKWHEEL_CORE_TASK_H
#define TICKWHEEL_CORE_TASK_H

#include "base.h"
#include "wheel.h"

/* Wheel-side status of a task, under its lock. */
enum task_filing {
	FILED_NONE,  /* not in the wheel */
	FILED_DUE,   /* in the wheel for its next firing */
	FILED_REAP,  /* ended; in the wheel until its retention runs out */
	FILED_READY, /* due, in the engine's ready list (wheel_round.h) */
};

/* The due of a task set to TW_NEVER: a due that never comes, so never filed. */
#define DUE_NEVER UINT64_MAX

/*
 * A task is 64 + 8 + 80 = 152 bytes in three parts, stored in three arrays
 * per chunk of the slot table (task_table.c): a cache-line-aligned hot part, struct
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
 * generation (task_table.c).
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
	bool delay_pending : 1;  /* set_delay while paused; released: task_note_end_tick */
	bool release_queued : 1; /* an executor has yet to call release */
	bool skipped : 1;        /* skipped_since_run is not 0 */
	bool rerun : 1;          /* a firing came due during its own run: runs after it */
	_Atomic uint8_t traits;  /* TRAIT_*, read without the lock by tw_get */
} __attribute__((aligned(64)));

/* The first three are tw_task_spec's flags, bit for bit: tw_add stores them as they are. */
enum {
	TRAIT_CONCURRENT = TW_CONCURRENT,    /* immutable while live */
	TRAIT_RUN_LATE = TW_RUN_LATE,        /* immutable while live */
	TRAIT_ON_WHEEL = TW_ON_WHEEL_THREAD, /* until the budget guard moves it off (under lock) */
	TRAIT_TASK_FLAGS = TRAIT_CONCURRENT | TRAIT_RUN_LATE | TRAIT_ON_WHEEL,
	TRAIT_PAUSED_BY_FAILURES = 8, /* under lock */
	TRAIT_QUEUED = 16,            /* under lock: a firing of it waits in a ring, not taken */
	TRAIT_STUCK = 32,             /* under lock: that run is past run_limit_ms */
	TRAIT_DROP = 64, /* under lock: the queued firing was dropped and counted (pause, cancel) */
	/* under lock: the firing task->rerun stands for is a one-shot's */
	TRAIT_ONESHOT_RERUN = 128,
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
void tw__note_wheel_thread(void); /* the wheel thread, once at its start */
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
	/* Under lock: period_ms >> 31 while WIDE_BIT, in the low PERIOD_HI_BITS; above them the
	 * task's runs over the wheel-thread budget (task_strikes), for want of room elsewhere. */
	uint16_t period_hi;
	uint16_t delay_hi; /* delay_ms >> 31 while WIDE_BIT; under lock */
};

enum { PERIOD_HI_BITS = 13, PERIOD_HI_MASK = (1 << PERIOD_HI_BITS) - 1 };
_Static_assert((TW_MAX_DELAY_MS >> 31) <= PERIOD_HI_MASK, "a wide period fits PERIOD_HI_BITS");
_Static_assert(TW_WHEEL_RUN_STRIKES < 1 << (16 - PERIOD_HI_BITS), "the strikes fit above it");

_Static_assert(sizeof(struct task_cold) == 80, "the cold part is 80 bytes");
_Static_assert(offsetof(struct task_cold, failures) == 44, "an executor's run: 44 bytes");
_Static_assert((TW_MAX_DELAY_MS >> 31) <= UINT16_MAX, "wide values fit");

/*
 * A chunk of the slot table is TABLE_CHUNK_ALIGN bytes at an address aligned
 * to as much (task_table.c carves them from huge-page regions): TABLE_CHUNK_SLOTS
 * hot parts, as many mail links, as many cold parts. 1724 slots of 152 bytes
 * fill 256 KiB. Slot indexes keep a power-of-two stride per chunk
 * (TABLE_CHUNK_BITS), so an id is split with a shift and a mask; the indexes
 * from TABLE_CHUNK_SLOTS to the next chunk are never used. The alignment lets
 * each part find its chunk by masking its own address.
 *
 * Neighbours share cache lines in the mail and cold arrays (8 links, or 4
 * cold parts in 5 lines), so the cold parts start on a line and tasks get
 * their home executor (which runs them when every executor is full) by
 * blocks of TASKS_PER_EXECUTOR_BLOCK neighbours: otherwise each run would
 * write lines that the other executors write too (tw-perf heartbeats --tasks
 * 100000 shows it in the lateness: perf/results/HISTORY.md, "Figures moved out of the code").
 */
enum {
	TABLE_CHUNK_BITS = 11,
	TABLE_CHUNK_MASK = (1 << TABLE_CHUNK_BITS) - 1, /* a slot's place in its chunk */
	TABLE_CHUNK_SLOTS = 1724,
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

/* Lock held: n more firings skipped since the last run. */
static inline void add_skipped(struct tw_task *task, uint64_t n)
{
	TASK_LOCKED(task);
	struct task_cold *cold = task_cold(task);
	cold->skipped_since_run = add_saturating(cold->skipped_since_run, n);
	task->skipped = cold->skipped_since_run != 0;
}

/* Lock held: whether the wheel is to hold the task for this due: it is live, neither
 * paused nor released, and the due is one. */
static inline bool task_wants_due(const struct tw_task *task, uint64_t due)
{
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	return due && due != DUE_NEVER && !task->released &&
	       (state == TW_WAITING || state == TW_RUNNING);
}

/* Lock held: n firings of the task skipped for one reason: its own count for that reason
 * (one of the cold part's skipped_*), and the next run's report. The engine's totals are
 * each writer's to count. */
static inline void task_skip(struct tw_task *task, _Atomic uint32_t *count, uint64_t n)
{
	bump_skips(count, n);
	add_skipped(task, n);
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

/* task.c: the task's own small lock (a spin lock: it is held for a few dozen instructions).
 * Release builds take it inline when it is free, as every operation on a task does: a
 * call cost the fast paths more than the lock. Debug builds check who holds what. */
void tw__task_lock_contended(struct tw_task *task); /* spins until it takes the lock */
#ifdef NDEBUG
static inline void tw__task_lock(struct tw_task *task)
{
	if (__builtin_expect(atomic_flag_test_and_set_explicit(&task->lock, memory_order_acquire),
			     0))
		tw__task_lock_contended(task);
}

static inline void tw__task_unlock(struct tw_task *task)
{
	atomic_flag_clear_explicit(&task->lock, memory_order_release);
}
#else
void tw__task_lock(struct tw_task *task);
void tw__task_unlock(struct tw_task *task);
#endif

#include "task_delay.h"

/*
 * The record of a task about to be added, from its spec, before it is published (no other
 * thread reads it yet, so nothing is locked): live and waiting, due at due_ns, resuming with
 * delay_ms (a time given stands for a delay: tw_resume's), every count at 0. Inline, and
 * here rather than in task.c: every tw_add runs it, and a call would cost the add more
 * than the stores do.
 */
static inline __attribute__((always_inline)) void
task_init(struct tw_task *task, const tw_task_spec *spec, uint64_t delay_ms, uint64_t due_ns)
{
	struct task_cold *cold = task_cold(task);
	wheel_entry_init(&task->entry);
	atomic_flag_clear(&task->lock);
	task->filing = FILED_NONE;
	task->mailed = false;
	task->released = false;
	task->release_queued = false;
	atomic_store_explicit(&task->traits, (uint8_t)spec->flags, memory_order_relaxed);
	task->rerun = false;
	task_set_delay_ms(task, delay_ms);
	task->delay_pending = false;
	cold->skipped_since_run = 0;
	task->skipped = false;
	cold->callback = spec->callback;
	cold->arg = spec->arg;
	cold->release = spec->release;
	atomic_store_explicit(&task->state, TW_WAITING, memory_order_relaxed);
	atomic_store_explicit(&task->running, 0, memory_order_relaxed);
	atomic_store_explicit(&task->due_ns, due_ns, memory_order_relaxed);
	cold->period_hi = 0; /* no strikes; before the period, whose wide bits go there */
	task_set_period_ms(task, spec->period_ms);
	atomic_store_explicit(&cold->runs, 0, memory_order_relaxed);
	atomic_store_explicit(&cold->last_run_us, 0, memory_order_relaxed);
	atomic_store_explicit(&cold->longest_run_us, 0, memory_order_relaxed);
	atomic_store_explicit(&cold->last_lateness_us, 0, memory_order_relaxed);
	atomic_store_explicit(&cold->max_lateness_us, 0, memory_order_relaxed);
	atomic_store_explicit(&cold->consecutive_failures, 0, memory_order_relaxed);
	atomic_store_explicit(&cold->failures, 0, memory_order_relaxed);
	atomic_store_explicit(&cold->slow_runs, 0, memory_order_relaxed);
	atomic_store_explicit(&cold->skipped_overlap, 0, memory_order_relaxed);
	atomic_store_explicit(&cold->skipped_overload, 0, memory_order_relaxed);
	atomic_store_explicit(&cold->skipped_missed, 0, memory_order_relaxed);
}

#include "task_table.h"
#include "task_tally.h"

#endif
