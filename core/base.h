/*
 * base.h - the bottom of core/: what every module may use and nothing of the
 * engine. Counters one thread writes, the clock, the futex, liburcu's
 * read-side sections and what they order told to ThreadSanitizer, structs of
 * the caller's size.
 *
 * The modules of core/ and their order are written once, in core/check_layers.py
 * (core/README.md shows them).
 *
 * Not installed; users include api/tickwheel.h only.
 */
#ifndef TICKWHEEL_CORE_BASE_H
#define TICKWHEEL_CORE_BASE_H

#include "tickwheel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
/* liburcu's switch to its inline fast paths: a reserved name, but liburcu's, not ours. */
#define _LGPL_SOURCE /* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */
#include <urcu/urcu-memb.h>
#include <urcu/wfcqueue.h>

#define NS_PER_MS UINT64_C(1000000)

/* A duration kept in a task's 32 bits: microseconds, rounded up, saturating. */
static inline uint32_t us_of_ns(uint64_t ns)
{
	return ns > UINT64_C(1000) * UINT32_MAX ? UINT32_MAX : (uint32_t)((ns + 999) / 1000);
}

/*
 * Add to a counter that one thread at a time writes (its owner, or whoever
 * holds the task's lock) and others only read: no locked read-modify-write.
 * They return the new value.
 */
static inline uint64_t bump_by(_Atomic uint64_t *counter, uint64_t n)
{
	n += atomic_load_explicit(counter, memory_order_relaxed);
	atomic_store_explicit(counter, n, memory_order_relaxed);
	return n;
}

static inline uint64_t bump(_Atomic uint64_t *counter)
{
	return bump_by(counter, 1);
}

static inline uint32_t bump32(_Atomic uint32_t *counter)
{
	uint32_t n = atomic_load_explicit(counter, memory_order_relaxed) + 1;
	atomic_store_explicit(counter, n, memory_order_relaxed);
	return n;
}

/* A 32-bit count plus n, stopping at UINT32_MAX. */
static inline uint32_t add_saturating(uint32_t count, uint64_t n)
{
	uint64_t total = count + n;
	return total < UINT32_MAX ? (uint32_t)total : UINT32_MAX;
}

/* bump_by for a task's skip counter, which stops at UINT32_MAX. */
static inline void bump_skips(_Atomic uint32_t *counter, uint64_t n)
{
	atomic_store_explicit(
		counter, add_saturating(atomic_load_explicit(counter, memory_order_relaxed), n),
		memory_order_relaxed);
}

static inline uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* futex.c: sleeps while *word == expected (timeout NULL: no limit); wakes its sleepers. */
void tw__futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct timespec *timeout);
/* The same until CLOCK_MONOTONIC reads deadline_ns; true when it woke for that. */
bool tw__futex_wait_until(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns);
void tw__futex_wake_all(_Atomic uint32_t *word);

/* A system call's error for the log (errors.c). */
const char *tw__strerror(int err);

/*
 * liburcu 0.13's queues and grace periods are inline assembly and membarrier,
 * invisible to ThreadSanitizer: these tell it about the ordering they give
 * (release before handing an object over, acquire on taking it).
 */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define HANDOVER_RELEASE(p) __tsan_release(p)
#define HANDOVER_ACQUIRE(p) __tsan_acquire(p)
#else
#define HANDOVER_RELEASE(p) ((void)(p))
#define HANDOVER_ACQUIRE(p) ((void)(p))
#endif

/*
 * abi.c: a struct of the caller's size in or out. tw__struct_in keeps dst's
 * own values past src_size and refuses (-TW_EINVAL) a longer src whose extra
 * bytes are not all zero; tw__struct_out zeroes dst past what src has.
 */
int tw__struct_in(void *dst, size_t dst_size, const void *src, size_t src_size);
void tw__struct_out(void *dst, size_t dst_size, const void *src, size_t src_size);

/* RCU: rcu.c. Whether the calling thread is registered with liburcu; registers it. */
extern _Thread_local bool tw__rcu_registered;
void tw__rcu_register(void);

/* Registers the calling thread with liburcu once. */
static inline void tw__rcu_ensure_registered(void)
{
	if (__builtin_expect(!tw__rcu_registered, 0))
		tw__rcu_register();
}
/* Before the first engine: -TW_ENOMEM if the thread-exit hook could not be made. */
int tw__rcu_init(void);

/* Read-side sections, with what a grace period orders told to TSan. */
extern char tw__rcu_grace_token;

static inline void read_section_begin(void)
{
	tw__rcu_ensure_registered();
	urcu_memb_read_lock();
}

static inline void read_section_end(void)
{
	HANDOVER_RELEASE(&tw__rcu_grace_token);
	urcu_memb_read_unlock();
}

/* After a grace period: every read section that could see the old is over. */
static inline void after_grace_period(void)
{
	HANDOVER_ACQUIRE(&tw__rcu_grace_token);
}

#endif
