/*
 * task_table.c - where tasks live: the slot table (task_table.h).
 *
 * Tasks are stored in a generation-checked slot table: an id is the slot
 * index plus the slot's generation, so a lookup is one memory access to the
 * task itself, where a hash table (rculfhash) costs several (perf/README.md,
 * "Figures moved out of the code"). Slots come in chunks of 1724 (their
 * hot parts, then their cold parts: task.h) that are never moved or freed
 * before the engine is; only the directory of chunks grows, published through
 * RCU. A slot is reused, with the next generation, only after a grace period
 * following its reaping, so a reader that matched the id inside a read-side
 * section never sees another task.
 *
 * A live slot's index and generation are in its id; a reaped one keeps its
 * id in reaped.id until it is given back, a free one its generation in
 * free.generation until it is taken.
 *
 * Free slots are handed out lowest address first, from a bitmap per chunk,
 * not from a list in the order they were given back: the slots of tasks that
 * ended in random order are scattered, and a list would make each add touch
 * a cold line in a random place (three, with the slot's mail link and cold
 * part). In address order, consecutive adds walk the chunks as the hardware
 * prefetcher likes and share the mail links' and cold parts' lines.
 */
#include "alloc.h"
#include "task.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static struct task_dir *dir_new(size_t capacity)
{
	struct task_dir *d = tw__alloc(sizeof *d + capacity * sizeof d->chunk[0]);
	if (!d)
		return NULL;
	d->capacity = capacity;
	atomic_init(&d->chunks, 0);
	for (size_t i = 0; i < capacity; i++)
		atomic_init(&d->chunk[i], NULL);
	return d;
}

static void dir_free(struct task_dir *d)
{
	tw__free(d, sizeof *d + d->capacity * sizeof d->chunk[0]);
}

int tw__table_init(struct task_table *t)
{
	memset(t, 0, sizeof *t);
	t->dir = dir_new(16);
	if (!t->dir)
		return -TW_ENOMEM;
	if (pthread_mutex_init(&t->lock, NULL)) {
		dir_free(t->dir);
		t->dir = NULL;
		return -TW_ENOMEM;
	}
	return TW_OK;
}

uint64_t tw__table_bytes(struct task_table *t)
{
	read_section_begin(); /* the directory a growth replaces is freed after a grace period */
	struct task_dir *d = rcu_dereference(t->dir);
	uint64_t bytes = sizeof *d + d->capacity * sizeof d->chunk[0] +
			 atomic_load_explicit(&d->chunks, memory_order_acquire) * TABLE_CHUNK_ALIGN;
	read_section_end();
	pthread_mutex_lock(&t->lock);
	bytes += t->free_capacity * sizeof *t->free +
		 t->free_capacity / 64 * sizeof *t->chunks_with_free;
	pthread_mutex_unlock(&t->lock);
	return bytes;
}

/*
 * Chunks are carved from regions of 2 MiB aligned to 2 MiB and marked for
 * transparent huge pages. An operation on a random task of a large table
 * misses the TLB as well as the cache, and under a hypervisor a TLB miss walks
 * the guest's page tables and the host's: a huge page shortens the walk
 * (perf/results/HISTORY.md, "Task chunks on huge pages"). A region is mapped when its
 * first chunk is needed, so a small engine holds one: 2 MiB with a huge page,
 * its touched chunks without one.
 */
enum { REGION_BYTES = 2 << 20, CHUNKS_PER_REGION = REGION_BYTES / TABLE_CHUNK_ALIGN };
_Static_assert(REGION_BYTES % TABLE_CHUNK_ALIGN == 0, "a region holds whole chunks");

static void region_unmap(void *start, size_t bytes)
{
	if (bytes && munmap(start, bytes)) { /* only an engine bug passes a range not mapped */
		(void)fprintf(stderr, "tickwheel: munmap of the task table failed: errno %d\n",
			      errno);
		abort();
	}
}

