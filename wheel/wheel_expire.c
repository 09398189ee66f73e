/*
 * wheel_expire.c - moving time on: cascading windows down a level, jumping
 * to the next occupied tick, handing out, and telling the next expiry. How
 * the levels and the cascade work is told in wheel.c.
 */
#include "wheel_impl.h"

#include <assert.h>

enum {
	SCAN_LIMIT = 8, /* tw__wheel_next_expiry reads slots this small exactly */
	/* Entries a cascade moves at least per visit: a visit costs ~300
	 * instructions of its own, and 128 entries, each a cache miss with
	 * many timers, bound one tick's extra work to 128 misses. */
	MOVE_BATCH = 128,
};

static inline struct wheel_entry *entry_of(struct wheel_link *l)
{
	return (struct wheel_entry *)l; /* link is the first member */
}

/* Rotates the low n bits of bits right by k < n. */
static inline uint64_t rotate_field(uint64_t bits, unsigned k, unsigned n)
{
	if (!k)
		return bits;
	uint64_t field = n < 64 ? (UINT64_C(1) << n) - 1 : ~UINT64_C(0);
	return ((bits >> k) | (bits << (n - k))) & field;
}

/*
 * How many slots on from index from of level L (itself included, going
 * round) the first occupied one is, or UINT64_MAX: the word holding from,
 * then the summary of the level's words says which word to read.
 */
static inline uint64_t first_occupied(const struct wheel *w, unsigned level, unsigned from)
{
	unsigned base = geometry[level].base / 64, words = slots_of(level) / 64;
	const uint64_t *word = &w->occupied[base];
	unsigned here = from / 64;
	uint64_t bits = word[here] & (~UINT64_C(0) << (from & 63));
	if (bits)
		return here * 64 + (unsigned)__builtin_ctzll(bits) - from;
	uint64_t summary = w->summary[base / 64] >> (base & 63);
	if (words < 64)
		summary &= (UINT64_C(1) << words) - 1;
	summary = rotate_field(summary, (here + 1) & (words - 1), words);
	if (!summary)
		return UINT64_MAX;
	unsigned found = (here + 1 + (unsigned)__builtin_ctzll(summary)) & (words - 1);
	unsigned index = found * 64 + (unsigned)__builtin_ctzll(word[found]);
	return (index - from) & (slots_of(level) - 1);
}

/* Activation tick of the first occupied window of level L at or after from. */
static uint64_t next_activation(const struct wheel *w, unsigned level, uint64_t from)
{
	uint64_t ahead = first_occupied(w, level, index_of(level, from));
	if (ahead == UINT64_MAX)
		return UINT64_MAX;
	return from + (ahead << shift_of(level)) - width_of(level);
}

/*
 * Moves up to n entries from the head of s (level L, the window ending at
 * end) one level down, keeping their order. The top level sets aside, in
 * order, what is due beyond the window (w->held: still counted in s), to
 * put back once the window is done. The source list is cut once.
 */
static inline __attribute__((always_inline)) void
move_down(struct wheel *w, unsigned level, struct wheel_slot *s, uint64_t end, uint32_t n)
{
	unsigned base = geometry[level - 1].base;
	unsigned shift = shift_of(level - 1), mask = slots_of(level - 1) - 1;
	uint32_t moved = 0;
	struct wheel_link *next = s->head.next;
	/* Below the top, count is the list's length (the top's also counts
	 * what it holds back): with n bounded by it, n alone ends the loop. */
	if (level != TOP && n > s->count)
		n = s->count;
	for (uint32_t i = 0; i < n && (level != TOP || next != &s->head); i++) {
		struct wheel_entry *e = entry_of(next);
		next = next->next;
		struct wheel_link *to_head = &w->held;
		if (level != TOP || e->due < end) {
			/* The slot's number from the due, not from to->index: with a
			 * constant level, no load. */
			unsigned index = base + ((unsigned)(e->due >> shift) & mask);
			struct wheel_slot *to = &w->slot[index];
			to_head = &to->head;
			e->slot = to;
			/* Level 0 counts nothing: its list tells if it was empty. */
			if (level - 1 ? !to->count++ : to_head->prev == to_head)
				mark_occupied(w, index);
			moved++;
		}
		struct wheel_link *last = to_head->prev;
		/* Interleaved, as in link_tail: no vector store to assemble. */
		e->link.prev = last;
		last->next = &e->link;
		e->link.next = to_head;
		to_head->prev = &e->link;
	}
	s->head.next = next;
	next->prev = &s->head;
	s->count -= moved;
	if (!s->count)
		mark_empty(w, s->index);
}

