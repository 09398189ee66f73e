/*
 * reference_model.c - see reference_model.h.
 */
#include "reference_model.h"

static bool key_before(const struct model_key *a, const struct model_key *b)
{
	return a->due != b->due ? a->due < b->due : a->seq < b->seq;
}

static void heap_swap(struct model *m, size_t i, size_t j)
{
	struct model_key tmp = m->heap[i];
	m->heap[i] = m->heap[j];
	m->heap[j] = tmp;
}

static void heap_sift_down(struct model *m, size_t i)
{
	for (;;) {
		size_t least = i, left = 2 * i + 1, right = 2 * i + 2;
		if (left < m->heap_size && key_before(&m->heap[left], &m->heap[least]))
			least = left;
		if (right < m->heap_size && key_before(&m->heap[right], &m->heap[least]))
			least = right;
		if (least == i)
			return;
		heap_swap(m, i, least);
		i = least;
	}
}

static bool key_is_stale(const struct model *m, const struct model_key *k)
{
	const struct model_timer *t = &m->timer[k->id];
	return !t->pending || t->seq != k->seq;
}

/* Drops the stale keys by rebuilding the heap from the live timers. */
static void heap_rebuild(struct model *m)
{
	m->heap_size = 0;
	for (uint32_t id = 0; id < m->n_timers; id++) {
		const struct model_timer *t = &m->timer[id];
		if (t->pending)
			m->heap[m->heap_size++] =
				(struct model_key){ .due = t->due, .seq = t->seq, .id = id };
	}
	for (size_t i = m->heap_size / 2; i-- > 0;)
		heap_sift_down(m, i);
}

static void heap_push(struct model *m, struct model_key key)
{
	if (m->heap_size == HEAP_CAPACITY)
		heap_rebuild(m);
	size_t i = m->heap_size++;
	m->heap[i] = key;
	while (i > 0 && key_before(&m->heap[i], &m->heap[(i - 1) / 2])) {
		heap_swap(m, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void heap_pop(struct model *m)
{
	m->heap[0] = m->heap[--m->heap_size];
	heap_sift_down(m, 0);
}

const struct model_key *model_earliest(struct model *m)
{
	while (m->heap_size > 0 && key_is_stale(m, &m->heap[0]))
		heap_pop(m);
	return m->heap_size > 0 ? &m->heap[0] : NULL;
}

void model_init(struct model *m, uint64_t now, size_t n_timers)
{
	m->now = now;
	m->last_seq = 0;
	m->count = 0;
	m->n_timers = n_timers;
	m->heap_size = 0;
	for (size_t i = 0; i < n_timers; i++)
		m->timer[i] = (struct model_timer){ .pending = false };
}

void model_file(struct model *m, uint32_t id, uint64_t due)
{
	struct model_timer *t = &m->timer[id];
	if (!t->pending)
		m->count++;
	t->pending = true;
	t->due = due > m->now ? due : m->now + 1;
	t->seq = ++m->last_seq;
	heap_push(m, (struct model_key){ .due = t->due, .seq = t->seq, .id = id });
}

void model_remove(struct model *m, uint32_t id)
{
	m->timer[id].pending = false;
	m->count--;
}

int64_t model_expire(struct model *m, uint64_t target)
{
	const struct model_key *first = model_earliest(m);
	if (first == NULL || first->due > target) {
		if (target > m->now)
			m->now = target;
		return NO_TIMER;
	}
	uint32_t id = first->id;
	m->now = first->due;
	model_remove(m, id);
	heap_pop(m);
	return id;
}
