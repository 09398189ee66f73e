/*
 * record.c - the recorder's ring, its writer thread and its file.
 *
 * The ring is a byte ring of 2^k bytes. A producer reserves 8 + 56 + tail bytes by a
 * compare-and-swap on head, against released (what the writer has taken out), copies the
 * event in and commits it by storing its length in the record's first 8 bytes. The writer
 * takes committed records in order, copies them to its own buffer, zeroes their bytes (so a
 * word of 0 means "not committed yet" on every lap) and moves released on before it calls
 * write(2): producers wait for nothing, neither the file nor each other. A record that does
 * not fit is dropped and counted; the next event put marks the gap with a DROPPED event.
 */
#include "record_ring.h"

#include "alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static _Atomic uint64_t recorders;   /* serials, so that a thread knows which it announced to */
static _Atomic unsigned env_engines; /* engines recorded by TW_RECORD so far */

/* Copies n bytes in or out of the ring at position at, across its end. */
static inline void ring_in(struct tw_recorder *r, uint64_t at, const void *src, size_t n)
{
	size_t pos = at & r->mask, first = r->mask + 1 - pos < n ? r->mask + 1 - pos : n;
	if (__builtin_constant_p(n) && first == n) {
		memcpy(r->ring + pos, src, n); /* most events: inlined, not a call */
		return;
	}
	memcpy(r->ring + pos, src, first);
	memcpy(r->ring, (const unsigned char *)src + first, n - first);
}

static void ring_out(struct tw_recorder *r, uint64_t at, void *dst, size_t n)
{
	size_t pos = at & r->mask, first = r->mask + 1 - pos < n ? r->mask + 1 - pos : n;
	memcpy(dst, r->ring + pos, first);
	memcpy((unsigned char *)dst + first, r->ring, n - first);
	memset(r->ring + pos, 0, first);
	memset(r->ring, 0, n - first);
}

static _Atomic uint64_t *word_at(struct tw_recorder *r, uint64_t at)
{
	return (_Atomic uint64_t *)(void *)(r->ring + (at & r->mask));
}

/* Whether the ring has room up to end: released looked at afresh. */
static __attribute__((noinline)) bool room(struct tw_recorder *r, uint64_t end)
{
	uint64_t released = atomic_load_explicit(&r->released, memory_order_acquire);
	uint64_t seen = atomic_load_explicit(&r->released_seen, memory_order_relaxed);
	while (seen < released &&
	       !atomic_compare_exchange_weak_explicit(&r->released_seen, &seen, released,
						      memory_order_release, memory_order_relaxed)) {
	}
	return end - released <= r->mask + 1;
}

/* Reserves and commits one record; false when it does not fit. The ring's bytes past the
 * tail's own are zero, so tail_len may be short of ev->tail: the padding is there. */
static bool put_one(struct tw_recorder *r, struct rec_event *ev, const void *tail,
		    uint32_t tail_len)
{
	ev->tail = (tail_len + 7) & ~7u;
	uint64_t len = 8 + sizeof *ev + ev->tail, cap = r->mask + 1;
	if (len > MAX_EVENT || len > cap / 2)
		return false;
	uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
	do {
		if (h + len - atomic_load_explicit(&r->released_seen, memory_order_acquire) > cap &&
		    !room(r, h + len))
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&r->head, &h, h + len, memory_order_relaxed,
							memory_order_relaxed));
	ring_in(r, h + 8, ev, sizeof *ev);
	if (tail_len)
		ring_in(r, h + 8 + sizeof *ev, tail, tail_len);
	atomic_store_explicit(word_at(r, h), len, memory_order_release);
	/* Woken early only when the ring is half full: else it drains every IDLE_NS. */
	if (atomic_load_explicit(&r->sleeping, memory_order_relaxed) &&
	    h + len - atomic_load_explicit(&r->released, memory_order_relaxed) > cap / 2 &&
	    atomic_exchange(&r->sleeping, 0)) {
		atomic_fetch_add(&r->wake, 1);
		tw__futex_wake_all(&r->wake);
	}
	return true;
}

