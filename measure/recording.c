/*
 * recording.c - the reader of recording files (recording.h).
 */

#include "recording.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct rec_reader {
	FILE *f;
	char *path;
	struct rec_header h;
	uint64_t size, offset; /* the file's size; where the next event starts */
	bool failed;
	char error[512];
	char *tail; /* the tail of the event last read, NUL-terminated pieces */
	size_t tail_cap;
	char name[65536 + 1], cron[65536 + 1];
};

static uint16_t le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void fail(struct rec_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct rec_reader *r, const char *fmt, ...)
{
	int n = snprintf(r->error, sizeof r->error, "%s: ", r->path);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof r->error)
		vsnprintf(r->error + n, sizeof r->error - (size_t)n, fmt, ap);
	va_end(ap);
	r->failed = true;
}

static int read_header(struct rec_reader *r)
{
	unsigned char b[REC_HEADER_SIZE];
	size_t got = fread(b, 1, sizeof b, r->f);
	if (got < 8 || memcmp(b, REC_MAGIC, 8)) {
		fail(r, "not a tickwheel recording (its first 8 bytes are not \\x89TWRECD\\n)");
		return -1;
	}
	if (got < sizeof b) {
		fail(r, "cut short: %zu bytes, the header alone takes %u", got, REC_HEADER_SIZE);
		return -1;
	}
	r->h.version = le32(b + 8);
	r->h.header_size = le32(b + 12);
	if (r->h.version != REC_VERSION) {
		fail(r, "recording format version %u; this reader knows version %u", r->h.version,
		     REC_VERSION);
		return -1;
	}
	if (r->h.header_size < REC_HEADER_SIZE || r->h.header_size % 8 ||
	    r->h.header_size > r->size) {
		fail(r,
		     "damaged header: header size %u (64 or more, a multiple of 8, within the "
		     "file)",
		     r->h.header_size);
		return -1;
	}
	r->h.start_mono_ns = le64(b + 16);
	r->h.start_wall_ns = le64(b + 24);
	r->h.executors = le32(b + 32);
	r->h.config = le32(b + 36);
	r->h.pid = le32(b + 40);
	r->h.queue_capacity = le32(b + 44);
	r->h.retain_ms = le64(b + 48);
	r->h.max_failures = le32(b + 56);
	r->offset = r->h.header_size;
	if (fseeko(r->f, (off_t)r->offset, SEEK_SET)) {
		fail(r, "cannot seek: %s", strerror(errno));
		return -1;
	}
	return 0;
}

struct rec_reader *rec_open(const char *path, char *err, size_t err_size)
{
	struct rec_reader *r = calloc(1, sizeof *r);
	if (!r || !(r->path = strdup(path))) {
		snprintf(err, err_size, "%s: out of memory", path);
		free(r);
		return NULL;
	}
	struct stat st;
	r->f = fopen(path, "rb");
	if (!r->f || fstat(fileno(r->f), &st)) {
		snprintf(err, err_size, "%s: %s", path, strerror(errno));
		rec_close(r);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, err_size, "%s: not a regular file", path);
		rec_close(r);
		return NULL;
	}
	r->size = (uint64_t)st.st_size;
	if (read_header(r)) {
		snprintf(err, err_size, "%s", r->error);
		rec_close(r);
		return NULL;
	}
	return r;
}

/* Copies len bytes of the tail from *at into out (NUL-terminated); false past the tail. */
static bool tail_text(const char *tail, uint32_t size, uint32_t *at, uint32_t len, char *out)
{
	if (len > size - *at)
		return false;
	memcpy(out, tail + *at, len);
	out[len] = '\0';
	*at += len;
	return true;
}

