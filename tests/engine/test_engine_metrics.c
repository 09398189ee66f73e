/*
 * test_engine_metrics.c - the Prometheus text exposition (tw_metrics_write,
 * tw_metrics_format).
 *
 * On the manual clock a run's lateness is the manual time it starts at minus
 * its due, so the histogram's buckets and sum are known exactly: a one-shot
 * due 1 ms after t0 and run by tw_advance(e, 10) is 9 ms late. Checked: every
 * family's HELP and TYPE lines, cumulative buckets that never go down, +Inf
 * equal to _count, the prefix, the labels (checked, escaped), the buffer
 * that is too small (snprintf's way) and the writer that fails.
 */
#include "engine_test_support.h"

#include <stdio.h>

static int ok_callback(const tw_fire *fire, void *arg)
{
	(void)fire;
	(void)arg;
	return 0;
}

static int failing_callback(const tw_fire *fire, void *arg)
{
	(void)fire;
	(void)arg;
	return 1;
}

/* An engine with known counts: 3 one-shots 9 ms late, a periodic task run 5 times (lateness
 * 0 each: every 2 ms, advanced 2 ms at a time), 1 failure, 1 task cancelled. */
static tw_engine *known_engine(void)
{
	tw_engine *e = manual_engine(1);
	for (int i = 0; i < 3; i++)
		add_task(e, 1, 0, ok_callback, NULL);
	add_task(e, 5, 0, failing_callback, NULL);
	tw_id cancelled = add_task(e, 1000, 0, ok_callback, NULL);
	cr_assert_eq(tw_cancel(e, cancelled), TW_OK);
	step(e, 10);
	add_task(e, 2, 2, ok_callback, NULL);
	for (int i = 0; i < 5; i++)
		step(e, 2);
	return e;
}

/* The whole text with no options, malloc'ed. */
static char *text_now(tw_engine *e)
{
	size_t len = 0;
	cr_assert_eq(tw_metrics_format(e, NULL, NULL, 0, &len), -TW_ENOSPACE);
	size_t cap = len + 1024; /* the busy times may grow meanwhile */
	char *buf = malloc(cap);
	cr_assert_not_null(buf);
	cr_assert_eq(tw_metrics_format(e, NULL, buf, cap, NULL), TW_OK);
	return buf;
}

/* Lets the engine's threads finish what they had started (a round of the wheel thread, an
 * ended task's mail): on the manual clock nothing else moves after that, so the text, the
 * busy times included, stays the same from one call to the next. Waits until two texts a
 * few ms apart agree, rather than for a fixed time a held-up thread may overrun. */
static void settle(tw_engine *e)
{
	quiesce(e);
	char *before = text_now(e);
	for (int tries = 0; tries < 1000; tries++) {
		sleep_ms(5);
		char *now = text_now(e);
		bool same = !strcmp(before, now);
		free(before);
		before = now;
		if (same)
			break;
	}
	free(before);
}

/* The whole text, malloc'ed. */
static char *format(tw_engine *e, const tw_metrics_options *opt)
{
	settle(e);
	size_t len = 0;
	cr_assert_eq(tw_metrics_format(e, opt, NULL, 0, &len), -TW_ENOSPACE);
	/* With room to spare, as the header says: the busy times grow between the calls. */
	size_t cap = len + 1024;
	char *buf = malloc(cap);
	cr_assert_not_null(buf);
	size_t again = 0;
	int rc = tw_metrics_format(e, opt, buf, cap, &again);
	cr_assert_eq(rc, TW_OK, "%s", tw_strerror(rc));
	cr_assert_eq(strlen(buf), again);
	return buf;
}

/* The value of the sample line that starts with `series ` (name and labels). */
static double sample(const char *text, const char *series)
{
	size_t n = strlen(series);
	for (const char *line = text; *line;) {
		if (!strncmp(line, series, n) && line[n] == ' ')
			return strtod(line + n + 1, NULL);
		const char *nl = strchr(line, '\n');
		if (!nl)
			break;
		line = nl + 1;
	}
	cr_assert_fail("no sample %s in:\n%s", series, text);
	return 0;
}

static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)); p += n)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

