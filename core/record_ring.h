/*
 * record_ring.h - the recorder's record, for record.c and record_hooks.c alone: the ring,
 * the writer's state, and what the hooks read inline (the clock, the serial).
 */
#ifndef TICKWHEEL_CORE_RECORD_RING_H
#define TICKWHEEL_CORE_RECORD_RING_H

#include "record.h"

enum {
	HEADER_SIZE = 64,
	OUT_SIZE = 64 * 1024,  /* the writer's buffer: one write(2) at most */
	MAX_EVENT = 4096,      /* a longer event (a long cron text) is dropped */
	DEFAULT_KIB = 1024,    /* tickwheel.h, record_buffer_kib */
	MAX_KIB = 1024 * 1024, /* 1 GiB */
	IDLE_NS = 5 * 1000000, /* the writer's sleep when the ring is less than half full */
};

/* Lines apart by who writes them how often: the producers (head), the writer after each
 * batch (released), the producers when the ring looks full (released_seen, which they read
 * instead of released: the writer's line is not pulled over at every event), the rest
 * seldom. */
struct tw_recorder {
	_Atomic uint64_t head __attribute__((aligned(64))); /* bytes reserved, ever */
	_Atomic uint64_t dropped_pending; /* dropped since the last DROPPED event */
	_Atomic uint32_t next_thread;
	_Atomic uint64_t released __attribute__((aligned(64)));      /* bytes the writer took out */
	_Atomic uint64_t released_seen __attribute__((aligned(64))); /* released, or earlier */
	_Atomic uint32_t sleeping, wake; /* the writer sleeps on wake while sleeping is 1 */
	_Atomic bool quit;
	_Atomic uint64_t written __attribute__((aligned(64)));
	_Atomic uint64_t dropped, bytes;
	_Atomic int error;
	unsigned char *ring __attribute__((aligned(64)));
	uint64_t mask, serial, wheel_index;
	_Atomic uint64_t *manual_now;
	int fd;
	pthread_t writer;
	void (*log)(int level, const char *message, void *log_arg);
	void *log_arg;
	unsigned char header[HEADER_SIZE];
	unsigned char out[OUT_SIZE];
};

/* The recorder's clock: the engine's. */
static inline uint64_t record_now(const struct tw_recorder *r)
{
	return r->manual_now ? atomic_load_explicit(r->manual_now, memory_order_acquire) :
			       monotonic_ns();
}

#endif
