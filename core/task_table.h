/*
 * task_table.h - ids and the generation-checked slot table that holds the
 * tasks (task_table.c): chunks of slots that never move, a directory of them
 * published through RCU, free slots by bitmap. Part of task.h, which includes it.
 */
#ifndef TICKWHEEL_CORE_TASK_TABLE_H
#define TICKWHEEL_CORE_TASK_TABLE_H

#include "task.h"

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

struct task_dir {
	size_t capacity;                 /* chunk pointers room */
	_Atomic size_t chunks;           /* published chunks */
	struct tw_task *_Atomic chunk[]; /* each TABLE_CHUNK_SLOTS tasks, then their other parts */
};

/* A chunk's free slots (given back, not taken again), a bit each: task_table.c. */
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

#endif