static char *region_map(void)
{
	size_t span = 2 * (size_t)REGION_BYTES;
	char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	char *start = p + (REGION_BYTES - (uintptr_t)p % REGION_BYTES) % REGION_BYTES;
	region_unmap(p, (size_t)(start - p));
	region_unmap(start + REGION_BYTES, (size_t)(p + span - (start + REGION_BYTES)));
#ifdef MADV_HUGEPAGE
	(void)madvise(start, REGION_BYTES, MADV_HUGEPAGE); /* advice: refused without THP */
#endif
	return start;
}

/*
 * Fresh memory is faulted in a page at a time by its first write, and a page
 * fault is slow next to an add: a chunk's faults, spread over its adds, would
 * dominate them. The add that grew the table populates the chunk in one call
 * (perf/results/HISTORY.md, "Figures moved out of the code"), after it let go of the
 * table's lock: with a huge page the fault clears 2 MiB, and the wheel thread
 * takes that lock to give slots back. Older kernels refuse the advice; the
 * adds fault the pages in then. Fresh mappings read as zeros.
 */
static void populate(void *chunk, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
	(void)madvise(chunk, bytes, MADV_POPULATE_WRITE);
#else
	(void)chunk;
	(void)bytes;
#endif
}

/* populate() for a reservation, which promises -TW_ENOMEM when the memory is refused: the
 * kernel answers ENOMEM (or EFAULT) when it cannot fault the pages in; a kernel without the
 * advice (EINVAL) leaves them to the adds, as populate() does. */
static int populate_reserved(void *chunk, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
	if (madvise(chunk, bytes, MADV_POPULATE_WRITE) != 0 && (errno == ENOMEM || errno == EFAULT))
		return -TW_ENOMEM;
#else
	(void)chunk;
	(void)bytes;
#endif
	return TW_OK;
}

/* Lock held: memory for chunk number `chunks`, in a new region or after the last chunk. */
static struct tw_task *chunk_map(struct task_dir *d, size_t chunks)
{
	if (chunks % CHUNKS_PER_REGION == 0)
		return (struct tw_task *)region_map();
	return (struct tw_task *)((char *)atomic_load_explicit(&d->chunk[chunks - 1],
							       memory_order_relaxed) +
				  TABLE_CHUNK_ALIGN);
}

void tw__table_fini(struct task_table *t)
{
	if (!t->dir) /* tw__table_init failed or never ran */
		return;
	size_t chunks = atomic_load(&t->dir->chunks);
	for (size_t i = 0; i < chunks; i += CHUNKS_PER_REGION)
		region_unmap(atomic_load(&t->dir->chunk[i]), REGION_BYTES);
	dir_free(t->dir);
	tw__free(t->free, t->free_capacity * sizeof *t->free);
	tw__free(t->chunks_with_free, t->free_capacity / 64 * sizeof *t->chunks_with_free);
	pthread_mutex_destroy(&t->lock);
}

/* Lock held: room in the free-slot maps for chunk number `chunks`. */
static int free_maps_reserve(struct task_table *t, size_t chunks)
{
	if (chunks < t->free_capacity)
		return TW_OK;
	size_t capacity = t->free_capacity ? t->free_capacity * 2 : 64; /* a multiple of 64 */
	struct chunk_free *free = tw__alloc(capacity * sizeof *free);
	uint64_t *with_free = tw__alloc(capacity / 64 * sizeof *with_free);
	if (!free || !with_free) {
		if (free)
			tw__free(free, capacity * sizeof *free);
		if (with_free)
			tw__free(with_free, capacity / 64 * sizeof *with_free);
		return -TW_ENOMEM;
	}
	memset(free, 0, capacity * sizeof *free);
	memset(with_free, 0, capacity / 64 * sizeof *with_free);
	if (t->free_capacity) {
		memcpy(free, t->free, t->free_capacity * sizeof *free);
		memcpy(with_free, t->chunks_with_free, t->free_capacity / 64 * sizeof *with_free);
		tw__free(t->free, t->free_capacity * sizeof *free);
		tw__free(t->chunks_with_free, t->free_capacity / 64 * sizeof *with_free);
	}
	t->free = free;
	t->chunks_with_free = with_free;
	t->free_capacity = capacity;
	return TW_OK;
}

