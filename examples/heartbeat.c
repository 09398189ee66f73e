/*
 * heartbeat.c - trading heartbeats: one periodic task per venue session, every 250 ms, for 2 s.
 *
 * Each run measures how late it started against the due it stands for (fire->due_ns, on
 * CLOCK_MONOTONIC) and prints it. A run that follows skipped firings (fire->skipped > 0) first
 * sends a gap marker, so that the venue sees beats that were lost, not a session that went
 * silent. Skips are rare on a healthy machine; --slow-send makes one send block for 600 ms, as a
 * full socket buffer would. --on-wheel-thread runs the beats on the engine's wheel thread
 * (TW_ON_WHEEL_THREAD): a beat that only writes a message needs no executor, and starts with
 * one wake-up instead of two. Exits 1 if a run started before its due, or with --slow-send if no
 * gap was sent.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep with -std=c11 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <tickwheel.h>

enum { VENUES = 4, PERIOD_MS = 250, RUN_MS = 2000 };

struct venue {
	const char *name;
	tw_id id;
};
static struct venue venues[VENUES] = {
	{ .name = "XNAS" }, { .name = "XLON" }, { .name = "XETR" }, { .name = "XTKS" }
};
static atomic_ulong early, gaps;
static bool slow_send, on_wheel_thread;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int beat(const tw_fire *fire, void *arg)
{
	const struct venue *v = arg;
	/* Signed: a negative lateness would be an engine bug, and must show as one. */
	int64_t late = (int64_t)(now_ns() - fire->due_ns);
	early += late < 0;
	if (fire->skipped) {
		gaps++;
		printf("%s run %2" PRIu64 ": gap marker, %" PRIu64 " beats skipped\n", v->name,
		       fire->run, fire->skipped);
	}
	printf("%s run %2" PRIu64 ": heartbeat, %8.3f ms late\n", v->name, fire->run, late / 1e6);
	/* The task is serial (no TW_CONCURRENT): while this run blocks, its next two firings are
	 * skipped, not queued. Firings of other tasks that were handed to the same executor thread
	 * wait behind it too (on the wheel thread: every other task waits): real code hands a
	 * blocking send to a thread of its own. */
	if (slow_send && v == &venues[0] && fire->run == 3)
		nanosleep(&(struct timespec){ 0, 600000000 }, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		slow_send |= !strcmp(argv[i], "--slow-send");
		on_wheel_thread |= !strcmp(argv[i], "--on-wheel-thread");
	}
	tw_engine *e;
	int rc = tw_engine_create(NULL, &e);
	if (rc) {
		fprintf(stderr, "tw_engine_create: %s\n", tw_strerror(rc));
		return 1;
	}
	for (int i = 0; i < VENUES && rc == TW_OK; i++) {
		/* Spread over the period, so that the venues' beats do not all leave in one tick. */
		tw_task_spec spec = { .delay_ms = PERIOD_MS + i * PERIOD_MS / VENUES,
				      .period_ms = PERIOD_MS,
				      .callback = beat,
				      .arg = &venues[i],
				      .flags = on_wheel_thread ? TW_ON_WHEEL_THREAD : 0 };
		rc = tw_add(e, &spec, &venues[i].id);
	}
	if (rc == TW_OK)
		nanosleep(&(struct timespec){ RUN_MS / 1000, RUN_MS % 1000 * 1000000L }, NULL);
	for (int i = 0; i < VENUES && rc == TW_OK; i++) {
		tw_task_info info;
		if ((rc = tw_get(e, venues[i].id, &info)) == TW_OK)
			printf("%s: %" PRIu64 " runs, skipped: %" PRIu64 " overlapping, %" PRIu64
			       " overload, %" PRIu64 " missed%s\n",
			       venues[i].name, info.runs, info.skipped_overlap,
			       info.skipped_overload, info.skipped_missed,
			       info.on_wheel_thread ? "; on the wheel thread" : "");
	}
	int stop = tw_engine_stop(e, 1000); /* a run still going gets 1 s to return */
	tw_engine_destroy(e);
	if (rc || stop)
		fprintf(stderr, "heartbeat: %s\n", tw_strerror(rc ? rc : stop));
	printf("%lu runs started before their due, %lu gap markers\n", early, gaps);
	return rc || stop || early || (slow_send && !gaps);
}
