/*
 * wheel.c - the hierarchical timing wheel.
 *
 * Geometry. Level 0 has 4096 slots of one tick; level 1 has 512 slots of
 * 2048 ticks; from there each level's slots are 256 times wider; the top
 * level has 64 slots:
 *
 *   level  slots  slot width        level span
 *   0      4096   1 ms              4.1 s
 *   1      512    2.05 s (2^11)     17.5 min
 *   2      512    8.7 min (2^19)    3.1 days
 *   3      512    1.55 days (2^27)  2.2 years
 *   4      64     1.09 years (2^35) 69.7 years   (2^41 ms)
 *
 * Why so wide at the bottom: every move from one level to the next costs
 * instructions and, with many timers, a cache miss per entry. With 4096
 * one-tick slots, delays up to 2 to 4 s (heartbeats, bursts) are filed where
 * they fire and never move, and with 256-fold steps above, delays up to 9 to
 * 17 minutes move once. The occupancy bitmap has a summary word over its
 * 64-bit words, so finding the next occupied slot of a level stays a couple
 * of word reads, and tw__wheel_next_expiry O(levels).
 *
 * A due time beyond the top level's span waits in the top slot of its own
 * index; each time an earlier window of that slot is moved down, it is set
 * aside (w->held) in order and put back. So it never fires early and keeps
 * its place among entries due in the same tick.
 *
 * Each level but the top spans two windows (slots) of the level above. That
 * spare window is what makes cascading smooth: a slot of level L (window
 * [a, a + width(L))) is moved down while time is still in the window before
 * it, a little on every tick, so that it is empty by its deadline: a for
 * level 1, a - width(L - 1) above, when the first window of the level below
 * must itself start moving. A crowded slot thus never costs one tick more
 * than its share (count / ticks left).
 *
 * Where an entry goes. Let F(L) be the frontier of level L: every window of
 * level L below F(L) has been moved down. An entry due at T lives on the
 * lowest level L with T < F(L + 1). A level that is not cascading has
 * F(L) = start of the window after now's + width(L); one that is has F(L) =
 * the start of the window being moved (draining[L]), and entries added for
 * that window join its tail.
 *
 * Exactness and order. Level-0 slots are one tick wide, so an entry is handed
 * out at its tick. Lists are appended at the tail and cascaded from the head,
 * and an entry added later for the same tick always lands on the same or a
 * lower level than one added earlier, after that one has cascaded; so every
 * list stays in the order of the last add, and entries due in one tick come
 * out in that order.
 *
 * Work only when needed. level_due[L] is the first tick at which level L
 * needs attention (a window to start moving, a share of a crowded slot);
 * drain_due is their minimum. An advance jumps from one occupied level-0 tick
 * to the next and stops on the way only at drain_due, so a long gap costs
 * work for occupied slots and entries, not for the ticks elapsed.
 */
#include "wheel.h"

#include <assert.h>
#ifdef WHEEL_DEBUG
#include <stdio.h>
#endif

enum {
	TOP = WHEEL_LEVELS - 1,
	SCAN_LIMIT = 8, /* tw__wheel_next_expiry reads slots this small exactly */
	/* Entries a cascade moves at least per visit: a visit costs ~300
	 * instructions of its own, and 128 entries, each a cache miss with
	 * many timers, bound one tick's extra work to 128 misses. */
	MOVE_BATCH = 128,
};

/* First slot of each level in w->slot. */
enum {
	BASE1 = 1 << WHEEL_LEVEL0_BITS,
	BASE2 = BASE1 + (1 << WHEEL_UPPER_BITS),
	BASE3 = BASE2 + (1 << WHEEL_UPPER_BITS),
	BASE4 = BASE3 + (1 << WHEEL_UPPER_BITS),
};

/* Per level: log2 of its slot width and slot count, and its first slot. */
static const struct level_geometry {
	uint8_t shift, bits;
	uint16_t base;
} geometry[WHEEL_LEVELS] = {
	{ WHEEL_LEVEL_SHIFT(0), WHEEL_LEVEL0_BITS, 0 },
	{ WHEEL_LEVEL_SHIFT(1), WHEEL_UPPER_BITS, BASE1 },
	{ WHEEL_LEVEL_SHIFT(2), WHEEL_UPPER_BITS, BASE2 },
	{ WHEEL_LEVEL_SHIFT(3), WHEEL_UPPER_BITS, BASE3 },
	{ WHEEL_LEVEL_SHIFT(4), WHEEL_TOP_BITS, BASE4 },
};

/* What the code relies on. The cascade: every level spans two windows of the
 * one above. The bitmap: each level fills whole words, and the summary bits
 * of a level's words lie in one summary word. wheel.h's time limit: the top
 * level reaches 2^41. */
