/*
 * test_engine_record.c - the recorder (tw_config.record_path, TW_RECORD): what a recording
 * holds, read back with a reader written from api/record-format.md alone; bad paths, the
 * environment variable, a buffer too small for what is recorded, a disk that is full.
 */
#include "engine_test_support.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { ADD = 1, SET_DELAY, SET_DUE, SET_PERIOD, PAUSE, RESUME, CANCEL };
enum { RUN = 16, SKIP = 17, THREAD = 32, DROPPED = 33, END = 34 };
enum { SKIP_OVERLAP = 1, SKIP_OVERLOAD = 2, SKIP_MISSED = 3 }; /* SKIP's u */

/* One event as the format page defines it. */
struct event {
	unsigned type, thread;
	uint32_t tail;
	uint64_t t_ns, id;
	int32_t result;
	uint32_t u;
	uint64_t a, b, c;
	const unsigned char *tail_bytes;
};

struct recording {
	unsigned char *bytes;
	size_t size;
	uint64_t start_mono_ns;
	uint32_t executors, config_bits, pid, max_failures;
	uint64_t retain_ms;
	struct event *events;
	size_t count;
};

static uint64_t u64_at(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t u32_at(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads path whole; fails the test unless it is a well-formed recording. */
static void read_recording(const char *path, struct recording *r)
{
	memset(r, 0, sizeof *r);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	size_t cap = 1 << 16;
	r->bytes = malloc(cap);
	size_t got;
	while ((got = fread(r->bytes + r->size, 1, cap - r->size, f)) > 0) {
		r->size += got;
		if (r->size == cap)
			r->bytes = realloc(r->bytes, cap *= 2);
		cr_assert_not_null(r->bytes);
	}
	fclose(f);
	cr_assert_geq(r->size, 64, "no header: %zu bytes", r->size);
	cr_assert_eq(memcmp(r->bytes, "\x89TWRECD\n", 8), 0, "magic");
	cr_assert_eq(u32_at(r->bytes + 8), 1, "version");
	cr_assert_eq(u32_at(r->bytes + 12), 64, "header size");
	r->start_mono_ns = u64_at(r->bytes + 16);
	r->executors = u32_at(r->bytes + 32);
	r->config_bits = u32_at(r->bytes + 36);
	r->pid = u32_at(r->bytes + 40);
	r->retain_ms = u64_at(r->bytes + 48);
	r->max_failures = u32_at(r->bytes + 56);
	size_t max = (r->size - 64) / 56 + 1;
	r->events = calloc(max, sizeof *r->events);
	for (size_t at = 64; at < r->size; r->count++) {
		cr_assert_leq(at + 56, r->size, "event %zu cut short", r->count);
		const unsigned char *p = r->bytes + at;
		struct event *ev = &r->events[r->count];
		ev->type = p[0];
		cr_assert_eq(p[1], 0, "reserved byte");
		ev->thread = (unsigned)p[2] | (unsigned)p[3] << 8;
		ev->tail = u32_at(p + 4);
		cr_assert_eq(ev->tail % 8, 0, "event %zu: tail %u", r->count, ev->tail);
		ev->t_ns = u64_at(p + 8);
		ev->id = u64_at(p + 16);
		ev->result = (int32_t)u32_at(p + 24);
		ev->u = u32_at(p + 28);
		ev->a = u64_at(p + 32);
		ev->b = u64_at(p + 40);
		ev->c = u64_at(p + 48);
		ev->tail_bytes = p + 56;
		at += 56 + ev->tail;
		cr_assert_leq(at, r->size, "event %zu: tail past the end", r->count);
	}
}

static void free_recording(struct recording *r)
{
	free(r->events);
	free(r->bytes);
}

static void temp_path(char *path, size_t size)
{
	(void)snprintf(path, size, "/tmp/tw-record-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0, "mkstemp: %s", strerror(errno));
	close(fd);
}

#define assert_event(ev, type_, thread_, id_, result_)                                          \
	do {                                                                                    \
		cr_assert_eq((ev)->type, (type_), "type %u, not %u", (ev)->type, (type_));      \
		cr_assert_eq((ev)->thread, (thread_), "type %u: thread %u, not %u", (ev)->type, \
			     (unsigned)(ev)->thread, (unsigned)(thread_));                      \
		cr_assert_eq((ev)->id, (id_), "type %u: id %" PRIu64, (ev)->type, (ev)->id);    \
		cr_assert_eq((ev)->result, (result_), "type %u: result %d", (ev)->type,         \
			     (ev)->result);                                                     \
	} while (0)

static int returns_arg(const tw_fire *fire, void *arg)
{
	(void)fire;
	return (int)(intptr_t)arg;
}

/* What the second thread does: its calls come after the first thread's, in one order. */
struct second {
	tw_engine *e;
	tw_id periodic, one_shot;
	uint64_t due_ns;
	int results[2];
	pid_t tid;
};

static void *second_thread(void *arg)
{
	struct second *s = arg;
	s->tid = (pid_t)syscall(SYS_gettid);
	(void)pthread_setname_np(pthread_self(), "rec-second");
	tw_id ids[2] = { s->one_shot, 999999 };
	if (tw_pause(s->e, s->periodic) || tw_resume(s->e, s->periodic) ||
	    tw_set_due(s->e, s->periodic, s->due_ns) ||
	    tw_set_delay_many(s->e, ids, 2, 4, s->results) != -TW_ENOTFOUND ||
	    tw_cancel(s->e, 999999) != -TW_ENOTFOUND)
		s->tid = 0;
	return NULL;
}

Test(record, operations_from_two_threads_and_runs)
{
	char path[64];
	temp_path(path, sizeof path);
	tw_config cfg = manual_config(1);
	cfg.record_path = path;
	cfg.retain_ms = 777;
	cfg.max_failures = 3;
	tw_engine *e = engine_new(&cfg);
	cr_assert_eq(tw_record_status(e), TW_OK);
	tw_task_spec spec = spec_of(5, 0, returns_arg, NULL);
	spec.name = "alpha";
	tw_id one_shot = add_spec(e, &spec);
	tw_id periodic = add_task(e, 10, 10, returns_arg, (void *)(intptr_t)7);
	/* The manual clock's time, on its grid: the header's start_mono_ns should be it. */
	uint64_t t0 = info_of(e, one_shot).next_due_ns - 5 * 1000000, ms = 1000000;
	cr_assert_eq(tw_set_delay(e, one_shot, 3), TW_OK);
	struct second s = { .e = e, .periodic = periodic, .one_shot = one_shot };
	s.due_ns = t0 + 20 * ms;
	pthread_t t;
	struct recording head;
	cr_assert_eq(pthread_create(&t, NULL, second_thread, &s), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_neq(s.tid, 0, "the second thread's calls answered otherwise");
	step(e, 4);  /* the one-shot, due at 4 by set_delay_many */
	step(e, 16); /* the periodic task at 20 (set_due) */
	step(e, 10); /* and at 30 */
	cr_assert_eq(tw_cancel(e, periodic), TW_OK);
	tw_engine_destroy(e);

	read_recording(path, &head);
	cr_assert_eq(head.executors, 1);
	cr_assert_eq(head.config_bits, 1, "manual_clock");
	cr_assert_eq(head.pid, (uint32_t)getpid());
	cr_assert_eq(head.retain_ms, cfg.retain_ms, "retain_ms, which decides ESTATE or ENOTFOUND");
	cr_assert_eq(head.max_failures, cfg.max_failures);
	cr_assert_eq(head.start_mono_ns, t0);
	cr_assert_eq(head.count, 16, "%zu events", head.count);
	struct event *ev = head.events;
	assert_event(&ev[0], THREAD, 1, 0, 0);
	cr_assert_eq(ev[0].a, (uint64_t)syscall(SYS_gettid));
	assert_event(&ev[1], ADD, 1, one_shot, 0);
	cr_assert_eq(ev[1].a, 5);
	cr_assert_eq(ev[1].b, 0);
	cr_assert_eq(ev[1].u, 0);
	cr_assert_eq(ev[1].t_ns, t0);
	cr_assert_eq(ev[1].tail, 16, "8 + \"alpha\" padded");
	cr_assert_eq(ev[1].tail_bytes[0], 5, "name_len");
	cr_assert_eq(ev[1].tail_bytes[2], 0, "cron_len");
	cr_assert_eq(memcmp(ev[1].tail_bytes + 8, "alpha\0\0\0", 8), 0);
	assert_event(&ev[2], ADD, 1, periodic, 0);
	cr_assert_eq(ev[2].a, 10);
	cr_assert_eq(ev[2].b, 10);
	cr_assert_eq(ev[2].tail, 8);
	assert_event(&ev[3], SET_DELAY, 1, one_shot, 0);
	cr_assert_eq(ev[3].a, 3);
	cr_assert_eq(ev[3].u, 0);
	assert_event(&ev[4], THREAD, 2, 0, 0);
	cr_assert_eq(ev[4].a, (uint64_t)s.tid);
	cr_assert_eq(ev[4].tail, 16);
	cr_assert_str_eq((const char *)ev[4].tail_bytes, "rec-second");
	assert_event(&ev[5], PAUSE, 2, periodic, 0);
	assert_event(&ev[6], RESUME, 2, periodic, 0);
	assert_event(&ev[7], SET_DUE, 2, periodic, 0);
	cr_assert_eq(ev[7].a, s.due_ns);
	assert_event(&ev[8], SET_DELAY, 2, one_shot, 0);
	cr_assert_eq(ev[8].u, 1, "from tw_set_delay_many");
	cr_assert_eq(ev[8].a, 4);
	assert_event(&ev[9], SET_DELAY, 2, 999999, -TW_ENOTFOUND);
	cr_assert_eq(ev[9].u, 1);
	cr_assert_eq(ev[9].t_ns, ev[8].t_ns, "one call, one time");
	assert_event(&ev[10], CANCEL, 2, 999999, -TW_ENOTFOUND);
	assert_event(&ev[11], RUN, 0, one_shot, 0);
	cr_assert_eq(ev[11].a, t0 + 4 * ms, "due");
	cr_assert_eq(ev[11].t_ns, t0 + 4 * ms, "start on the manual clock");
	cr_assert_geq(ev[11].b, ev[11].t_ns, "end");
	cr_assert_eq(ev[11].c, 1, "run");
	cr_assert_eq(ev[11].u, 0, "executor 0");
	assert_event(&ev[12], RUN, 0, periodic, 7);
	cr_assert_eq(ev[12].a, t0 + 20 * ms);
	cr_assert_eq(ev[12].c, 1);
	cr_assert_eq(ev[12].t_ns, t0 + 20 * ms);
	assert_event(&ev[13], RUN, 0, periodic, 7);
	cr_assert_eq(ev[13].a, t0 + 30 * ms);
	cr_assert_eq(ev[13].c, 2);
	cr_assert_eq(ev[13].t_ns, t0 + 30 * ms);
	assert_event(&ev[14], CANCEL, 1, periodic, 0);
	cr_assert_eq(ev[14].t_ns, t0 + 30 * ms);
	assert_event(&ev[15], END, 0, 0, 0);
	cr_assert_eq(ev[15].a, 15, "events before END");
	cr_assert_eq(ev[15].b, 0, "dropped");
	cr_assert_eq(ev[15].c, t0 + 30 * ms);
	free_recording(&head);
	unlink(path);
}

Test(record, a_path_that_cannot_be_opened_fails_create_with_eio)
{
	tw_config cfg = manual_config(1);
	cfg.record_path = "/nonexistent-tw-dir/recording";
	tw_engine *e = (tw_engine *)&cfg;
	errno = 0;
	cr_assert_eq(tw_engine_create(&cfg, &e), -TW_EIO);
	cr_assert_eq(errno, ENOENT, "errno %d", errno);
	cr_assert_null(e);
	cfg.record_path = NULL;
	cfg.record_buffer_kib = 1024 * 1024 + 1;
	cr_assert_eq(tw_engine_create(&cfg, &e), -TW_EINVAL, "a buffer past 1 GiB");
}

Test(record, no_recording_status_and_stats)
{
	cr_assert_eq(tw_record_status(NULL), -TW_EINVAL);
	tw_engine *e = manual_engine(1);
	cr_assert_eq(tw_record_status(e), TW_OK);
	tw_engine_stats stats = stats_of(e);
	cr_assert_eq(stats.record_events + stats.record_dropped + stats.record_bytes, 0);
	cr_assert_eq(stats.record_error, 0);
	tw_engine_destroy(e);
}

/* TW_RECORD: the first engine without a record_path records to it, the second to PATH.2;
 * record_path "" records nothing whatever TW_RECORD says. */
Test(record, the_environment_variable_names_the_file)
{
	char path[64], second[80];
	temp_path(path, sizeof path);
	(void)snprintf(second, sizeof second, "%s.2", path);
	cr_assert_eq(setenv("TW_RECORD", path, 1), 0);
	tw_config cfg = manual_config(1);
	tw_engine *e1 = engine_new(&cfg);
	tw_engine *e2 = engine_new(&cfg);
	cfg.record_path = "";
	tw_engine *none = engine_new(&cfg);
	tw_id id = add_task(e2, 1, 0, returns_arg, NULL);
	(void)add_task(none, 1, 0, returns_arg, NULL);
	tw_engine_destroy(none);
	tw_engine_destroy(e1);
	tw_engine_destroy(e2);
	cr_assert_eq(unsetenv("TW_RECORD"), 0);
	struct recording r1, r2;
	read_recording(path, &r1);
	cr_assert_eq(r1.count, 1, "only END");
	assert_event(&r1.events[0], END, 0, 0, 0);
	read_recording(second, &r2);
	cr_assert_eq(r2.count, 3, "THREAD, ADD, END: %zu", r2.count);
	assert_event(&r2.events[1], ADD, 1, id, 0);
	struct stat st;
	char third[80];
	(void)snprintf(third, sizeof third, "%s.3", path);
	cr_assert_neq(stat(third, &st), 0, "the engine with record_path \"\" took TW_RECORD");
	free_recording(&r1);
	free_recording(&r2);
	unlink(path);
	unlink(second);
}

/* A buffer of 4 KiB holds 64 events: batches of 1000 overflow it at once. What is dropped
 * is counted, marked by DROPPED events where it was, and the file stays well-formed. */
Test(record, a_full_buffer_drops_and_counts)
{
	enum { BATCH = 1000, BATCHES = 20 };
	char path[64];
	temp_path(path, sizeof path);
	tw_config cfg = manual_config(1);
	cfg.record_path = path;
	cfg.record_buffer_kib = 4;
	tw_engine *e = engine_new(&cfg);
	tw_id id = add_task(e, 100, 0, returns_arg, NULL);
	static tw_id ids[BATCH];
	for (unsigned i = 0; i < BATCH; i++)
		ids[i] = id;
	for (unsigned b = 0; b < BATCHES; b++)
		cr_assert_eq(tw_set_delay_many(e, ids, BATCH, 50 + b, NULL), TW_OK);
	tw_engine_stats stats = stats_of(e);
	cr_assert_gt(stats.record_dropped, 0, "no event dropped from a 4 KiB buffer");
	cr_assert_eq(tw_record_status(e), TW_OK, "drops are no error");
	tw_engine_destroy(e);

	struct recording r;
	read_recording(path, &r);
	struct event *end = &r.events[r.count - 1];
	cr_assert_eq(end->type, END);
	cr_assert_eq(end->a, r.count - 1, "END counts the events before it");
	uint64_t marked = 0, set_delays = 0, dropped_events = 0;
	for (size_t i = 0; i + 1 < r.count; i++) {
		if (r.events[i].type == DROPPED) {
			cr_assert_gt(r.events[i].a, 0);
			marked += r.events[i].a;
			dropped_events++;
		} else if (r.events[i].type == SET_DELAY) {
			cr_assert_eq(r.events[i].id, id);
			cr_assert_eq(r.events[i].u, 1);
			set_delays++;
		}
	}
	cr_assert_gt(dropped_events, 0, "no DROPPED event");
	cr_assert_eq(marked, end->b, "DROPPED events add up to END's count");
	cr_assert_geq(end->b, stats.record_dropped);
	/* every event is either in the file or counted: THREAD, ADD, the set_delays */
	cr_assert_eq(r.count - 1 - dropped_events + end->b, 2 + BATCH * BATCHES,
		     "%zu events, %" PRIu64 " dropped", r.count, end->b);
	cr_assert_lt(set_delays, BATCH * BATCHES);
	free_recording(&r);
	unlink(path);
}

static _Atomic int errors_logged;

static void count_errors(int level, const char *message, void *arg)
{
	(void)message;
	(void)arg;
	if (level == TW_LOG_ERROR)
		atomic_fetch_add(&errors_logged, 1);
}

/* /dev/full opens and refuses every write with ENOSPC: a disk that is full. */
Test(record, a_full_disk_stops_the_recording_with_eio)
{
	tw_config cfg = manual_config(1);
	cfg.record_path = "/dev/full";
	cfg.log = count_errors;
	tw_engine *e = engine_new(&cfg);
	int rc = TW_OK;
	for (unsigned waited = 0; waited < WAIT_LIMIT_MS && rc == TW_OK; waited++) {
		sleep_ms(1);
		rc = tw_record_status(e);
	}
	cr_assert_eq(rc, -TW_EIO, "%s", tw_strerror(rc));
	cr_assert_eq(errno, ENOSPC, "errno %d", errno);
	cr_assert_eq(stats_of(e).record_error, ENOSPC);
	cr_assert_eq(atomic_load(&errors_logged), 1, "logged once");
	(void)add_task(e, 1, 0, returns_arg, NULL); /* THREAD and ADD: dropped */
	tw_engine_stats stats = stats_of(e);
	for (unsigned waited = 0; waited < WAIT_LIMIT_MS && stats.record_dropped < 2; waited++) {
		sleep_ms(1);
		stats = stats_of(e);
	}
	cr_assert_eq(stats.record_dropped, 2);
	cr_assert_eq(stats.record_events, 0);
	cr_assert_eq(stats.record_bytes, 0);
	step(e, 1); /* the engine goes on */
	cr_assert_eq(stats_of(e).runs, 1);
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&errors_logged), 1, "logged once");
}

Test(record, buffer_counted_in_memory_bytes)
{
	char path[64];
	temp_path(path, sizeof path);
	tw_config cfg = manual_config(1);
	cfg.record_path = "";
	tw_engine *plain = engine_new(&cfg);
	cfg.record_path = path;
	cfg.record_buffer_kib = 4096;
	tw_engine *recording = engine_new(&cfg);
	tw_engine_stats a = { 0 }, b = { 0 };
	cr_assert_eq(tw_stats(plain, &a), TW_OK);
	cr_assert_eq(tw_stats(recording, &b), TW_OK);
	cr_assert_geq(b.memory_bytes, a.memory_bytes + 4096u * 1024u,
		      "memory_bytes %" PRIu64 " with a 4 MiB buffer, %" PRIu64 " without",
		      b.memory_bytes, a.memory_bytes);
	cr_assert_lt(b.memory_bytes, a.memory_bytes + 4096u * 1024u + 131072u,
		     "the buffer and the writer's own");
	tw_engine_destroy(recording);
	tw_engine_destroy(plain);
	unlink(path);
}

/* record_buffer_kib 1 to 3 give the smallest buffer, 4 KiB; 5 rounds up to 8. */
Test(record, small_buffers_round_up_to_a_power_of_two)
{
	char path[64];
	temp_path(path, sizeof path);
	tw_config cfg = manual_config(1);
	cfg.record_path = path;
	uint64_t memory[4];
	const unsigned kib[4] = { 1, 4, 5, 8 };
	for (int i = 0; i < 4; i++) {
		cfg.record_buffer_kib = kib[i];
		tw_engine *e = engine_new(&cfg);
		tw_engine_stats st = stats_of(e);
		memory[i] = st.memory_bytes;
		tw_engine_destroy(e);
	}
	cr_assert_eq(memory[0], memory[1], "1 KiB is 4: %" PRIu64 " and %" PRIu64, memory[0],
		     memory[1]);
	cr_assert_eq(memory[2], memory[3], "5 KiB is 8: %" PRIu64 " and %" PRIu64, memory[2],
		     memory[3]);
	cr_assert_eq(memory[3] - memory[1], 4096, "8 KiB holds 4 KiB more than 4");
	unlink(path);
}

/* Skips are recorded as they are counted: a serial periodic task blocked in its run skips 20
 * firings as overlap one by one, then 9 missed at once (as one event with the first missed
 * due) and one more overlap; its pause drops the firing that waited. The sums per reason
 * are the engine's counts. */
Test(record, skips_as_the_engine_counts_them)
{
	char path[64];
	temp_path(path, sizeof path);
	tw_config cfg = manual_config(2);
	cfg.record_path = path;
	tw_engine *e = engine_new(&cfg);
	struct recorder *r = recorder_new(e);
	uint64_t t0 = manual_now(e);
	tw_id id = add_recorded(e, r, 1, 1, TW_RUN_LATE);
	atomic_store(&r->block, true);
	advance(e, 1); /* t0 + 1: run 1, blocked */
	wait_started(r);
	for (int i = 0; i < 20; i++)
		advance(e, 1); /* t0 + 2 .. t0 + 21: one waits, 19 overlaps */
	advance(e, 10);        /* t0 + 22 .. t0 + 31: 9 missed, then one more overlap */
	cr_assert_eq(tw_pause(e, id), TW_OK, "drops the firing that waits: missed");
	tw_engine_stats before = stats_of(e);
	atomic_store(&r->block, false);
	gate_open(&r->gate, 1);
	quiesce(e);
	tw_engine_stats st = stats_of(e);
	cr_assert_eq(st.skipped_overlap, 20);
	cr_assert_eq(st.skipped_missed, 10);
	cr_assert_eq(st.skipped_overload, 0);
	cr_assert_eq(before.skipped_overlap + before.skipped_missed, 30);
	destroy_expecting_one_release(e, r);

	struct recording rec;
	read_recording(path, &rec);
	uint64_t sum[4] = { 0 }, events = 0;
	const struct event *stall = NULL;
	for (size_t i = 0; i < rec.count; i++) {
		const struct event *ev = &rec.events[i];
		if (ev->type != SKIP)
			continue;
		events++;
		cr_assert_eq(ev->id, id);
		cr_assert_eq(ev->thread, 0, "the engine's event");
		cr_assert(ev->u >= SKIP_OVERLAP && ev->u <= SKIP_MISSED, "reason %u", ev->u);
		cr_assert_gt(ev->c, 0);
		sum[ev->u] += ev->c;
		if (ev->c > 1)
			stall = ev;
	}
	cr_assert_eq(sum[SKIP_OVERLAP], st.skipped_overlap);
	cr_assert_eq(sum[SKIP_OVERLOAD], st.skipped_overload);
	cr_assert_eq(sum[SKIP_MISSED], st.skipped_missed);
	cr_assert_eq(events, 20 + 2, "20 overlaps one by one, the stall's 9, the pause's 1");
	cr_assert_not_null(stall, "the stall's missed firings in one event");
	cr_assert_eq(stall->u, SKIP_MISSED);
	cr_assert_eq(stall->c, 9);
	cr_assert_eq(stall->a, t0 + 22 * NS_PER_MS, "the first missed due");
	free_recording(&rec);
	unlink(path);
}
