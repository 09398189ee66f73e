/*
 * test_engine_inputs.c - every bad input gets its error code, nothing
 * crashes, and a refused call changes nothing.
 *
 *   -TW_EINVAL    a NULL engine, spec or out pointer, a missing callback,
 *                 unknown flags
 *   -TW_ERANGE    a delay or period above TW_MAX_DELAY_MS (that would overflow)
 *   -TW_ENOTFOUND an id the engine does not know (0 is never an id)
 *   -TW_ESTATE    tw_advance() without the manual clock
 *   -TW_ELIMIT    max_tasks live tasks already
 */
#include "engine_test_support.h"

#include <limits.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

Test(inputs, config_init_fills_the_defaults)
{
	tw_config cfg;
	memset(&cfg, 0x5a, sizeof cfg);
	tw_config_init(&cfg);
	cr_assert_eq(cfg.executors, 0);
	cr_assert_eq(cfg.pin_executors, false);
	cr_assert_eq(cfg.queue_capacity, 4096);
	cr_assert_eq(cfg.max_failures, 10);
	cr_assert_eq(cfg.slow_run_ms, 100);
	cr_assert_eq(cfg.max_tasks, 0);
	cr_assert_eq(cfg.retain_ms, 5000);
	cr_assert_null(cfg.log);
	cr_assert_null(cfg.log_arg);
	cr_assert_eq(cfg.manual_clock, false);
	tw_config_init(NULL); /* must not crash */
	assert_no_leaks();
}

Test(inputs, engine_create_and_destroy_bad_arguments)
{
	tw_config cfg = manual_config(1);
	cr_assert_eq(tw_engine_create(&cfg, NULL), -TW_EINVAL);
	cr_assert_eq(tw_engine_create(NULL, NULL), -TW_EINVAL);
	tw_engine_destroy(NULL); /* must not crash */
	cr_assert_eq(tw_engine_stop(NULL, 0), -TW_EINVAL);
	/* No config: defaults, on the real clock. */
	tw_engine *e = NULL;
	cr_assert_eq(tw_engine_create(NULL, &e), TW_OK);
	cr_assert_not_null(e);
	cr_assert_eq(tw_advance(e, 1), -TW_ESTATE, "tw_advance without the manual clock");
	tw_engine_destroy(e);
	assert_no_leaks();
}

Test(inputs, add_refuses_null_pointers_missing_callback_and_unknown_flags)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_task_spec good = spec_of(1, 1, count_callback, &c);
	good.release = count_release;
	tw_id id = 777;
	cr_assert_eq(tw_add(NULL, &good, &id), -TW_EINVAL);
	cr_assert_eq(tw_add(e, NULL, &id), -TW_EINVAL);
	cr_assert_eq(tw_add(e, &good, NULL), -TW_EINVAL);
	tw_task_spec bad = good;
	bad.callback = NULL;
	cr_assert_eq(tw_add(e, &bad, &id), -TW_EINVAL);
	const unsigned flags[] = { 8u,
				   0x80u,
				   TW_CONCURRENT | 8u,
				   TW_RUN_LATE | 16u,
				   1u << 31,
				   ~0u,
				   TW_CONCURRENT | TW_ON_WHEEL_THREAD };
	for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
		bad = good;
		bad.flags = flags[i];
		cr_assert_eq(tw_add(e, &bad, &id), -TW_EINVAL, "flags %#x", flags[i]);
	}
	/* Nothing was added: no task, no run, no release. */
	step(e, 10);
	tw_engine_stats s = stats_of(e);
	cr_assert_eq(s.tasks_live, 0);
	cr_assert_eq(s.runs, 0);
	cr_assert_eq(atomic_load(&c.runs), 0);
	/* The good spec itself is fine, with or without TW_CONCURRENT. */
	id = add_spec(e, &good);
	good.flags = TW_CONCURRENT;
	tw_id id2 = add_spec(e, &good);
	cr_assert_neq(id, id2);
	destroy_expecting_releases(e, &c, 2);
}

