/*
 * test_wheel_check.c - tw__wheel_check on wheels broken on purpose: each
 * test breaks one invariant of a sound wheel and checks that the checker
 * fails and says on stderr which invariant, with the values that break it.
 * The other suites only see true or false; this one reads the message.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wheel_test_support.h"

/* 134 KiB: off the stack. Criterion runs each test in its own process. */
static struct wheel w;
static struct timer timers[4];

static void start(void)
{
	wheel_and_timers_init(&w, 0, timers, sizeof timers / sizeof timers[0]);
}

/* tw__wheel_check with stderr on a pipe: its verdict, and what it wrote. */
static bool check_capturing(char *out, size_t size)
{
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	cr_assert_eq(fflush(stderr), 0);
	int saved = dup(STDERR_FILENO);
	cr_assert_geq(saved, 0);
	cr_assert_geq(dup2(fds[1], STDERR_FILENO), 0);
	bool sound = tw__wheel_check(&w);
	/* A line longer than the pipe holds would block here: messages are one short line. */
	cr_assert_eq(fflush(stderr), 0);
	cr_assert_geq(dup2(saved, STDERR_FILENO), 0);
	cr_assert_eq(close(saved), 0);
	cr_assert_eq(close(fds[1]), 0);
	size_t n = 0;
	ssize_t got;
	while (n < size - 1 && (got = read(fds[0], out + n, size - 1 - n)) > 0)
		n += (size_t)got;
	out[n] = '\0';
	cr_assert_eq(close(fds[0]), 0);
	return sound;
}

static void expect_failure(const char *message)
{
	char out[1024];
	cr_assert_not(check_capturing(out, sizeof out), "tw__wheel_check passed a broken wheel");
	cr_assert_str_eq(out, message);
}

Test(wheel_check, sound_wheel_passes_and_says_nothing, .init = start)
{
	/* Every level, a due beyond the top's span, and time moved on through
	 * cascades, so that the checker's quiet is not that of an empty wheel. */
	static struct timer more[64];
	timers_init(more, 64);
	for (unsigned i = 0; i < 64; i++)
		add_timer(&w, &more[i], (UINT64_C(1) << (i % 44)) + i);
	for (uint64_t target = 1; target < (UINT64_C(1) << 22); target = target * 3 + 1) {
		expect_drain_in_order(&w, target, more, 64);
		char out[1024];
		cr_assert(check_capturing(out, sizeof out), "at tick %" PRIu64 ": %s", target, out);
		cr_assert_str_empty(out);
	}
}

Test(wheel_check, occupancy_bit_of_an_empty_slot, .init = start)
{
	add_timer(&w, &timers[0], 5);
	w.occupied[0] |= UINT64_C(1) << 6; /* slot 6's word is already in the summary */
	expect_failure("tw__wheel_check: level 0 slot 6 is empty, but its occupancy bit (6 of "
		       "w->occupied) is set\n");
}

Test(wheel_check, summary_without_its_word, .init = start)
{
	add_timer(&w, &timers[0], 5);
	w.summary[0] = 0;
	expect_failure("tw__wheel_check: summary bit 0 is clear, but bitmap word 0 is "
		       "0x0000000000000020\n");
}

/* At tick 0, level 1 slot 2 is the window [4096, 6144). */
Test(wheel_check, due_moved_past_its_window, .init = start)
{
	add_timer(&w, &timers[0], 5000);
	timers[0].entry.due = 7000;
	expect_failure("tw__wheel_check: level 1 slot 2 holds an entry due at 7000, outside its "
		       "window [4096, 6144): it belongs in slot 3\n");
}

Test(wheel_check, due_moved_before_its_window, .init = start)
{
	add_timer(&w, &timers[0], 5000);
	timers[0].entry.due = 4000;
	expect_failure("tw__wheel_check: level 1 slot 2 holds an entry due at 4000, before its "
		       "window [4096, 6144)\n");
}

Test(wheel_check, level_0_entry_too_far_ahead, .init = start)
{
	add_timer(&w, &timers[0], 5);
	timers[0].entry.due = 4096 + 5;
	expect_failure("tw__wheel_check: level 0 slot 5 holds an entry due at 4101, 4096 ticks or "
		       "more after now 0\n");
}

Test(wheel_check, entry_names_another_slot, .init = start)
{
	add_timer(&w, &timers[0], 5);
	add_timer(&w, &timers[1], 5000);
	timers[0].entry.slot = timers[1].entry.slot;
	expect_failure("tw__wheel_check: level 0 slot 5 holds an entry due at 5 that names level 1 "
		       "slot 2 as its slot\n");
}

Test(wheel_check, broken_links, .init = start)
{
	add_timer(&w, &timers[0], 5);
	add_timer(&w, &timers[1], 5);
	struct wheel_link *head = &w.slot[5].head;
	timers[1].entry.link.prev = head; /* should be timers[0]'s link */
	char message[256];
	(void)snprintf(message, sizeof message,
		       "tw__wheel_check: level 0 slot 5: entry 0 (%p) has broken links: next->prev "
		       "%p, prev->next %p\n",
		       (void *)&timers[0].entry.link, (void *)head, (void *)&timers[0].entry.link);
	expect_failure(message);
}

Test(wheel_check, count_of_an_upper_slot, .init = start)
{
	add_timer(&w, &timers[0], 5000);
	w.slot[(1 << WHEEL_LEVEL0_BITS) + 2].count = 7;
	expect_failure("tw__wheel_check: level 1 slot 2 has count 7, but its list holds 1\n");
}

Test(wheel_check, window_left_without_work, .init = start)
{
	add_timer(&w, &timers[0], 5000); /* its window starts moving at 2048 */
	w.level_due[1] = 3000;
	expect_failure("tw__wheel_check: level 1 slot 2 (window [4096, 6144)) is not empty and "
		       "needs work by 2048, but level_due[1] is 3000\n");
}

Test(wheel_check, drain_due_after_a_level, .init = start)
{
	add_timer(&w, &timers[0], 5000);
	w.drain_due = 2049;
	expect_failure("tw__wheel_check: drain_due is 2049, after level_due[1] 2048, which level 1 "
		       "slot 2 needs\n");
}

Test(wheel_check, held_list_while_no_window_moves, .init = start)
{
	struct wheel_link *held = &w.held, *link = &timers[0].entry.link;
	held->next = held->prev = link;
	link->next = link->prev = held;
	expect_failure("tw__wheel_check: the held list is not empty, but no top-level window is "
		       "being moved (draining[4] is 0)\n");
}

Test(wheel_check, count_of_the_wheel, .init = start)
{
	add_timer(&w, &timers[0], 5);
	add_timer(&w, &timers[1], 9);
	w.count = 3;
	expect_failure("tw__wheel_check: the lists hold 2 in all, but w->count is 3\n");
}
