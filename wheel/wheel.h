/*
 * wheel.h - a hierarchical timing wheel with 1 ms slots, in virtual time.
 *
 * The wheel knows nothing of threads or clocks. Time is an unsigned 64-bit
 * count of ticks (milliseconds) that the owner advances with wheel_expire().
 * Entries are intrusive: the owner embeds a struct wheel_entry in its own
 * object, so the wheel never allocates. Nothing here is thread-safe: one
 * owner calls everything.
 *
 * Guarantees (see wheel.c for how they are kept):
 *  - exact: an entry due at tick T is handed out by the expire call that
 *    reaches T, never earlier, never later; an entry added with a due time at
 *    or before the current tick is due at the next tick;
 *  - stable: entries due in the same tick come out in the order in which they
 *    were last added or rescheduled;
 *  - re-entrant: between two wheel_expire() calls of one advance the owner may
 *    add, remove or reschedule any entry, the one in hand included;
 *  - O(1) add, remove and reschedule, by relinking; expiry and cascading cost
 *    work proportional to occupied slots and entries, not to ticks elapsed,
 *    and cascading of a crowded slot is spread over the ticks before it.
 *
 * Time must stay below 2^64 - 2^42 ticks (half a billion years of ms); due
 * times may be anything up to UINT64_MAX and never fire early.
 */
#ifndef TICKWHEEL_WHEEL_H
#define TICKWHEEL_WHEEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Geometry (see wheel.c): level 0 has 4096 one-tick slots, so that delays up
 * to 2 to 4 s are filed where they fire and never cascade; level 1's slots
 * are 2048 ticks wide, and from there each level's slots are 256 times wider
 * than the level below's. Every level but the top spans two slots (windows)
 * of the level above. The top level's 64 slots of 2^35 ticks reach 2^41.
 */
enum {
	WHEEL_LEVELS = 5,
	WHEEL_LEVEL0_BITS = 12, /* level 0: 4096 slots of 1 tick, 4.1 s */
	WHEEL_UPPER_BITS = 9,   /* levels 1 to 3: 512 slots each */
	WHEEL_FANOUT_BITS = 8,  /* above level 1, slots 256 times wider per level */
	WHEEL_TOP_BITS = 6,     /* level 4: 64 slots of 2^35 ticks, 2^41 in all */
	WHEEL_SLOT_COUNT = (1 << WHEEL_LEVEL0_BITS) + (WHEEL_LEVELS - 2) * (1 << WHEEL_UPPER_BITS) +
			   (1 << WHEEL_TOP_BITS),
	WHEEL_WORDS = WHEEL_SLOT_COUNT / 64, /* 64-bit words of the occupancy bitmap */
};

/* log2 of the width in ticks of a slot of level L: 0, 11, 19, 27, 35. */
#define WHEEL_LEVEL_SHIFT(level) \
	((level) ? WHEEL_LEVEL0_BITS - 1 + WHEEL_FANOUT_BITS * ((level)-1) : 0)

struct wheel_link {
	struct wheel_link *next, *prev;
};

struct wheel_slot {
	struct wheel_link head; /* circular list, oldest first */
	uint32_t count;         /* entries in the list; level 0 leaves it 0 */
	uint32_t index;         /* in wheel.slot, to clear its occupancy bit */
};

/* Embed in the owner's object; 32 bytes. Treat the fields as private. */
struct wheel_entry {
	struct wheel_link link;
	uint64_t due;            /* the tick it will be handed out at */
	struct wheel_slot *slot; /* NULL while not in the wheel */
};

/* About 134 KiB: keep it off small stacks. The slots come first: at offset 0
 * a slot and its count are addressed from the wheel and the index alone,
 * which saves add and reschedule an address computation each. */
struct wheel {
	struct wheel_slot slot[WHEEL_SLOT_COUNT]; /* level 0's, then level 1's, ... */
	uint64_t now;       /* every entry due at or before now was handed out */
	uint64_t drain_due; /* no level above 0 needs work before this tick */
	size_t count;
	uint64_t draining[WHEEL_LEVELS];  /* start of the window being cascaded, or 0 */
	uint64_t level_due[WHEEL_LEVELS]; /* next tick at which the level needs work */
	uint64_t limit[WHEEL_LEVELS];     /* entries due before limit[L] go to level <= L */
	uint64_t summary[(WHEEL_WORDS + 63) / 64]; /* bit j: occupied word j is not 0 */
	uint64_t occupied[WHEEL_WORDS];            /* bit i: slot i is not empty */
	struct wheel_link held; /* set aside from the top slot being moved: due later */
};

/* Starts an empty wheel whose current tick is now. */
void tw__wheel_init(struct wheel *w, uint64_t now);

/* Marks an entry as not in any wheel. Call once before its first add. */
static inline void wheel_entry_init(struct wheel_entry *e)
{
	e->slot = NULL;
}

