/*
 * snapshot_test.h - what the snapshot suites share: a directory of their own for the files,
 * manual engines at a chosen wall-clock time, and a resolver that maps names to counters and
 * counts what it was handed and what was released. Defined in snapshot_test_support.c.
 */
#ifndef TICKWHEEL_TESTS_SNAPSHOT_TEST_H
#define TICKWHEEL_TESTS_SNAPSHOT_TEST_H

#include "../engine/engine_test_support.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define S(x)  ((int64_t)(x)*1000000000)
#define MSNS  UINT64_C(1000000)
#define WALL0 S(1767225600) /* 2026-01-01 00:00:00 UTC */

struct tmpdir {
	char dir[64];
	char path[128]; /* dir/snap */
};

/* A new directory of the test's own, under /tmp. */
struct tmpdir tmpdir_make(void);

/* Removes the directory and what is in it (the tests leave files of known names only). */
void tmpdir_remove(struct tmpdir *t);

/* Files in the directory (a temporary one left behind shows here). */
int tmpdir_files(struct tmpdir *t);

/* A manual engine whose wall clock reads wall now; *start gets its manual time then. */
tw_engine *engine_at(int64_t wall, uint64_t max_tasks, uint64_t *start);

/* ---- the resolver ---- */

enum { NAMES = 16 };

struct app;
struct task_arg {
	struct app *app;
	int index;
};

struct app {
	struct task_arg args[NAMES]; /* the tasks' args: the app's own */
	const char *names[NAMES];    /* known callbacks, by name; NULL-terminated */
	struct counts counts[NAMES];
	_Atomic uint64_t fire_skipped[NAMES]; /* tw_fire.skipped of each task's latest run */
	const char *decline;                  /* a name the resolver declines */
	int fail_at;                          /* resolve call that fails (-TW_ENOMEM), 1-based */
	int calls;
	tw_snapshot_task seen[NAMES]; /* as shown, by name index (texts copied below) */
	char seen_cron[NAMES][128];
};

/* The app's callbacks: count the run (app_failing then fails it); the release counts too. */
int app_callback(const tw_fire *fire, void *arg);
int app_failing(const tw_fire *fire, void *arg);
void app_release(void *arg);
/* The index of name in app->names, or -1. */
int app_index(struct app *app, const char *name);
/* The resolver: a known name gets its counters ("fail..." names app_failing). */
int app_resolve(const tw_snapshot_task *task, void *ctx, tw_resolved *out);

tw_id add_named_at(tw_engine *e, struct app *app, const char *name, uint64_t delay, uint64_t period,
		   const char *cron, unsigned flags, unsigned misfire, int line);
#define add_named(e, app, name, delay, period, cron, flags, misfire) \
	add_named_at(e, app, name, delay, period, cron, flags, misfire, __LINE__)

tw_id find_at(tw_engine *e, const char *name, int line);
#define find(e, name) find_at(e, name, __LINE__)

uint64_t snapshot_at(tw_engine *e, const char *path, int line);
#define snapshot(e, path) snapshot_at(e, path, __LINE__)

/* The whole file, malloc'ed. */
uint8_t *slurp(const char *path, size_t *len);
/* Writes the file whole. */
void spit(const char *path, const uint8_t *buf, size_t len);

#endif
