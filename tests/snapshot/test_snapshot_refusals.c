/*
 * test_snapshot_refusals.c - files tw_restore refuses whole, with their codes (cut at every
 * byte, every bit flipped, another version, no snapshot, empty, missing, bad records with a
 * good checksum), and restores that fail half-way (max_tasks, a name taken, a resolver's
 * error): in every case no task is left, and each release the resolver handed over is
 * called exactly once.
 */
#include "../../core/snapshot.h"
#include "snapshot_test.h"

#include <zlib.h>

static const char *const NAMES_INIT[] = { "beat", "once", "cron", "paused", "fail-job", "never" };

static void app_init(struct app *app)
{
	memset(app, 0, sizeof *app);
	for (int i = 0; i < 6; i++)
		app->names[i] = NAMES_INIT[i];
}

/* A snapshot of five named tasks at t->path. */
static void write_five(struct tmpdir *t)
{
	uint64_t s;
	tw_engine *a = engine_at(WALL0, 0, &s);
	struct app app;
	app_init(&app);
	add_named(a, &app, "beat", 100, 1000, NULL, TW_RUN_LATE, 0);
	add_named(a, &app, "once", 5000, 0, NULL, 0, TW_MISFIRE_SKIP);
	add_named(a, &app, "cron", 0, 0, "CRON_TZ=Europe/Berlin 0 30 2 * * *", 0, 0);
	tw_id p = add_named(a, &app, "paused", 300, 500, NULL, 0, 0);
	add_named(a, &app, "never", TW_NEVER, 0, NULL, 0, 0);
	cr_assert_eq(tw_pause(a, p), TW_OK);
	cr_assert_eq(snapshot(a, t->path), 5);
	tw_engine_destroy(a);
}

/* A directory of the test's own holding write_five's snapshot. */
static struct tmpdir five_written(void)
{
	struct tmpdir t = tmpdir_make();
	write_five(&t);
	return t;
}

/* An engine to restore into, its wall clock at wall (max_tasks 0: the default), and the
 * app whose resolver the restore is given. */
static tw_engine *restore_target(int64_t wall, uint64_t max_tasks, struct app *app)
{
	uint64_t start;
	tw_engine *e = engine_at(wall, max_tasks, &start);
	app_init(app);
	return e;
}

/* tw_restore of path into a fresh engine must fail with code, leaving nothing. */
static void refused_at(const char *path, int code, const char *what, int line)
{
	struct app app;
	tw_engine *b = restore_target(WALL0, 0, &app);
	tw_restore_result res;
	int rc = tw_restore(b, path, app_resolve, &app, &res);
	cr_assert_eq(rc, code, "line %d, %s: %s, expected %s", line, what, tw_strerror(rc),
		     tw_strerror(code));
	cr_assert_eq(app.calls, 0, "line %d, %s: the resolver was called", line, what);
	cr_assert_eq(res.restored, 0);
	cr_assert_eq(stats_of(b).tasks_live, 0, "line %d, %s", line, what);
	tw_engine_destroy(b);
}
#define refused(path, code, what) refused_at(path, code, what, __LINE__)

Test(refusals, a_snapshot_cut_at_any_byte_is_refused)
{
	struct tmpdir t = five_written();
	size_t len;
	uint8_t *good = slurp(t.path, &len);
	char cut[160], what[64];
	snprintf(cut, sizeof cut, "%s/cut", t.dir);
	for (size_t n = 0; n < len; n++) {
		spit(cut, good, n);
		snprintf(what, sizeof what, "cut to %zu of %zu bytes", n, len);
		refused(cut, n < 8 ? -TW_ENOTSNAPSHOT : -TW_ECORRUPT, what);
	}
	free(good);
	tmpdir_remove(&t);
}

Test(refusals, a_snapshot_with_any_bit_flipped_is_refused)
{
	struct tmpdir t = five_written();
	size_t len;
	uint8_t *good = slurp(t.path, &len);
	/* Through the parser (every bit), and through tw_restore for a bit of each byte. */
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			good[i] ^= (uint8_t)(1u << bit);
			struct snap_file f;
			int rc = tw__snapshot_parse(good, len, &f);
			int want = i < 8 ? -TW_ENOTSNAPSHOT : i < 12 ? -TW_EVERSION : -TW_ECORRUPT;
			cr_assert_eq(rc, want, "byte %zu bit %d: %s", i, bit, tw_strerror(rc));
			if (bit == (int)(i % 8)) {
				char what[64];
				snprintf(what, sizeof what, "byte %zu bit %d flipped", i, bit);
				spit(t.path, good, len);
				refused(t.path, want, what);
			}
			good[i] ^= (uint8_t)(1u << bit);
		}
	}
	free(good);
	tmpdir_remove(&t);
}

