/*
 * cluster/defer.h - deferred tasks: how they are stored in etcd (pure codecs) and the
 * replica's record of the tasks it holds.
 *
 * Keys under the prefix P:
 *   P/defer/t/<group %04u>/<key>  the task:  "tw1 <kind> <due_ms> <attempts> <max> <backoff>\n"
 *                                             followed by the payload's bytes
 *   P/defer/c/<group %04u>/<key>  its claim: "<attempt> <member> <token>"; present from the
 *                                             owner's claim to the write after its handler
 *   P/dead/<key>                  a dead letter: the task's header with " <last_code>"
 *                                             before its newline, then the payload
 * <attempts> counts the attempts that ended; a claim's <attempt> is the one it starts. One
 * watch over P/defer/ follows both the tasks and the claims; a task and its claim are always
 * written together, in one transaction.
 */
#ifndef TW_CLUSTER_DEFER_H
#define TW_CLUSTER_DEFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tickwheel_cluster.h"

#define CL_DEFAULT_ATTEMPTS 5
#define CL_DEFAULT_BACKOFF_MS 1000
/* The longest record header: "tw1 " kind and five numbers, with spaces and the newline. */
#define CL_RECORD_HEAD_MAX (4 + TW_CLUSTER_KIND_MAX + 6 * 21 + 1)

struct cl_record {
	char kind[TW_CLUSTER_KIND_MAX + 1];
	int64_t due_ms;
	unsigned attempts, max_attempts, backoff_ms;
	bool dead;     /* a dead letter: last_code is part of it */
	int last_code; /* dead: the last attempt's handler return */
	const uint8_t *payload; /* decode: points into the value decoded */
	size_t payload_len;
};

struct cl_claim_value {
	unsigned attempt;
	char member[TW_CLUSTER_MEMBER_MAX + 1];
	uint64_t token;
};

bool tw__cl_kind_ok(const char *kind);
bool tw__cl_task_key_ok(const char *key);
/* The value of r (header and payload), malloc'ed, in *out; < 0 a code. */
int tw__cl_record_encode(const struct cl_record *r, uint8_t **out, size_t *len);
/* 0, or -1 when the value is not a record (an operator's own key under the prefix). */
int tw__cl_record_decode(const uint8_t *value, size_t len, struct cl_record *r);
int tw__cl_claim_encode(const struct cl_claim_value *v, char *buf, size_t cap);
int tw__cl_claim_decode(const uint8_t *value, size_t len, struct cl_claim_value *v);
/* The wait after failed attempt n (1, 2, ...): backoff * 2^(n - 1), capped. */
int64_t tw__cl_backoff_ms(unsigned backoff_ms, unsigned failed);

#endif
