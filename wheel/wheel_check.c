/*
 * wheel_check.c - the invariants told in wheel.c, checked for the tests: list
 * links and counts, bitmaps, where each entry sits, and that no occupied
 * window is left without a tick to move it.
 *
 * A failed check says on stderr what failed and with which values, in every
 * build: a random test that breaks after a million operations is debugged
 * from that one line, and a build with other flags may not break alike.
 */
#include "wheel_impl.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

static bool __attribute__((format(printf, 1, 2))) check_failed(const char *fmt, ...)
{
	char message[320];
	va_list ap;
	va_start(ap, fmt);
	(void)vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	/* One call, so that the line stays whole among a test's own output. */
	(void)fprintf(stderr, "tw__wheel_check: %s\n", message);
	return false;
}

/* Names s as "level L slot I", or by its address if it is none of w's: an
 * entry's slot pointer is what a corrupt wheel gets wrong. */
static void name_slot(char *buf, size_t size, const struct wheel *w, const struct wheel_slot *s)
{
	uintptr_t offset = (uintptr_t)s - (uintptr_t)w->slot;
	if (!s || offset % sizeof *s || offset / sizeof *s >= WHEEL_SLOT_COUNT) {
		(void)snprintf(buf, size, "%p", (const void *)s);
		return;
	}
	unsigned i = (unsigned)(offset / sizeof *s), level = TOP;
	while (i < geometry[level].base)
		level--;
	(void)snprintf(buf, size, "level %u slot %u", level, i - geometry[level].base);
}

/*
 * The list at head, of slot s of level L: its links, and that each entry
 * names s and is due no earlier than min_due (now on level 0, the window's
 * start above, the end of the window being moved for the held list) and
 * where its due puts it.
 */
