/*
 * test_recording.c - the recording reader (recording.h) on files a small writer
 * here builds from the format's page: a whole file, one cut short in an event
 * and in a tail, a foreign magic, another version, an unknown event type
 * (skipped by its tail), a tail that claims more than the file holds.
 */
#include "recording.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[] = "/tmp/test_recording_XXXXXX";

static void make_temp(void)
{
	int fd = mkstemp(path);
	cr_assert(fd >= 0, "mkstemp");
	close(fd);
}

static void remove_temp(void)
{
	unlink(path);
}

TestSuite(recording, .init = make_temp, .fini = remove_temp);

/* The writer: a buffer, little-endian fields. */
struct buf {
	unsigned char b[4096];
	size_t n;
};

static void put(struct buf *w, uint64_t v, int size)
{
	for (int i = 0; i < size; i++)
		w->b[w->n++] = (unsigned char)(v >> (8 * i));
}

static void header(struct buf *w, uint32_t version)
{
	memcpy(w->b, REC_MAGIC, 8);
	w->n = 8;
	put(w, version, 4);
	put(w, REC_HEADER_SIZE, 4);
	put(w, 1000000000, 8); /* start_mono_ns */
	put(w, 2000000000, 8); /* start_wall_ns */
	put(w, 2, 4);          /* executors */
	put(w, 0, 4);          /* config */
	put(w, 4242, 4);       /* pid */
	put(w, 4096, 4);       /* queue_capacity */
	put(w, 0, 8);
	put(w, 0, 8);
}

static void event(struct buf *w, unsigned type, unsigned thread, uint32_t tail, uint64_t t,
		  uint64_t id, int32_t result, uint32_t u, uint64_t a, uint64_t b, uint64_t c)
{
	put(w, type, 1);
	put(w, 0, 1);
	put(w, thread, 2);
	put(w, tail, 4);
	put(w, t, 8);
	put(w, id, 8);
	put(w, (uint32_t)result, 4);
	put(w, u, 4);
	put(w, a, 8);
	put(w, b, 8);
	put(w, c, 8);
}

/* An ADD with a name and a cron text, padded to 8. */
static void add(struct buf *w, uint64_t id, const char *name, const char *cron)
{
	size_t nl = strlen(name), cl = strlen(cron), tail = (8 + nl + cl + 7) / 8 * 8;
	event(w, REC_ADD, 1, (uint32_t)tail, 1001000000, id, 0, 1u | 1u << 8, 0, 100, 0);
	put(w, nl, 2);
	put(w, cl, 2);
	put(w, 0, 4);
	memcpy(w->b + w->n, name, nl);
	memcpy(w->b + w->n + nl, cron, cl);
	memset(w->b + w->n + nl + cl, 0, tail - 8 - nl - cl);
	w->n += tail - 8;
}

static void save(const struct buf *w, size_t n)
{
	FILE *f = fopen(path, "wb");
	cr_assert(f);
	cr_assert_eq(fwrite(w->b, 1, n, f), n);
	fclose(f);
}

static void whole(struct buf *w)
{
	header(w, REC_VERSION);
	event(w, REC_THREAD, 1, 8, 1000500000, 0, 0, 0, 777, 0, 0);
	memcpy(w->b + w->n, "worker\0\0", 8);
	w->n += 8;
	add(w, 5, "beat", "");
	event(w, 99, 0, 16, 1001500000, 0, 0, 0, 0, 0, 0); /* unknown: skipped by its tail */
	put(w, UINT64_MAX, 8);
	put(w, UINT64_MAX, 8);
	add(w, 6, "nightly", "0 3 * * *");
	event(w, REC_RUN, 0, 0, 1101000000, 5, -3, 1, 1101000000, 1101200000, 1);
	event(w, REC_END, 0, 0, 1200000000, 0, 0, 0, 6, 0, 1200000000);
}