Test(inputs, delays_and_periods_above_the_maximum_are_out_of_range)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, 10, 10);
	/* Huge values keep their code; only TW_NEVER itself means "no due" (as a delay). */
	const uint64_t too_big[] = { TW_MAX_DELAY_MS + 1, TW_MAX_DELAY_MS * 2, UINT64_MAX / 2,
				     INT64_MAX, UINT64_MAX - 1 };
	for (size_t i = 0; i < sizeof too_big / sizeof too_big[0]; i++) {
		tw_task_spec spec = spec_of(too_big[i], 0, count_callback, &c);
		tw_id out;
		cr_assert_eq(tw_add(e, &spec, &out), -TW_ERANGE, "delay %" PRIu64, too_big[i]);
		spec = spec_of(1, too_big[i], count_callback, &c);
		cr_assert_eq(tw_add(e, &spec, &out), -TW_ERANGE, "period %" PRIu64, too_big[i]);
		cr_assert_eq(tw_set_delay(e, id, too_big[i]), -TW_ERANGE);
		cr_assert_eq(tw_set_period(e, id, too_big[i]), -TW_ERANGE);
	}
	tw_task_spec never_period = spec_of(1, TW_NEVER, count_callback, &c);
	tw_id refused;
	cr_assert_eq(tw_add(e, &never_period, &refused), -TW_ERANGE, "TW_NEVER is not a period");
	cr_assert_eq(tw_set_period(e, id, TW_NEVER), -TW_ERANGE);
	/* The refused changes left the task alone. */
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.period_ms, 10);
	cr_assert_eq(info.state, TW_WAITING);
	step(e, 10);
	cr_assert_eq(atomic_load(&c.runs), 1);
	destroy_expecting_releases(e, &c, 1);
}

/* Large delays and periods: above TW_MAX_DELAY_MS they answer -TW_ERANGE, up
 * to it they are accepted, and an accepted one never comes due early through
 * an overflow. 18446744073710 ms is the first whole number of milliseconds
 * whose nanoseconds do not fit in 64 bits (585 years). */
static const uint64_t huge_delays[] = { TW_MAX_DELAY_MS,
					TW_MAX_DELAY_MS - 1,
					TW_MAX_DELAY_MS / 2,
					UINT64_C(18446744073710),
					UINT64_C(18446744073710) * 2,
					UINT64_C(1) << 50,
					UINT64_C(1) << 53,
					UINT64_C(1) << 60 };

static int huge_rc(uint64_t ms)
{
	return ms > TW_MAX_DELAY_MS ? -TW_ERANGE : TW_OK;
}

Test(inputs, huge_delays_never_fire_early)
{
	for (size_t i = 0; i < sizeof huge_delays / sizeof huge_delays[0]; i++) {
		uint64_t delay = huge_delays[i];
		tw_engine *e = manual_engine(1);
		struct counts c = { 0 };
		uint64_t now = manual_now(e);
		tw_task_spec spec = spec_of(delay, 0, count_callback, &c);
		tw_id id;
		int rc = tw_add(e, &spec, &id);
		cr_assert_eq(rc, huge_rc(delay), "delay %" PRIu64 " ms: %s", delay,
			     tw_strerror(rc));
		if (rc == TW_OK) {
			tw_task_info info = info_of(e, id);
			cr_assert(info.next_due_ns > now + 1000 * NS_PER_MS,
				  "delay %" PRIu64 " ms: due %" PRIu64 " ns after now", delay,
				  info.next_due_ns - now);
			step(e, 1000);
			cr_assert_eq(atomic_load(&c.runs), 0,
				     "delay %" PRIu64 " ms fired within 1 s", delay);
		}
		tw_engine_destroy(e);
	}
	assert_no_leaks();
}

