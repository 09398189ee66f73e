/*
 * snapshot_format.c - the snapshot file's bytes (api/snapshot-format.md): encoders for the
 * writer, and the parser that checks a whole file in memory before anything is restored.
 *
 * The parser reads untrusted bytes (a file cut short, a disk's bit flip, any file at all):
 * every read is checked against the end first, every length against what is left, and a
 * count is trusted only as far as the bytes could hold that many records. It allocates with
 * malloc, not the engine's allocator, so that the fuzzer can build it alone.
 */
#include "snapshot.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* The fuzzer's build (tests/fuzz/) checks no CRC: a mutated file would almost never get past
 * it, and the records behind it would go unexplored. Never defined in the library. */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define CRC_CHECKED false
#else
#define CRC_CHECKED true
#endif

static const uint8_t MAGIC[8] = { 0x89, 'T', 'W', 'S', 'N', 'A', 'P', '\n' };
static const uint8_t END_MAGIC[4] = { 'T', 'W', 'N', 'D' };

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

uint32_t tw__snapshot_crc(uint32_t crc, const uint8_t *buf, size_t len)
{
	/* zlib's length is a uInt: feed it in pieces that fit. */
	while (len) {
		uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
		crc = (uint32_t)crc32(crc, buf, n);
		buf += n;
		len -= n;
	}
	return crc;
}

size_t tw__snapshot_put_header(uint8_t *dst, int64_t written_wall_ns)
{
	memcpy(dst, MAGIC, sizeof MAGIC);
	put32(dst + 8, SNAP_VERSION);
	put32(dst + 12, SNAP_HEADER_BYTES);
	put64(dst + 16, (uint64_t)written_wall_ns);
	put64(dst + 24, 0);
	return SNAP_HEADER_BYTES;
}

size_t tw__snapshot_put_record(uint8_t *dst, const struct snap_record *r)
{
	uint8_t *p = dst;
	put32(p, (uint32_t)(SNAP_RECORD_FIXED + r->name_len + r->cron_len));
	p += 4;
	p[0] = r->kind;
	p[1] = r->flags;
	p[2] = r->misfire;
	p[3] = r->bits;
	p[4] = r->name_len;
	p[5] = p[6] = p[7] = 0;
	put32(p + 8, r->cron_len);
	put32(p + 12, 0);
	put64(p + 16, r->period_ms);
	put64(p + 24, r->delay_ms);
	put64(p + 32, (uint64_t)r->due_wall_ns);
	for (size_t i = 0; i < SNAP_COUNTERS; i++)
		put64(p + 40 + 8 * i, r->counters[i]);
	p += SNAP_RECORD_FIXED;
	memcpy(p, r->name, r->name_len);
	p += r->name_len;
	if (r->cron_len)
		memcpy(p, r->cron, r->cron_len);
	p += r->cron_len;
	return (size_t)(p - dst);
}

size_t tw__snapshot_put_trailer(uint8_t *dst, uint64_t count, uint32_t crc)
{
	put64(dst, count);
	put32(dst + 8, tw__snapshot_crc(crc, dst, 8));
	memcpy(dst + 12, END_MAGIC, sizeof END_MAGIC);
	return SNAP_TRAILER_BYTES;
}

/* A record's fixed part and texts, p at its first byte after the length field (len bytes). */
static bool parse_record(const uint8_t *p, uint32_t len, struct snap_record *r)
{
	if (len < SNAP_RECORD_FIXED)
		return false;
	*r = (struct snap_record){
		.kind = p[0],
		.flags = p[1],
		.misfire = p[2],
		.bits = p[3],
		.name_len = p[4],
		.cron_len = get32(p + 8),
		.period_ms = get64(p + 16),
		.delay_ms = get64(p + 24),
		.due_wall_ns = (int64_t)get64(p + 32),
	};
	for (size_t i = 0; i < SNAP_COUNTERS; i++)
		r->counters[i] = get64(p + 40 + 8 * i);
	if (p[5] | p[6] | p[7] || get32(p + 12))
		return false;
	/* Texts: exactly what the length says is left, compared without overflow. */
	if (r->name_len < 1 || r->name_len > TW_NAME_MAX ||
	    r->cron_len != len - SNAP_RECORD_FIXED - r->name_len ||
	    len - SNAP_RECORD_FIXED < r->name_len)
		return false;
	r->name = (const char *)p + SNAP_RECORD_FIXED;
	for (unsigned i = 0; i < r->name_len; i++)
		if (r->name[i] < 0x20 || r->name[i] > 0x7e)
			return false;
	if (r->cron_len) {
		r->cron = r->name + r->name_len;
		if (memchr(r->cron, 0, r->cron_len))
			return false;
	}
	if (r->kind > SNAP_CALENDAR || (r->kind == SNAP_CALENDAR) != (r->cron_len > 0))
		return false;
	if (r->flags & ~(unsigned)(TW_CONCURRENT | TW_RUN_LATE | TW_ON_WHEEL_THREAD) ||
	    (r->flags & (TW_CONCURRENT | TW_ON_WHEEL_THREAD)) ==
		    (TW_CONCURRENT | TW_ON_WHEEL_THREAD))
		return false;
	if (r->misfire > TW_MISFIRE_SKIP || r->bits & ~(unsigned)SNAP_BITS ||
	    ((r->bits & SNAP_PAUSED_BY_FAILURES) && !(r->bits & SNAP_PAUSED)))
		return false;
	if (r->kind == SNAP_PERIODIC ? r->period_ms < 1 || r->period_ms > TW_MAX_DELAY_MS :
				       r->period_ms != 0)
		return false;
	if (r->delay_ms > TW_MAX_DELAY_MS && r->delay_ms != TW_NEVER)
		return false;
	if (r->due_wall_ns < 0 || ((r->bits & SNAP_PAUSED) && r->due_wall_ns))
		return false;
	for (int i = SNAP_FAILURES; i < SNAP_COUNTERS; i++)
		if (r->counters[i] > UINT32_MAX) /* a task keeps these in 32 bits */
			return false;
	return true;
}