Test(metrics, every_family_has_help_and_type)
{
	tw_engine *e = known_engine();
	char *text = format(e, NULL);
	static const char *const families[][2] = {
		{ "runs_total", "counter" },
		{ "failures_total", "counter" },
		{ "slow_runs_total", "counter" },
		{ "skipped_total", "counter" },
		{ "tasks_completed_total", "counter" },
		{ "tasks_stopped_total", "counter" },
		{ "wheel_wakeups_total", "counter" },
		{ "stuck_runs_total", "counter" },
		{ "wheel_thread_runs_total", "counter" },
		{ "over_budget_runs_total", "counter" },
		{ "tasks_moved_off_wheel_thread_total", "counter" },
		{ "tasks_live", "gauge" },
		{ "tasks", "gauge" },
		{ "spare_executors", "gauge" },
		{ "memory_bytes", "gauge" },
		{ "wheel_busy_seconds_total", "counter" },
		{ "lateness_seconds", "histogram" },
		{ "lateness_max_seconds", "gauge" },
		{ "executor_queued", "gauge" },
		{ "executor_queued_max", "gauge" },
		{ "executor_busy_seconds_total", "counter" },
	};
	size_t types = 0;
	for (const char *p = text; (p = strstr(p, "# TYPE ")); p++)
		types++;
	cr_assert_eq(types, sizeof families / sizeof families[0], "%s", text);
	for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
		char want[128];
		snprintf(want, sizeof want, "# TYPE tickwheel_%s %s", families[i][0],
			 families[i][1]);
		cr_assert(has_line(text, want), "no line %s in:\n%s", want, text);
		/* HELP right before TYPE, with some text. */
		snprintf(want, sizeof want, "# HELP tickwheel_%s ", families[i][0]);
		const char *help = strstr(text, want);
		cr_assert_not_null(help, "no %s", want);
		const char *eol = strchr(help, '\n');
		cr_assert(eol - help > (ptrdiff_t)strlen(want) + 5);
		cr_assert_eq(strncmp(eol + 1, "# TYPE ", 7), 0);
	}
	cr_assert_eq(text[strlen(text) - 1], '\n');
	free(text);
	tw_engine_destroy(e);
}

Test(metrics, values_are_the_stats)
{
	tw_engine *e = known_engine();
	tw_engine_stats st = stats_of(e);
	cr_assert_eq(st.runs, 9);
	char *text = format(e, NULL);
	cr_assert_eq(sample(text, "tickwheel_runs_total"), 9);
	cr_assert_eq(sample(text, "tickwheel_failures_total"), 1);
	cr_assert_eq(sample(text, "tickwheel_tasks_completed_total"), 4);
	cr_assert_eq(sample(text, "tickwheel_tasks_stopped_total"), 1);
	cr_assert_eq(sample(text, "tickwheel_tasks_live"), 1);
	cr_assert_eq(sample(text, "tickwheel_tasks{state=\"waiting\"}"), 1);
	cr_assert_eq(sample(text, "tickwheel_tasks{state=\"running\"}"), 0);
	cr_assert_eq(sample(text, "tickwheel_tasks{state=\"paused\"}"), 0);
	cr_assert_eq(sample(text, "tickwheel_skipped_total{reason=\"overlap\"}"),
		     (double)st.skipped_overlap);
	cr_assert_eq(sample(text, "tickwheel_skipped_total{reason=\"overload\"}"),
		     (double)st.skipped_overload);
	cr_assert_eq(sample(text, "tickwheel_skipped_total{reason=\"missed\"}"),
		     (double)st.skipped_missed);
	cr_assert_eq(sample(text, "tickwheel_wheel_wakeups_total"), (double)st.wheel_wakeups);
	cr_assert_eq(sample(text, "tickwheel_stuck_runs_total"), 0);
	cr_assert_eq(sample(text, "tickwheel_spare_executors"), 0);
	cr_assert_eq(sample(text, "tickwheel_memory_bytes"), (double)st.memory_bytes);
	free(text);
	tw_engine_destroy(e);
}