/* Adds one chunk, left in *fresh to populate; the lock is held. Old directories wait
 * for a grace period. */
static int grow(struct task_table *t, struct tw_task **fresh)
{
	struct task_dir *d = t->dir;
	size_t chunks = atomic_load_explicit(&d->chunks, memory_order_relaxed);
	if (chunks == (UINT32_MAX >> TABLE_CHUNK_BITS))
		return -TW_ELIMIT;
	int rc = free_maps_reserve(t, chunks);
	if (rc)
		return rc;
	if (chunks == d->capacity) {
		struct task_dir *bigger = dir_new(d->capacity * 2);
		if (!bigger)
			return -TW_ENOMEM;
		for (size_t i = 0; i < chunks; i++)
			atomic_init(&bigger->chunk[i], atomic_load(&d->chunk[i]));
		atomic_init(&bigger->chunks, chunks);
		/* What rcu_assign_pointer does (a release store), as an atomic that TSan sees:
		 * liburcu's is a plain store to it, so every reader's rcu_dereference raced
		 * with a growth (tw_find against tw_add, in tests/stress). Readers take the
		 * stores above with HANDOVER_ACQUIRE: their load is not an acquire to TSan. */
		HANDOVER_RELEASE(bigger);
		__atomic_store_n(&t->dir, bigger, __ATOMIC_RELEASE);
		urcu_memb_synchronize_rcu();
		after_grace_period();
		dir_free(d);
		d = bigger;
	}
	struct tw_task *chunk = chunk_map(d, chunks);
	if (!chunk)
		return -TW_ENOMEM; /* the bigger directory stays: the next growth uses it */
	atomic_store_explicit(&d->chunk[chunks], chunk, memory_order_release);
	*fresh = chunk;
	atomic_store_explicit(&d->chunks, chunks + 1, memory_order_release);
	return TW_OK;
}

/*
 * The first adds of an engine are the table's growth: a chunk mapped and faulted in every
 * 1724 adds, its region's huge page cleared by the kernel at the first. A program that
 * knows its capacity moves that to tw_engine_create (tw_config.reserve_tasks): the
 * directory sized once, every chunk mapped and populated, so that the adds only take slots.
 * Nothing reads the table yet: the directory is replaced without a grace period.
 */
