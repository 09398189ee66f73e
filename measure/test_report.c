/*
 * test_report.c - the report's table and JSON, the plots and the series the
 * tools draw. JSON is read back by python's json module (TW_PYTHON, set by
 * meson), so a malformed file fails here as it would for perf/compare.py.
 */
#include "hgrm.h"
#include "measure.h"
#include "plot.h"
#include "report.h"
#include "wake_floor.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char json_path[] = "/tmp/test_report_XXXXXX";

static void make_temp(void)
{
	int fd = mkstemp(json_path);
	cr_assert(fd >= 0, "mkstemp");
	close(fd);
}

static void remove_temp(void)
{
	unlink(json_path);
}

/* ascii() of a python expression over the JSON file `d`; NULL if it did not parse. */
static char *py(const char *expression)
{
	const char *python = getenv("TW_PYTHON") ? getenv("TW_PYTHON") : "python3";
	char command[4096];
	snprintf(command, sizeof command,
		 "'%s' -c 'import json, sys; d = json.load(open(sys.argv[1], encoding=\"utf-8\"));"
		 " print(ascii(eval(sys.argv[2])))' '%s' '%s'",
		 python, json_path, expression);
	FILE *p = popen(command, "r");
	cr_assert(p, "popen %s", python);
	static char out[4096];
	size_t n = fread(out, 1, sizeof out - 1, p);
	out[n] = 0;
	out[strcspn(out, "\n")] = 0;
	return pclose(p) == 0 ? out : NULL;
}

#define assert_py(expression, expected)                                                    \
	do {                                                                               \
		const char *got_ = py(expression);                                         \
		cr_assert(got_, "python could not read %s for %s", json_path, expression); \
		cr_assert_str_eq(got_, expected, "%s", expression);                        \
	} while (0)

static struct report *sample(void)
{
	char *argv[] = { "tw-test", "--tasks", "5", "a b" };
	struct report *r = report_open("tw-test", "sample", 4, argv);
	cr_assert(r);
	report_param(r, "tasks", 5);
	report_param(r, "seconds", 1.5);
	report_add(r, "tickwheel", "lateness_p99", 315, "us", BETTER_LOWER);
	report_add(r, "libev", "lateness_p99", 630, "us", BETTER_LOWER);
	report_add(r, "tickwheel", "runs", 1000, "runs", BETTER_HIGHER);
	report_target(r, "lateness_p99", "<=", 1200);
	report_target(r, "runs", ">=", 2000);
	double x[] = { 1, 2, 3 }, y[] = { 0.25, 0.5, 1 };
	report_series(r, "tickwheel", "lateness_cdf", x, y, 3);
	report_note(r, "libuv drifts by %s", "design");
	return r;
}

TestSuite(report, .init = make_temp, .fini = remove_temp);

Test(report, json_reads_back)
{
	struct report *r = sample();
	cr_assert_eq(report_write_json(r, json_path), 0);
	report_free(r);
	assert_py("d[\"tool\"], d[\"scenario\"]", "('tw-test', 'sample')");
	assert_py("d[\"command\"]", "\"tw-test --tasks 5 'a b'\"");
	assert_py("d[\"params\"]", "{'tasks': 5, 'seconds': 1.5}");
	assert_py("[(f[\"impl\"], f[\"name\"], f[\"value\"], f[\"unit\"], f[\"better\"]) "
		  "for f in d[\"figures\"]]",
		  "[('tickwheel', 'lateness_p99', 315, 'us', 'lower'), "
		  "('libev', 'lateness_p99', 630, 'us', 'lower'), "
		  "('tickwheel', 'runs', 1000, 'runs', 'higher')]");
	assert_py("d[\"targets\"]", "[{'name': 'lateness_p99', 'op': '<=', 'limit': 1200, "
				    "'met': True}, {'name': 'runs', 'op': '>=', 'limit': 2000, "
				    "'met': False}]");
	assert_py("d[\"series\"]", "[{'impl': 'tickwheel', 'name': 'lateness_cdf', 'x': [1, 2, 3], "
				   "'y': [0.25, 0.5, 1]}]");
	assert_py("d[\"notes\"]", "['libuv drifts by design']");
	assert_py("sorted(d[\"machine\"])",
		  "['arch', 'build', 'compiler', 'cpu', 'cpus', 'date', 'git', 'host', 'kernel']");
	assert_py(
		"all(isinstance(v, str) and v for k, v in d[\"machine\"].items() if k != \"cpus\")",
		"True");
	assert_py("d[\"machine\"][\"cpus\"] > 0", "True");
	assert_py("__import__(\"re\").fullmatch(\"\\\\d{4}-\\\\d\\\\d-\\\\d\\\\dT\\\\d\\\\d:"
		  "\\\\d\\\\d:\\\\d\\\\dZ\", d[\"machine\"][\"date\"]) is not None",
		  "True");
	assert_py("d[\"machine\"][\"build\"].startswith(\"buildtype=\")", "True");
}

