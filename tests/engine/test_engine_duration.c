/*
 * test_engine_duration.c - tw_parse_duration and tw_parse_duration_range:
 * durations as people write them, exact in integer nanoseconds, and every
 * malformed or overflowing input refused without touching the outputs.
 */
#include "tickwheel.h"

#include <criterion/criterion.h>
#include <stdint.h>

#define MS UINT64_C(1000000)
#define S  (1000 * MS)

struct case_ns {
	const char *text;
	uint64_t ns;
};

Test(duration, units_and_fractions)
{
	const struct case_ns cases[] = {
		{ "200ms", 200 * MS },  { "1.5s", 1500 * MS },
		{ "2m", 120 * S },      { "3min", 180 * S },
		{ "1h", 3600 * S },     { "250us", 250000 },
		{ "10ns", 10 },         { "100", 100 * MS },
		{ "0.1s", 100 * MS },   { "0.5ms", 500000 },
		{ "1.0000000001s", S }, { "0", 0 },
		{ "0.0001ms", 100 },    { "18446744073709551615ns", UINT64_MAX },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint64_t ns = 12345;
		int rc = tw_parse_duration(cases[i].text, &ns);
		cr_assert_eq(rc, TW_OK, "'%s': %s", cases[i].text, tw_strerror(rc));
		cr_assert_eq(ns, cases[i].ns, "'%s': %llu ns", cases[i].text,
			     (unsigned long long)ns);
	}
}

Test(duration, ranges)
{
	const struct {
		const char *text;
		uint64_t lo, hi;
	} cases[] = {
		{ "100-500ms", 100 * MS, 500 * MS },
		{ "1-2s", S, 2 * S },
		{ "1s-2m", S, 120 * S },
		{ "1.5-2us", 1500, 2000 },
		{ "200ms", 200 * MS, 200 * MS },
		{ "100-100", 100 * MS, 100 * MS },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint64_t lo = 0, hi = 0;
		int rc = tw_parse_duration_range(cases[i].text, &lo, &hi);
		cr_assert_eq(rc, TW_OK, "'%s': %s", cases[i].text, tw_strerror(rc));
		cr_assert_eq(lo, cases[i].lo, "'%s': low end", cases[i].text);
		cr_assert_eq(hi, cases[i].hi, "'%s': high end", cases[i].text);
	}
}

Test(duration, bad_input_is_refused_and_outputs_untouched)
{
	const char *bad[] = { "",          "ms",    "1.",    ".5s",  "abc",  "5x",
			      "5 ms",      " 5ms",  "5ms ",  "1-",   "-5",   "1--2",
			      "500-100ms", "2s-1s", "1e3ms", "+5ms", "5mss", "0x10" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		uint64_t ns = 7, lo = 8, hi = 9;
		cr_assert_eq(tw_parse_duration(bad[i], &ns), -TW_EINVAL, "'%s'", bad[i]);
		cr_assert_eq(tw_parse_duration_range(bad[i], &lo, &hi), -TW_EINVAL, "'%s'", bad[i]);
		cr_assert(ns == 7 && lo == 8 && hi == 9, "'%s' wrote an output", bad[i]);
	}
	uint64_t ns = 0;
	cr_assert_eq(tw_parse_duration("100-500ms", &ns), -TW_EINVAL, "a range is not a duration");
	cr_assert_eq(tw_parse_duration(NULL, &ns), -TW_EINVAL);
	cr_assert_eq(tw_parse_duration("5ms", NULL), -TW_EINVAL);
}

Test(duration, overflow_is_a_range_error)
{
	const char *huge[] = { "18446744073709551616ns", "20000000000s", "6000000h",
			       "99999999999999999999999ms", "1-20000000000s" };
	for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
		uint64_t lo = 3, hi = 4;
		cr_assert_eq(tw_parse_duration_range(huge[i], &lo, &hi), -TW_ERANGE, "'%s'",
			     huge[i]);
		cr_assert(lo == 3 && hi == 4, "'%s' wrote an output", huge[i]);
	}
}
