/*
 * futex.c - a thread's wait on a word of its own, and its wake-up.
 */
#include "base.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

void tw__futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct timespec *timeout)
{
	/* EAGAIN (the word changed), EINTR and ETIMEDOUT all mean "look again", which every
	 * caller does in a loop; nothing else can happen with a word of our own. */
	(void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, timeout, NULL, 0);
}

bool tw__futex_wait_until(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns)
{
	/* FUTEX_WAIT_BITSET takes an absolute time on CLOCK_MONOTONIC: a thread preempted
	 * between reading the clock and the call does not sleep the longer for it. */
	struct timespec at = { .tv_sec = (time_t)(deadline_ns / 1000000000u),
			       .tv_nsec = (long)(deadline_ns % 1000000000u) };
	return syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET_PRIVATE, expected, &at, NULL,
		       FUTEX_BITSET_MATCH_ANY) < 0 &&
	       errno == ETIMEDOUT;
}

void tw__futex_wake_all(_Atomic uint32_t *word)
{
	/* Cannot fail for an aligned word of this process. */
	(void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}