Test(metrics, lateness_buckets_are_cumulative_seconds)
{
	tw_engine *e = known_engine();
	tw_engine_stats st = stats_of(e);
	/* 3 one-shots 9 ms late, one 5 ms late, 5 periodic runs on time. */
	cr_assert_eq(st.lateness_sum_ns, 3 * 9 * NS_PER_MS + 5 * NS_PER_MS);
	char *text = format(e, NULL);
	cr_assert(has_line(text, "tickwheel_lateness_seconds_bucket{le=\"0.000001\"} 5"), "%s",
		  text);
	cr_assert(has_line(text, "tickwheel_lateness_seconds_bucket{le=\"0.004096\"} 5"));
	/* 5 ms: 4096 <= 5000 < 8192 us; 9 ms: 8192 <= 9000 < 16384 us. */
	cr_assert(has_line(text, "tickwheel_lateness_seconds_bucket{le=\"0.008192\"} 6"));
	cr_assert(has_line(text, "tickwheel_lateness_seconds_bucket{le=\"0.016384\"} 9"));
	cr_assert(has_line(text, "tickwheel_lateness_seconds_bucket{le=\"4.194304\"} 9"));
	cr_assert(has_line(text, "tickwheel_lateness_seconds_bucket{le=\"+Inf\"} 9"));
	cr_assert(has_line(text, "tickwheel_lateness_seconds_sum 0.032"));
	cr_assert(has_line(text, "tickwheel_lateness_seconds_count 9"));
	cr_assert(has_line(text, "tickwheel_lateness_max_seconds 0.009"));

	/* 23 bounds doubling from 1 us, then +Inf; counts never go down. */
	double previous_le = 0, previous = 0;
	unsigned buckets = 0;
	static const char key[] = "tickwheel_lateness_seconds_bucket{le=\"";
	for (const char *p = text; (p = strstr(p, key)); p++) {
		const char *le = p + strlen(key);
		double count = strtod(strstr(le, "} ") + 2, NULL);
		cr_assert_geq(count, previous, "bucket %u goes down", buckets);
		previous = count;
		if (!strncmp(le, "+Inf", 4)) {
			cr_assert_eq(buckets, TW_LATENESS_BUCKETS - 1);
			cr_assert_eq(count, sample(text, "tickwheel_lateness_seconds_count"));
		} else {
			double bound = strtod(le, NULL);
			cr_assert_float_eq(bound, buckets ? 2 * previous_le : 1e-6, 1e-12);
			previous_le = bound;
		}
		buckets++;
	}
	cr_assert_eq(buckets, TW_LATENESS_BUCKETS);
	free(text);
	tw_engine_destroy(e);
}

Test(metrics, prefix)
{
	tw_engine *e = manual_engine(1);
	tw_metrics_options opt = { .prefix = "app_timers_" };
	char *text = format(e, &opt);
	cr_assert(has_line(text, "# TYPE app_timers_runs_total counter"));
	cr_assert(has_line(text, "app_timers_runs_total 0"));
	cr_assert_null(strstr(text, "tickwheel_"));
	free(text);

	opt.prefix = "";
	text = format(e, &opt);
	cr_assert(has_line(text, "runs_total 0"));
	cr_assert(has_line(text, "lateness_seconds_bucket{le=\"+Inf\"} 0"));
	free(text);

	opt.prefix = "ns:sub_";
	text = format(e, &opt);
	cr_assert(has_line(text, "ns:sub_runs_total 0"));
	free(text);

	char buf[64];
	const char *bad[] = { "1x_", "a-b_", "a b", "é_" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		opt.prefix = bad[i];
		cr_assert_eq(tw_metrics_format(e, &opt, buf, sizeof buf, NULL), -TW_EINVAL, "%s",
			     bad[i]);
	}
	tw_engine_destroy(e);
}

Test(metrics, labels_are_checked_and_escaped)
{
	tw_engine *e = manual_engine(1);
	const char *const labels[] = { "engine", "gw\"1\"\\n\n", "zone", "", NULL };
	tw_metrics_options opt = { .labels = labels };
	char *text = format(e, &opt);
	cr_assert(
		has_line(text, "tickwheel_runs_total{engine=\"gw\\\"1\\\"\\\\n\\n\",zone=\"\"} 0"),
		"%s", text);
	cr_assert(has_line(text, "tickwheel_skipped_total{engine=\"gw\\\"1\\\"\\\\n\\n\",zone=\"\","
				 "reason=\"missed\"} 0"));
	cr_assert(has_line(text, "tickwheel_lateness_seconds_bucket{engine=\"gw\\\"1\\\"\\\\n\\n\","
				 "zone=\"\",le=\"+Inf\"} 0"));
	free(text);

	const char *const empty[] = { NULL };
	opt.labels = empty;
	text = format(e, &opt);
	cr_assert(has_line(text, "tickwheel_runs_total 0"));
	free(text);

	const char *const bad[][5] = {
		{ "1a", "v", NULL }, { "a-b", "v", NULL },    { "__name", "v", NULL },
		{ "le", "v", NULL }, { "reason", "v", NULL }, { "state", "v", NULL },
		{ "", "v", NULL },   { "odd", NULL },         { "a", "1", "a", "2", NULL },
		{ "é", "v", NULL },
	};
	char buf[64];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		opt.labels = bad[i];
		cr_assert_eq(tw_metrics_format(e, &opt, buf, sizeof buf, NULL), -TW_EINVAL,
			     "labels %zu (%s)", i, bad[i][0]);
	}
	tw_engine_destroy(e);
}