Test(recording, reads_a_whole_file)
{
	struct buf w;
	whole(&w);
	save(&w, w.n);
	char err[256];
	struct rec_reader *r = rec_open(path, err, sizeof err);
	cr_assert(r, "%s", err);
	const struct rec_header *h = rec_header(r);
	cr_expect_eq(h->version, 1);
	cr_expect_eq(h->start_mono_ns, 1000000000);
	cr_expect_eq(h->executors, 2);
	cr_expect_eq(h->pid, 4242);
	struct rec_event ev;
	cr_assert_eq(rec_next(r, &ev), 1);
	cr_expect_eq(ev.type, REC_THREAD);
	cr_expect_eq(ev.a, 777);
	cr_expect_str_eq(ev.name, "worker");
	cr_assert_eq(rec_next(r, &ev), 1);
	cr_expect_eq(ev.type, REC_ADD);
	cr_expect_eq(ev.id, 5);
	cr_expect_eq(REC_ADD_FLAGS(ev.u), 1);
	cr_expect_eq(REC_ADD_MISFIRE(ev.u), 1);
	cr_expect_eq(ev.b, 100);
	cr_expect_str_eq(ev.name, "beat");
	cr_expect_str_eq(ev.cron, "");
	cr_assert_eq(rec_next(r, &ev), 1);
	cr_expect_eq(ev.type, 99);
	cr_expect_null(rec_type_name(ev.type));
	cr_assert_eq(rec_next(r, &ev), 1);
	cr_expect_str_eq(ev.name, "nightly");
	cr_expect_str_eq(ev.cron, "0 3 * * *");
	cr_assert_eq(rec_next(r, &ev), 1);
	cr_expect_eq(ev.type, REC_RUN);
	cr_expect_eq(ev.result, -3);
	cr_expect_eq(ev.b - ev.t_ns, 200000);
	cr_assert_eq(rec_next(r, &ev), 1);
	cr_expect_eq(ev.type, REC_END);
	cr_expect_eq(rec_next(r, &ev), 0);
	cr_expect_eq(rec_next(r, &ev), 0);
	rec_close(r);
}

/* Cut anywhere inside an event or its tail: the whole events before it, then an error. */
Test(recording, a_file_cut_short_says_where)
{
	struct buf w;
	whole(&w);
	size_t cuts[] = { 70, 64 + 56 + 4, 64 + 64 + 56 + 3, w.n - 1 };
	for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
		save(&w, cuts[k]);
		char err[256];
		struct rec_reader *r = rec_open(path, err, sizeof err);
		cr_assert(r, "%s", err);
		struct rec_event ev;
		int rc, events = 0;
		while ((rc = rec_next(r, &ev)) == 1)
			events++;
		cr_expect_eq(rc, -1, "cut at %zu", cuts[k]);
		cr_expect(strstr(rec_error(r), "cut short"), "%s", rec_error(r));
		cr_expect(strstr(rec_error(r), path));
		cr_expect_eq(rec_next(r, &ev), -1);
		rec_close(r);
	}
	save(&w, 40);
	char err[256];
	cr_expect_null(rec_open(path, err, sizeof err));
	cr_expect(strstr(err, "cut short"), "%s", err);
}

Test(recording, a_foreign_file_is_refused)
{
	struct buf w;
	whole(&w);
	w.b[1] = 'X';
	save(&w, w.n);
	char err[256];
	cr_expect_null(rec_open(path, err, sizeof err));
	cr_expect(strstr(err, "not a tickwheel recording"), "%s", err);
	save(&w, 3);
	cr_expect_null(rec_open(path, err, sizeof err));
	cr_expect(strstr(err, "not a tickwheel recording"), "%s", err);
	header(&w, 2);
	save(&w, w.n);
	cr_expect_null(rec_open(path, err, sizeof err));
	cr_expect(strstr(err, "version 2"), "%s", err);
	cr_expect_null(rec_open("/nonexistent/rec", err, sizeof err));
	cr_expect(strstr(err, "/nonexistent/rec"), "%s", err);
}

/* A tail larger than the file, one not a multiple of 8, names overrunning ADD's tail. */
Test(recording, damaged_tails_are_errors)
{
	struct buf w;
	header(&w, REC_VERSION);
	event(&w, 99, 0, 1u << 30, 0, 0, 0, 0, 0, 0, 0);
	save(&w, w.n);
	char err[256];
	struct rec_reader *r = rec_open(path, err, sizeof err);
	cr_assert(r, "%s", err);
	struct rec_event ev;
	cr_expect_eq(rec_next(r, &ev), -1);
	cr_expect(strstr(rec_error(r), "tail"), "%s", rec_error(r));
	rec_close(r);

	header(&w, REC_VERSION);
	event(&w, 99, 0, 12, 0, 0, 0, 0, 0, 0, 0);
	put(&w, 0, 8);
	put(&w, 0, 8);
	save(&w, w.n);
	r = rec_open(path, err, sizeof err);
	cr_expect_eq(rec_next(r, &ev), -1);
	cr_expect(strstr(rec_error(r), "multiple of 8"), "%s", rec_error(r));
	rec_close(r);

	header(&w, REC_VERSION);
	event(&w, REC_ADD, 1, 8, 0, 1, 0, 0, 0, 0, 0);
	put(&w, 30, 2);
	put(&w, 0, 6);
	save(&w, w.n);
	r = rec_open(path, err, sizeof err);
	cr_expect_eq(rec_next(r, &ev), -1);
	cr_expect(strstr(rec_error(r), "damaged ADD"), "%s", rec_error(r));
	rec_close(r);
}