Test(inputs, huge_set_delay_never_fires_early)
{
	for (size_t i = 0; i < sizeof huge_delays / sizeof huge_delays[0]; i++) {
		uint64_t delay = huge_delays[i];
		tw_engine *e = manual_engine(1);
		struct counts c = { 0 };
		tw_id id = add_counted(e, &c, 100, 0);
		int rc = tw_set_delay(e, id, delay);
		cr_assert_eq(rc, huge_rc(delay), "set_delay(%" PRIu64 "): %s", delay,
			     tw_strerror(rc));
		step(e, 1000);
		cr_assert_eq(atomic_load(&c.runs), rc == TW_OK ? 0 : 1,
			     "set_delay(%" PRIu64 "): wrong runs", delay);
		tw_engine_destroy(e);
	}
	assert_no_leaks();
}

Test(inputs, huge_periods_never_fire_early)
{
	for (size_t i = 0; i < sizeof huge_delays / sizeof huge_delays[0]; i++) {
		uint64_t period = huge_delays[i];
		tw_engine *e = manual_engine(1);
		struct counts c = { 0 };
		uint64_t now = manual_now(e);
		tw_task_spec spec = spec_of(1, period, count_callback, &c);
		tw_id id;
		int rc = tw_add(e, &spec, &id);
		cr_assert_eq(rc, huge_rc(period), "period %" PRIu64 " ms: %s", period,
			     tw_strerror(rc));
		if (rc == TW_OK) {
			for (int ms = 0; ms < 100; ms++)
				step(e, 1);
			tw_task_info info = info_of(e, id);
			cr_assert_eq(info.runs + info_skips(&info), 1,
				     "period %" PRIu64 " ms: %" PRIu64 " runs + %" PRIu64
				     " skips in 100 ms",
				     period, info.runs, info_skips(&info));
			cr_assert(info.next_due_ns > now + 1000 * NS_PER_MS,
				  "period %" PRIu64 " ms: next due %" PRIu64 " ns after the start",
				  period, info.next_due_ns - now);
		}
		tw_engine_destroy(e);
	}
	assert_no_leaks();
}

/* A paused task resumed with a huge period is not due soon either. */
Test(inputs, huge_period_on_resume_never_fires_early)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, 1, 1);
	step(e, 1);
	cr_assert_eq(tw_pause(e, id), TW_OK);
	cr_assert_eq(tw_set_period(e, id, TW_MAX_DELAY_MS), TW_OK);
	cr_assert_eq(tw_resume(e, id), TW_OK);
	for (int ms = 0; ms < 100; ms++)
		step(e, 1);
	cr_assert_eq(atomic_load(&c.runs), 1);
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info_skips(&info), 0);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* Periods and delays from 2^31 ms on keep their upper bits out of the task's
 * first cache line: every value reads back exactly, around each boundary. */
static const uint64_t wide_values[] = { (UINT64_C(1) << 31) - 1,
					UINT64_C(1) << 31,
					(UINT64_C(1) << 31) + 12345,
					UINT32_MAX - UINT64_C(1),
					UINT32_MAX,
					UINT64_C(1) << 32,
					(UINT64_C(1) << 42) + (UINT64_C(1) << 31) - 1,
					TW_MAX_DELAY_MS - 1,
					TW_MAX_DELAY_MS };

Test(inputs, wide_periods_read_back_exactly)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	for (size_t i = 0; i < sizeof wide_values / sizeof wide_values[0]; i++) {
		uint64_t period = wide_values[i];
		tw_task_spec spec = spec_of(period, period, count_callback, &c);
		tw_id id = add_spec(e, &spec);
		cr_assert_eq(info_of(e, id).period_ms, period);
		for (size_t j = 0; j < sizeof wide_values / sizeof wide_values[0]; j++) {
			cr_assert_eq(tw_set_period(e, id, wide_values[j]), TW_OK);
			cr_assert_eq(info_of(e, id).period_ms, wide_values[j]);
		}
		cr_assert_eq(tw_set_period(e, id, 5), TW_OK);
		cr_assert_eq(info_of(e, id).period_ms, 5);
	}
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* A wide delay set while paused, on a task with a wide period: resuming uses
 * the delay, exactly, and keeps the period. */
