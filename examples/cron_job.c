/*
 * cron_job.c - a job every 5 seconds by the calendar, in a named time zone: a
 * task with a cron expression (tw_task_spec.cron) rather than a period. Its
 * fire times are wall-clock times (:00, :05, :10 ... of each minute in Tokyo),
 * not every 5 s from whenever the program started, and it follows the system
 * clock when that is set.
 *
 * Checks the expression first with tw_cron_parse (which says where an error
 * is) and prints the next fire times with tw_cron_next, then runs the job
 * until it ran --runs times (default 2). Each run prints the fire time it
 * stands for in Tokyo's local time. Exits non-zero when a run stands for a
 * time that is not on the 5-second grid, or starts more than a second late.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep, gmtime_r with -std=c11 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tickwheel.h>

#define EXPR "CRON_TZ=Asia/Tokyo */5 * * * * *"

static tw_cron *schedule; /* for showing times in the schedule's zone */
static atomic_int runs, wrong;

static int64_t clock_ns(clockid_t clock)
{
	struct timespec ts;
	(void)clock_gettime(clock, &ts); /* cannot fail: the clocks exist, ts is ours */
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* "2026-12-01 18:40:05 +0900": a wall-clock time in the schedule's zone. */
static void local_text(int64_t unix_ns, char *buf, size_t size)
{
	int32_t offset = 0;
	tw_cron_utc_offset(schedule, unix_ns, &offset);
	time_t local = (time_t)(unix_ns / 1000000000) + offset;
	struct tm tm;
	gmtime_r(&local, &tm);
	size_t n = strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(buf + n, size - n, " %+03d%02d", offset / 3600, abs(offset) / 60 % 60);
}

static int job(const tw_fire *fire, void *arg)
{
	(void)arg;
	/* The due is on CLOCK_MONOTONIC: the wall-clock time it stands for is now minus how
	 * late the run started. */
	int64_t late = clock_ns(CLOCK_MONOTONIC) - (int64_t)fire->due_ns;
	int64_t wall = clock_ns(CLOCK_REALTIME) - late;
	int64_t second = (wall + 500000000) / 1000000000; /* to the nearest second */
	char text[64];
	local_text(second * 1000000000, text, sizeof text);
	printf("run %llu for %s, %.1f ms late\n", (unsigned long long)fire->run, text,
	       (double)late / 1e6);
	if (second % 5 != 0 || late < 0 || late > 1000000000)
		atomic_fetch_add(&wrong, 1);
	atomic_fetch_add(&runs, 1);
	return 0;
}

int main(int argc, char **argv)
{
	int want = argc > 2 && !strcmp(argv[1], "--runs") ? atoi(argv[2]) : 2;
	tw_cron_error err;
	int rc = tw_cron_parse(EXPR, &schedule, &err);
	if (rc) {
		fprintf(stderr, "%s\n%*s^ %s\n", EXPR, (int)err.offset, "",
			err.reason ? err.reason : tw_strerror(rc));
		return 1;
	}
	int64_t next[3];
	if (tw_cron_next(schedule, clock_ns(CLOCK_REALTIME), next, 3) == TW_OK) {
		for (int i = 0; i < 3; i++) {
			char text[64];
			local_text(next[i], text, sizeof text);
			printf("next: %s\n", text);
		}
	}

	tw_engine *e;
	if ((rc = tw_engine_create(NULL, &e))) {
		fprintf(stderr, "tw_engine_create: %s\n", tw_strerror(rc));
		tw_cron_free(schedule);
		return 1;
	}
	tw_task_spec spec = { .callback = job, .cron = EXPR }; /* period_ms stays 0 */
	tw_id id;
	if ((rc = tw_add(e, &spec, &id)) == TW_OK) {
		tw_task_info info;
		if (tw_get(e, id, &info) == TW_OK) {
			char text[64];
			local_text(info.next_due_wall_ns, text, sizeof text);
			printf("first run due at %s\n", text);
		}
		/* Up to 5 s a run, and a second more each: then something is wrong. */
		for (int waited = 0; atomic_load(&runs) < want && waited < want * 6000;
		     waited += 10)
			nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
		rc = tw_engine_stop(e, 1000);
	}
	tw_engine_destroy(e);
	tw_cron_free(schedule);
	if (rc) {
		fprintf(stderr, "tickwheel: %s\n", tw_strerror(rc));
		return 1;
	}
	if (atomic_load(&runs) < want || atomic_load(&wrong)) {
		fprintf(stderr, "cron_job: %d runs of %d, %d off the grid or late\n",
			atomic_load(&runs), want, atomic_load(&wrong));
		return 1;
	}
	return 0;
}
