/*
 * The version, and structs of another size than the library's: a program
 * built against an older header (shorter structs) or a newer one (longer)
 * gets what api/tickwheel.h promises under "Growing structs".
 */
#include <tickwheel.h>

#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

Test(abi, version_is_the_headers_and_the_projects)
{
	cr_assert_str_eq(tw_version(), TW_VERSION_STRING);
	cr_assert_str_eq(tw_version(), TW_BUILD_VERSION);
	char text[32];
	snprintf(text, sizeof text, "%d.%d.%d", TW_VERSION_MAJOR, TW_VERSION_MINOR,
		 TW_VERSION_PATCH);
	cr_assert_str_eq(text, TW_VERSION_STRING);
	cr_assert_eq(TW_VERSION_NUMBER,
		     TW_VERSION_MAJOR * 10000 + TW_VERSION_MINOR * 100 + TW_VERSION_PATCH);
}

static tw_engine *manual_engine(void)
{
	tw_config c;
	tw_config_init(&c);
	c.manual_clock = true;
	c.executors = 1;
	tw_engine *e;
	cr_assert_eq(tw_engine_create(&c, &e), TW_OK);
	return e;
}

static int nothing(const tw_fire *fire, void *arg)
{
	(void)fire;
	(void)arg;
	return 0;
}

static void count_release(void *arg)
{
	++*(int *)arg;
}

/* A struct with room for fields a newer header would have, and guard bytes. */
#define GROWN(type)                      \
	struct {                         \
		type known;              \
		unsigned char newer[16]; \
	}

Test(abi, config_init_writes_only_the_callers_size)
{
	GROWN(tw_config) c;
	memset(&c, 0xa5, sizeof c);
	size_t old_size = offsetof(tw_config, manual_clock);
	tw_config_init_sized(&c.known, old_size);
	cr_assert_eq(c.known.queue_capacity, 4096);
	cr_assert_eq(c.known.retain_ms, 5000);
	const unsigned char *past = (const unsigned char *)&c.known + old_size;
	for (size_t i = 0; i < sizeof c - old_size; i++)
		cr_assert_eq(past[i], 0xa5, "byte %zu past the caller's struct was written", i);

	memset(&c, 0xa5, sizeof c);
	tw_config_init_sized(&c.known, sizeof c);
	for (size_t i = 0; i < sizeof c.newer; i++)
		cr_assert_eq(c.newer[i], 0, "a newer caller's field %zu is not zeroed", i);
}

Test(abi, older_config_gets_defaults_for_what_it_lacks)
{
	tw_config c;
	memset(&c, 0xff, sizeof c); /* what lies past an older caller's struct */
	tw_config_init_sized(&c, offsetof(tw_config, manual_clock));
	c.executors = 1;
	tw_engine *e = NULL;
	/* manual_clock and coarse_clock are past the old size: their defaults (off) apply,
	 * so tw_advance answers as on a real-clock engine. */
	cr_assert_eq(tw_engine_create_sized(&c, offsetof(tw_config, manual_clock), &e), TW_OK);
	cr_assert_eq(tw_advance(e, 1), -TW_ESTATE);
	tw_engine_destroy(e);
}

Test(abi, newer_config_is_refused_only_if_it_asks_for_more)
{
	GROWN(tw_config) c;
	memset(&c, 0, sizeof c);
	tw_config_init_sized(&c.known, sizeof c);
	c.known.executors = 1;
	tw_engine *e = NULL;
	cr_assert_eq(tw_engine_create_sized(&c.known, sizeof c, &e), TW_OK);
	tw_engine_destroy(e);
	c.newer[7] = 1;
	e = (tw_engine *)&c;
	cr_assert_eq(tw_engine_create_sized(&c.known, sizeof c, &e), -TW_EINVAL);
	cr_assert_null(e);
}

Test(abi, task_spec_of_another_size)
{
	tw_engine *e = manual_engine();
	int released = 0;
	GROWN(tw_task_spec) spec;
	memset(&spec, 0, sizeof spec);
	spec.known = (tw_task_spec){
		.delay_ms = 1, .callback = nothing, .arg = &released, .release = count_release
	};
	tw_id id;
	cr_assert_eq(tw_add_sized(e, &spec.known, sizeof spec, &id), TW_OK);
	spec.newer[0] = 1;
	tw_id refused = 0;
	cr_assert_eq(tw_add_sized(e, &spec.known, sizeof spec, &refused), -TW_EINVAL);
	cr_assert_eq(refused, 0);
	/* An older caller without the release field: none is called. */
	tw_id old;
	cr_assert_eq(tw_add_sized(e, &spec.known, offsetof(tw_task_spec, release), &old), TW_OK);
	cr_assert_eq(tw_advance(e, 1), TW_OK);
	cr_assert_eq(tw_quiesce(e), TW_OK);
	cr_assert_eq(tw_engine_stop(e, 1000), TW_OK);
	tw_engine_destroy(e);
	cr_assert_eq(released, 1, "release called %d times (want 1: only the full spec had one)",
		     released);
}

Test(abi, info_and_stats_filled_to_the_callers_size)
{
	tw_engine *e = manual_engine();
	tw_task_spec spec = { .delay_ms = 3, .period_ms = 5, .callback = nothing };
	tw_id id;
	cr_assert_eq(tw_add(e, &spec, &id), TW_OK);
	cr_assert_eq(tw_advance(e, 3), TW_OK);
	cr_assert_eq(tw_quiesce(e), TW_OK);

	GROWN(tw_task_info) info;
	memset(&info, 0xa5, sizeof info);
	cr_assert_eq(tw_get_sized(e, id, &info.known, sizeof info), TW_OK);
	cr_assert_eq(info.known.runs, 1);
	cr_assert_eq(info.known.period_ms, 5);
	for (size_t i = 0; i < sizeof info.newer; i++)
		cr_assert_eq(info.newer[i], 0, "tw_task_info: byte %zu past the library's size", i);
	memset(&info, 0xa5, sizeof info);
	size_t old_size = offsetof(tw_task_info, runs) + sizeof info.known.runs;
	cr_assert_eq(tw_get_sized(e, id, &info.known, old_size), TW_OK);
	cr_assert_eq(info.known.runs, 1);
	cr_assert_eq(((unsigned char *)&info)[old_size], 0xa5, "written past the caller's size");

	GROWN(tw_engine_stats) stats;
	memset(&stats, 0xa5, sizeof stats);
	cr_assert_eq(tw_stats_sized(e, &stats.known, sizeof stats), TW_OK);
	cr_assert_eq(stats.known.runs, 1);
	for (size_t i = 0; i < sizeof stats.newer; i++)
		cr_assert_eq(stats.newer[i], 0, "tw_engine_stats: byte %zu past the library's size",
			     i);
	memset(&stats, 0xa5, sizeof stats);
	old_size = offsetof(tw_engine_stats, runs) + sizeof stats.known.runs;
	cr_assert_eq(tw_stats_sized(e, &stats.known, old_size), TW_OK);
	cr_assert_eq(stats.known.runs, 1);
	cr_assert_eq(((unsigned char *)&stats)[old_size], 0xa5, "written past the caller's size");
	tw_engine_destroy(e);
}