static bool check_list(const struct wheel *w, const struct wheel_link *head,
		       const struct wheel_slot *s, unsigned level, uint64_t min_due, uint32_t *n)
{
	unsigned index = s->index - geometry[level].base, shift = shift_of(level);
	uint64_t width = width_of(level);
	bool held = head == &w->held;
	const char *list = held ? "the held list of level" : "level";
	uint32_t position = 0;
	for (const struct wheel_link *l = head->next; l != head; l = l->next, (*n)++, position++) {
		const struct wheel_entry *e = (const struct wheel_entry *)l;
		if (l->next->prev != l || l->prev->next != l)
			return check_failed(
				"%s %u slot %u: entry %" PRIu32 " (%p) has broken links: "
				"next->prev %p, prev->next %p",
				list, level, index, position, (const void *)l,
				(const void *)l->next->prev, (const void *)l->prev->next);
		if (e->slot != s) {
			char named[48];
			name_slot(named, sizeof named, w, e->slot);
			return check_failed("%s %u slot %u holds an entry due at %" PRIu64
					    " that names %s as its slot",
					    list, level, index, e->due, named);
		}
		if (e->due < min_due && level == 0)
			return check_failed("level 0 slot %u holds an entry due at %" PRIu64
					    ", before now %" PRIu64,
					    index, e->due, min_due);
		if (e->due < min_due && held)
			return check_failed("%s %u slot %u holds an entry due at %" PRIu64
					    ", not after the window being moved [%" PRIu64
					    ", %" PRIu64 ")",
					    list, level, index, e->due, min_due - width, min_due);
		if (e->due < min_due)
			return check_failed("level %u slot %u holds an entry due at %" PRIu64
					    ", before its window [%" PRIu64 ", %" PRIu64 ")",
					    level, index, e->due, min_due, min_due + width);
		if (level == 0 && e->due - min_due >= slots_of(0))
			return check_failed("level 0 slot %u holds an entry due at %" PRIu64
					    ", %u ticks or more after now %" PRIu64,
					    index, e->due, slots_of(0), min_due);
		if (level == 0 && index_of(level, e->due) != index)
			return check_failed("level 0 slot %u holds an entry due at %" PRIu64
					    ", which belongs in slot %u",
					    index, e->due, index_of(level, e->due));
		if (level < TOP && index_of(level, e->due) != index)
			return check_failed("level %u slot %u holds an entry due at %" PRIu64
					    ", outside its window [%" PRIu64 ", %" PRIu64
					    "): it belongs in slot %u",
					    level, index, e->due, min_due, min_due + width,
					    index_of(level, e->due));
		/* Only the top level keeps dues beyond its span, in their index's slot. */
		if (level == TOP && index_of(level, e->due) != index &&
		    (e->due >> shift) - (min_due >> shift) < slots_of(TOP))
			return check_failed("%s %u slot %u holds an entry due at %" PRIu64
					    ", within the level's span from %" PRIu64
					    ", that belongs in slot %u",
					    list, level, index, e->due, min_due,
					    index_of(level, e->due));
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
	if (s->index != i)
		return check_failed("level %u slot %u records its index in w->slot as %" PRIu32
				    ", not %u",
				    level, index, s->index, i);
	if (!check_list(w, &s->head, s, level, start, &n))
		return false;
	bool draining = level && start == w->draining[level];
	/* A window that should be moving down already must at least be due for it. */
	if (n && level > 0 && !draining && start < next_window(level, now) + width &&
	    w->level_due[level] > now)
		return check_failed("level %u slot %u (window [%" PRIu64 ", %" PRIu64
				    ")) is not empty and was to start moving down at %" PRIu64
				    ", but level_due[%u] is %" PRIu64 ", after now %" PRIu64,
				    level, index, start, start + width, start - width, level,
				    w->level_due[level], now);
	if (level == TOP && draining && !check_list(w, &w->held, s, level, start + width, &n))
		return false;
	/* Level 0 counts nothing; wheel_hand_out_ may leave the bit of now's
	 * emptied slot set. */
	bool stale_allowed = level == 0 && index == index_of(0, now) && !n;
	if (level == 0 && s->count)
		return check_failed("level 0 slot %u has count %" PRIu32
				    ", but level 0 counts nothing",
				    index, s->count);
	if (level > 0 && s->count != n)
		return check_failed("level %u slot %u has count %" PRIu32
				    ", but its list%s holds %" PRIu32,
				    level, index, s->count,
				    level == TOP && draining ? " with the held list" : "", n);
	bool bit_set = !!(w->occupied[i / 64] & bit(i));
	if (bit_set != (n > 0) && !stale_allowed)
		return check_failed(
			"level %u slot %u %s, but its occupancy bit (%u of w->occupied) is %s",
			level, index, n ? "is not empty" : "is empty", i,
			bit_set ? "set" : "clear");
	if (level > 0 && n > 0) {
		uint64_t deadline = level == 1 ? start : start - width_of(level - 1);
		uint64_t needed = draining ? deadline : start - width;
		if (w->level_due[level] > needed)
			return check_failed("level %u slot %u (window [%" PRIu64 ", %" PRIu64
					    ")) is not empty and needs work by %" PRIu64
					    ", but level_due[%u] is %" PRIu64,
					    level, index, start, start + width, needed, level,
					    w->level_due[level]);
		if (w->drain_due > w->level_due[level])
			return check_failed("drain_due is %" PRIu64 ", after level_due[%u] %" PRIu64
					    ", which level %u slot %u needs",
					    w->drain_due, level, w->level_due[level], level, index);
	}
	*total += n;
	return true;
}

/* The summary has a bit set exactly for the bitmap words that are not zero. */
static bool check_summary(const struct wheel *w)
{
	for (unsigned j = 0; j < sizeof w->summary * 8; j++) {
		bool set = !!(w->summary[j / 64] & bit(j));
		if (j >= WHEEL_WORDS && set)
			return check_failed("summary bit %u is set, but the bitmap has %u words", j,
					    (unsigned)WHEEL_WORDS);
		if (j < WHEEL_WORDS && set != (w->occupied[j] != 0))
			return check_failed(
				"summary bit %u is %s, but bitmap word %u is 0x%016" PRIx64, j,
				set ? "set" : "clear", j, w->occupied[j]);
	}
	return true;
}

bool tw__wheel_check(const struct wheel *w)
{
	size_t total = 0;
	if (!w->draining[TOP] && w->held.next != &w->held)
		return check_failed("the held list is not empty, but no top-level window is being "
				    "moved (draining[%u] is 0)",
				    (unsigned)TOP);
	if (!check_summary(w))
		return false;
	for (unsigned level = 0; level < WHEEL_LEVELS; level++)
		for (unsigned index = 0; index < slots_of(level); index++)
			if (!check_slot(w, level, index, &total))
				return false;
	if (total != w->count)
		return check_failed("the lists hold %zu in all, but w->count is %zu", total,
				    w->count);
	return true;
}