_Static_assert(WHEEL_LEVELS == 5 && BASE4 + (1 << WHEEL_TOP_BITS) == WHEEL_SLOT_COUNT,
	       "geometry[] lists every level");
_Static_assert(WHEEL_LEVEL0_BITS == WHEEL_LEVEL_SHIFT(1) + 1, "level 0 spans two windows");
_Static_assert(WHEEL_LEVEL_SHIFT(1) + WHEEL_UPPER_BITS == WHEEL_LEVEL_SHIFT(2) + 1,
	       "an upper level spans two windows");
_Static_assert(WHEEL_LEVEL0_BITS == 12 && WHEEL_UPPER_BITS >= 6 && WHEEL_TOP_BITS >= 6,
	       "level 0's words are summary word 0, the others' are whole words");
_Static_assert(BASE4 / 64 - 64 + (1 << WHEEL_TOP_BITS) / 64 <= 64, "summary word 1 is enough");
_Static_assert(WHEEL_LEVEL_SHIFT(TOP) + WHEEL_TOP_BITS == 41, "wheel.h: time below 2^64 - 2^42");

static inline unsigned shift_of(unsigned level)
{
	return geometry[level].shift;
}

static inline uint64_t width_of(unsigned level)
{
	return UINT64_C(1) << shift_of(level);
}

static inline unsigned slots_of(unsigned level)
{
	return 1u << geometry[level].bits;
}

/* Index within level L of the slot for tick t. */
static inline unsigned index_of(unsigned level, uint64_t t)
{
	return (unsigned)(t >> shift_of(level)) & (slots_of(level) - 1);
}

/* Start of the window of level L that follows the one holding t. */
static inline uint64_t next_window(unsigned level, uint64_t t)
{
	return ((t >> shift_of(level)) + 1) << shift_of(level);
}

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static inline uint64_t bit(unsigned n)
{
	return UINT64_C(1) << (n & 63);
}

static inline struct wheel_entry *entry_of(struct wheel_link *l)
{
	return (struct wheel_entry *)l; /* link is the first member */
}

/* Slot index of level L; const wheels too, for the functions that only read. */
static inline struct wheel_slot *slot_at(const struct wheel *w, unsigned level, unsigned index)
{
	return (struct wheel_slot *)&w->slot[geometry[level].base + index];
}

static inline struct wheel_slot *slot_for(const struct wheel *w, unsigned level, uint64_t t)
{
	return slot_at(w, level, index_of(level, t));
}

/* Occupancy of slot i of w->slot: a bit in a word, and the word's bit in the
 * summary, set while the word is not zero. */
static inline void mark_occupied(struct wheel *w, unsigned i)
{
	w->occupied[i / 64] |= bit(i);
	w->summary[i / 4096] |= bit(i / 64);
}

/* Clears slot i's bit; true if its word is now empty, and so its summary bit
 * must go too (mark_word_empty). */
static inline bool clear_slot_bit(struct wheel *w, unsigned i)
{
	return !(w->occupied[i / 64] &= ~bit(i));
}

static inline void mark_word_empty(struct wheel *w, unsigned i)
{
	w->summary[i / 4096] &= ~bit(i / 64);
}

static inline void mark_empty(struct wheel *w, unsigned i)
{
	if (clear_slot_bit(w, i))
		mark_word_empty(w, i);
}

/* mark_empty out of line: tw__wheel_remove's common path then needs no more
 * registers than the unlink itself. */
