/*
 * wheel.c - the hierarchical timing wheel.
 *
 * Geometry. Level L has 64 slots, each one window of 32^L ticks wide:
 *
 *   level  slot width        level span (64 slots)
 *   0      1 ms              64 ms
 *   1      32 ms             2.0 s
 *   2      1.024 s           65.5 s
 *   3      32.8 s            35 min
 *   4      17.5 min          18.6 h
 *   5      9.3 h             24.9 days
 *   6      12.4 days         2.2 years
 *   7      1.09 years        69.7 years   (2^41 ms)
 *
 * A due time beyond the top level's span waits in the top slot of its own
 * index; each time an earlier window of that slot is moved down, it is set
 * aside (w->held) in order and put back. So it never fires early and keeps
 * its place among entries due in the same tick.
 *
 * A level spans two windows of the level above. That spare window is what
 * makes cascading smooth: a slot of level L (window [a, a + 32^L)) is moved
 * down while time is still in the window before it, a little on every tick,
 * so that it is empty by its deadline: a for level 1, a - 32^(L-1) above, when
 * the first window of the level below must itself start moving. A crowded
 * slot thus never costs one tick more than its share (count / ticks left).
 *
 * Where an entry goes. Let F(L) be the frontier of level L: every window of
 * level L below F(L) has been moved down. An entry due at T lives on the
 * lowest level L with T < F(L + 1). A level that is not cascading has
 * F(L) = start of the window after now's + 32^L; one that is has F(L) = the
 * start of the window being moved (draining[L]), and entries added for that
 * window join its tail.
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
	SLOT_MASK = WHEEL_SLOTS - 1,
	SCAN_LIMIT = 8,  /* wheel_next_expiry reads slots this small exactly */
	MOVE_BATCH = 64, /* entries a cascade moves at least per visit */
};

static inline unsigned shift_of(unsigned level)
{
	return level * WHEEL_LEVEL_BITS;
}

static inline uint64_t width_of(unsigned level)
{
	return UINT64_C(1) << shift_of(level);
}

/* Start of the window of level L that follows the one holding t. */
static inline uint64_t next_window(unsigned level, uint64_t t)
{
	return ((t >> shift_of(level)) + 1) << shift_of(level);
}

static inline uint64_t rotate_right(uint64_t bits, unsigned n)
{
	n &= 63;
	return n ? (bits >> n) | (bits << (64 - n)) : bits;
}

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static inline struct wheel_entry *entry_of(struct wheel_link *l)
{
	return (struct wheel_entry *)l; /* link is the first member */
}

static inline struct wheel_slot *slot_for(struct wheel *w, unsigned level, uint64_t t)
{
	return &w->slot[level][(t >> shift_of(level)) & SLOT_MASK];
}

static inline void link_tail(struct wheel *w, struct wheel_slot *s, struct wheel_entry *e)
{
	struct wheel_link *head = &s->head, *last = head->prev;
	e->link.prev = last;
	e->link.next = head;
	last->next = &e->link;
	head->prev = &e->link;
	e->slot = s;
	if (!s->count++)
		w->occupied[s->level] |= UINT64_C(1) << s->index;
}