static uint64_t hash_name(const char *name, size_t len)
{
	uint64_t h = UINT64_C(14695981039346656037);
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * UINT64_C(1099511628211);
	return h;
}

/* Marks every record whose name comes again later in the file; false: no memory. */
static bool mark_duplicates(struct snap_file *f)
{
	size_t cap = 16;
	while (cap < 2 * f->count)
		cap *= 2;
	uint32_t *slots = calloc(cap, sizeof *slots); /* record index + 1; 0: empty */
	if (!slots)
		return false;
	for (size_t i = 0; i < f->count; i++) {
		struct snap_record *r = &f->records[i];
		size_t at = (size_t)hash_name(r->name, r->name_len) & (cap - 1);
		for (;; at = (at + 1) & (cap - 1)) {
			if (!slots[at])
				break;
			struct snap_record *o = &f->records[slots[at] - 1];
			if (o->name_len == r->name_len &&
			    memcmp(o->name, r->name, r->name_len) == 0) {
				o->duplicate = true;
				f->duplicates++;
				break;
			}
		}
		slots[at] = (uint32_t)i + 1;
	}
	free(slots);
	return true;
}

int tw__snapshot_parse(const uint8_t *buf, size_t len, struct snap_file *out)
{
	*out = (struct snap_file){ 0 };
	if (len < sizeof MAGIC || memcmp(buf, MAGIC, sizeof MAGIC) != 0)
		return -TW_ENOTSNAPSHOT;
	if (len < 12)
		return -TW_ECORRUPT;
	if (get32(buf + 8) != SNAP_VERSION)
		return -TW_EVERSION;
	if (len < SNAP_HEADER_BYTES + SNAP_TRAILER_BYTES)
		return -TW_ECORRUPT;
	const uint8_t *trailer = buf + len - SNAP_TRAILER_BYTES;
	if (memcmp(trailer + 12, END_MAGIC, sizeof END_MAGIC) != 0 ||
	    (CRC_CHECKED && tw__snapshot_crc(0, buf, len - 8) != get32(trailer + 8)))
		return -TW_ECORRUPT;
	/* A written time before 1970 is no time this library writes (dues are >= 0 too). */
	if (get32(buf + 12) != SNAP_HEADER_BYTES || get64(buf + 24) || (int64_t)get64(buf + 16) < 0)
		return -TW_ECORRUPT;
	uint64_t count = get64(trailer);
	size_t area = len - SNAP_HEADER_BYTES - SNAP_TRAILER_BYTES;
	if (count > area / (4 + SNAP_RECORD_FIXED + 1) || count >= UINT32_MAX)
		return -TW_ECORRUPT;
	struct snap_file f = { .written_wall_ns = (int64_t)get64(buf + 16), .count = count };
	if (count && !(f.records = calloc(count, sizeof *f.records)))
		return -TW_ENOMEM;
	const uint8_t *p = buf + SNAP_HEADER_BYTES, *end = trailer;
	for (size_t i = 0; i < count; i++) {
		if (end - p < 4) {
			tw__snapshot_file_free(&f);
			return -TW_ECORRUPT;
		}
		uint32_t rec_len = get32(p);
		if ((size_t)(end - p - 4) < rec_len ||
		    !parse_record(p + 4, rec_len, &f.records[i])) {
			tw__snapshot_file_free(&f);
			return -TW_ECORRUPT;
		}
		p += 4 + (size_t)rec_len;
	}
	if (p != end) {
		tw__snapshot_file_free(&f);
		return -TW_ECORRUPT;
	}
	if (!mark_duplicates(&f)) {
		tw__snapshot_file_free(&f);
		return -TW_ENOMEM;
	}
	*out = f;
	return TW_OK;
}

void tw__snapshot_file_free(struct snap_file *f)
{
	free(f->records);
	*f = (struct snap_file){ 0 };
}

bool tw__snapshot_starts_like(const uint8_t *buf, size_t len)
{
	return !memcmp(buf, MAGIC, len < sizeof MAGIC ? len : sizeof MAGIC);
}