void tw__record_drop(struct tw_recorder *r)
{
	atomic_fetch_add_explicit(&r->dropped_pending, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
}

/* Marks the gap of the events dropped since the last mark, before the event after them. */
static void mark_gap(struct tw_recorder *r)
{
	uint64_t n = atomic_exchange_explicit(&r->dropped_pending, 0, memory_order_relaxed);
	if (!n)
		return;
	struct rec_event ev = { .type = REC_DROPPED, .t_ns = record_now(r), .a = n };
	if (!put_one(r, &ev, NULL, 0))
		atomic_fetch_add_explicit(&r->dropped_pending, n, memory_order_relaxed);
}

bool tw__record_put(struct tw_recorder *r, struct rec_event *ev, const void *tail,
		    uint32_t tail_len)
{
	if (atomic_load_explicit(&r->dropped_pending, memory_order_relaxed))
		mark_gap(r);
	return put_one(r, ev, tail, tail_len);
}

uint16_t tw__record_new_thread(struct tw_recorder *r)
{
	uint32_t n = atomic_fetch_add(&r->next_thread, 1) + 1;
	return n < UINT16_MAX ? (uint16_t)n : UINT16_MAX;
}

static void log_error(struct tw_recorder *r, const char *what, int err)
{
	if (!r->log)
		return;
	char message[160];
	(void)snprintf(message, sizeof message,
		       "recording stopped: %s failed: %s; later events are counted as dropped",
		       what, tw__strerror(err));
	r->log(TW_LOG_ERROR, message, r->log_arg);
}

/* Writes n bytes holding events (their count) unless a write failed before. */
static void write_out(struct tw_recorder *r, const unsigned char *p, size_t n, uint64_t events)
{
	size_t done = 0;
	while (!atomic_load_explicit(&r->error, memory_order_relaxed) && done < n) {
		ssize_t w = write(r->fd, p + done, n - done);
		if (w >= 0) {
			done += (size_t)w;
		} else if (errno != EINTR) {
			atomic_store(&r->error, errno);
			log_error(r, "write", errno);
		}
	}
	if (done == n) {
		atomic_fetch_add_explicit(&r->written, events, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->bytes, n, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&r->dropped, events, memory_order_relaxed);
	}
}

/* Takes the committed records out of the ring and writes them; how many it took. */
static uint64_t drain(struct tw_recorder *r)
{
	uint64_t tail = atomic_load_explicit(&r->released, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire), events = 0;
	size_t used = 0;
	while (tail < head) {
		uint64_t len = atomic_load_explicit(word_at(r, tail), memory_order_acquire);
		if (!len || used + len - 8 > OUT_SIZE)
			break; /* reserved, not committed yet; or the buffer is full */
		ring_out(r, tail + 8, r->out + used, len - 8);
		atomic_store_explicit(word_at(r, tail), 0, memory_order_relaxed);
		used += len - 8;
		tail += len;
		events++;
	}
	atomic_store_explicit(&r->released, tail, memory_order_release);
	if (used)
		write_out(r, r->out, used, events);
	return events;
}

static void *writer_main(void *arg)
{
	struct tw_recorder *r = arg;
	write_out(r, r->header, HEADER_SIZE, 0);
	for (;;) {
		bool quit = atomic_load_explicit(&r->quit, memory_order_acquire);
		if (drain(r))
			continue;
		uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
		bool empty = head == atomic_load_explicit(&r->released, memory_order_relaxed);
		if (quit && empty)
			return NULL;
		if (!empty && quit) {
			sched_yield(); /* a producer between its reservation and its commit */
			continue;
		}
		uint32_t seen = atomic_load(&r->wake);
		atomic_store(&r->sleeping, 1);
		if (!atomic_load(&r->quit))
			(void)tw__futex_wait_until(&r->wake, seen, monotonic_ns() + IDLE_NS);
		atomic_store(&r->sleeping, 0);
	}
}

static void fill_header(struct tw_recorder *r, const struct record_setup *s)
{
	const tw_config *cfg = s->cfg;
	struct timespec wall;
	(void)clock_gettime(CLOCK_REALTIME, &wall); /* cannot fail: the clock exists */
	uint64_t u64[2] = { record_now(r),
			    (uint64_t)wall.tv_sec * 1000000000u + (uint64_t)wall.tv_nsec };
	uint32_t u32[4] = { s->executors,
			    (cfg->manual_clock ? REC_CONFIG_MANUAL_CLOCK : 0u) |
				    (cfg->coarse_clock ? REC_CONFIG_COARSE_CLOCK : 0u) |
				    (cfg->pin_executors ? REC_CONFIG_PIN_EXECUTORS : 0u),
			    (uint32_t)getpid(), cfg->queue_capacity ? cfg->queue_capacity : 4096 };
	/* what decides a call's answer as much as its timing (an ended task answers ESTATE for
	 * retain_ms, then ENOTFOUND), so that a replay's engine answers as this one did */
	uint64_t retain_ms = cfg->retain_ms;
	uint32_t max_failures = cfg->max_failures;
	uint32_t version[2] = { 1, HEADER_SIZE };
	memset(r->header, 0, HEADER_SIZE);
	memcpy(r->header, "\x89TWRECD\n", 8);
	memcpy(r->header + 8, version, sizeof version);
	memcpy(r->header + 16, u64, sizeof u64);
	memcpy(r->header + 32, u32, sizeof u32);
	memcpy(r->header + 48, &retain_ms, sizeof retain_ms);
	memcpy(r->header + 56, &max_failures, sizeof max_failures);
}

/* The file to record to: record_path, or TW_RECORD's (".N" after it for the N-th engine
 * that takes it); NULL: none. */
static const char *path_of(const tw_config *cfg, char *buf, size_t size)
{
	if (cfg->record_path)
		return *cfg->record_path ? cfg->record_path : NULL;
	/* secure_getenv: a set-user-ID program does not write where its caller says. */
	const char *env = secure_getenv("TW_RECORD");
	if (!env || !*env)
		return NULL;
	unsigned n = atomic_fetch_add(&env_engines, 1) + 1;
	if (n == 1)
		return env;
	int len = snprintf(buf, size, "%s.%u", env, n);
	return len > 0 && (size_t)len < size ? buf : "";
}

static void free_recorder(struct tw_recorder *r)
{
	if (r->ring)
		(void)munmap(r->ring, r->mask + 1); /* cannot fail: our own mapping */
	tw__free_aligned(r, sizeof *r, 64);
}

int tw__record_open(struct tw_recorder **out, const struct record_setup *s)
{
	*out = NULL;
	char buf[PATH_MAX];
	uint64_t kib = s->cfg->record_buffer_kib ? s->cfg->record_buffer_kib : DEFAULT_KIB;
	if (kib > MAX_KIB)
		return -TW_EINVAL;
	const char *path = path_of(s->cfg, buf, sizeof buf);
	if (!path)
		return TW_OK;
	if (!*path) {
		errno = ENAMETOOLONG; /* TW_RECORD's path with ".N" after it */
		return -TW_EIO;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -TW_EIO;
	struct tw_recorder *r = tw__alloc_aligned(sizeof *r, 64);
	if (!r) {
		(void)close(fd); /* nothing written: nothing to lose */
		return -TW_ENOMEM;
	}
	memset(r, 0, sizeof *r);
	r->fd = fd;
	uint64_t cap = 4096;
	while (cap < kib * 1024)
		cap <<= 1;
	/* Populated now: a page fault at an event's first use of its page would cost the
	 * caller more than the event. */
	void *ring = mmap(NULL, cap, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	r->ring = ring == MAP_FAILED ? NULL : ring;
	r->mask = cap - 1;
	r->serial = atomic_fetch_add(&recorders, 1) + 1;
	r->wheel_index = s->wheel_index;
	r->manual_now = s->cfg->manual_clock ? s->manual_now : NULL;
	r->log = s->cfg->log;
	r->log_arg = s->cfg->log_arg;
	fill_header(r, s);
	int rc = r->ring ? TW_OK : -TW_ENOMEM;
	if (rc == TW_OK && pthread_create(&r->writer, NULL, writer_main, r))
		rc = -TW_ERESOURCE;
	if (rc != TW_OK) {
		(void)close(fd);
		free_recorder(r);
		return rc;
	}
	(void)pthread_setname_np(r->writer, "tw-record");
	*out = r;
	return TW_OK;
}

void tw__record_close(struct tw_recorder *r, uint64_t now_ns)
{
	if (!r)
		return;
	atomic_store_explicit(&r->quit, true, memory_order_release);
	atomic_fetch_add(&r->wake, 1);
	tw__futex_wake_all(&r->wake);
	(void)pthread_join(r->writer, NULL); /* fails only for a thread joined already */
	/* The writer is gone: this thread writes what is left, the last gap, then END. */
	struct rec_event ev[2] = { { .type = REC_DROPPED, .t_ns = now_ns } };
	uint64_t n = atomic_exchange(&r->dropped_pending, 0);
	if (n) {
		ev[0].a = n;
		write_out(r, (const unsigned char *)&ev[0], sizeof ev[0], 1);
	}
	ev[1] = (struct rec_event){ .type = REC_END,
				    .t_ns = now_ns,
				    .a = atomic_load(&r->written),
				    .b = atomic_load(&r->dropped),
				    .c = now_ns };
	write_out(r, (const unsigned char *)&ev[1], sizeof ev[1], 1);
	if (close(r->fd) && !atomic_load(&r->error)) {
		atomic_store(&r->error, errno); /* NFS and the like report a failed write here */
		log_error(r, "close", errno);
	}
	free_recorder(r);
}

void tw__record_stats(const struct tw_recorder *r, tw_engine_stats *out)
{
	out->record_events = atomic_load_explicit(&r->written, memory_order_relaxed);
	out->record_dropped = atomic_load_explicit(&r->dropped, memory_order_relaxed);
	out->record_bytes = atomic_load_explicit(&r->bytes, memory_order_relaxed);
	out->record_error = atomic_load_explicit(&r->error, memory_order_relaxed);
	out->memory_bytes += sizeof *r + r->mask + 1; /* the recorder and its ring */
}

int tw__record_error(const struct tw_recorder *r)
{
	return atomic_load_explicit(&r->error, memory_order_relaxed);
}