Test(inputs, wide_delay_and_period_on_resume)
{
	for (size_t i = 0; i < sizeof wide_values / sizeof wide_values[0]; i++) {
		uint64_t delay = wide_values[i];
		uint64_t period = wide_values[sizeof wide_values / sizeof wide_values[0] - 1 - i];
		tw_engine *e = manual_engine(1);
		struct counts c = { 0 };
		tw_id id = add_counted(e, &c, 1, period);
		cr_assert_eq(tw_pause(e, id), TW_OK);
		cr_assert_eq(tw_set_delay(e, id, delay), TW_OK);
		uint64_t now = manual_now(e);
		cr_assert_eq(tw_resume(e, id), TW_OK);
		tw_task_info info = info_of(e, id);
		cr_assert_eq(info.period_ms, period);
		cr_assert_eq(info.next_due_ns, now + delay * NS_PER_MS, "delay %" PRIu64 " ms",
			     delay);
		/* and a one-shot resumes after its own delay */
		tw_id once = add_counted(e, &c, delay, 0);
		cr_assert_eq(tw_pause(e, once), TW_OK);
		cr_assert_eq(tw_resume(e, once), TW_OK);
		cr_assert_eq(info_of(e, once).next_due_ns, now + delay * NS_PER_MS);
		tw_engine_destroy(e);
	}
	assert_no_leaks();
}

/* The manual clock cannot be advanced past the end of time: an advance that
 * would overflow is refused, or at least a delay of 100 s still means 100 s. */
Test(inputs, manual_clock_does_not_wrap_around)
{
	tw_engine *e = manual_engine(1);
	struct counts early = { 0 }, late = { 0 };
	add_counted(e, &early, 100000, 0);
	for (int i = 0; i < 3; i++) {
		int rc = tw_advance(e, TW_MAX_DELAY_MS);
		cr_assert(rc == TW_OK || rc == -TW_ERANGE, "advance %d: %s", i, tw_strerror(rc));
	}
	quiesce(e);
	cr_assert_eq(atomic_load(&early.runs), 1);
	add_counted(e, &late, 100000, 0);
	int rc = tw_advance(e, 1);
	cr_assert(rc == TW_OK || rc == -TW_ERANGE);
	quiesce(e);
	cr_assert_eq(atomic_load(&late.runs), 0, "a task due in 100 s ran 1 ms later");
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&early.releases), 1);
	cr_assert_eq(atomic_load(&late.releases), 1);
	assert_no_leaks();
}

/* The manual clock's end is 2^64 - 1 ns less TW_MAX_DELAY_MS (tw_advance's doc): an advance
 * to it exactly is taken, one a millisecond further refused, and there a task added with the
 * longest delay still has its due. */
Test(inputs, manual_clock_ends_the_longest_delay_before_2_to_the_64_ns)
{
	tw_engine *e = manual_engine(1);
	const uint64_t end = UINT64_MAX - TW_MAX_DELAY_MS * NS_PER_MS;
	uint64_t now = manual_now(e);
	while (end - now >= TW_MAX_DELAY_MS * NS_PER_MS) {
		advance(e, TW_MAX_DELAY_MS);
		now += TW_MAX_DELAY_MS * NS_PER_MS;
	}
	uint64_t last = (end - now) / NS_PER_MS;
	advance(e, last);
	now += last * NS_PER_MS;
	cr_assert_eq(manual_now(e), now);
	cr_assert_lt(end - now, NS_PER_MS, "within a millisecond of the end");
	cr_assert_eq(tw_advance(e, 1), -TW_ERANGE);
	cr_assert_eq(manual_now(e), now, "a refused advance moves nothing");
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, TW_MAX_DELAY_MS, 0);
	cr_assert_eq(info_of(e, id).next_due_ns, now + TW_MAX_DELAY_MS * NS_PER_MS);
	destroy_expecting_releases(e, &c, 1);
}