Test(report, strings_are_escaped)
{
	const char *odd = "we\"ird\\name\nline\ttab\x01 \xc2\xb5s";
	struct report *r = report_open(odd, "s", 0, NULL);
	cr_assert(r);
	report_add(r, odd, odd, 1, "\xff", BETTER_NEITHER);
	report_note(r, "%s", odd);
	cr_assert_eq(report_write_json(r, json_path), 0);
	report_free(r);
	const char *expected = "'we\"ird\\\\name\\nline\\ttab\\x01 \\xb5s'";
	assert_py("d[\"tool\"]", expected);
	assert_py("d[\"figures\"][0][\"impl\"]", expected);
	assert_py("d[\"figures\"][0][\"name\"]", expected);
	assert_py("d[\"notes\"][0]", expected);
	/* A byte that is not UTF-8 becomes U+FFFD, so the file stays readable. */
	assert_py("d[\"figures\"][0][\"unit\"] == \"\\ufffd\"", "True");
}

Test(report, non_finite_numbers_are_null)
{
	struct report *r = report_open("t", "s", 0, NULL);
	report_add(r, "tickwheel", "nan", NAN, "us", BETTER_LOWER);
	report_add(r, "tickwheel", "inf", INFINITY, "us", BETTER_LOWER);
	report_param(r, "huge", 1e300);
	cr_assert_eq(report_write_json(r, json_path), 0);
	report_free(r);
	assert_py("[f[\"value\"] for f in d[\"figures\"]]", "[None, None]");
	assert_py("d[\"params\"][\"huge\"]", "1e+300");
}

Test(report, a_second_report_replaces_the_first)
{
	struct report *r = report_open("t", "s", 0, NULL);
	report_add(r, "tickwheel", "p99", 1, "us", BETTER_LOWER);
	report_add(r, "libev", "p99", 2, "us", BETTER_LOWER);
	report_add(r, "tickwheel", "p99", 3, "ms", BETTER_HIGHER);
	report_param(r, "tasks", 1);
	report_param(r, "tasks", 2);
	cr_assert_eq(report_write_json(r, json_path), 0);
	report_free(r);
	assert_py(
		"[(f[\"impl\"], f[\"value\"], f[\"unit\"], f[\"better\"]) for f in d[\"figures\"]]",
		"[('tickwheel', 3, 'ms', 'higher'), ('libev', 2, 'us', 'lower')]");
	assert_py("d[\"params\"]", "{'tasks': 2}");
}

Test(report, missed_targets_are_counted)
{
	struct report *r = report_open("t", "s", 0, NULL);
	cr_assert_eq(report_missed(r), 0);
	report_add(r, "tickwheel", "p99", 500, "us", BETTER_LOWER);
	report_add(r, "libev", "never", 1, "us", BETTER_LOWER);
	report_target(r, "p99", "<=", 500);
	cr_assert_eq(report_missed(r), 0, "500 <= 500 is met");
	report_target(r, "p99", ">=", 600);
	cr_assert_eq(report_missed(r), 1);
	/* Only tickwheel's figure counts: a peer's of that name does not. */
	report_target(r, "never", "<=", 10);
	cr_assert_eq(report_missed(r), 2, "a target on a figure never reported is missed");
	report_add(r, "tickwheel", "p99", 700, "us", BETTER_LOWER);
	cr_assert_eq(report_missed(r), 2, "now <= 500 is missed and >= 600 met");
	report_target(r, "p99", "<=", 800);
	cr_assert_eq(report_missed(r), 1, "a second target of the same op replaces the first");
	report_free(r);
}

Test(report, out_of_memory_is_reported_not_written)
{
	struct report *r = report_open("t", "s", 0, NULL);
	double v = 1;
	report_add(r, "tickwheel", "kept", 1, "us", BETTER_LOWER);
	report_series(r, "tickwheel", "too_big", &v, &v, SIZE_MAX / 2);
	unlink(json_path);
	cr_assert_eq(report_write_json(r, json_path), -1, "a dropped series makes the JSON a lie");
	cr_assert_eq(access(json_path, F_OK), -1, "nothing written");
	report_free(r);
}

