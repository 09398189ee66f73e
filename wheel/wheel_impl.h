/*
 * wheel_impl.h - private to wheel/: the geometry, and the slot, bitmap and
 * window arithmetic that filing (wheel.c), moving time on (wheel_expire.c)
 * and the checker (wheel_check.c) share. In line, so that splitting the
 * wheel into files costs the hot paths nothing. wheel.c tells the design.
 */
#ifndef TICKWHEEL_WHEEL_IMPL_H
#define TICKWHEEL_WHEEL_IMPL_H

#include "wheel.h"

enum { TOP = WHEEL_LEVELS - 1 };

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

/* The frontier of level L + 1: entries due before it live on level L or lower. */
static inline uint64_t frontier_above(const struct wheel *w, unsigned level)
{
	uint64_t cascading = w->draining[level + 1];
	return cascading ? cascading : next_window(level + 1, w->now) + width_of(level + 1);
}

/* Recomputes every frontier, after time jumped. */
static inline void update_limits(struct wheel *w)
{
	for (unsigned level = 0; level < TOP; level++)
		w->limit[level] = frontier_above(w, level);
}

#endif
