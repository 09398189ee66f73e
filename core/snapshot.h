/*
 * snapshot.h - the snapshot file's format (api/snapshot-format.md): records encoded and
 * parsed in memory (snapshot_format.c). Uses only tickwheel.h and zlib's crc32, so that the
 * fuzzer builds the parser alone (tests/fuzz/).
 */
#ifndef TICKWHEEL_CORE_SNAPSHOT_H
#define TICKWHEEL_CORE_SNAPSHOT_H

#include "tickwheel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	SNAP_VERSION = 1,
	SNAP_HEADER_BYTES = 32,
	SNAP_RECORD_FIXED = 96, /* a record's bytes after its length field, before the texts */
	SNAP_TRAILER_BYTES = 16,
};

/* The record's kind of schedule. */
enum { SNAP_ONESHOT, SNAP_PERIODIC, SNAP_CALENDAR };

/* Its bits. */
enum {
	SNAP_PAUSED = 1u << 0,
	SNAP_PAUSED_BY_FAILURES = 1u << 1,
	SNAP_BITS = SNAP_PAUSED | SNAP_PAUSED_BY_FAILURES,
};

/* Its counters, in the file's order. */
enum {
	SNAP_RUNS,
	SNAP_FAILURES,
	SNAP_CONSECUTIVE_FAILURES,
	SNAP_SLOW_RUNS,
	SNAP_SKIPPED_OVERLAP,
	SNAP_SKIPPED_OVERLOAD,
	SNAP_SKIPPED_MISSED,
	SNAP_COUNTERS
};

struct snap_record {
	const char *name; /* name_len bytes, not NUL-terminated: into the parsed buffer */
	const char *cron; /* cron_len bytes for SNAP_CALENDAR, else NULL */
	uint32_t cron_len;
	uint8_t name_len, kind, flags, misfire, bits;
	bool duplicate; /* parse: a later record has the same name */
	uint64_t period_ms, delay_ms;
	int64_t due_wall_ns; /* 0: none */
	uint64_t counters[SNAP_COUNTERS];
};

struct snap_file {
	int64_t written_wall_ns;
	size_t count, duplicates;
	struct snap_record *records; /* malloc'ed; free with tw__snapshot_file_free */
};

/* The bytes a record takes in the file, its length field included. */
static inline size_t snap_record_bytes(const struct snap_record *r)
{
	return 4 + SNAP_RECORD_FIXED + r->name_len + (size_t)r->cron_len;
}

/* Encoders: each writes its bytes at dst and returns their number. */
size_t tw__snapshot_put_header(uint8_t *dst, int64_t written_wall_ns);
size_t tw__snapshot_put_record(uint8_t *dst, const struct snap_record *r);
/* The trailer, for crc the CRC-32 of every byte before the trailer's CRC field (the count
 * included: pass the CRC of the bytes before the trailer; it is carried on over the count). */
size_t tw__snapshot_put_trailer(uint8_t *dst, uint64_t count, uint32_t crc);
uint32_t tw__snapshot_crc(uint32_t crc, const uint8_t *buf, size_t len);

/*
 * Checks buf whole and parses it: TW_OK with *out (records point into buf), or
 * -TW_ENOTSNAPSHOT, -TW_EVERSION, -TW_ECORRUPT (*out then empty), -TW_ENOMEM. Reads no byte
 * outside buf[0, len) whatever buf holds.
 */
int tw__snapshot_parse(const uint8_t *buf, size_t len, struct snap_file *out);
void tw__snapshot_file_free(struct snap_file *f);

/* Whether buf[0, len) can be the start of a snapshot file: the magic's first len bytes, or
 * the whole magic (a writer killed at any point leaves such a temporary file, or an empty one). */
bool tw__snapshot_starts_like(const uint8_t *buf, size_t len);

#endif