static inline void unlink_entry(struct wheel *w, struct wheel_entry *e)
{
	struct wheel_slot *s = e->slot;
	e->link.prev->next = e->link.next;
	e->link.next->prev = e->link.prev;
	e->slot = NULL;
	if (!--s->count)
		w->occupied[s->level] &= ~(UINT64_C(1) << s->index);
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

static inline unsigned level_for(const struct wheel *w, uint64_t due)
{
	unsigned level = 0;
	while (level < TOP && due >= w->limit[level])
		level++;
	return level;
}

void wheel_init(struct wheel *w, uint64_t now)
{
	w->now = now;
	w->drain_due = UINT64_MAX;
	w->count = 0;
	for (unsigned l = 0; l < WHEEL_LEVELS; l++) {
		w->occupied[l] = 0;
		w->draining[l] = 0;
		w->level_due[l] = UINT64_MAX;
		for (unsigned i = 0; i < WHEEL_SLOTS; i++) {
			struct wheel_slot *s = &w->slot[l][i];
			s->head.next = s->head.prev = &s->head;
			s->count = 0;
			s->level = (uint16_t)l;
			s->index = (uint16_t)i;
		}
	}
	w->held.next = w->held.prev = &w->held;
	update_limits(w);
}

/*
 * Start of the window that slot index of level L stands for: one of the 64
 * windows from the level's frontier on (the first window not yet moved down).
 */
static inline uint64_t window_of_slot(const struct wheel *w, unsigned level, unsigned index)
{
	uint64_t first = w->draining[level];
	if (!first)
		first = next_window(level, w->now) + width_of(level);
	uint64_t q = first >> shift_of(level);
	return (q + ((index - q) & SLOT_MASK)) << shift_of(level);
}

static inline void file(struct wheel *w, struct wheel_entry *e)
{
	unsigned level = level_for(w, e->due);
	struct wheel_slot *s = slot_for(w, level, e->due);
	link_tail(w, s, e);
	/* A slot that had entries already has its window's work scheduled. */
	if (level == 0 || s->count > 1)
		return;
	/* The top level files a due beyond its span in the slot of the same
	 * index, and keeps it there, in order, while that slot's earlier
	 * windows pass. */
	uint64_t start = level < TOP ? next_window(level, e->due) - width_of(level) :
				       window_of_slot(w, TOP, s->index);
	uint64_t start_moving = start - width_of(level);
	if (start_moving < w->level_due[level]) {
		w->level_due[level] = start_moving;
		w->drain_due = min_u64(w->drain_due, start_moving);
	}
}

void wheel_add(struct wheel *w, struct wheel_entry *e, uint64_t due)
{
	assert(!e->slot);
	e->due = due > w->now ? due : w->now + 1;
	file(w, e);
	w->count++;
}

void wheel_remove(struct wheel *w, struct wheel_entry *e)
{
	assert(e->slot);
	unlink_entry(w, e);
	w->count--;
}

void wheel_reschedule(struct wheel *w, struct wheel_entry *e, uint64_t due)
{
	if (e->slot)
		unlink_entry(w, e);
	else
		w->count++;
	e->due = due > w->now ? due : w->now + 1;
	file(w, e);
}

/* Activation tick of the first occupied window of level L at or after from. */
static uint64_t next_activation(const struct wheel *w, unsigned level, uint64_t from)
{
	uint64_t bits = rotate_right(w->occupied[level], (unsigned)(from >> shift_of(level)));
	if (!bits)
		return UINT64_MAX;
	uint64_t start = from + ((uint64_t)__builtin_ctzll(bits) << shift_of(level));
	return start - width_of(level);
}

/*
 * Moves up to n entries from the head of s (level L, the window ending at
 * end) one level down, keeping their order. The top level sets aside, in
 * order, what is due beyond the window (w->held: still counted in s), to
 * put back once the window is done. The source list is cut once.
 */
static void move_down(struct wheel *w, unsigned level, struct wheel_slot *s, uint64_t end,
		      uint32_t n)
{
	struct wheel_slot *below = w->slot[level - 1];
	unsigned shift = shift_of(level - 1);
	uint64_t filled = 0;
	uint32_t moved = 0;
	struct wheel_link *next = s->head.next;
	for (uint32_t i = 0; i < n && next != &s->head; i++) {
		struct wheel_entry *e = entry_of(next);
		next = next->next;
		struct wheel_link *to_head = &w->held;
		if (level != TOP || e->due < end) {
			unsigned index = (e->due >> shift) & SLOT_MASK;
			struct wheel_slot *to = &below[index];
			to_head = &to->head;
			e->slot = to;
			to->count++;
			filled |= UINT64_C(1) << index;
			moved++;
		}
		struct wheel_link *last = to_head->prev;
		e->link.prev = last;
		e->link.next = to_head;
		last->next = &e->link;
		to_head->prev = &e->link;
	}
	w->occupied[level - 1] |= filled;
	s->head.next = next;
	next->prev = &s->head;
	s->count -= moved;
	if (!s->count)
		w->occupied[level] &= ~(UINT64_C(1) << s->index);
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
	uint64_t deadline = level == 1 ? start : start - (width >> WHEEL_LEVEL_BITS);
	uint32_t left = s->count, share = left;
	assert(t <= deadline);
	if (t < deadline) {
		share = (uint32_t)((left + (deadline - t)) / (deadline - t + 1));
		if (share < MOVE_BATCH)
			share = left < MOVE_BATCH ? left : MOVE_BATCH;
	}
	move_down(w, level, s, start + width, share);
	left = s->head.next == &s->head ? 0 : s->count;
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

static void cascade(struct wheel *w, uint64_t t)
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
static void jump_empty(struct wheel *w, uint64_t t)
{
	w->now = t;
	w->drain_due = UINT64_MAX;
	for (unsigned l = 1; l < WHEEL_LEVELS; l++) {
		w->draining[l] = 0;
		w->level_due[l] = UINT64_MAX;
	}
	update_limits(w);
}

/* Sets the current tick; frontiers move when t enters a new window of level 1. */
static inline void set_now(struct wheel *w, uint64_t t)
{
	uint64_t crossed = (t ^ w->now) >> WHEEL_LEVEL_BITS;
	w->now = t;
	for (unsigned level = 0; crossed && level < TOP; level++) {
		w->limit[level] = frontier_above(w, level);
		crossed >>= WHEEL_LEVEL_BITS;
	}
}

/* The first tick after now with an entry on level 0, or UINT64_MAX. */
static inline uint64_t next_occupied_tick(const struct wheel *w)
{
	uint64_t ticks = rotate_right(w->occupied[0], (unsigned)(w->now + 1));
	return ticks ? w->now + 1 + (uint64_t)__builtin_ctzll(ticks) : UINT64_MAX;
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

struct wheel_entry *wheel_expire(struct wheel *w, uint64_t target)
{
	for (;;) {
		struct wheel_slot *s = &w->slot[0][w->now & SLOT_MASK];
		if (s->count) {
			struct wheel_entry *e = entry_of(s->head.next);
			unlink_entry(w, e);
			w->count--;
			return e;
		}
		if (w->now >= target)
			return NULL;
		if (!w->count)
			jump_empty(w, target);
		else
			step(w, target);
	}
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
	uint64_t first = UINT64_MAX, bits = w->occupied[TOP];
	uint32_t seen = 0;
	while (bits) {
		const struct wheel_slot *s = &w->slot[TOP][__builtin_ctzll(bits)];
		bits &= bits - 1;
		seen += s->count;
		if (seen > SCAN_LIMIT)
			return work_expiry(w, TOP);
		first = min_u64(first, list_expiry(&s->head));
	}
	return min_u64(first, list_expiry(&w->held));
}

uint64_t wheel_next_expiry(const struct wheel *w)
{
	uint64_t now = w->now;
	if (!w->count)
		return UINT64_MAX;
	if (w->slot[0][now & SLOT_MASK].count)
		return now;
	uint64_t first = next_occupied_tick(w);
	for (unsigned level = 1; level < TOP; level++) {
		uint64_t from = next_window(level, now);
		uint64_t bits =
			rotate_right(w->occupied[level], (unsigned)(from >> shift_of(level)));
		if (!bits)
			continue;
		uint64_t start = from + ((uint64_t)__builtin_ctzll(bits) << shift_of(level));
		const struct wheel_slot *s = slot_for((struct wheel *)w, level, start);
		first = min_u64(first, s->count > SCAN_LIMIT ? work_expiry(w, level) :
							       list_expiry(&s->head));
	}
	return min_u64(first, top_expiry(w));
}

/* Build with -DWHEEL_DEBUG to hear which invariant failed. */
static bool check_failed(int line)
{
#ifdef WHEEL_DEBUG
	fprintf(stderr, "wheel_check: invariant at wheel.c:%d does not hold\n", line);
#else
	(void)line;
#endif
	return false;
}

/* Invariants, for tests: list links and counts, bitmaps, where each entry
 * sits, and that no occupied window is left without a tick to move it. */
static bool check_list(const struct wheel_link *head, const struct wheel_slot *s, uint64_t min_due,
		       uint32_t *n)
{
	for (const struct wheel_link *l = head->next; l != head; l = l->next, (*n)++) {
		const struct wheel_entry *e = (const struct wheel_entry *)l;
		if (l->next->prev != l || l->prev->next != l || e->slot != s || e->due < min_due)
			return check_failed(__LINE__);
		if (s->level == 0 &&
		    (e->due - min_due > SLOT_MASK || (e->due & SLOT_MASK) != s->index))
			return check_failed(__LINE__);
		/* Only the top level keeps dues beyond its span, in their index's slot. */
		unsigned shift = shift_of(s->level);
		if (s->level < TOP && ((e->due >> shift) & SLOT_MASK) != s->index)
			return check_failed(__LINE__);
		if (s->level == TOP && ((e->due >> shift) & SLOT_MASK) != s->index &&
		    (e->due >> shift) - (min_due >> shift) < WHEEL_SLOTS)
			return check_failed(__LINE__);
	}
	return true;
}

static bool check_slot(const struct wheel *w, unsigned level, unsigned index, size_t *total)
{
	const struct wheel_slot *s = &w->slot[level][index];
	uint64_t now = w->now, width = width_of(level);
	uint64_t start = level ? window_of_slot(w, level, index) : now;
	uint32_t n = 0;
	if (s->level != level || s->index != index || !check_list(&s->head, s, start, &n))
		return check_failed(__LINE__);
	bool draining = level && start == w->draining[level];
	/* A window that should be moving down already must at least be due for it. */
	if (n && level > 0 && !draining && start < next_window(level, now) + width &&
	    w->level_due[level] > now)
		return check_failed(__LINE__);
	if (level == TOP && draining && !check_list(&w->held, s, start + width, &n))
		return check_failed(__LINE__);
	if (n != s->count || !!(w->occupied[level] & (UINT64_C(1) << index)) != (n > 0))
		return check_failed(__LINE__);
	if (level > 0 && n > 0) {
		uint64_t deadline = level == 1 ? start : start - (width >> WHEEL_LEVEL_BITS);
		uint64_t needed = draining ? deadline : start - width;
		if (w->level_due[level] > needed || w->drain_due > w->level_due[level])
			return check_failed(__LINE__);
	}
	*total += n;
	return true;
}

bool wheel_check(const struct wheel *w)
{
	size_t total = 0;
	if (!w->draining[TOP] && w->held.next != &w->held)
		return check_failed(__LINE__);
	for (unsigned level = 0; level < WHEEL_LEVELS; level++)
		for (unsigned index = 0; index < WHEEL_SLOTS; index++)
			if (!check_slot(w, level, index, &total))
				return check_failed(__LINE__);
	return total == w->count;
}