int tw__table_reserve(struct task_table *t, uint64_t tasks)
{
	uint64_t chunks = tasks / TABLE_CHUNK_SLOTS + (tasks % TABLE_CHUNK_SLOTS != 0);
	if (chunks > (UINT32_MAX >> TABLE_CHUNK_BITS))
		return -TW_EINVAL;
	if (chunks > t->dir->capacity) {
		size_t capacity = t->dir->capacity;
		while (capacity < chunks)
			capacity *= 2;
		struct task_dir *d = dir_new(capacity);
		if (!d)
			return -TW_ENOMEM;
		dir_free(t->dir);
		t->dir = d;
	}
	pthread_mutex_lock(&t->lock);
	int rc = TW_OK;
	while (rc == TW_OK &&
	       atomic_load_explicit(&t->dir->chunks, memory_order_relaxed) < chunks) {
		struct tw_task *fresh = NULL;
		rc = grow(t, &fresh);
		if (rc == TW_OK)
			rc = populate_reserved(fresh, TABLE_CHUNK_ALIGN);
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* Lock held, t->free_slots > 0: the free slot of lowest address, taken off the maps. */
static uint32_t take_free_slot(struct task_table *t)
{
	size_t word = t->first_free_word;
	while (!t->chunks_with_free[word])
		word++;
	t->first_free_word = word;
	size_t c = word * 64 + (size_t)__builtin_ctzll(t->chunks_with_free[word]);
	struct chunk_free *f = &t->free[c];
	uint32_t w = f->first_word;
	while (!f->bits[w])
		w++;
	f->first_word = w;
	uint32_t bit = (uint32_t)__builtin_ctzll(f->bits[w]);
	f->bits[w] &= f->bits[w] - 1;
	if (--f->count == 0)
		t->chunks_with_free[word] &= ~(UINT64_C(1) << (c % 64));
	t->free_slots--;
	return (uint32_t)c << TABLE_CHUNK_BITS | (w * 64 + bit);
}

/* Lock held: slot index is free again. */
static void put_free_slot(struct task_table *t, uint32_t index)
{
	size_t c = index >> TABLE_CHUNK_BITS, word = c / 64;
	uint32_t slot = index & TABLE_CHUNK_MASK, w = slot / 64;
	struct chunk_free *f = &t->free[c];
	f->bits[w] |= UINT64_C(1) << (slot % 64);
	if (w < f->first_word)
		f->first_word = w;
	if (f->count++ == 0)
		t->chunks_with_free[word] |= UINT64_C(1) << (c % 64);
	if (word < t->first_free_word)
		t->first_free_word = word;
	t->free_slots++;
}

struct tw_task *tw__table_take(struct task_table *t, tw_id *id, int *error)
{
	struct tw_task *task = NULL, *fresh = NULL;
	pthread_mutex_lock(&t->lock);
	if (t->free_slots) {
		uint32_t index = take_free_slot(t);
		task = table_slot_at(t->dir, index);
		*id = make_id(task->free.generation + 1, index);
	} else {
		size_t room = atomic_load_explicit(&t->dir->chunks, memory_order_relaxed) *
			      TABLE_CHUNK_SLOTS;
		if (t->used == room && (*error = grow(t, &fresh)) != TW_OK)
			goto out;
		uint32_t index = t->used / TABLE_CHUNK_SLOTS << TABLE_CHUNK_BITS |
				 t->used % TABLE_CHUNK_SLOTS;
		task = table_slot_at(t->dir, index);
		*id = make_id(1, index);
		t->used++;
	}
out:
	pthread_mutex_unlock(&t->lock);
	if (fresh)
		populate(fresh, TABLE_CHUNK_ALIGN);
	return task;
}

void tw__table_give_back(struct task_table *t, struct tw_task *task)
{
	tw_id id = task->reaped.id;
	pthread_mutex_lock(&t->lock);
	/* A slot whose generations ran out is retired, so ids are never reused. */
	if (id_generation(id) != UINT32_MAX) {
		task->free.generation = id_generation(id);
		put_free_slot(t, id_index(id));
	}
	pthread_mutex_unlock(&t->lock);
	HANDOVER_RELEASE(t); /* to tw__engine_free, past urcu_memb_barrier (unseen by TSan) */
}

struct tw_task *tw__table_find(struct task_table *t, tw_id id)
{
	struct tw_task *task = tw__table_slot(t, id);
	return task && atomic_load_explicit(&task->id, memory_order_acquire) == id ? task : NULL;
}

/*
 * Chunks live as long as the engine, so only fetching a chunk's address needs
 * a read-side section: the caller reads the chunk outside one.
 */
struct tw_task *tw__table_chunk(struct task_table *t, size_t i)
{
	read_section_begin();
	struct task_dir *d = rcu_dereference(t->dir);
	HANDOVER_ACQUIRE(d);
	struct tw_task *chunk = NULL;
	if (i < atomic_load_explicit(&d->chunks, memory_order_acquire))
		chunk = atomic_load_explicit(&d->chunk[i], memory_order_acquire);
	read_section_end();
	return chunk;
}

/* fn runs outside a read-side section and may call user code (a release that destroys
 * another engine waits for grace periods). */
void tw__table_for_each(struct task_table *t, void (*fn)(struct tw_task *, void *), void *ctx)
{
	struct tw_task *chunk;
	for (size_t i = 0; (chunk = tw__table_chunk(t, i)); i++)
		for (size_t j = 0; j < TABLE_CHUNK_SLOTS; j++)
			fn(&chunk[j], ctx);
}