/* tw_config.reserve_tasks: the table's room made at create (memory_bytes counts it, whole
 * chunks of 1724 tasks), the adds into it grow nothing, past it the table grows as before. */
Test(inputs, reserve_tasks_makes_the_room_at_create)
{
	enum { N = 10000, CHUNK_TASKS = 1724, CHUNK_BYTES = 256 << 10 };
	const uint64_t chunks = (N + CHUNK_TASKS - 1) / CHUNK_TASKS;
	tw_engine *plain = manual_engine(1);
	uint64_t unreserved = stats_of(plain).memory_bytes;
	tw_engine_destroy(plain);
	tw_config cfg = manual_config(1);
	cfg.reserve_tasks = N;
	tw_engine *e = engine_new(&cfg);
	uint64_t reserved = stats_of(e).memory_bytes;
	cr_assert_geq(reserved - unreserved, chunks * CHUNK_BYTES, "%" PRIu64 " bytes reserved",
		      reserved - unreserved);
	cr_assert_lt(reserved - unreserved, (chunks + 1) * CHUNK_BYTES, "%" PRIu64 " bytes",
		     reserved - unreserved);
	struct counts c = { 0 };
	uint64_t room = chunks * CHUNK_TASKS;
	for (uint64_t i = 0; i < room; i++)
		add_counted(e, &c, 1000, 0);
	cr_assert_eq(stats_of(e).memory_bytes, reserved, "adds into the room grow nothing");
	add_counted(e, &c, 1000, 0);
	cr_assert_gt(stats_of(e).memory_bytes, reserved, "past it the table grows");
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c.releases), room + 1);
	cfg.reserve_tasks = UINT64_MAX;
	tw_engine *refused = NULL;
	cr_assert_eq(tw_engine_create(&cfg, &refused), -TW_EINVAL);
	cr_assert_null(refused);
	assert_no_leaks();
}

static void check_unknown(tw_engine *e, tw_id id)
{
	tw_task_info info;
	cr_assert_eq(tw_get(e, id, &info), -TW_ENOTFOUND, "get %#" PRIx64, id);
	cr_assert_eq(tw_pause(e, id), -TW_ENOTFOUND, "pause %#" PRIx64, id);
	cr_assert_eq(tw_resume(e, id), -TW_ENOTFOUND, "resume %#" PRIx64, id);
	cr_assert_eq(tw_cancel(e, id), -TW_ENOTFOUND, "cancel %#" PRIx64, id);
	cr_assert_eq(tw_set_delay(e, id, 5), -TW_ENOTFOUND, "set_delay %#" PRIx64, id);
	cr_assert_eq(tw_set_period(e, id, 5), -TW_ENOTFOUND, "set_period %#" PRIx64, id);
}

Test(inputs, unknown_ids_are_not_found)
{
	tw_engine *e = manual_engine(1);
	check_unknown(e, 0);
	check_unknown(e, 1);
	check_unknown(e, UINT64_MAX);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, 10, 10);
	check_unknown(e, 0);
	/* Ids near a real one: other bits set or cleared. */
	for (int bit = 0; bit < 64; bit++)
		check_unknown(e, id ^ (UINT64_C(1) << bit));
	check_unknown(e, id + 1);
	check_unknown(e, id - 1);
	check_unknown(e, UINT64_MAX);
	check_unknown(e, UINT32_MAX);
	/* None of that touched the real task. */
	tw_task_info info = info_of(e, id);
	cr_assert_eq(info.state, TW_WAITING);
	cr_assert_eq(info.period_ms, 10);
	step(e, 10);
	cr_assert_eq(atomic_load(&c.runs), 1);
	destroy_expecting_releases(e, &c, 1);
}