static inline bool wheel_entry_pending(const struct wheel_entry *e)
{
	return e->slot != NULL;
}

/* The tick at which a pending entry will be handed out (or was, once out). */
static inline uint64_t wheel_entry_due(const struct wheel_entry *e)
{
	return e->due;
}

static inline uint64_t wheel_now(const struct wheel *w)
{
	return w->now;
}

static inline size_t wheel_count(const struct wheel *w)
{
	return w->count;
}

/* Files e, which must not be pending, to be handed out at tick due
 * (or at now + 1 if due <= now). */
void tw__wheel_add(struct wheel *w, struct wheel_entry *e, uint64_t due);

/* Takes e, which must be pending, out of the wheel. */
void tw__wheel_remove(struct wheel *w, struct wheel_entry *e);

/* Moves e, pending or not, to tick due; it then counts as last added. */
void tw__wheel_reschedule(struct wheel *w, struct wheel_entry *e, uint64_t due);

/* Private to the inline functions here and to the wheel's .c files: the slot
 * of the current tick, and whether a slot's list is empty (level 0 counts
 * nothing). */
static inline struct wheel_slot *wheel_now_slot_(const struct wheel *w)
{
	return (struct wheel_slot *)&w->slot[w->now & ((1u << WHEEL_LEVEL0_BITS) - 1)];
}

static inline bool wheel_slot_empty_(const struct wheel_slot *s)
{
	return s->head.next == &s->head;
}

/* Private to wheel_expire() and the wheel's .c files: takes out the head of
 * s, the slot of the current tick. Its occupancy bit stays set when it
 * empties: wheel_expire.c clears it once time leaves the tick. */
static inline struct wheel_entry *wheel_hand_out_(struct wheel *w, struct wheel_slot *s)
{
	struct wheel_entry *e = (struct wheel_entry *)s->head.next;
	struct wheel_link *next = e->link.next;
	w->count--;
	s->head.next = next;
	next->prev = &s->head;
	e->slot = NULL;
	return e;
}

/* Private: wheel_expire() once the current tick has no entry left. */
struct wheel_entry *tw__wheel_expire_later_(struct wheel *w, uint64_t target);

/*
 * Advances the wheel towards tick target and hands out the next due entry,
 * already taken out of the wheel (no longer pending), or NULL once every entry
 * due at or before target has been handed out. Call it in a loop; wheel_now()
 * tells the tick of the entry in hand. A target behind the current tick does
 * not move time back. In line: most calls hand out the next entry of the
 * current tick, which is a few loads and stores.
 */
static inline struct wheel_entry *wheel_expire(struct wheel *w, uint64_t target)
{
	struct wheel_slot *s = wheel_now_slot_(w);
	if (wheel_slot_empty_(s))
		return tw__wheel_expire_later_(w, target);
	return wheel_hand_out_(w, s);
}

/*
 * A hint that changes nothing: starts loading the entry that the wheel_expire()
 * call after next hands out at the current tick, if there is one, so that an
 * owner who touches each entry it is handed overlaps those cache misses.
 */
static inline void wheel_prefetch(const struct wheel *w)
{
	const struct wheel_slot *s = wheel_now_slot_(w);
	const struct wheel_link *second = s->head.next->next;
	if (second != &s->head)
		__builtin_prefetch(second, 1);
}

/*
 * A look ahead that changes nothing, for an owner that prepares for a tick: the first entry
 * filed to be handed out at tick, or NULL when none is filed there yet (one due at tick may
 * still be waiting on a level above, to come down before it). wheel_next_at() gives the
 * entries after it, in the order they come out, then NULL. No change may come between.
 */
static inline const struct wheel_entry *wheel_first_at(const struct wheel *w, uint64_t tick)
{
	if (tick <= w->now || tick - w->now >= (UINT64_C(1) << WHEEL_LEVEL0_BITS))
		return NULL; /* not on level 0 */
	const struct wheel_slot *s = &w->slot[tick & ((1u << WHEEL_LEVEL0_BITS) - 1)];
	const struct wheel_entry *e = (const struct wheel_entry *)s->head.next;
	return !wheel_slot_empty_(s) && e->due == tick ? e : NULL;
}

static inline const struct wheel_entry *wheel_next_at(const struct wheel_entry *e)
{
	const struct wheel_link *next = e->link.next;
	return next == &e->slot->head ? NULL : (const struct wheel_entry *)next;
}

/*
 * The earliest tick at which wheel_expire() may have something to do: never
 * later than the first due entry, possibly earlier (a crowded slot that must
 * cascade). UINT64_MAX when the wheel is empty. O(levels).
 */
uint64_t tw__wheel_next_expiry(const struct wheel *w);

/* Checks every invariant; O(entries). For tests. */
bool tw__wheel_check(const struct wheel *w);

#endif