/* The top slot's window is done: what it set aside becomes its content. */
static void put_back_held(struct wheel *w, struct wheel_slot *s)
{
	struct wheel_link *held = &w->held;
	if (held->next == held)
		return;
	s->head.next = held->next;
	s->head.prev = held->prev;
	held->next->prev = &s->head;
	held->prev->next = &s->head;
	held->next = held->prev = held;
}

/*
 * Gives level L its share of work at tick t and says when it next needs some.
 * A window is moved down between its activation (the start of the window
 * before it) and its deadline, in batches of at least MOVE_BATCH entries so
 * that sparse windows cost one visit, and in equal shares per tick when
 * crowded, so that no tick carries more than count / ticks left.
 */
static void work_level(struct wheel *w, unsigned level, uint64_t t)
{
	uint64_t width = width_of(level);
	uint64_t start = w->draining[level];
	if (!start) {
		start = next_window(level, t);
		if (!slot_for(w, level, start)->count) {
			w->level_due[level] = next_activation(w, level, start + width);
			return;
		}
		w->draining[level] = start;
		w->limit[level - 1] = start;
	}
	struct wheel_slot *s = slot_for(w, level, start);
	uint64_t deadline = level == 1 ? start : start - width_of(level - 1);
	uint32_t left = s->count, share = left;
	assert(t <= deadline);
	if (t < deadline) {
		share = (uint32_t)((left + (deadline - t)) / (deadline - t + 1));
		if (share < MOVE_BATCH)
			share = left < MOVE_BATCH ? left : MOVE_BATCH;
	}
	/* Level 1 moves nearly every entry: its own copy, with constant geometry. */
	if (level == 1)
		move_down(w, 1, s, start + width, share);
	else
		move_down(w, level, s, start + width, share);
	left = wheel_slot_empty_(s) ? 0 : s->count;
	if (level > 1 && share) /* the first window below starts moving at our deadline */
		w->level_due[level - 1] = min_u64(w->level_due[level - 1], deadline);
	if (!left) {
		if (level == TOP)
			put_back_held(w, s);
		w->draining[level] = 0;
		w->limit[level - 1] = frontier_above(w, level - 1);
		w->level_due[level] = next_activation(w, level, start + width);
	} else {
		uint64_t gap = (deadline - t) / ((left + MOVE_BATCH - 1) / MOVE_BATCH);
		w->level_due[level] = min_u64(t + (gap ? gap : 1), deadline);
	}
}

/* Out of line, as jump_empty: seldom needed, and inlined they would burden
 * every step with their registers and set-up. */
static __attribute__((noinline)) void cascade(struct wheel *w, uint64_t t)
{
	uint64_t due = UINT64_MAX;
	for (unsigned level = TOP; level >= 1; level--) {
		/* Level 1 ends one window on the tick the next one must start. */
		while (w->level_due[level] <= t)
			work_level(w, level, t);
		due = min_u64(due, w->level_due[level]);
	}
	w->drain_due = due;
}

/* Everything is gone: time may jump, and no cascade is in flight. */
static __attribute__((noinline)) void jump_empty(struct wheel *w, uint64_t t)
{
	w->now = t;
	w->drain_due = UINT64_MAX;
	for (unsigned l = 1; l < WHEEL_LEVELS; l++) {
		w->draining[l] = 0;
		w->level_due[l] = UINT64_MAX;
	}
	update_limits(w);
}

/* Sets the current tick; the frontier above level L moves when t enters a new
 * window of level L + 1. */
static inline void set_now(struct wheel *w, uint64_t t)
{
	uint64_t crossed = t ^ w->now;
	w->now = t;
	for (unsigned level = 0; level < TOP && crossed >> shift_of(level + 1); level++)
		w->limit[level] = frontier_above(w, level);
}

/* The first tick after now with an entry on level 0, or UINT64_MAX. Going
 * round, the search ends on now's own slot, whose bit may be one that
 * wheel_hand_out_ left set: level 0 holds no entry due that far ahead. */
static inline uint64_t next_occupied_tick(const struct wheel *w)
{
	uint64_t ahead = first_occupied(w, 0, index_of(0, w->now + 1));
	return ahead >= slots_of(0) - 1 ? UINT64_MAX : w->now + 1 + ahead;
}

/* Moves now to the next tick where something happens, at most target. */
static void step(struct wheel *w, uint64_t target)
{
	uint64_t now = w->now, t = min_u64(target, next_occupied_tick(w));
	if (w->drain_due <= t) {
		set_now(w, w->drain_due > now ? w->drain_due : now + 1);
		cascade(w, w->now);
	} else {
		set_now(w, t);
	}
}

/*
 * Moves time on until the current tick has entries, and returns their slot;
 * NULL once at target.
 */
