/*
 * futex.c - a thread's wait on a word of its own, and the words of errors.
 */
#include "base.h"

#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void tw__futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct timespec *timeout)
{
	/* EAGAIN (the word changed), EINTR and ETIMEDOUT all mean "look again", which every
	 * caller does in a loop; nothing else can happen with a word of our own. */
	(void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, timeout, NULL, 0);
}

void tw__futex_wake_all(_Atomic uint32_t *word)
{
	/* Cannot fail for an aligned word of this process. */
	(void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* A system call's error for the log, from any of the engine's threads. POSIX lets strerror
 * share one buffer between threads; glibc (2.32 on) and musl do not, and the errors logged
 * are all known ones, whose texts are constant. */
const char *tw__strerror(int err)
{
	return strerror(err); /* NOLINT(concurrency-mt-unsafe): thread-safe on Linux, above */
}