static __attribute__((noinline)) void slot_emptied(struct wheel *w, const struct wheel_slot *s)
{
	mark_empty(w, s->index);
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

/* Appends e to s; true if s was empty, and so needs its occupancy bit. The
 * caller counts it, above level 0. */
static inline bool link_tail(struct wheel_slot *s, struct wheel_entry *e)
{
	struct wheel_link *head = &s->head, *last = head->prev;
	/* Interleaved, so that the compiler does not pair e's two stores into
	 * a vector store, which costs two more instructions to assemble. */
	e->link.prev = last;
	last->next = &e->link;
	e->link.next = head;
	head->prev = &e->link;
	e->slot = s;
	return last == head;
}

/* Takes e out of its list, but leaves e->slot; true if the list is now
 * empty, and so its slot's occupancy bit must go. */
static inline bool unlink_entry(struct wheel *w, struct wheel_entry *e)
{
	struct wheel_slot *s = e->slot;
	struct wheel_link *prev = e->link.prev, *next = e->link.next;
	prev->next = next;
	next->prev = prev;
	/* Level 0 counts nothing: both neighbours are then the head. Above, the
	 * count says it: the top slot's also covers what it holds back. Told
	 * apart by address, which costs no load. */
	return s >= &w->slot[BASE1] ? !--s->count : prev == next;
}

/* The frontier of level L + 1: entries due before it live on level L or lower. */
static inline uint64_t frontier_above(const struct wheel *w, unsigned level)
{
	uint64_t cascading = w->draining[level + 1];
	return cascading ? cascading : next_window(level + 1, w->now) + width_of(level + 1);
}

/* Recomputes every frontier, after time jumped. */
static void update_limits(struct wheel *w)
{
	for (unsigned level = 0; level < TOP; level++)
		w->limit[level] = frontier_above(w, level);
}

void tw__wheel_init(struct wheel *w, uint64_t now)
{
	w->now = now;
	w->drain_due = UINT64_MAX;
	w->count = 0;
	for (unsigned l = 0; l < WHEEL_LEVELS; l++) {
		w->draining[l] = 0;
		w->level_due[l] = UINT64_MAX;
	}
	for (unsigned i = 0; i < sizeof w->summary / sizeof w->summary[0]; i++)
		w->summary[i] = 0;
	for (unsigned i = 0; i < WHEEL_WORDS; i++)
		w->occupied[i] = 0;
	for (unsigned i = 0; i < WHEEL_SLOT_COUNT; i++) {
		struct wheel_slot *s = &w->slot[i];
		s->head.next = s->head.prev = &s->head;
		s->count = 0;
		s->index = i;
	}
	w->held.next = w->held.prev = &w->held;
	update_limits(w);
}

/*
 * Start of the window that slot index of level L stands for: one of the
 * level's windows from its frontier on (the first window not yet moved down).
 */
static inline uint64_t window_of_slot(const struct wheel *w, unsigned level, unsigned index)
{
	uint64_t first = w->draining[level];
	if (!first)
		first = next_window(level, w->now) + width_of(level);
	uint64_t q = first >> shift_of(level);
	return (q + ((index - q) & (slots_of(level) - 1))) << shift_of(level);
}

/*
 * A slot of level L (above 0) just got its first entry: its window must start
 * moving down in time. The top level files a due beyond its span in the slot
 * of the same index, and keeps it there, in order, while that slot's earlier
 * windows pass. Out of line: only the first entry of a window comes here.
 */
static __attribute__((noinline)) void schedule_window(struct wheel *w, unsigned level,
						      const struct wheel_slot *s, uint64_t due)
{
	uint64_t start = level < TOP ? next_window(level, due) - width_of(level) :
				       window_of_slot(w, TOP, s->index - geometry[TOP].base);
	uint64_t start_moving = start - width_of(level);
	if (start_moving < w->level_due[level]) {
		w->level_due[level] = start_moving;
		w->drain_due = min_u64(w->drain_due, start_moving);
	}
}

/* The slot's first entry: its occupancy bit, and above level 0 its window's
 * work. Out of line, so that filing in an occupied slot stays short. */
static __attribute__((noinline)) void slot_filled(struct wheel *w, const struct wheel_entry *e,
						  unsigned level)
{
	mark_occupied(w, e->slot->index);
	if (level)
		schedule_window(w, level, e->slot, e->due);
}

/* Files e on level L; inlined with a constant level, its geometry folds away.
 * A slot that had entries already has its window's work scheduled. */
static inline __attribute__((always_inline)) void file_at(struct wheel *w, struct wheel_entry *e,
							  unsigned level)
{
	struct wheel_slot *s = slot_for(w, level, e->due);
	bool first = link_tail(s, e);
	if (level)
		s->count++;
	if (first)
		slot_filled(w, e, level);
}

/* Levels 2 and up: out of line, as few adds go that far. */
static __attribute__((noinline)) void file_upper(struct wheel *w, struct wheel_entry *e)
{
	for (unsigned level = 2; level < TOP; level++) {
		if (e->due < w->limit[level]) {
			file_at(w, e, level);
			return;
		}
	}
	file_at(w, e, TOP);
}

/* Levels 0 and 1 in line: they take every due up to 17 minutes at least. */
static inline void file(struct wheel *w, struct wheel_entry *e)
{
	if (e->due < w->limit[0])
		file_at(w, e, 0);
	else if (e->due < w->limit[1])
		file_at(w, e, 1);
	else
		file_upper(w, e);
}

void tw__wheel_add(struct wheel *w, struct wheel_entry *e, uint64_t due)
{
	assert(!e->slot);
	e->due = due > w->now ? due : w->now + 1;
	w->count++; /* first, so that file()'s calls can be tail calls */
	file(w, e);
}

void tw__wheel_remove(struct wheel *w, struct wheel_entry *e)
{
	assert(e->slot);
	struct wheel_slot *s = e->slot;
	w->count--;
	if (unlink_entry(w, e))
		slot_emptied(w, s);
	e->slot = NULL;
}

/* tw__wheel_reschedule when e was its slot's last entry: the slot's bits, then
 * filing. Out of line, so that the common path makes only tail calls. */
static __attribute__((noinline)) void refile_emptied(struct wheel *w, struct wheel_entry *e,
						     const struct wheel_slot *emptied)
{
	mark_empty(w, emptied->index);
	file(w, e);
}

void tw__wheel_reschedule(struct wheel *w, struct wheel_entry *e, uint64_t due)
{
	struct wheel_slot *s = e->slot;
	e->due = due > w->now ? due : w->now + 1;
	if (s) {
		/* e->slot stays: file() sets it anew. */
		if (unlink_entry(w, e)) {
			refile_emptied(w, e, s);
			return;
		}
	} else {
		w->count++;
	}
	file(w, e);
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

/* Build with -DWHEEL_DEBUG to hear which invariant failed. */
static bool check_failed(int line)
{
#ifdef WHEEL_DEBUG
	fprintf(stderr, "tw__wheel_check: invariant at wheel.c:%d does not hold\n", line);
#else
	(void)line;
#endif
	return false;
}

/* Invariants, for tests: list links and counts, bitmaps, where each entry
 * sits, and that no occupied window is left without a tick to move it. */
static bool check_list(const struct wheel_link *head, const struct wheel_slot *s, unsigned level,
		       uint64_t min_due, uint32_t *n)
{
	unsigned index = s->index - geometry[level].base, shift = shift_of(level);
	for (const struct wheel_link *l = head->next; l != head; l = l->next, (*n)++) {
		const struct wheel_entry *e = (const struct wheel_entry *)l;
		if (l->next->prev != l || l->prev->next != l || e->slot != s || e->due < min_due)
			return check_failed(__LINE__);
		if (level == 0 && e->due - min_due >= slots_of(0))
			return check_failed(__LINE__);
		/* Only the top level keeps dues beyond its span, in their index's slot. */
		if (level < TOP && index_of(level, e->due) != index)
			return check_failed(__LINE__);
		if (level == TOP && index_of(level, e->due) != index &&
		    (e->due >> shift) - (min_due >> shift) < slots_of(TOP))
			return check_failed(__LINE__);
	}
	return true;
}

static bool check_slot(const struct wheel *w, unsigned level, unsigned index, size_t *total)
{
	const struct wheel_slot *s = slot_at(w, level, index);
	uint64_t now = w->now, width = width_of(level);
	uint64_t start = level ? window_of_slot(w, level, index) : now;
	unsigned i = geometry[level].base + index;
	uint32_t n = 0;
	if (s->index != i || !check_list(&s->head, s, level, start, &n))
		return check_failed(__LINE__);
	bool draining = level && start == w->draining[level];
	/* A window that should be moving down already must at least be due for it. */
	if (n && level > 0 && !draining && start < next_window(level, now) + width &&
	    w->level_due[level] > now)
		return check_failed(__LINE__);
	if (level == TOP && draining && !check_list(&w->held, s, level, start + width, &n))
		return check_failed(__LINE__);
	/* Level 0 counts nothing; wheel_hand_out_ may leave the bit of now's
	 * emptied slot set. */
	bool stale_allowed = level == 0 && index == index_of(0, now) && !n;
	if (s->count != (level ? n : 0) ||
	    (!!(w->occupied[i / 64] & bit(i)) != (n > 0) && !stale_allowed))
		return check_failed(__LINE__);
	if (level > 0 && n > 0) {
		uint64_t deadline = level == 1 ? start : start - width_of(level - 1);
		uint64_t needed = draining ? deadline : start - width;
		if (w->level_due[level] > needed || w->drain_due > w->level_due[level])
			return check_failed(__LINE__);
	}
	*total += n;
	return true;
}

/* The summary has a bit set exactly for the bitmap words that are not zero. */
static bool check_summary(const struct wheel *w)
{
	for (unsigned j = 0; j < sizeof w->summary * 8; j++) {
		bool set = !!(w->summary[j / 64] & bit(j));
		if (set != (j < WHEEL_WORDS && w->occupied[j] != 0))
			return check_failed(__LINE__);
	}
	return true;
}

bool tw__wheel_check(const struct wheel *w)
{
	size_t total = 0;
	if (!w->draining[TOP] && w->held.next != &w->held)
		return check_failed(__LINE__);
	if (!check_summary(w))
		return false;
	for (unsigned level = 0; level < WHEEL_LEVELS; level++)
		for (unsigned index = 0; index < slots_of(level); index++)
			if (!check_slot(w, level, index, &total))
				return check_failed(__LINE__);
	return total == w->count;
}