Test(metrics, a_buffer_too_small_is_filled_and_the_length_told)
{
	tw_engine *e = known_engine();
	char *text = format(e, NULL);
	size_t whole = strlen(text);
	size_t caps[] = { 1, 2, 100, whole / 2, whole };
	for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
		size_t cap = caps[i], len = 0;
		char *buf = malloc(cap + 8);
		memset(buf, 'x', cap + 8);
		cr_assert_eq(tw_metrics_format(e, NULL, buf, cap, &len), -TW_ENOSPACE);
		cr_assert_eq(len, whole, "cap %zu", cap);
		cr_assert_eq(buf[cap - 1], '\0', "cap %zu: not NUL-terminated", cap);
		cr_assert_eq(strncmp(buf, text, cap - 1), 0, "cap %zu", cap);
		cr_assert_eq(buf[cap], 'x', "cap %zu: written past the buffer", cap);
		free(buf);
	}
	char *buf = malloc(whole + 1);
	cr_assert_eq(tw_metrics_format(e, NULL, buf, whole + 1, NULL), TW_OK);
	cr_assert_str_eq(buf, text);
	free(buf);
	cr_assert_eq(tw_metrics_format(e, NULL, NULL, 10, NULL), -TW_EINVAL);
	cr_assert_eq(tw_metrics_format(NULL, NULL, NULL, 0, NULL), -TW_EINVAL);
	free(text);
	tw_engine_destroy(e);
}

struct collected {
	char text[65536];
	size_t len, calls, fail_at;
};

static int collect(void *ctx, const char *data, size_t len)
{
	struct collected *c = ctx;
	if (++c->calls == c->fail_at)
		return -5;
	cr_assert_leq(c->len + len, sizeof c->text);
	memcpy(c->text + c->len, data, len);
	c->len += len;
	return 0;
}

Test(metrics, the_writer_gets_the_same_text_and_may_fail)
{
	tw_engine *e = known_engine();
	char value[300];
	memset(value, 'v', sizeof value - 1);
	value[sizeof value - 1] = '\0';
	const char *const labels[] = { "a_long_value", value, NULL };
	tw_metrics_options opt = { .labels = labels };
	char *text = format(e, &opt);
	cr_assert_gt(strlen(text), 8192, "the text should span several chunks");
	struct collected *c = calloc(1, sizeof *c);
	cr_assert_eq(tw_metrics_write(e, &opt, collect, c), TW_OK);
	cr_assert_eq(c->len, strlen(text));
	cr_assert_eq(memcmp(c->text, text, c->len), 0);
	cr_assert_gt(c->calls, 1);

	memset(c, 0, sizeof *c);
	c->fail_at = 2;
	cr_assert_eq(tw_metrics_write(e, &opt, collect, c), -TW_EWRITE);
	cr_assert_eq(c->calls, 2, "the writer was called after it failed");
	cr_assert_str_eq(tw_strerror(-TW_EWRITE), "the writer callback failed");
	cr_assert_str_eq(tw_strerror(-TW_ENOSPACE), "buffer too small");

	cr_assert_eq(tw_metrics_write(e, &opt, NULL, c), -TW_EINVAL);
	cr_assert_eq(tw_metrics_write(NULL, &opt, collect, c), -TW_EINVAL);
	free(c);
	free(text);
	tw_engine_destroy(e);
}

Test(metrics, options_of_another_size)
{
	tw_engine *e = manual_engine(1);
	const char *const labels[] = { "x", "y", NULL };
	struct {
		tw_metrics_options known;
		unsigned char newer[16];
	} opt = { .known = { .prefix = "p_", .labels = labels } };
	char buf[8192];
	/* An older caller's struct, without labels: they are not read. */
	cr_assert_eq(tw_metrics_format_sized(e, &opt.known, offsetof(tw_metrics_options, labels),
					     buf, sizeof buf, NULL),
		     TW_OK);
	cr_assert(has_line(buf, "p_runs_total 0"), "%s", buf);
	/* A newer caller's, zero past ours: fine; anything else there: refused. */
	cr_assert_eq(tw_metrics_format_sized(e, &opt.known, sizeof opt, buf, sizeof buf, NULL),
		     TW_OK);
	cr_assert(has_line(buf, "p_runs_total{x=\"y\"} 0"));
	opt.newer[3] = 1;
	cr_assert_eq(tw_metrics_format_sized(e, &opt.known, sizeof opt, buf, sizeof buf, NULL),
		     -TW_EINVAL);
	tw_engine_destroy(e);
}

