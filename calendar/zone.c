/*
 * zone.c - zones from TZif data (RFC 8536) and the stretch of constant offset
 * around an instant. Loading from files is zone_load.c.
 *
 * Only the version 2+ data block is read when there is one (64-bit times;
 * the version 1 block is skipped), and only what changes the clock is kept:
 * a transition that keeps the offset (a new abbreviation, a DST flag that
 * flips while the offset stays) is no transition for a schedule.
 */
#include "zone.h"

#include <stdlib.h>
#include <string.h>

/* No offset in the tz database is a day away from UTC; a file that says so is damaged. */
#define MAX_OFFSET (26 * 3600)

struct header {
	unsigned version;
	uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
};

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

/* The i-th transition time of a block whose times take time_size bytes. */
static int64_t time_at(const unsigned char *times, size_t time_size, size_t i)
{
	return time_size == 8 ? be64(times + 8 * i) : (int32_t)be32(times + 4 * i);
}

static bool read_header(const unsigned char *p, size_t size, struct header *h)
{
	if (size < 44 || memcmp(p, "TZif", 4) != 0)
		return false;
	h->version = p[4] ? (unsigned)(p[4] - '0') : 1;
	if (p[4] && (p[4] < '2' || p[4] > '9'))
		return false;
	h->isutcnt = be32(p + 20), h->isstdcnt = be32(p + 24), h->leapcnt = be32(p + 28);
	h->timecnt = be32(p + 32), h->typecnt = be32(p + 36), h->charcnt = be32(p + 40);
	/* RFC 8536: isutcnt and isstdcnt are 0 or typecnt; at least one type. */
	return h->typecnt > 0 && h->typecnt <= 256 && h->timecnt <= 1u << 20 &&
	       h->charcnt <= 1u << 16 && h->leapcnt <= 1u << 16 &&
	       (h->isutcnt == 0 || h->isutcnt == h->typecnt) &&
	       (h->isstdcnt == 0 || h->isstdcnt == h->typecnt);
}

/* The size of a data block whose times take time_size bytes. */
static size_t block_size(const struct header *h, size_t time_size)
{
	return (size_t)h->timecnt * (time_size + 1) + (size_t)h->typecnt * 6 + h->charcnt +
	       (size_t)h->leapcnt * (time_size + 4) + h->isstdcnt + h->isutcnt;
}

static int fail(const char **reason, const char *why)
{
	*reason = why;
	return -1;
}

int tw__zone_from_tzif(const unsigned char *data, size_t size, struct tw__zone **out,
		       const char **reason, bool *nomem)
{
	static const char *const bad = "the time zone file is not valid TZif data";
	struct header h;
	if (!read_header(data, size, &h))
		return fail(reason, bad);
	size_t time_size = 4, pos = 44;
	if (h.version >= 2) {
		pos += block_size(&h, 4); /* the 32-bit block, for version 1 readers */
		if (pos > size || !read_header(data + pos, size - pos, &h))
			return fail(reason, bad);
		pos += 44;
		time_size = 8;
	}
	if (block_size(&h, time_size) > size - pos)
		return fail(reason, bad);
	if (h.leapcnt)
		return fail(reason, "time zone files with leap seconds (right/) are not supported");
	const unsigned char *times = data + pos, *idx = times + (size_t)h.timecnt * time_size;
	const unsigned char *types = idx + h.timecnt;
	pos += block_size(&h, time_size);

	int32_t offsets[256];
	for (size_t i = 0; i < h.typecnt; i++) {
		offsets[i] = (int32_t)be32(types + 6 * i);
		if (offsets[i] <= -MAX_OFFSET || offsets[i] >= MAX_OFFSET || types[6 * i + 4] > 1)
			return fail(reason, bad);
	}
	struct tw__zone *z =
		calloc(1, sizeof *z + (size_t)h.timecnt * (sizeof(int64_t) + sizeof(int32_t)));
	if (!z) {
		*nomem = true;
		return fail(reason, "out of memory");
	}
	z->at = (int64_t *)(z + 1);
	z->offset = (int32_t *)(z->at + h.timecnt);
	z->initial = offsets[0];
	int32_t last = z->initial;
	for (size_t i = 0; i < h.timecnt; i++) {
		int64_t at = time_at(times, time_size, i);
		if (idx[i] >= h.typecnt || (i && at <= time_at(times, time_size, i - 1))) {
			free(z);
			return fail(reason, bad);
		}
		if (offsets[idx[i]] == last)
			continue;
		last = offsets[idx[i]];
		z->at[z->count] = at;
		z->offset[z->count++] = last;
	}
	/* The footer, "\nRULE\n", which may be empty. */
	if (h.version >= 2 && pos < size) {
		const unsigned char *nl =
			pos + 1 < size ? memchr(data + pos + 1, '\n', size - pos - 1) : NULL;
		if (data[pos] != '\n' || !nl) {
			free(z);
			return fail(reason, bad);
		}
		size_t len = (size_t)(nl - (data + pos + 1));
		if (len) {
			if (tw__posix_tz_parse((const char *)data + pos + 1, len, &z->rule)) {
				free(z);
				return fail(reason,
					    "the time zone file's rule (its footer) is not valid");
			}
			z->has_rule = true;
		}
	}
	*out = z;
	return 0;
}

void tw__zone_free(struct tw__zone *z)
{
	free(z);
}

/* The rule's stretch around t, cut at from: where the table ends, its last
 * offset holds until the rule's first change after it. */
static void rule_span(const struct tw__zone *z, int64_t t, int64_t from, int32_t from_prev,
		      struct tw__zone_span *out)
{
	tw__posix_tz_span(&z->rule, t, out);
	if (out->start <= from) {
		out->start = from;
		out->prev_offset = from_prev;
	}
}

void tw__zone_span(const struct tw__zone *z, int64_t t, struct tw__zone_span *out)
{
	if (!z) {
		*out = (struct tw__zone_span){ INT64_MIN, INT64_MAX, 0, 0 };
		return;
	}
	if (z->count == 0 || t < z->at[0]) {
		if (z->count == 0 && z->has_rule) {
			tw__posix_tz_span(&z->rule, t, out);
			return;
		}
		*out = (struct tw__zone_span){ INT64_MIN, z->count ? z->at[0] : INT64_MAX,
					       z->initial, z->initial };
		return;
	}
	size_t lo = 0, hi = z->count; /* the last change at or before t: at[lo] */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (z->at[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	int32_t prev = lo ? z->offset[lo - 1] : z->initial;
	if (lo + 1 < z->count) {
		*out = (struct tw__zone_span){ z->at[lo], z->at[lo + 1], z->offset[lo], prev };
		return;
	}
	if (z->has_rule) {
		rule_span(z, t, z->at[lo], prev, out);
		return;
	}
	*out = (struct tw__zone_span){ z->at[lo], INT64_MAX, z->offset[lo], prev };
}