Test(inputs, null_engine_or_out_pointer_is_invalid)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id id = add_counted(e, &c, 10, 10);
	tw_task_info info;
	tw_engine_stats stats;
	cr_assert_eq(tw_get(NULL, id, &info), -TW_EINVAL);
	cr_assert_eq(tw_get(e, id, NULL), -TW_EINVAL);
	cr_assert_eq(tw_get(e, 0, NULL), -TW_EINVAL);
	cr_assert_eq(tw_pause(NULL, id), -TW_EINVAL);
	cr_assert_eq(tw_resume(NULL, id), -TW_EINVAL);
	cr_assert_eq(tw_cancel(NULL, id), -TW_EINVAL);
	cr_assert_eq(tw_set_delay(NULL, id, 5), -TW_EINVAL);
	cr_assert_eq(tw_set_period(NULL, id, 5), -TW_EINVAL);
	cr_assert_eq(tw_stats(NULL, &stats), -TW_EINVAL);
	cr_assert_eq(tw_stats(e, NULL), -TW_EINVAL);
	cr_assert_eq(tw_advance(NULL, 1), -TW_EINVAL);
	cr_assert_eq(tw_quiesce(NULL), -TW_EINVAL);
	cr_assert_eq(info_of(e, id).state, TW_WAITING);
	destroy_expecting_releases(e, &c, 1);
}

Test(inputs, advance_needs_the_manual_clock)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	tw_engine *e = engine_new(&cfg);
	cr_assert_eq(tw_advance(e, 0), -TW_ESTATE);
	cr_assert_eq(tw_advance(e, 10), -TW_ESTATE);
	cr_assert_eq(tw_quiesce(e), TW_OK);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* tw_strerror names every code, as returned (negated) and as enumerated. */
Test(inputs, strerror_names_every_code)
{
	const int codes[] = { TW_OK,     TW_EINVAL,    TW_ENOTFOUND, TW_ESTATE,   TW_ERANGE,
			      TW_ENOMEM, TW_ESHUTDOWN, TW_ELIMIT,    TW_ETIMEDOUT };
	enum { N = sizeof codes / sizeof codes[0] };
	const char *names[N];
	for (int i = 0; i < N; i++) {
		names[i] = tw_strerror(-codes[i]);
		cr_assert_not_null(names[i], "code %d", codes[i]);
		cr_assert_gt(strlen(names[i]), 0, "code %d", codes[i]);
		cr_assert_str_eq(tw_strerror(codes[i]), names[i], "code %d, both signs", codes[i]);
		for (int j = 0; j < i; j++)
			cr_assert_str_neq(names[i], names[j], "codes %d and %d share a name",
					  codes[i], codes[j]);
	}
	const int unknown[] = { TW_ETIMEDOUT + 1, -(TW_ETIMEDOUT + 1), 100,    -100, 12345,
				INT_MAX,          INT_MIN + 1,         INT_MIN };
	for (size_t k = 0; k < sizeof unknown / sizeof unknown[0]; k++) {
		const char *s = tw_strerror(unknown[k]);
		cr_assert_not_null(s, "code %d", unknown[k]);
		cr_assert_gt(strlen(s), 0);
		for (int j = 0; j < N; j++)
			cr_assert_str_neq(s, names[j], "unknown code %d named like code %d",
					  unknown[k], codes[j]);
	}
	assert_no_leaks();
}

Test(inputs, max_tasks_limits_live_tasks)
{
	tw_config cfg = manual_config(1);
	cfg.max_tasks = 3;
	tw_engine *e = engine_new(&cfg);
	struct counts c = { 0 };
	tw_id a = add_counted(e, &c, 100, 100);
	tw_id b = add_counted(e, &c, 100, 100);
	add_counted(e, &c, 5, 0);
	cr_assert_eq(tw_pause(e, b), TW_OK);
	tw_task_spec spec = spec_of(1, 0, count_callback, &c);
	spec.release = count_release;
	tw_id out = 0;
	cr_assert_eq(tw_add(e, &spec, &out), -TW_ELIMIT, "paused tasks are live");
	cr_assert_eq(stats_of(e).tasks_live, 3);
	(void)a;
	destroy_expecting_releases(e, &c, 3);
}