Test(metrics, after_stop)
{
	tw_engine *e = known_engine();
	cr_assert_eq(tw_engine_stop(e, 1000), TW_OK);
	char *text = format(e, NULL);
	cr_assert_eq(sample(text, "tickwheel_runs_total"), 9);
	cr_assert_eq(sample(text, "tickwheel_tasks_live"), 0);
	free(text);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* Per executor: queue depth now, its high-water mark, busy time; and the wheel thread's. */
Test(metrics, executors_queue_and_busy_time)
{
	tw_engine *e = manual_engine(1);
	struct recorder *r = recorder_new(e);
	add_recorded(e, r, 1, 0, 0);
	start_blocked_run(e, r);
	struct counts c = { 0 };
	for (int i = 0; i < 3; i++)
		add_counted(e, &c, 1, 0);
	advance(e, 1);
	tw_engine_stats st = stats_of(e);
	cr_assert_eq(st.executors, 1);
	cr_assert_eq(st.queued, 3, "three firings behind the blocked run");
	tw_executor_info x;
	cr_assert_eq(tw_executor_stats(e, 0, &x), TW_OK);
	cr_assert_eq(x.queued, 3);
	cr_assert_neq(x.run_ns, 0, "its run is going");
	cr_assert(!x.spare);
	cr_assert_eq(tw_executor_stats(e, 1, &x), -TW_ENOTFOUND);
	cr_assert_eq(tw_executor_stats(e, 0, NULL), -TW_EINVAL);
	sleep_ms(5);
	gate_open(&r->gate, 1);
	quiesce(e);
	cr_assert_eq(tw_executor_stats(e, 0, &x), TW_OK);
	cr_assert_eq(x.queued, 0);
	cr_assert_geq(x.queued_max, 3, "it held the three when it took the first of them");
	cr_assert_eq(x.runs, 4);
	cr_assert_geq(x.busy_ns, 5 * NS_PER_MS, "the blocked run's time");
	cr_assert_eq(x.run_ns, 0);
	st = stats_of(e);
	cr_assert_eq(st.executor_busy_ns, x.busy_ns);
	cr_assert_gt(st.wheel_busy_ns, 0);
	destroy_checking_recorder(e, r);
}

/* lateness_count beside lateness_sum_ns: the runs the buckets hold, added up. */
Test(metrics, lateness_count_is_the_buckets_added_up)
{
	tw_engine *e = manual_engine(1);
	struct counts c = { 0 };
	add_counted(e, &c, 1, 1);
	for (int i = 0; i < 5; i++)
		step(e, 1);
	tw_engine_stats st = stats_of(e);
	uint64_t sum = 0;
	for (int b = 0; b < TW_LATENESS_BUCKETS; b++)
		sum += st.lateness_us[b];
	cr_assert_eq(st.lateness_count, 5);
	cr_assert_eq(st.lateness_count, sum);
	cr_assert_eq(st.lateness_count, st.runs);
	tw_engine_destroy(e);
	assert_no_leaks();
}

/* memory_bytes: what the engine holds; its table grows with the tasks, by whole chunks
 * (152 bytes a task: core/task.h), and does not shrink before destroy. */
Test(metrics, memory_bytes_grows_with_the_table)
{
	tw_engine *e = manual_engine(1);
	uint64_t empty = stats_of(e).memory_bytes;
	cr_assert_gt(empty, 0);
	enum { N = 50000 };
	static tw_id ids[N];
	struct counts c = { 0 };
	for (int i = 0; i < N; i++)
		ids[i] = add_counted(e, &c, 1000, 0);
	uint64_t full = stats_of(e).memory_bytes;
	double per_task = (double)(full - empty) / N;
	cr_assert(per_task >= 144 && per_task <= 170, "%.1f bytes a task", per_task);
	for (int i = 0; i < N; i++)
		cr_assert_eq(tw_cancel(e, ids[i]), TW_OK);
	cr_assert_eq(stats_of(e).memory_bytes, full, "the table keeps its chunks");
	destroy_expecting_releases(e, &c, N);
}
