/*
 * tests/cluster/chaos_defer_log.h - what the chaos checker of deferred tasks reads: every
 * replica's LOG.defer (chaos_defer.h), as events sorted by key and time, the library's lines
 * that say a replica lost its lease or a group, and the dead letters etcd holds.
 */
#ifndef TW_TESTS_CHAOS_DEFER_LOG_H
#define TW_TESTS_CHAOS_DEFER_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHAOS_KEY_CAP 64

struct ev {
	int64_t ns;
	uint32_t key, order;
	int replica;
	char type;     /* the line's letter */
	int64_t due;   /* D, M: the due; S: the due handed to the handler */
	int64_t code;  /* d, c, m, E: the answer; S: the attempt */
	int64_t extra; /* D: the try; S: the group; E: the attempt */
	uint64_t token;
};

struct lease_note {
	int64_t ns;
	int replica;
	int group; /* -1: the whole lease */
};

struct chaos_log {
	char (*names)[CHAOS_KEY_CAP]; /* by key number */
	uint32_t nkeys, cap;
	uint32_t *table; /* open addressing: key number + 1 */
	uint32_t table_size;
	struct ev *ev; /* sorted by key, then time */
	size_t nev, evcap;
	struct lease_note *notes;
	size_t nnotes, notecap;
	char (*dead)[CHAOS_KEY_CAP]; /* sorted */
	size_t ndead, deadcap;
};

/* Each returns the lines or letters it found wrong (printed as failures). */
unsigned chaos_log_read(struct chaos_log *l, const char *dir, int replicas);
unsigned chaos_log_read_dead(struct chaos_log *l, const char *const *endpoints, const char *prefix);
bool chaos_log_is_dead(const struct chaos_log *l, const char *key);
/* A key's number; -1 when no log names it. */
int64_t chaos_log_find(const struct chaos_log *l, const char *key);
void chaos_log_free(struct chaos_log *l);
bool chaos_grow(void **p, size_t *cap, size_t need, size_t size);

#endif