Test(report, table_shows_ratios_and_verdicts)
{
	struct report *r = sample();
	char *text = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&text, &size);
	cr_assert(out);
	report_print(r, out);
	fclose(out);
	report_free(r);
	cr_assert(strstr(text, "tw-test sample: tw-test --tasks 5 'a b'\n"), "%s", text);
	cr_assert(strstr(text, "630 (x2.00)"), "the peer's ratio to tickwheel:\n%s", text);
	cr_assert(strstr(text, "<= 1200  met\n"), "%s", text);
	cr_assert(strstr(text, ">= 2000  missed\n"), "%s", text);
	cr_assert(strstr(text, "note: libuv drifts by design\n"), "%s", text);
	/* Aligned: the heading and every row of the table have the same column starts. */
	const char *heading = strstr(text, "figure"), *row = strstr(text, "lateness_p99");
	cr_assert(heading && row);
	cr_assert_eq(strstr(heading, "tickwheel") - heading, strstr(row, "315") - row + 3 - 9, "%s",
		     text);
	free(text);
}

Test(plot, nothing_to_draw_is_an_error)
{
	struct plot p = { "t", "x", "y", false, false, PLOT_LINES };
	cr_assert_eq(plot_png("/tmp/never.png", &p, NULL, 0), -1);
	struct plot_series empty = { "e", NULL, NULL, 0 };
	cr_assert_eq(plot_png("/tmp/never.png", &p, &empty, 1), -1);
}

Test(plot, draws_a_png)
{
	char path[] = "/tmp/test_plot_XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	close(fd);
	double x[] = { 1, 10, 100 }, y[] = { 0.1, 0.9, 1 };
	struct plot_series s[] = { { "it's \"quoted\"\n", x, y, 3 }, { NULL, x, x, 3 } };
	struct plot p = { "a 'title'", "x_us", "y", true, true, PLOT_STEPS };
	struct plot_panel panels[] = { { p, s, 2 }, { p, s, 1 } };
	cr_assert_eq(plot_png(path, &p, s, 2), 0, "is gnuplot (gnuplot-nox) installed?");
	cr_assert_eq(plot_png_panels(path, panels, 2), 0);
	char magic[8] = { 0 };
	FILE *f = fopen(path, "rb");
	cr_assert(f);
	cr_assert_eq(fread(magic, 1, 8, f), 8);
	fclose(f);
	cr_assert_eq(memcmp(magic, "\x89PNG\r\n\x1a\n", 8), 0);
	p.style = PLOT_BOXES;
	cr_assert_eq(plot_png("/nonexistent/dir/x.png", &p, s, 1), -1,
		     "gnuplot failing to write is reported");
	unlink(path);
}

static struct lateness late;

Test(plot, lateness_cdf_steps_and_thinning)
{
	double x[16], y[16];
	cr_assert_eq(lateness_cdf(&late, x, y, 16), 0, "no runs, no points");
	for (int i = 0; i < 10; i++)
		lateness_note(&late, 1000000 + (uint64_t)i * 1000 + 500, 1000000);
	lateness_note(&late, 1000000 + 9000, 1000000);
	lateness_note(&late, 50000000, 1000000); /* 49 ms: a bucket 32 us wide */
	cr_assert_eq(lateness_cdf(&late, x, y, 16), 11);
	cr_assert_float_eq(x[0], 1, 1e-9, "bucket 0 ends at 1 us");
	cr_assert_float_eq(y[0], 1.0 / 12, 1e-9);
	cr_assert_float_eq(x[9], 10, 1e-9);
	cr_assert_float_eq(y[9], 11.0 / 12, 1e-9);
	cr_assert(x[10] > 49000 && x[10] <= 49000 * 1.001, "49 ms ends its bucket at %f", x[10]);
	cr_assert_float_eq(y[10], 1, 1e-9);
	size_t n = lateness_cdf(&late, x, y, 4);
	cr_assert(n <= 4 && n >= 3, "%zu points", n);
	cr_assert_float_eq(y[n - 1], 1, 1e-9, "thinning keeps the last point");
	for (size_t i = 1; i < n; i++)
		cr_assert(x[i] > x[i - 1] && y[i] > y[i - 1]);
}

