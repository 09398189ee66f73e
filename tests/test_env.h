/*
 * test_env.h - what the randomized tests read from the environment (seeds, sizes), for
 * Criterion suites: a value that is not a number fails the test rather than being ignored.
 */
#ifndef TICKWHEEL_TESTS_TEST_ENV_H
#define TICKWHEEL_TESTS_TEST_ENV_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

static inline uint64_t env_u64(const char *name, uint64_t fallback)
{
	const char *text = getenv(name);
	if (text == NULL || *text == '\0')
		return fallback;
	char *end;
	uint64_t value = strtoull(text, &end, 0);
	cr_assert(*end == '\0', "%s=%s is not a number", name, text);
	return value;
}

#endif