static inline struct wheel_slot *advance(struct wheel *w, uint64_t target)
{
	for (;;) {
		if (w->now >= target)
			return NULL;
		if (!w->count)
			jump_empty(w, target);
		else
			step(w, target);
		struct wheel_slot *s = wheel_now_slot_(w);
		if (!wheel_slot_empty_(s))
			return s;
	}
}

/*
 * The common step with sparse ticks: the next occupied tick lies in now's
 * bitmap word or the next one, in now's level-1 window (so no frontier
 * moves), before target and drain_due (no level needs work first), so time
 * just jumps there. Returns its slot, or NULL for advance() to take the
 * general way.
 */
static inline struct wheel_slot *next_in_word(struct wheel *w, uint64_t target)
{
	_Static_assert(WHEEL_LEVEL_SHIFT(1) >= 7, "two bitmap words can lie in one level-1 window");
	uint64_t now = w->now, t;
	uint64_t *word = &w->occupied[index_of(0, now) / 64];
	uint64_t bits = word[0] & ~bit((unsigned)now); /* now's slot is empty */
	uint64_t later = bits & (~UINT64_C(1) << (now & 63));
	if (later) {
		t = (now & ~UINT64_C(63)) + (unsigned)__builtin_ctzll(later);
	} else {
		/* The next word, if in now's level-1 window (level 0 wraps only
		 * at the end of one, too). */
		if (((now + 64) ^ now) >> shift_of(1) || !(later = word[1]))
			return NULL;
		t = ((now + 64) & ~UINT64_C(63)) + (unsigned)__builtin_ctzll(later);
	}
	if (t >= target || t >= w->drain_due)
		return NULL;
	if (!(word[0] = bits))
		mark_word_empty(w, index_of(0, now));
	w->now = t;
	return slot_for(w, 0, t);
}

/* The general way: time moves on through advance(). Out of line, so that
 * tw__wheel_expire_later_ needs no frame on its common path. */
static __attribute__((noinline)) struct wheel_entry *advance_and_hand_out(struct wheel *w,
									  uint64_t target)
{
	mark_empty(w, index_of(0, w->now)); /* wheel_hand_out_ left it set */
	struct wheel_slot *s = advance(w, target);
	return s ? wheel_hand_out_(w, s) : NULL;
}

struct wheel_entry *tw__wheel_expire_later_(struct wheel *w, uint64_t target)
{
	struct wheel_slot *s = next_in_word(w, target);
	return s ? wheel_hand_out_(w, s) : advance_and_hand_out(w, target);
}

/* The first due tick in a small slot; else when it needs work (early). */
static uint64_t list_expiry(const struct wheel_link *head)
{
	uint64_t first = UINT64_MAX;
	for (const struct wheel_link *l = head->next; l != head; l = l->next)
		first = min_u64(first, ((const struct wheel_entry *)l)->due);
	return first;
}

static uint64_t work_expiry(const struct wheel *w, unsigned level)
{
	uint64_t due = w->level_due[level];
	return due > w->now ? due : w->now + 1;
}

/*
 * The top level can hold entries back in a window earlier than their own, so
 * its first occupied slot need not hold its first due entry: read every slot
 * when they are few.
 */
static uint64_t top_expiry(const struct wheel *w)
{
	_Static_assert(WHEEL_TOP_BITS == 6, "the top level's bitmap is one word");
	uint64_t first = UINT64_MAX, bits = w->occupied[geometry[TOP].base / 64];
	uint32_t seen = 0;
	while (bits) {
		const struct wheel_slot *s = slot_at(w, TOP, (unsigned)__builtin_ctzll(bits));
		bits &= bits - 1;
		seen += s->count;
		if (seen > SCAN_LIMIT)
			return work_expiry(w, TOP);
		first = min_u64(first, list_expiry(&s->head));
	}
	return min_u64(first, list_expiry(&w->held));
}

uint64_t tw__wheel_next_expiry(const struct wheel *w)
{
	uint64_t now = w->now;
	if (!w->count)
		return UINT64_MAX;
	if (!wheel_slot_empty_(wheel_now_slot_(w)))
		return now;
	uint64_t first = next_occupied_tick(w);
	for (unsigned level = 1; level < TOP; level++) {
		uint64_t from = next_window(level, now);
		uint64_t ahead = first_occupied(w, level, index_of(level, from));
		if (ahead == UINT64_MAX)
			continue;
		const struct wheel_slot *s = slot_for(w, level, from + (ahead << shift_of(level)));
		first = min_u64(first, s->count > SCAN_LIMIT ? work_expiry(w, level) :
							       list_expiry(&s->head));
	}
	return min_u64(first, top_expiry(w));
}
