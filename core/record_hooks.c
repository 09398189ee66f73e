/*
 * record_hooks.c - the recorder's events, made from the operations' and the runs' values
 * (api/record-format.md says what each field holds). Called only while recording, behind
 * the one-line hooks; out of line, so that the operations pay a call only then.
 */
#include "record_ring.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

/* The threads a thread has recorded for lately: its number in each recording. */
static _Thread_local struct {
	uint64_t serial;
	uint16_t number;
	bool announced;
} known[4];
static _Thread_local unsigned known_next;

/* A thread's first event in a recording: its number, and its THREAD event put. */
static __attribute__((noinline)) uint16_t announce(struct tw_recorder *r)
{
	uint64_t serial = r->serial;
	unsigned i = 0;
	while (i < 4 && known[i].serial != serial)
		i++;
	if (i == 4) {
		i = known_next++ % 4;
		known[i].serial = r->serial;
		known[i].number = tw__record_new_thread(r);
		known[i].announced = false;
	}
	char name[16] = { 0 };
	if (pthread_getname_np(pthread_self(), name, sizeof name))
		name[0] = 0; /* no name to tell: an empty one */
	struct rec_event ev = { .type = REC_THREAD,
				.thread = known[i].number,
				.t_ns = record_now(r),
				.a = (uint64_t)gettid() };
	if (!tw__record_put(r, &ev, name, (uint32_t)strlen(name)))
		return 0; /* tried again at the thread's next event */
	known[i].announced = true;
	return known[i].number;
}

uint16_t tw__record_thread(struct tw_recorder *r)
{
	uint64_t serial = r->serial;
	for (unsigned i = 0; i < 4; i++)
		if (known[i].serial == serial && known[i].announced)
			return known[i].number;
	return announce(r);
}

int tw__record_add(struct tw_recorder *r, const tw_task_spec *spec, size_t size, int rc,
		   const tw_id *out)
{
	uint16_t thread = tw__record_thread(r);
	if (!thread) {
		tw__record_drop(r);
		return rc;
	}
	tw_task_spec s = { 0 };
	if (spec)
		memcpy(&s, spec, size < sizeof s ? size : sizeof s);
	size_t name_len = s.name ? strnlen(s.name, TW_NAME_MAX + 1) : 0;
	size_t cron_len = s.cron ? strnlen(s.cron, 4096) : 0; /* longer: too long an event */
	unsigned char tail[8 + TW_NAME_MAX + 1 + 4096];
	uint16_t lens[4] = { (uint16_t)name_len, (uint16_t)cron_len, 0, 0 };
	memcpy(tail, lens, sizeof lens);
	if (name_len)
		memcpy(tail + 8, s.name, name_len);
	if (cron_len)
		memcpy(tail + 8 + name_len, s.cron, cron_len);
	struct rec_event ev = {
		.type = REC_ADD,
		.thread = thread,
		.t_ns = record_now(r),
		.id = rc == TW_OK && out ? *out : 0,
		.result = rc,
		.u = (s.flags & 0xffu) | (s.misfire & 0xffu) << 8 | (s.first_due_ns ? 1u << 16 : 0),
		.a = s.delay_ms,
		.b = s.period_ms,
		.c = s.first_due_ns,
	};
	if (!tw__record_put(r, &ev, tail, (uint32_t)(8 + name_len + cron_len)))
		tw__record_drop(r);
	return rc;
}

int tw__record_op(struct tw_recorder *r, unsigned type, tw_id id, int rc, uint64_t a)
{
	uint16_t thread = tw__record_thread(r);
	if (!thread) {
		tw__record_drop(r);
		return rc;
	}
	struct rec_event ev = { .type = (uint8_t)type,
				.thread = thread,
				.t_ns = record_now(r),
				.id = id,
				.result = rc,
				.a = a };
	if (!tw__record_put(r, &ev, NULL, 0))
		tw__record_drop(r);
	return rc;
}

/* A call refused as a whole: no element was touched, results were not written. */
static bool refused_whole(int rc)
{
	return rc == -TW_EINVAL || rc == -TW_ERANGE || rc == -TW_ESHUTDOWN || rc == -TW_EFORKED;
}

int tw__record_many(struct tw_recorder *r, const tw_id *ids, size_t n, uint64_t delay_ms,
		    const int *results, int rc)
{
	if (!ids)
		return rc; /* nothing to name: a NULL array is refused, and n is 0 or a lie */
	uint16_t thread = tw__record_thread(r);
	if (!thread) {
		for (size_t i = 0; i < n; i++)
			tw__record_drop(r);
		return rc;
	}
	bool each = results && !refused_whole(rc);
	struct rec_event ev = { .type = REC_SET_DELAY,
				.thread = thread,
				.t_ns = record_now(r),
				.u = REC_FROM_MANY,
				.a = delay_ms };
	for (size_t i = 0; i < n; i++) {
		ev.id = ids[i];
		ev.result = each ? results[i] : rc;
		if (!tw__record_put(r, &ev, NULL, 0))
			tw__record_drop(r);
	}
	return rc;
}

void tw__record_skip(struct tw_recorder *r, tw_id id, uint64_t due_ns, unsigned reason, uint64_t n)
{
	struct rec_event ev = {
		.type = REC_SKIP,
		.t_ns = record_now(r),
		.id = id,
		.u = reason,
		.a = due_ns,
		.c = n,
	};
	if (!tw__record_put(r, &ev, NULL, 0))
		tw__record_drop(r);
}

void tw__record_run(struct tw_recorder *r, const tw_fire *fire, uint64_t start_ns, uint64_t end_ns,
		    int rc, unsigned index)
{
	/* On the manual clock the run's start is the manual clock's time, its length the
	 * real one (replay makes its callbacks take as long). */
	uint64_t t = r->manual_now != NULL ? record_now(r) : start_ns;
	struct rec_event ev = {
		.type = REC_RUN,
		.t_ns = t,
		.id = fire->id,
		.result = rc,
		.u = index == r->wheel_index ? UINT32_MAX : index,
		.a = fire->due_ns,
		.b = t + (end_ns > start_ns ? end_ns - start_ns : 0),
		.c = fire->run,
	};
	if (!tw__record_put(r, &ev, NULL, 0))
		tw__record_drop(r);
}