/* Every lateness lands in a bucket that holds it, 1 us wide below 2 ms and at most 0.1 % of
 * the value wide above; buckets follow one another without gaps, to 19 h. */
Test(plot, lateness_buckets_hold_their_values)
{
	uint64_t last_high = 0;
	for (unsigned i = 0; i < LATENESS_BUCKETS; i++) {
		uint64_t low = lateness_bucket_low_us(i), high = lateness_bucket_high_us(i);
		cr_assert_eq(low, last_high, "bucket %u starts where %u ended", i, i - 1);
		cr_assert_eq(lateness_bucket_of(low), i);
		cr_assert_eq(lateness_bucket_of(high - 1), i);
		cr_assert(high - low == 1 || (double)(high - low) <= (double)low / 1000,
			  "bucket %u: [%llu, %llu)", i, (unsigned long long)low,
			  (unsigned long long)high);
		last_high = high;
	}
	cr_expect_geq(last_high, UINT64_C(1) << 36, "up to 2^36 us");
	cr_expect_eq(lateness_bucket_of(UINT64_MAX / 1000), LATENESS_BUCKETS - 1,
		     "later: the last");

	static struct lateness l;
	for (int i = 0; i < 99; i++)
		lateness_note(&l, 1000000 + 30 * NS_PER_MS, 1000000);
	lateness_note(&l, 1000000 + 300 * NS_PER_MS, 1000000);
	uint64_t p50 = lateness_percentile_us(&l, 0.5), p100 = lateness_percentile_us(&l, 1);
	cr_expect(p50 <= 30000 && p50 > 30000 * 0.999, "p50 %llu", (unsigned long long)p50);
	cr_expect(p100 <= 300000 && p100 > 300000 * 0.999, "max %llu", (unsigned long long)p100);
}

Test(plot, interval_deviations_histogram)
{
	static struct deviations d;
	struct intervals t = { .period_ns = 1000000, .histogram = &d };
	uint64_t now = 1000000000;
	intervals_note(&t, now, 0);
	intervals_note(&t, now += 1000000 + 15000, 0); /* +15 us */
	intervals_note(&t, now += 1000000 - 5000, 0);  /* -5 us */
	intervals_note(&t, now += 1000000 - 5000, 0);  /* -5 us */
	intervals_note(&t, now += 7000000, 0);         /* +6 ms: above */
	intervals_note(&t, now += 3000000, 1);         /* skipped: not an interval */
	double x[DEVIATION_BINS], y[DEVIATION_BINS];
	size_t n = deviations_points(&d, x, y, DEVIATION_BINS);
	cr_assert_eq(n, 3, "bins -10..0, 0..10, 10..20 us");
	cr_assert_float_eq(x[0], -5, 1e-9);
	cr_assert_float_eq(y[0], 2, 1e-9);
	cr_assert_float_eq(y[1], 0, 1e-9);
	cr_assert_float_eq(x[2], 15, 1e-9);
	cr_assert_float_eq(y[2], 1, 1e-9);
	cr_assert_eq(atomic_load(&d.above), 1);
	cr_assert_eq(atomic_load(&d.below), 0);
	cr_assert_eq(t.count, 4);
}

Test(wake_floor, refuses_a_run_too_short_for_its_periods)
{
	struct wake_floor f;
	errno = 0;
	cr_expect_eq(wake_floor_measure(0.05, 10, 50, &f), -1); /* 50 wakes < 2 x 50 */
	cr_expect_eq(errno, EINVAL);
	cr_expect_eq(wake_floor_measure(1, 0, 50, &f), -1);
	cr_expect_eq(wake_floor_measure(1, 60, 50, &f), -1);
}

/* A real 0.2 s measurement: its counts follow from its arguments, and a
 * timerfd never wakes before its time. */
Test(wake_floor, counts_every_wake_up_and_every_interval)
{
	struct wake_floor f;
	cr_assert_eq(wake_floor_measure(0.2, 10, 50, &f), 0, "errno %d", errno);
	cr_expect_eq(f.wakes, 200);
	uint64_t intervals = 0;
	for (uint64_t p = 10; p <= 50; p++)
		intervals += (200 - 1) / p; /* starts 0, p, 2p ... with a wake p ms later */
	cr_expect_eq(f.intervals, intervals);
	cr_expect_leq(f.intervals_over_1ms, f.intervals);
	cr_expect_geq(f.lateness_p50_us, 0);
	cr_expect_leq(f.lateness_p50_us, f.lateness_p99_us);
	cr_expect_leq(f.lateness_p99_us, f.lateness_max_us);
	cr_expect_geq(f.interval_sd_us, 0);
	cr_expect_leq(f.interval_sd_us, f.interval_worst_us);
	cr_expect_leq(f.interval_off_p50_us, f.interval_off_p99_us);
	cr_expect_leq(f.interval_off_p99_us, f.interval_worst_us);
	cr_expect_gt(f.cpu_per_wakeup_us, 0, "a wake-up cost no CPU");
	cr_expect_lt(f.cpu_per_wakeup_us, 1000, "%.1f us of CPU a 1 ms wake-up",
		     f.cpu_per_wakeup_us);
}