/* A task that ended is not live any more: it leaves room for another, even
 * while its id is still kept for queries. */
Test(inputs, ended_tasks_do_not_count_against_max_tasks)
{
	tw_config cfg = manual_config(1);
	cfg.max_tasks = 2;
	tw_engine *e = engine_new(&cfg);
	struct counts c = { 0 };
	tw_id a = add_counted(e, &c, 100, 100);
	add_counted(e, &c, 5, 0);
	tw_task_spec spec = spec_of(1, 0, count_callback, &c);
	spec.release = count_release;
	tw_id out = 0;
	cr_assert_eq(tw_add(e, &spec, &out), -TW_ELIMIT);
	cr_assert_eq(tw_cancel(e, a), TW_OK);
	cr_assert_eq(stats_of(e).tasks_live, 1);
	int rc = tw_add(e, &spec, &out);
	cr_assert_eq(rc, TW_OK, "after a cancel, 1 live task of 2: %s", tw_strerror(rc));
	step(e, 5); /* the one-shot completes */
	cr_assert_eq(stats_of(e).tasks_live, 0);
	rc = tw_add(e, &spec, &out);
	cr_assert_eq(rc, TW_OK, "after a completion: %s", tw_strerror(rc));
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* Executors: 0 means one per online CPU; any count works. */
Test(inputs, executor_counts)
{
	const unsigned counts[] = { 0, 1, 3, 8 };
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
		tw_config cfg = manual_config(counts[i]);
		cfg.pin_executors = i % 2;
		tw_engine *e = engine_new(&cfg);
		struct counts c[16];
		memset(c, 0, sizeof c);
		for (int k = 0; k < 16; k++)
			add_counted(e, &c[k], 1, 1);
		for (int t = 0; t < 10; t++)
			step(e, 1);
		for (int k = 0; k < 16; k++)
			cr_assert_eq(atomic_load(&c[k].runs), 10, "executors %u, task %d",
				     counts[i], k);
		tw_engine_destroy(e);
		for (int k = 0; k < 16; k++)
			cr_assert_eq(atomic_load(&c[k].releases), 1);
	}
	assert_no_leaks();
}

/* Each id gets what tw_set_delay would answer; the call, the first failure. */
Test(inputs, set_delay_many_answers_for_each_id)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	tw_id waiting = add_counted(e, &c, 10, 0), paused = add_counted(e, &c, 10, 0);
	tw_id cancelled = add_counted(e, &c, 10, 0), completed = add_counted(e, &c, 1, 0);
	step(e, 1);
	cr_assert_eq(info_of(e, completed).state, TW_COMPLETED);
	cr_assert_eq(tw_pause(e, paused), TW_OK);
	cr_assert_eq(tw_cancel(e, cancelled), TW_OK);
	const tw_id ids[] = { waiting,   0,      waiting ^ (UINT64_C(1) << 40),
			      completed, paused, cancelled };
	const int want[] = { TW_OK, -TW_ENOTFOUND, -TW_ENOTFOUND, -TW_ESTATE, TW_OK, -TW_ESTATE };
	int results[6];
	cr_assert_eq(tw_set_delay_many(e, ids, 6, 20, results), -TW_ENOTFOUND);
	for (size_t i = 0; i < 6; i++)
		cr_assert_eq(results[i], want[i], "id %zu: %d, want %d", i, results[i], want[i]);
	cr_assert_eq(tw_set_delay_many(e, ids + 3, 3, 20, NULL), -TW_ESTATE);
	cr_assert_eq(tw_set_delay_many(e, ids, 1, 20, NULL), TW_OK);
	/* The paused task took its new delay for its resume, as tw_set_delay does. */
	uint64_t resumed_at = manual_now(e);
	cr_assert_eq(tw_resume(e, paused), TW_OK);
	cr_assert_eq(info_of(e, paused).next_due_ns, resumed_at + 20 * NS_PER_MS);
	destroy_expecting_releases(e, &c, 4);
}

