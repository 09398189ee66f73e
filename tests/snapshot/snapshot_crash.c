/*
 * snapshot_crash.c - a writer killed at random points never leaves a broken snapshot.
 *
 * A child process snapshots generation after generation of named tasks to one path
 * (generation g: tasks gen-g-0 .. gen-g-N-1, each of period PERIOD_BASE + g ms, so that a
 * record shows its generation twice); the parent SIGKILLs it after a random number of
 * microseconds, then reads the file: it must parse, and hold exactly one whole generation,
 * the one read last time or a newer one, never a mix, a cut file or an empty one. Temporary
 * files a kill leaves behind are counted and left for the next snapshots to remove. Once the
 * kills are done, the parent restores the last file into an engine of its own (only then: an
 * engine belongs to the process that made it, and the children are forked from an engineless
 * parent) and snapshots it to the same path: no temporary file may be left after that.
 *
 * A plain program (the ThreadSanitizer build runs it too): exits 1 with a message on the
 * first broken file. Usage: snapshot_crash [kills] [seed]
 */
#include "../../core/snapshot.h"
#include "../test_util.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { TASKS = 500, PERIOD_BASE = 1000 };

static char dir[64], path[128];

static _Noreturn void fail(const char *fmt, const char *what, long a, long b)
{
	fprintf(stderr, "snapshot_crash: ");
	fprintf(stderr, fmt, what, a, b);
	fprintf(stderr, "\n");
	exit(1);
}

static int callback(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 0;
}

/* The child: generations from first on, each snapshotted, until it is killed. */
static void writer(long first)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.manual_clock = true;
	cfg.executors = 1;
	tw_engine *e;
	if (tw_engine_create(&cfg, &e))
		_exit(2);
	static tw_id ids[TASKS];
	for (long g = first;; g++) {
		for (int i = 0; i < TASKS; i++) {
			if (g > first && tw_cancel(e, ids[i]))
				_exit(3);
			char name[TW_NAME_MAX + 1];
			snprintf(name, sizeof name, "gen-%ld-%d", g, i);
			tw_task_spec spec = { .delay_ms = 1000 + (uint64_t)i,
					      .period_ms = PERIOD_BASE + (uint64_t)g,
					      .callback = callback,
					      .name = name };
			if (tw_add(e, &spec, &ids[i]))
				_exit(4);
		}
		uint64_t n;
		if (tw_snapshot(e, path, &n) || n != TASKS)
			_exit(5);
	}
}

/* The file's generation; fails on anything but one whole generation. */
static long check_file(void)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		fail("%s: %ld %ld", "no snapshot at all", errno, 0);
	static uint8_t buf[1 << 20];
	size_t len = fread(buf, 1, sizeof buf, f);
	fclose(f);
	struct snap_file s;
	int rc = tw__snapshot_parse(buf, len, &s);
	if (rc)
		fail("%s: code %ld, %ld bytes", "a file that does not parse", rc, (long)len);
	if (s.count != TASKS)
		fail("%s: %ld records, not %ld", "a partial generation", (long)s.count, TASKS);
	long gen = (long)s.records[0].period_ms - PERIOD_BASE;
	static bool seen[TASKS];
	memset(seen, 0, sizeof seen);
	for (size_t i = 0; i < s.count; i++) {
		const struct snap_record *r = &s.records[i];
		char name[TW_NAME_MAX + 1];
		memcpy(name, r->name, r->name_len);
		name[r->name_len] = '\0';
		long g;
		int k;
		if (sscanf(name, "gen-%ld-%d", &g, &k) != 2 || k < 0 || k >= TASKS || seen[k])
			fail("%s: record %ld of generation %ld", "a bad or repeated name", (long)i,
			     gen);
		seen[k] = true;
		if (g != gen || (long)r->period_ms - PERIOD_BASE != gen)
			fail("%s: generations %ld and %ld", "a mixed file", g, gen);
	}
	tw__snapshot_file_free(&s);
	return gen;
}