/* Sets the trailer's CRC to match buf's bytes (a record changed on purpose). */
static void reseal(uint8_t *buf, size_t len)
{
	uint32_t crc = (uint32_t)crc32(0, buf, (uInt)(len - 8));
	for (int i = 0; i < 4; i++)
		buf[len - 8 + i] = (uint8_t)(crc >> (8 * i));
}

Test(refusals, another_version_no_snapshot_empty_and_missing)
{
	struct tmpdir t = five_written();
	size_t len;
	uint8_t *buf = slurp(t.path, &len);
	buf[8] = 2; /* version 2, sealed: a newer writer's file */
	reseal(buf, len);
	spit(t.path, buf, len);
	refused(t.path, -TW_EVERSION, "version 2");
	free(buf);
	const char *text = "beat 1000\nonce 5000\n";
	spit(t.path, (const uint8_t *)text, strlen(text));
	refused(t.path, -TW_ENOTSNAPSHOT, "a text file");
	spit(t.path, (const uint8_t *)"", 0);
	refused(t.path, -TW_ENOTSNAPSHOT, "an empty file");
	char missing[160];
	snprintf(missing, sizeof missing, "%s/missing", t.dir);
	errno = 0;
	refused(missing, -TW_EIO, "a missing file");
	struct app app;
	tw_engine *b = restore_target(WALL0, 0, &app);
	errno = 0;
	cr_assert_eq(tw_restore(b, missing, app_resolve, &app, NULL), -TW_EIO);
	cr_assert_eq(errno, ENOENT);
	cr_assert_eq(tw_restore(b, t.dir, app_resolve, &app, NULL), -TW_EIO, "a directory");
	cr_assert_eq(tw_restore(b, missing, NULL, &app, NULL), -TW_EINVAL);
	cr_assert_eq(tw_restore(b, NULL, app_resolve, &app, NULL), -TW_EINVAL);
	tw_engine_destroy(b);
	tmpdir_remove(&t);
}

/* The first record's fixed part in buf (after the 32-byte header and its length field). */
#define REC0 (32 + 4)

