/*
 * test_table.c - the slot table's own promises (core/task_table.c), below the API: freed slots are
 * handed out again lowest address first whatever order they came back in, each with the
 * next generation, a slot whose generations ran out is never handed out again, and the
 * table grows by chunks once no slot is free.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "base.h"
#include "task.h"

enum { N = 3 * TABLE_CHUNK_SLOTS + 100 }; /* four chunks */

static struct task_table table;

static void setup(void)
{
	cr_assert_eq(tw__rcu_init(), TW_OK);
	cr_assert_eq(tw__table_init(&table), TW_OK);
}

static void teardown(void)
{
	tw__table_fini(&table);
}

/* The n-th slot handed out of a fresh table. */
static uint32_t fresh_index(size_t n)
{
	return (uint32_t)(n / TABLE_CHUNK_SLOTS << TABLE_CHUNK_BITS | n % TABLE_CHUNK_SLOTS);
}

static struct tw_task *take(tw_id *id)
{
	int error = TW_OK;
	struct tw_task *task = tw__table_take(&table, id, &error);
	cr_assert_not_null(task, "take: error %d", error);
	cr_assert_eq(tw__table_slot(&table, *id), task);
	return task;
}

static void give_back(struct tw_task *task, tw_id id)
{
	task->reaped.id = id;
	tw__table_give_back(&table, task);
}

static void shuffle(size_t *a, size_t n, unsigned seed)
{
	srand(seed);
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)rand() % i, t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
}

TestSuite(table, .init = setup, .fini = teardown);

Test(table, fresh_slots_come_in_order_then_chunks_grow)
{
	for (size_t i = 0; i < N; i++) {
		tw_id id;
		take(&id);
		cr_assert_eq(id_index(id), fresh_index(i), "slot %zu", i);
		cr_assert_eq(id_generation(id), 1);
	}
	cr_assert_not_null(tw__table_chunk(&table, 3));
	cr_assert_null(tw__table_chunk(&table, 4));
}

/* Slots of tasks that ended in random order come back lowest address first, so consecutive
 * adds walk memory forwards. */
Test(table, freed_slots_are_reused_lowest_address_first)
{
	static tw_id ids[N];
	static struct tw_task *tasks[N];
	static size_t order[N];
	for (size_t i = 0; i < N; i++) {
		tasks[i] = take(&ids[i]);
		order[i] = i;
	}
	shuffle(order, N, 1);
	for (size_t k = 0; k < N; k++)
		give_back(tasks[order[k]], ids[order[k]]);
	for (size_t i = 0; i < N; i++) {
		tw_id id;
		cr_assert_eq(take(&id), tasks[i], "slot %zu", i);
		cr_assert_eq(id, make_id(2, fresh_index(i)));
	}
	tw_id id; /* every freed slot taken: the table grows again */
	take(&id);
	cr_assert_eq(id_index(id), fresh_index(N));
}

/* A slot given back below the others is the next one out, even in an earlier chunk, and
 * slots given back in between interleave with what is left. */
Test(table, the_lowest_free_slot_goes_first_across_chunks)
{
	static tw_id ids[N];
	static struct tw_task *tasks[N];
	for (size_t i = 0; i < N; i++)
		tasks[i] = take(&ids[i]);
	size_t late = 3 * TABLE_CHUNK_SLOTS + 5, early = 70, middle = TABLE_CHUNK_SLOTS + 1;
	give_back(tasks[late], ids[late]);
	give_back(tasks[middle], ids[middle]);
	tw_id id;
	cr_assert_eq(take(&id), tasks[middle]);
	give_back(tasks[early], ids[early]);
	cr_assert_eq(take(&id), tasks[early]);
	cr_assert_eq(take(&id), tasks[late]);
	cr_assert_eq(id_generation(id), 2);
	take(&id); /* none free: a fresh one */
	cr_assert_eq(id_index(id), fresh_index(N));
}

/* A slot whose generation reached its last value is retired, so its ids are never reused. */
Test(table, a_slot_out_of_generations_is_retired)
{
	tw_id first, second;
	struct tw_task *a = take(&first);
	struct tw_task *b = take(&second);
	give_back(a, make_id(UINT32_MAX, id_index(first)));
	give_back(b, second);
	tw_id id;
	cr_assert_eq(take(&id), b);
	cr_assert_eq(id, make_id(2, id_index(second)));
	take(&id);
	cr_assert_eq(id_index(id), fresh_index(2), "the retired slot stays out");
}

/* Chunks are carved in order from regions of 2 MiB aligned to 2 MiB (huge-page candidates),
 * each chunk aligned to its own size, and a fresh chunk reads as zeros (free, generation 0). */
Test(table, chunks_fill_aligned_two_mebibyte_regions_in_order)
{
	enum { REGION = 2 << 20, PER_REGION = REGION / TABLE_CHUNK_ALIGN };
	size_t chunks = PER_REGION + 2, tasks = chunks * TABLE_CHUNK_SLOTS;
	for (size_t i = 0; i < tasks; i++) {
		tw_id id;
		take(&id);
	}
	for (size_t c = 0; c < chunks; c++) {
		uintptr_t at = (uintptr_t)tw__table_chunk(&table, c);
		cr_assert_neq(at, 0, "chunk %zu", c);
		cr_assert_eq(at % TABLE_CHUNK_ALIGN, 0, "chunk %zu", c);
		uintptr_t region = (uintptr_t)tw__table_chunk(&table, c - c % PER_REGION);
		cr_assert_eq(region % REGION, 0, "chunk %zu's region", c);
		cr_assert_eq(at, region + c % PER_REGION * TABLE_CHUNK_ALIGN, "chunk %zu", c);
	}
	tw_id id; /* the first slot of the next chunk, never written before */
	struct tw_task *fresh = take(&id);
	cr_assert_eq(id_index(id), fresh_index(tasks));
	cr_assert_eq(fresh->free.generation, 0);
	const unsigned char *cold = (const unsigned char *)task_cold(fresh);
	for (size_t i = 0; i < sizeof(struct task_cold); i++)
		cr_assert_eq(cold[i], 0, "byte %zu of a fresh cold part", i);
}