static int temporaries_left(void)
{
	DIR *d = opendir(dir);
	if (!d)
		fail("%s: %ld %ld", "opendir", errno, 0);
	int n = 0;
	struct dirent *ent;
	while ((ent = readdir(d))) {
		n += !strncmp(ent->d_name, "snap.tmp-", 9);
	}
	closedir(d);
	return n;
}

static int accept_all(const tw_snapshot_task *task, void *ctx, tw_resolved *out)
{
	(void)task, (void)ctx;
	out->callback = callback;
	return 0;
}

int main(int argc, char **argv)
{
	long kills = argc > 1 ? atol(argv[1]) : 150;
	uint64_t rng = argc > 2 ? strtoull(argv[2], NULL, 0) : test_now_ns();
	printf("snapshot_crash: %ld kills, seed %llu\n", kills, (unsigned long long)rng);
	snprintf(dir, sizeof dir, "/tmp/tw-snapshot-crash-XXXXXX");
	if (!mkdtemp(dir))
		fail("%s: %ld %ld", "mkdtemp", errno, 0);
	snprintf(path, sizeof path, "%s/snap", dir);
	long gen = -1, next = 0, newer = 0;
	int temporaries = 0;
	uint64_t window_us = 20000;
	for (long k = 0; k < kills; k++) {
		pid_t pid = fork();
		if (pid < 0)
			fail("%s: %ld %ld", "fork", errno, 0);
		if (!pid)
			writer(next);
		/* The first child lives until its first snapshot is in place; the time that took
		 * (a slower build, a sanitizer) sets how long the others may live: up to twice
		 * that, so that kills land before, during and after their writes. */
		if (!k) {
			uint64_t t0 = test_now_ns();
			while (access(path, F_OK))
				nanosleep(&(struct timespec){ 0, 200000 }, NULL);
			uint64_t first_us = (test_now_ns() - t0) / 1000;
			if (first_us * 2 > window_us)
				window_us = first_us * 2;
		} else {
			long us = (long)(test_rng_next(&rng) % window_us);
			nanosleep(&(struct timespec){ us / 1000000, us % 1000000 * 1000 }, NULL);
		}
		int status;
		if (kill(pid, SIGKILL) || waitpid(pid, &status, 0) != pid)
			fail("%s: %ld %ld", "kill", errno, 0);
		if (!WIFSIGNALED(status))
			fail("%s: status %ld, %ld", "the writer ended by itself", status, 0);
		long g = check_file();
		if (g < gen)
			fail("%s: generation %ld after %ld", "an older snapshot came back", g, gen);
		newer += g > gen;
		gen = g;
		next = gen + 1000; /* the next child's generations are all newer */
		temporaries += temporaries_left();
	}
	tw_engine *e;
	tw_restore_result res;
	if (tw_engine_create(NULL, &e))
		fail("%s: %ld %ld", "tw_engine_create", 0, 0);
	int rc = tw_restore(e, path, accept_all, NULL, &res);
	if (rc || res.restored != TASKS)
		fail("%s: code %ld, %ld restored", "the last snapshot does not restore", rc,
		     (long)res.restored);
	/* the leftovers of the kills that no child's snapshot removed */
	if (tw_snapshot(e, path, NULL))
		fail("%s: %ld %ld", "tw_snapshot", errno, 0);
	int left = temporaries_left();
	if (left)
		fail("%s: %ld left, %ld", "a snapshot left stale temporary files", left, 0);
	tw_engine_destroy(e);
	if (unlink(path) || rmdir(dir))
		fail("%s: %ld %ld", "cleaning up", errno, 0);
	printf("snapshot_crash: %ld kills within %llu us of the start: every file whole; a newer "
	       "generation %ld times, %d temporary files seen after kills\n",
	       kills, (unsigned long long)window_us, newer, temporaries);
	/* Evidence that the kills hit both sides: after a rename, and in the middle of a
	 * write (a temporary file left). */
	if (newer < kills / 10 || !temporaries)
		fail("%s: %ld newer of %ld", "the kills missed the writes (too early, too late?)",
		     newer, kills);
	return 0;
}
