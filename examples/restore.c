/*
 * restore.c - jobs that survive a restart: a nightly job at 02:30 Berlin time and a job every
 * 5 seconds, both by the calendar, kept in a snapshot file (tw_snapshot) every few seconds
 * and on SIGTERM or SIGINT, and restored (tw_restore) when the program starts again.
 *
 * The engine keeps the schedules, the next dues, pauses, counters and misfire policies; the
 * program keeps its code: the resolver maps each saved name to its callback. A name the
 * program no longer knows, or whose schedule the program has changed since, is declined and
 * (for the latter) added afresh with the new schedule. The nightly job is TW_MISFIRE_RUN_ONCE
 * (a night missed while the program was down runs once at start: a report is not lost), the
 * 5-second job TW_MISFIRE_SKIP (beats missed while down are counted, not caught up).
 *
 *   restore [--state FILE] [--seconds N] [--every N] [--expect-restored N]
 *
 * --state: the snapshot (default restore.snap); --seconds: run that long, then exit as on
 * SIGTERM (default 3; 0: until a signal); --every: seconds between snapshots (default 2);
 * --expect-restored: exit non-zero unless the start restored that many jobs (for the test
 * suite, which runs the program twice on one file). Also exits non-zero when a snapshot
 * fails, or a file is there that cannot be restored.
 */
#define _POSIX_C_SOURCE 200809L /* sigaction, nanosleep with -std=c11 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tickwheel.h>

static int nightly_report(const tw_fire *fire, void *arg)
{
	(void)arg;
	printf("nightly report (run %llu, %llu nights missed before it)\n",
	       (unsigned long long)fire->run, (unsigned long long)fire->skipped);
	return 0;
}

static int beat(const tw_fire *fire, void *arg)
{
	(void)arg;
	printf("beat %llu%s\n", (unsigned long long)fire->run,
	       fire->skipped ? " (after a gap)" : "");
	fflush(stdout);
	return 0;
}

/* The program's jobs: the code the snapshot cannot hold. */
static const struct job {
	const char *name, *cron;
	tw_callback callback;
	unsigned misfire;
} jobs[] = {
	{ "nightly-report", "CRON_TZ=Europe/Berlin 0 30 2 * * *", nightly_report,
	  TW_MISFIRE_RUN_ONCE },
	{ "beat-5s", "CRON_TZ=Europe/Berlin */5 * * * * *", beat, TW_MISFIRE_SKIP },
};
enum { JOBS = sizeof jobs / sizeof jobs[0] };

static int resolve(const tw_snapshot_task *task, void *ctx, tw_resolved *out)
{
	(void)ctx;
	for (int i = 0; i < JOBS; i++) {
		if (strcmp(task->name, jobs[i].name))
			continue;
		if (!task->cron || strcmp(task->cron, jobs[i].cron)) {
			printf("%s: schedule changed since the snapshot: added afresh\n",
			       task->name);
			return TW_RESOLVE_DECLINE;
		}
		out->callback = jobs[i].callback; /* arg and release: none needed */
		printf("%s: restored, %llu runs so far%s\n", task->name,
		       (unsigned long long)task->runs,
		       task->misfired ? ", missed while down: runs now" : "");
		return 0;
	}
	printf("%s: no such job any more: declined\n", task->name);
	return TW_RESOLVE_DECLINE;
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int save(tw_engine *e, const char *path)
{
	uint64_t n;
	int rc = tw_snapshot(e, path, &n);
	if (rc)
		fprintf(stderr, "tw_snapshot(%s): %s: %s\n", path, tw_strerror(rc),
			strerror(errno));
	return rc;
}

int main(int argc, char **argv)
{
	const char *path = "restore.snap";
	long seconds = 3, every = 2, expect = -1;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--state"))
			path = argv[i + 1];
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--every"))
			every = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--expect-restored"))
			expect = atol(argv[i + 1]);
	}
	if (every < 1)
		every = 1;
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) || sigaction(SIGINT, &sa, NULL)) {
		perror("sigaction");
		return 1;
	}
	tw_engine *e;
	int rc = tw_engine_create(NULL, &e);
	if (rc) {
		fprintf(stderr, "tw_engine_create: %s\n", tw_strerror(rc));
		return 1;
	}
	tw_restore_result res;
	rc = tw_restore(e, path, resolve, NULL, &res);
	if (rc == -TW_EIO && errno == ENOENT) {
		printf("no snapshot at %s: a first start\n", path);
		rc = 0;
	} else if (rc) {
		/* Refused whole: nothing was added. A real program would keep the file aside
		 * for a look, and start from its own defaults as here. */
		fprintf(stderr, "tw_restore(%s): %s\n", path, tw_strerror(rc));
		tw_engine_destroy(e);
		return 1;
	} else {
		printf("restored %llu of %llu jobs from %s (%llu missed fire times counted)\n",
		       (unsigned long long)res.restored, (unsigned long long)res.records, path,
		       (unsigned long long)res.skipped_missed);
	}
	/* Jobs not restored (a first start, a changed schedule) are added now. */
	for (int i = 0; i < JOBS && !rc; i++) {
		tw_id id;
		if (tw_find(e, jobs[i].name, &id) == TW_OK)
			continue;
		tw_task_spec spec = { .callback = jobs[i].callback,
				      .cron = jobs[i].cron,
				      .name = jobs[i].name,
				      .misfire = jobs[i].misfire };
		if ((rc = tw_add(e, &spec, &id)))
			fprintf(stderr, "tw_add(%s): %s\n", jobs[i].name, tw_strerror(rc));
	}
	for (long t = 1; !rc && !stop && (!seconds || t <= seconds * 10); t++) {
		nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
		if (t % (every * 10) == 0)
			rc = save(e, path);
	}
	/* The last snapshot before the engine stops (a stopped engine's tasks have ended). */
	if (!rc)
		rc = save(e, path);
	if (!rc)
		printf("saved to %s\n", path);
	int stop_rc = tw_engine_stop(e, 1000);
	tw_engine_destroy(e);
	if (rc || stop_rc)
		return 1;
	if (expect >= 0 && res.restored != (uint64_t)expect) {
		fprintf(stderr, "restore: %llu jobs restored, expected %ld\n",
			(unsigned long long)res.restored, expect);
		return 1;
	}
	return 0;
}
