/*
 * task.h - a task's record (hot part, mail link, cold part), its lock and the
 * tallies of tasks by state, and the slot table that holds them (task.c).
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
 * to as much (task.c carves them from huge-page regions): TABLE_CHUNK_SLOTS
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
 * 100000 shows it in the lateness: perf/README.md, "Figures moved out of the code").
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

/* A period or delay of 31 bits or more: WIDE_BIT and its low 31 bits in the
 * hot part, its bits above in the cold part. */
static inline uint64_t wide_ms(uint32_t low, uint16_t high)
{
	return (uint64_t)high << 31 | (low & ~WIDE_BIT);
}

/* The period a value of the task's period_ms field stands for (the caller read the field
 * once; a wide one also needs the lock, see task_period_ms). */
static inline uint64_t period_of_field(const struct tw_task *task, uint32_t ms)
{
	return ms & WIDE_BIT ? wide_ms(ms, task_cold(task)->period_hi & PERIOD_HI_MASK) : ms;
}

/* Lock held, or readers of a task that cannot change (tw_get takes the lock
 * for a wide period: its two halves are only consistent under it). */
static inline uint64_t task_period_ms(const struct tw_task *task)
{
	uint32_t ms = atomic_load_explicit(&task->period_ms, memory_order_relaxed);
	return period_of_field(task, ms);
}

/* Lock held, or the task not yet published. */
static inline void task_set_period_ms(struct tw_task *task, uint64_t ms)
{
	struct task_cold *cold = task_cold(task);
	if (ms >= WIDE_BIT)
		cold->period_hi = (uint16_t)((cold->period_hi & ~PERIOD_HI_MASK) | (ms >> 31));
	atomic_store_explicit(&task->period_ms,
			      ms < WIDE_BIT ? (uint32_t)ms : (uint32_t)ms | WIDE_BIT,
			      memory_order_relaxed);
}

/* Lock held: runs of the task over the wheel-thread budget so far. */
static inline unsigned task_strikes(const struct tw_task *task)
{
	return task_cold(task)->period_hi >> PERIOD_HI_BITS;
}

static inline void task_set_strikes(struct tw_task *task, unsigned strikes)
{
	struct task_cold *cold = task_cold(task);
	cold->period_hi =
		(uint16_t)((cold->period_hi & PERIOD_HI_MASK) | strikes << PERIOD_HI_BITS);
}

/* Not a delay: tw_set_due on a paused task, whose due_ns holds the time asked until
 * tw_resume places it (task_delay_at_due_ms: the delay that time stood for when asked). */
#define DELAY_AT_DUE (UINT64_MAX - 1)

/* In delay_hi, above any delay's high part (TW_MAX_DELAY_MS >> 31 is 4096): TW_NEVER is all
 * ones; AT_DUE_HI marks DELAY_AT_DUE, the delay the time stood for kept in the bits below. */
enum { NEVER_HI = UINT16_MAX, AT_DUE_HI = 1 << 14 };
_Static_assert((TW_MAX_DELAY_MS >> 31) < AT_DUE_HI, "a delay's high part is below AT_DUE_HI");

/* Lock held, both. TW_NEVER and DELAY_AT_DUE are kept as wide delays (see NEVER_HI). */
static inline uint64_t task_delay_ms(const struct tw_task *task)
{
	if (!(task->delay_ms & WIDE_BIT))
		return task->delay_ms;
	uint16_t high = task_cold(task)->delay_hi;
	if (high & AT_DUE_HI)
		return high == NEVER_HI ? TW_NEVER : DELAY_AT_DUE;
	return wide_ms(task->delay_ms, high);
}

static inline void task_set_delay_ms(struct tw_task *task, uint64_t ms)
{
	if (ms < WIDE_BIT) {
		task->delay_ms = (uint32_t)ms;
		return;
	}
	task->delay_ms = (uint32_t)ms | WIDE_BIT;
	task_cold(task)->delay_hi = ms == TW_NEVER ? NEVER_HI : (uint16_t)(ms >> 31);
}

/* DELAY_AT_DUE, for a time that stood for a delay of ms when it was asked. */
static inline void task_set_delay_at_due(struct tw_task *task, uint64_t ms)
{
	task->delay_ms = (uint32_t)ms | WIDE_BIT;
	task_cold(task)->delay_hi = (uint16_t)(AT_DUE_HI | ms >> 31);
}

/* A task_delay_ms of DELAY_AT_DUE: the delay its time stood for when it was asked. */
static inline uint64_t task_delay_at_due_ms(const struct tw_task *task)
{
	return wide_ms(task->delay_ms, task_cold(task)->delay_hi & (AT_DUE_HI - 1));
}

