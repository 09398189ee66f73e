/*
 * record.c - recording a program's timers, to replay them elsewhere (tw-perf replay).
 *
 * A gateway in small: sessions whose timeouts are pushed back in bursts, and a heartbeat.
 * With --out FILE the engine records every operation and run to FILE (tw_config.record_path;
 * a program that cannot be changed gets the same from TW_RECORD=FILE). It prints what the
 * recording took - events, drops, bytes - and what the resets cost the calling thread, and
 * exits non-zero when a write failed, an event was dropped with --no-drops, or the file is
 * shorter than what the recorder said it wrote.
 *
 *   record [--out FILE] [--sessions N] [--resets N] [--buffer-kib K] [--no-drops]
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep with -std=c11 */
#include <tickwheel.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static int heartbeat(const tw_fire *fire, void *arg)
{
	(void)fire;
	(void)arg;
	return 0;
}

static int session_expired(const tw_fire *fire, void *arg)
{
	(void)fire;
	(void)arg;
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void usage(void)
{
	fprintf(stderr, "usage: record [--out FILE] [--sessions N] [--resets N] [--buffer-kib K] "
			"[--no-drops]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	unsigned long sessions = 10000, resets = 200000, buffer_kib = 0;
	int no_drops = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--no-drops"))
			no_drops = 1;
		else if (i + 1 >= argc)
			usage();
		else if (!strcmp(argv[i], "--out"))
			out = argv[++i];
		else if (!strcmp(argv[i], "--sessions"))
			sessions = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--resets"))
			resets = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--buffer-kib"))
			buffer_kib = strtoul(argv[++i], NULL, 10);
		else
			usage();
	}
	if (!sessions)
		usage();

	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	cfg.record_path = out ? out : ""; /* "": not even TW_RECORD's */
	if (buffer_kib)
		cfg.record_buffer_kib = (unsigned)buffer_kib;
	tw_engine *e;
	int rc = tw_engine_create(&cfg, &e);
	if (rc) {
		fprintf(stderr, "record: tw_engine_create: %s%s%s\n", tw_strerror(rc),
			rc == -TW_EIO ? ": " : "", rc == -TW_EIO ? strerror(errno) : "");
		return 1;
	}
	tw_id *ids = calloc(sessions, sizeof *ids);
	tw_task_spec spec = { .delay_ms = 30000, .callback = session_expired };
	tw_task_spec beat = { .period_ms = 10, .callback = heartbeat, .name = "heartbeat" };
	tw_id beat_id;
	if (!ids || tw_add(e, &beat, &beat_id))
		return 1;
	for (unsigned long i = 0; i < sessions; i++)
		if (tw_add(e, &spec, &ids[i]))
			return 1;
	/* Resets in bursts, as messages come: a session at random, 30 s from now again. */
	uint64_t start = now_ns(), x = 88172645463325252u;
	for (unsigned long i = 0; i < resets; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (tw_set_delay(e, ids[x % sessions], 30000))
			return 1;
	}
	uint64_t took = now_ns() - start;
	struct timespec pause = { .tv_nsec = 50 * 1000000 }; /* a few heartbeats */
	nanosleep(&pause, NULL);
	for (unsigned long i = 0; i < sessions; i += 2)
		(void)tw_cancel(e, ids[i]);
	tw_engine_stats stats;
	tw_stats(e, &stats);
	int status = tw_record_status(e);
	int err = errno;
	tw_engine_destroy(e); /* drains the recording and writes its END */
	free(ids);
	printf("resets: %lu in %.1f ms, %.1f ns each (the calling thread's time)\n", resets,
	       took / 1e6, resets ? (double)took / resets : 0.0);
	printf("heartbeat runs: %" PRIu64 "\n", stats.runs);
	if (!out)
		return 0;
	printf("recording %s: %" PRIu64 " events, %" PRIu64 " dropped, %" PRIu64
	       " bytes written before destroy\n",
	       out, stats.record_events, stats.record_dropped, stats.record_bytes);
	if (status) {
		fprintf(stderr, "record: the recording failed: %s\n", strerror(err));
		return 1;
	}
	struct stat st;
	if (stat(out, &st) || (uint64_t)st.st_size < stats.record_bytes) {
		fprintf(stderr, "record: %s is shorter than what was written\n", out);
		return 1;
	}
	if (no_drops && stats.record_dropped) {
		fprintf(stderr, "record: %" PRIu64 " events dropped\n", stats.record_dropped);
		return 1;
	}
	return 0;
}
