/*
 * wheel.c - the hierarchical timing wheel: how it works, and filing.
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
 *
 * Files. This one starts the wheel and files and takes out entries;
 * wheel_expire.c moves time on: cascades, hand-outs, the next expiry;
 * wheel_check.c checks the invariants above, for the tests; wheel_impl.h
 * holds the geometry and the arithmetic they share.
 */
#include "wheel_impl.h"

#include <assert.h>

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
 * work. */
static void slot_filled(struct wheel *w, const struct wheel_entry *e, unsigned level)
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

/* Levels 2 and up (few adds go that far). */
static void file_upper(struct wheel *w, struct wheel_entry *e)
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

/* mark_empty out of line: tw__wheel_remove's common path then needs no more
 * registers than the unlink itself. */
static __attribute__((noinline)) void slot_emptied(struct wheel *w, const struct wheel_slot *s)
{
	mark_empty(w, s->index);
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