/* The ADD's name and cron text, THREAD's name; other types' tails are skipped unread. */
static int read_tail(struct rec_reader *r, struct rec_event *ev)
{
	r->name[0] = r->cron[0] = '\0';
	ev->name = r->name;
	ev->cron = r->cron;
	if (!ev->tail)
		return 0;
	if (ev->type != REC_ADD && ev->type != REC_THREAD)
		return fseeko(r->f, (off_t)ev->tail, SEEK_CUR) ? -1 : 0;
	if (ev->tail > r->tail_cap) {
		char *t = realloc(r->tail, ev->tail);
		if (!t) {
			fail(r, "out of memory for a tail of %u bytes at offset %llu", ev->tail,
			     (unsigned long long)ev->offset);
			return -1;
		}
		r->tail = t;
		r->tail_cap = ev->tail;
	}
	if (fread(r->tail, 1, ev->tail, r->f) != ev->tail)
		return -1;
	uint32_t at = 0;
	if (ev->type == REC_THREAD) {
		size_t n = strnlen(r->tail, ev->tail);
		return tail_text(r->tail, ev->tail, &at, (uint32_t)(n < 64 ? n : 64), r->name) ? 0 :
												 -1;
	}
	unsigned char *t = (unsigned char *)r->tail;
	at = 8;
	if (ev->tail < 8 || !tail_text(r->tail, ev->tail, &at, le16(t), r->name) ||
	    !tail_text(r->tail, ev->tail, &at, le16(t + 2), r->cron)) {
		fail(r,
		     "damaged ADD at offset %llu: name and cron (%u + %u bytes) overrun its "
		     "tail of %u",
		     (unsigned long long)ev->offset, ev->tail < 8 ? 0u : le16(t),
		     ev->tail < 8 ? 0u : le16(t + 2), ev->tail);
		return -2;
	}
	return 0;
}

int rec_next(struct rec_reader *r, struct rec_event *ev)
{
	if (r->failed)
		return -1;
	if (r->offset == r->size)
		return 0;
	unsigned char b[REC_EVENT_SIZE];
	uint64_t left = r->size - r->offset;
	if (left < REC_EVENT_SIZE || fread(b, 1, sizeof b, r->f) != sizeof b) {
		fail(r,
		     "cut short: %llu bytes at offset %llu, an event takes %u (the events "
		     "before are whole)",
		     (unsigned long long)left, (unsigned long long)r->offset, REC_EVENT_SIZE);
		return -1;
	}
	*ev = (struct rec_event){ .type = b[0],
				  .thread = le16(b + 2),
				  .tail = le32(b + 4),
				  .t_ns = le64(b + 8),
				  .id = le64(b + 16),
				  .result = (int32_t)le32(b + 24),
				  .u = le32(b + 28),
				  .a = le64(b + 32),
				  .b = le64(b + 40),
				  .c = le64(b + 48),
				  .offset = r->offset };
	if (ev->tail % 8) {
		fail(r, "damaged event at offset %llu: a tail of %u bytes, not a multiple of 8",
		     (unsigned long long)r->offset, ev->tail);
		return -1;
	}
	if (ev->tail > left - REC_EVENT_SIZE) {
		fail(r,
		     "cut short: the event at offset %llu has a tail of %u bytes, the file "
		     "%llu more",
		     (unsigned long long)r->offset, ev->tail,
		     (unsigned long long)(left - REC_EVENT_SIZE));
		return -1;
	}
	int rc = read_tail(r, ev);
	if (rc == -1 && !r->failed)
		fail(r, "cannot read the event at offset %llu: %s", (unsigned long long)r->offset,
		     ferror(r->f) ? strerror(errno) : "end of file");
	if (rc)
		return -1;
	r->offset += REC_EVENT_SIZE + ev->tail;
	return 1;
}

const struct rec_header *rec_header(const struct rec_reader *r)
{
	return &r->h;
}

const char *rec_error(const struct rec_reader *r)
{
	return r->failed ? r->error : "";
}

uint64_t rec_file_size(const struct rec_reader *r)
{
	return r->size;
}

void rec_close(struct rec_reader *r)
{
	if (!r)
		return;
	if (r->f)
		fclose(r->f);
	free(r->tail);
	free(r->path);
	free(r);
}

const char *rec_type_name(unsigned type)
{
	switch (type) {
	case REC_ADD:
		return "ADD";
	case REC_SET_DELAY:
		return "SET_DELAY";
	case REC_SET_DUE:
		return "SET_DUE";
	case REC_SET_PERIOD:
		return "SET_PERIOD";
	case REC_PAUSE:
		return "PAUSE";
	case REC_RESUME:
		return "RESUME";
	case REC_CANCEL:
		return "CANCEL";
	case REC_RUN:
		return "RUN";
	case REC_SKIP:
		return "SKIP";
	case REC_THREAD:
		return "THREAD";
	case REC_DROPPED:
		return "DROPPED";
	case REC_END:
		return "END";
	default:
		return NULL;
	}
}