Test(refusals, records_that_are_not_valid_are_refused_under_a_good_checksum)
{
	struct tmpdir t = five_written();
	size_t len;
	uint8_t *good = slurp(t.path, &len);
	struct {
		size_t at;
		uint8_t value;
		const char *what;
	} cases[] = {
		{ REC0 + 0, 3, "an unknown kind" },
		{ REC0 + 1, 0x08, "an unknown flag" },
		{ REC0 + 1, TW_CONCURRENT | TW_ON_WHEEL_THREAD, "concurrent on the wheel thread" },
		{ REC0 + 2, 2, "an unknown misfire policy" },
		{ REC0 + 3, 4, "an unknown bit" },
		{ REC0 + 3, 2, "paused by failures, not paused" },
		{ REC0 + 4, 0, "an empty name" },
		{ REC0 + 5, 1, "a reserved byte" },
		{ REC0 + 8, 1, "a cron text on a periodic task" },
		{ REC0 + 23, 0xff, "a period above TW_MAX_DELAY_MS" },
		{ REC0 + 39, 0x80, "a due before 1970" },
		{ REC0 + 52, 1, "failures past 32 bits" },
		{ REC0 + 96, 0x07, "a control character in a name" },
		{ 12, 33, "another header size" },
		{ 24, 1, "a reserved header field" },
		{ len - 16, 4, "a wrong count" },
		{ 32, 0xff, "a record length past the end" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint8_t *buf = malloc(len);
		memcpy(buf, good, len);
		buf[cases[i].at] = cases[i].value;
		reseal(buf, len);
		struct snap_file f;
		cr_assert_eq(tw__snapshot_parse(buf, len, &f), -TW_ECORRUPT, "%s", cases[i].what);
		spit(t.path, buf, len);
		refused(t.path, -TW_ECORRUPT, cases[i].what);
		free(buf);
	}
	free(good);
	tmpdir_remove(&t);
}

Test(refusals, a_name_taken_in_the_engine_refuses_the_restore_whole)
{
	struct tmpdir t = five_written();
	struct app app;
	tw_engine *b = restore_target(WALL0, 0, &app);
	tw_id mine = add_named(b, &app, "cron", 1000, 0, NULL, 0, 0);
	struct app app2;
	app_init(&app2);
	cr_assert_eq(tw_restore(b, t.path, app_resolve, &app2, NULL), -TW_EEXIST);
	cr_assert_eq(app2.calls, 0);
	cr_assert_eq(stats_of(b).tasks_live, 1, "only the engine's own task");
	cr_assert_eq(find(b, "cron"), mine);
	tw_engine_destroy(b);
	tmpdir_remove(&t);
}

/* Every accepted task released exactly once, by the failed restore itself. */
static void assert_released_once(struct app *app, int resolved)
{
	int released = 0;
	for (int i = 0; i < 6; i++) {
		uint64_t n = atomic_load(&app->counts[i].releases);
		cr_assert_leq(n, 1, "%s released %" PRIu64 " times", app->names[i], n);
		released += (int)n;
		cr_assert_eq(atomic_load(&app->counts[i].runs), 0, "%s ran", app->names[i]);
	}
	cr_assert_eq(released, resolved);
}

Test(refusals, max_tasks_too_low_leaves_nothing_half_loaded)
{
	struct tmpdir t = five_written();
	struct app app;
	tw_engine *b = restore_target(WALL0 + S(3600), 3, &app);
	tw_restore_result res;
	cr_assert_eq(tw_restore(b, t.path, app_resolve, &app, &res), -TW_ELIMIT);
	/* An hour later: the one-shot "once" (TW_MISFIRE_SKIP) expired, four are resolved,
	 * and the fourth add finds three live. */
	cr_assert_eq(app.calls, 4);
	cr_assert_eq(res.expired, 1);
	cr_assert_eq(res.restored, 0);
	cr_assert_eq(stats_of(b).tasks_live, 0);
	assert_released_once(&app, 4);
	/* Nothing named stays either: the names are free. */
	cr_assert_eq(tw_find(b, "beat", &(tw_id){ 0 }), -TW_ENOTFOUND);
	step(b, 10000);
	assert_released_once(&app, 4);
	tw_engine_destroy(b);
	assert_released_once(&app, 4);
	tmpdir_remove(&t);
}

Test(refusals, a_resolver_error_stops_the_restore_and_releases_what_it_accepted)
{
	struct tmpdir t = five_written();
	struct app app;
	tw_engine *b = restore_target(WALL0, 0, &app);
	app.fail_at = 4;
	cr_assert_eq(tw_restore(b, t.path, app_resolve, &app, NULL), -TW_ENOMEM);
	cr_assert_eq(stats_of(b).tasks_live, 0);
	assert_released_once(&app, 3);
	tw_engine_destroy(b);
	assert_released_once(&app, 3);
	tmpdir_remove(&t);
}

Test(refusals, a_restore_after_stop_is_refused)
{
	struct tmpdir t = five_written();
	uint64_t s;
	tw_engine *b = engine_at(WALL0, 0, &s);
	cr_assert_eq(tw_engine_stop(b, 1000), TW_OK);
	struct app app;
	app_init(&app);
	cr_assert_eq(tw_restore(b, t.path, app_resolve, &app, NULL), -TW_ESHUTDOWN);
	cr_assert_eq(app.calls, 0);
	tw_engine_destroy(b);
	tmpdir_remove(&t);
}

Test(refusals, a_name_twice_in_a_file_keeps_the_later_record)
{
	/* Two records named "beat" (a task ended and named again during the walk): made
	 * here by renaming the second record of a file, "once" -> "beat". */
	struct tmpdir t = five_written();
	size_t len;
	uint8_t *buf = slurp(t.path, &len);
	struct snap_file f;
	cr_assert_eq(tw__snapshot_parse(buf, len, &f), TW_OK);
	size_t second = (size_t)((const uint8_t *)f.records[1].name - buf);
	cr_assert_eq(memcmp(buf + second, "once", 4), 0);
	tw__snapshot_file_free(&f);
	memcpy(buf + second, "beat", 4);
	reseal(buf, len);
	spit(t.path, buf, len);
	struct app app;
	tw_engine *b = restore_target(WALL0, 0, &app);
	tw_restore_result res;
	cr_assert_eq(tw_restore(b, t.path, app_resolve, &app, &res), TW_OK);
	cr_assert_eq(res.records, 5);
	cr_assert_eq(res.duplicates, 1);
	cr_assert_eq(res.restored, 4);
	cr_assert_eq(info_of(b, find(b, "beat")).period_ms, 0, "the later record: a one-shot");
	tw_engine_destroy(b);
	free(buf);
	tmpdir_remove(&t);
}

Test(refusals, the_new_codes_have_names_of_their_own)
{
	const int codes[] = { TW_EIO, TW_ECORRUPT, TW_EVERSION, TW_ENOTSNAPSHOT };
	for (size_t i = 0; i < 4; i++) {
		const char *s = tw_strerror(-codes[i]);
		cr_assert_str_neq(s, "unknown error", "code %d", codes[i]);
		cr_assert_str_eq(s, tw_strerror(codes[i]));
		for (int other = TW_OK; other < codes[i]; other++)
			cr_assert_str_neq(s, tw_strerror(other), "codes %d and %d", codes[i],
					  other);
	}
	cr_assert_str_eq(tw_strerror(TW_ENOTSNAPSHOT + 1), "unknown error");
}

Test(refusals, a_result_of_an_older_size_is_filled_to_that_size_only)
{
	struct tmpdir t = five_written();
	struct app app;
	tw_engine *b = restore_target(WALL0, 0, &app);
	struct {
		tw_restore_result known;
		unsigned char guard[16];
	} res;
	memset(&res, 0xa5, sizeof res);
	size_t old = offsetof(tw_restore_result, duplicates);
	cr_assert_eq(tw_restore_sized(b, t.path, app_resolve, &app, &res.known, old), TW_OK);
	cr_assert_eq(res.known.restored, 5);
	const unsigned char *past = (const unsigned char *)&res.known + old;
	for (size_t i = 0; i < sizeof res - old; i++)
		cr_assert_eq(past[i], 0xa5, "byte %zu past the caller's size was written", i);
	tw_engine_destroy(b);
	tmpdir_remove(&t);
}

Test(refusals, a_zone_this_machine_lacks_refuses_the_restore_whole)
{
	struct tmpdir t = five_written();
	size_t len;
	uint8_t *buf = slurp(t.path, &len);
	uint8_t *at = memmem(buf, len, "Europe/Berlin", 13);
	cr_assert_not_null(at);
	memcpy(at, "Europe/Berlix", 13);
	reseal(buf, len);
	spit(t.path, buf, len);
	refused(t.path, -TW_ENOZONE, "an unknown zone");
	free(buf);
	tmpdir_remove(&t);
}

/* A file of one calendar record "cron" with text at wall-clock due, written at written. */
static void write_calendar(const char *path, const char *text, int64_t due, int64_t written)
{
	size_t tlen = strlen(text), cap = 32 + 4 + 96 + 4 + tlen + 16;
	uint8_t *buf = calloc(1, cap);
	struct snap_record r = { .name = "cron",
				 .name_len = 4,
				 .kind = SNAP_CALENDAR,
				 .cron = text,
				 .cron_len = (uint32_t)tlen,
				 .due_wall_ns = due };
	size_t n = tw__snapshot_put_header(buf, written);
	n += tw__snapshot_put_record(buf + n, &r);
	n += tw__snapshot_put_trailer(buf + n, 1, tw__snapshot_crc(0, buf, n));
	spit(path, buf, n);
	free(buf);
}

/* What tw_add refuses, tw_restore refuses whole, before the resolver sees any task. */
Test(refusals, what_tw_add_refuses_restore_refuses)
{
	struct tmpdir t = tmpdir_make();
	/* the file is good: a due schedule restores */
	write_calendar(t.path, "CRON_TZ=UTC 0 0 0 * * *", WALL0 + S(3600), WALL0);
	struct app app;
	tw_engine *b = restore_target(WALL0, 0, &app);
	tw_restore_result res;
	cr_assert_eq(tw_restore(b, t.path, app_resolve, &app, &res), TW_OK);
	cr_assert_eq(res.restored, 1);
	/* 30 February: tw_add answers -TW_ENOMATCH, and so does tw_restore, due or not */
	app_init(&app);
	app.args[2] = (struct task_arg){ &app, 2 };
	tw_task_spec spec = spec_of(0, 0, app_callback, &app.args[2]);
	spec.cron = "CRON_TZ=UTC 0 0 0 30 2 *";
	spec.name = "cron2";
	cr_assert_eq(tw_add(b, &spec, &(tw_id){ 0 }), -TW_ENOMATCH);
	tw_engine_destroy(b);
	write_calendar(t.path, "CRON_TZ=UTC 0 0 0 30 2 *", WALL0 + S(3600), WALL0);
	refused(t.path, -TW_ENOMATCH, "30 February, due ahead");
	write_calendar(t.path, "CRON_TZ=UTC 0 0 0 30 2 *", WALL0 - S(3600), WALL0 - S(7200));
	refused(t.path, -TW_ENOMATCH, "30 February, due passed");
	/* a written time before 1970: no time this library writes */
	write_calendar(t.path, "CRON_TZ=UTC 0 0 0 * * *", WALL0 + S(3600), -1);
	refused(t.path, -TW_ECORRUPT, "written before 1970");
	tmpdir_remove(&t);
}