/* A second thread woken at each wake-up costs CPU on top of the wake-up alone. */
Test(wake_floor, a_handover_costs_more_than_a_wake_up_alone)
{
	struct wake_floor f;
	cr_assert_eq(wake_floor_measure(0.2, 10, 50, &f), 0, "errno %d", errno);
	cr_expect_eq(f.handovers, 0, "not measured yet");
	cr_assert_eq(wake_floor_handover(0.2, &f), 0, "errno %d", errno);
	cr_expect_eq(f.handovers, 200);
	cr_expect_gt(f.handover_woken_cpu_us, 0, "the woken thread never ran");
	cr_expect_leq(f.handover_cpu_us, 1000, "%.1f us of CPU a hand-over", f.handover_cpu_us);
	errno = 0;
	cr_expect_eq(wake_floor_handover(0, &f), -1);
	cr_expect_eq(errno, EINVAL);
}

/* Deviations of +5, -5, +25, -1500 us and +7 ms (beyond the histogram). */
Test(deviations, off_quantiles_and_fraction_fold_both_sides)
{
	static struct deviations d;
	struct intervals t = { .period_ns = 100000000, .histogram = &d };
	static const int64_t off_us[] = { 5, -5, 25, -1500, 7000 };
	uint64_t start = 1000000000;
	intervals_note(&t, start, 0);
	for (size_t i = 0; i < sizeof off_us / sizeof off_us[0]; i++) {
		start += t.period_ns + (uint64_t)(off_us[i] * 1000);
		intervals_note(&t, start, 0);
	}
	cr_expect_float_eq(deviations_off_quantile_us(&d, 0.2), 10, 1e-9);
	cr_expect_float_eq(deviations_off_quantile_us(&d, 0.5), 30, 1e-9);
	cr_expect_float_eq(deviations_off_quantile_us(&d, 0.8), 1500, 1e-9);
	cr_expect_float_eq(deviations_off_quantile_us(&d, 1), 5000, 1e-9);
	cr_expect_float_eq(deviations_off_fraction(&d, 1000), 0.4, 1e-9);
	cr_expect_float_eq(deviations_off_fraction(&d, 10000), 0.2, 1e-9);
}

/* HdrHistogram's percentile text: its header, levels and counts rising to 100 %, the largest
 * value last, its footers. */
Test(report, hgrm_percentile_distribution)
{
	static struct lateness l;
	for (uint64_t i = 0; i < 1000; i++)
		lateness_note(&l, 1000000 + i * 1000, 1000000); /* 0 .. 999 us */
	lateness_note(&l, 1000000 + 30 * NS_PER_MS, 1000000);   /* in a bucket 16 us wide */
	FILE *f = fopen(json_path, "w");
	cr_assert(f);
	hgrm_print(&l, f);
	fclose(f);
	f = fopen(json_path, "r");
	char line[256];
	cr_assert(fgets(line, sizeof line, f));
	cr_expect(strstr(line, "Value") && strstr(line, "1/(1-Percentile)"), "%s", line);
	double value, pct, last_value = -1, last_pct = -1;
	unsigned long long count, last_count = 0;
	int lines = 0;
	while (fgets(line, sizeof line, f) && line[0] != '#') {
		if (sscanf(line, "%lf %lf %llu", &value, &pct, &count) != 3)
			continue;
		cr_expect(value >= last_value && pct > last_pct && count >= last_count, "%s", line);
		last_value = value, last_pct = pct, last_count = count, lines++;
	}
	cr_expect_gt(lines, 20);
	cr_expect_eq(last_pct, 1.0);
	cr_expect_eq(last_count, 1001);
	cr_expect(fabs(last_value - 30.0) < 1e-9, "%f", last_value);
	cr_expect(strstr(line, "#[Mean"), "%s", line);
	fclose(f);
}