/* A refused call touches no task and leaves results as they were. */
Test(inputs, set_delay_many_refused_calls_change_nothing)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	uint64_t t0 = manual_now(e);
	tw_id id = add_counted(e, &c, 10, 0);
	int results[1] = { 12345 };
	cr_assert_eq(tw_set_delay_many(NULL, &id, 1, 5, results), -TW_EINVAL);
	cr_assert_eq(tw_set_delay_many(e, NULL, 1, 5, results), -TW_EINVAL);
	cr_assert_eq(tw_set_delay_many(e, NULL, 0, 5, NULL), TW_OK);
	cr_assert_eq(tw_set_delay_many(e, &id, 0, 5, results), TW_OK);
	cr_assert_eq(tw_set_delay_many(e, &id, 1, TW_MAX_DELAY_MS + 1, results), -TW_ERANGE);
	cr_assert_eq(results[0], 12345);
	cr_assert_eq(info_of(e, id).next_due_ns, t0 + 10 * NS_PER_MS);
	cr_assert_eq(tw_engine_stop(e, 1000), TW_OK);
	cr_assert_eq(tw_set_delay_many(e, &id, 1, 5, results), -TW_ESHUTDOWN);
	cr_assert_eq(results[0], 12345);
	destroy_expecting_releases(e, &c, 1);
}

/* Out of file descriptors is not the max_tasks cap: -TW_ERESOURCE, in a child
 * whose descriptor limit leaves no room for the engine's three. */
Test(inputs, no_file_descriptors_is_a_resource_error)
{
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		struct rlimit none = { 0, 0 };
		int bad = setrlimit(RLIMIT_NOFILE, &none) != 0;
		tw_engine *e = (tw_engine *)&none;
		int rc = tw_engine_create(NULL, &e);
		bad += rc != -TW_ERESOURCE;
		bad += e != NULL;
		bad += strcmp(tw_strerror(rc),
			      "the system refused a thread or a file descriptor") != 0;
		_exit(bad);
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

/* Configuration values outside their documented limits are refused, and nothing is made. */
Test(inputs, config_outside_its_limits_is_refused)
{
	tw_config cfg;
	tw_engine *e = NULL;
	tw_config_init(&cfg);
	cfg.executors = TW_MAX_EXECUTORS + 1;
	cr_assert_eq(tw_engine_create(&cfg, &e), -TW_EINVAL);
	cr_assert_null(e);
	tw_config_init(&cfg);
	cfg.spare_executors = TW_MAX_EXECUTORS + 1;
	cr_assert_eq(tw_engine_create(&cfg, &e), -TW_EINVAL);
	tw_config_init(&cfg);
	cfg.queue_capacity = TW_MAX_QUEUE_CAPACITY + 1;
	cr_assert_eq(tw_engine_create(&cfg, &e), -TW_EINVAL);
	/* 0 is the default queue, not a refusal; the limits themselves are accepted. */
	tw_config_init(&cfg);
	cfg.queue_capacity = 0;
	cfg.executors = 1;
	cfg.manual_clock = true;
	cr_assert_eq(tw_engine_create(&cfg, &e), TW_OK);
	tw_engine_destroy(e);
	/* tw_advance on a real-clock engine: the text names the engine's state too. */
	tw_config_init(&cfg);
	cfg.executors = 1;
	cr_assert_eq(tw_engine_create(&cfg, &e), TW_OK);
	int rc = tw_advance(e, 1);
	cr_assert_eq(rc, -TW_ESTATE);
	cr_assert(strstr(tw_strerror(rc), "engine") != NULL, "%s", tw_strerror(rc));
	tw_engine_destroy(e);
	assert_no_leaks();
}
