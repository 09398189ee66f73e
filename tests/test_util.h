/*
 * test_util.h - what the test programs share, Criterion or not: the monotonic
 * clock in ns, and splitmix64 (one generator: a seed replays the same run).
 */
#ifndef TICKWHEEL_TESTS_TEST_UTIL_H
#define TICKWHEEL_TESTS_TEST_UTIL_H

#include <stdint.h>
#include <time.h>

#define NS_PER_MS UINT64_C(1000000)

static inline uint64_t test_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64's finalizer: a well-mixed 64-bit hash of z. */
static inline uint64_t test_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* The next draw of the generator whose state is *state. */
static inline uint64_t test_rng_next(uint64_t *state)
{
	return test_mix64(*state += UINT64_C(0x9e3779b97f4a7c15));
}

#endif