/*
 * Lock held, a released task: nothing reads its delay once it ended, so delay_ms keeps the
 * tick it ended at (mod 2^32; delay_pending says it is kept) when the wheel thread takes it
 * in later than that, so that it is kept retain_ms from its end.
 */
enum { END_TICK_SPAN = 1 << 30 }; /* ticks between the end and its taking in, at most */

static inline void task_note_end_tick(struct tw_task *task, uint64_t tick)
{
	task->delay_ms = (uint32_t)tick;
	task->delay_pending = true;
}

/* The tick the task ended at, as noted, near tick `now`; else `now`. */
static inline uint64_t task_end_tick(const struct tw_task *task, uint64_t now)
{
	if (!task->delay_pending)
		return now;
	int32_t ahead = (int32_t)(task->delay_ms - (uint32_t)now);
	return ahead < 0 && (uint64_t) - (int64_t)ahead > now ? 0 : now + (uint64_t)(int64_t)ahead;
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

/* ---- the slot table: task.c ---- */

struct task_dir {
	size_t capacity;                 /* chunk pointers room */
	_Atomic size_t chunks;           /* published chunks */
	struct tw_task *_Atomic chunk[]; /* each TABLE_CHUNK_SLOTS tasks, then their other parts */
};

/* A chunk's free slots (given back, not taken again), a bit each: task.c. */
struct chunk_free {
	uint64_t bits[(TABLE_CHUNK_SLOTS + 63) / 64];
	uint32_t count;
	uint32_t first_word; /* the bits below it are all 0 */
};

struct task_table {
	struct task_dir *dir; /* RCU-protected; read by every operation */
	/* Written by every add and every slot given back: on a line of their own,
	 * so that the lookups' line stays shared in every reader's cache. */
	pthread_mutex_t lock __attribute__((aligned(64))); /* allocation, free slots, growth */
	uint32_t used;                                     /* slots ever handed out */
	uint32_t free_slots;                               /* given back, not taken again */
	/* Under the lock: per chunk, its free slots, and a bit per chunk that has some. Only
	 * the table's mutators read them, so they grow without RCU. */
	struct chunk_free *free;
	uint64_t *chunks_with_free;
	size_t free_capacity;   /* chunks the two have room for */
	size_t first_free_word; /* the words of chunks_with_free below it are all 0 */
};

int tw__table_init(struct task_table *t);
/* Before any other use: room for `tasks` tasks, mapped and faulted in. -TW_EINVAL past
 * what ids can index, -TW_ENOMEM. */
int tw__table_reserve(struct task_table *t, uint64_t tasks);
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
/* The slot at index, in a chunk the directory d holds. */
static inline struct tw_task *table_slot_at(struct task_dir *d, uint32_t index)
{
	struct tw_task *chunk =
		atomic_load_explicit(&d->chunk[index >> TABLE_CHUNK_BITS], memory_order_acquire);
	return &chunk[index & TABLE_CHUNK_MASK];
}

/* The slot that id names, whatever it now holds, or NULL: its address only,
 * for a prefetch. Call inside an RCU read-side section. Inline: every
 * operation on a task starts here. */
static inline struct tw_task *tw__table_slot(struct task_table *t, tw_id id)
{
	struct task_dir *d = rcu_dereference(t->dir);
	HANDOVER_ACQUIRE(d); /* pairs with grow's release of a new directory */
	uint32_t index = id_index(id);
	if (!id ||
	    (index >> TABLE_CHUNK_BITS) >= atomic_load_explicit(&d->chunks, memory_order_acquire) ||
	    (index & TABLE_CHUNK_MASK) >= TABLE_CHUNK_SLOTS)
		return NULL;
	return table_slot_at(d, index);
}
/* Chunk i's TABLE_CHUNK_SLOTS slots, or NULL past the last chunk; not inside a read-side
 * section. Chunks are never moved or freed before the engine: read them outside one. */
struct tw_task *tw__table_chunk(struct task_table *t, size_t i);
/* Calls fn on every slot of every chunk; not inside a read-side section. */
void tw__table_for_each(struct task_table *t, void (*fn)(struct tw_task *, void *), void *ctx);

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
/* Under lock: the task ends (TW_COMPLETED or TW_STOPPED) from its live state `from`; counted
 * in the ending thread's counts (shared: any thread's, atomically). */
void tw__task_end(struct end_counts *counts, struct tw_task *task, uint8_t from, tw_state end,
		  bool shared);

#endif
