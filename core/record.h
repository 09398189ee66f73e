/*
 * record.h - the recorder (tw_config.record_path, TW_RECORD): every operation a program
 * makes and every run, to a file of api/record-format.md. Uses base.h.
 *
 * The hooks in the operations and the run are one line each, behind a test of
 * e->recorder that is predicted not taken: recording off costs a load and a branch.
 * Recording on, an event is copied into a bounded ring reserved by compare-and-swap and
 * committed by a length word; the recorder's own thread drains it with write(2). Nothing
 * waits for the file: a full ring drops the event and counts it.
 */
#ifndef TICKWHEEL_CORE_RECORD_H
#define TICKWHEEL_CORE_RECORD_H

#include "base.h"

struct tw_recorder;

/* Event types of the file (api/record-format.md). */
enum {
	REC_ADD = 1,
	REC_SET_DELAY = 2,
	REC_SET_DUE = 3,
	REC_SET_PERIOD = 4,
	REC_PAUSE = 5,
	REC_RESUME = 6,
	REC_CANCEL = 7,
	REC_RUN = 16,
	REC_SKIP = 17,
	REC_THREAD = 32,
	REC_DROPPED = 33,
	REC_END = 34,
};

/* SET_DELAY's u from tw_set_delay_many. */
enum { REC_FROM_MANY = 1 };

/* SKIP's u: why the firings were skipped (tw_engine_stats' three counts). */
enum { REC_SKIP_OVERLAP = 1, REC_SKIP_OVERLOAD = 2, REC_SKIP_MISSED = 3 };

/* The header's config bits: the engine's options. */
enum {
	REC_CONFIG_MANUAL_CLOCK = 1,
	REC_CONFIG_COARSE_CLOCK = 2,
	REC_CONFIG_PIN_EXECUTORS = 4,
};

/* An event's fixed 56 bytes, as the file has them (little-endian, as the host: base.h). */
struct rec_event {
	uint8_t type, reserved;
	uint16_t thread;
	uint32_t tail;
	uint64_t t_ns, id;
	int32_t result;
	uint32_t u;
	uint64_t a, b, c;
};
_Static_assert(sizeof(struct rec_event) == 56, "record-format.md: an event is 56 bytes");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the file is little-endian");

/* What the recorder needs of the engine it records, at create. */
struct record_setup {
	const tw_config *cfg;
	unsigned executors;           /* the configured executors, for the header */
	unsigned wheel_index;         /* tw__record_run's executor index of the wheel thread */
	_Atomic uint64_t *manual_now; /* the manual clock's word; NULL: CLOCK_MONOTONIC */
};

/*
 * At create: *out gets a recorder when cfg->record_path or TW_RECORD names a file, else
 * NULL. -TW_EIO when the file cannot be opened (errno kept), -TW_EINVAL for a
 * record_buffer_kib past its limit, -TW_ENOMEM, -TW_ERESOURCE (its thread).
 */
int tw__record_open(struct tw_recorder **out, const struct record_setup *setup);
/* Once nothing records any more (the engine's threads are gone): drains the ring, writes
 * END with now_ns, closes the file and frees the recorder. NULL: nothing. */
void tw__record_close(struct tw_recorder *r, uint64_t now_ns);

/* The hooks: any thread, never block; each returns rc, the call's result, so that the
 * operation's code is a tail call. The spec of a tw_add of size bytes (may be NULL). */
int tw__record_add(struct tw_recorder *r, const tw_task_spec *spec, size_t size, int rc,
		   const tw_id *out);
/* One event of type for id: a is the call's value (delay, due, period) or 0. */
int tw__record_op(struct tw_recorder *r, unsigned type, tw_id id, int rc, uint64_t a);
int tw__record_many(struct tw_recorder *r, const tw_id *ids, size_t n, uint64_t delay_ms,
		    const int *results, int rc);
/* n firings of task id skipped for reason (REC_SKIP_*); due_ns the first one's, 0 if not
 * known. Any thread: the wheel thread's skips, and those a call makes. */
void tw__record_skip(struct tw_recorder *r, tw_id id, uint64_t due_ns, unsigned reason, uint64_t n);
/* A run that started at start_ns and ended at end_ns (CLOCK_MONOTONIC) on executor index. */
void tw__record_run(struct tw_recorder *r, const tw_fire *fire, uint64_t start_ns, uint64_t end_ns,
		    int rc, unsigned index);

/* record.c, for record_hooks.c (record_ring.h has the record): a new thread number; puts ev
 * and tail_len bytes of tail (after a DROPPED event for a gap before it), false when it did
 * not fit. record_hooks.c: the calling thread's number, its THREAD event put first (0 when
 * that did not fit). */
uint16_t tw__record_new_thread(struct tw_recorder *r);
uint16_t tw__record_thread(struct tw_recorder *r);
bool tw__record_put(struct tw_recorder *r, struct rec_event *ev, const void *tail,
		    uint32_t tail_len);
/* An event counted as dropped without being made (its thread could not be announced). */
void tw__record_drop(struct tw_recorder *r);

/* tw_engine_stats' record_* fields; the errno of the first failed write (0: none). */
void tw__record_stats(const struct tw_recorder *r, tw_engine_stats *out);
int tw__record_error(const struct tw_recorder *r);

#endif
