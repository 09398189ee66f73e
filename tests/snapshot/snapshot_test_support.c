/*
 * snapshot_test_support.c - the helpers of snapshot_test.h, compiled once for
 * both snapshot suites.
 */
#include "snapshot_test.h"

struct tmpdir tmpdir_make(void)
{
	struct tmpdir t;
	snprintf(t.dir, sizeof t.dir, "/tmp/tw-snapshot-XXXXXX");
	cr_assert_not_null(mkdtemp(t.dir), "mkdtemp: %s", strerror(errno));
	snprintf(t.path, sizeof t.path, "%s/snap", t.dir);
	return t;
}

void tmpdir_remove(struct tmpdir *t)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
	cr_assert_eq(system(cmd), 0);
}

int tmpdir_files(struct tmpdir *t)
{
	char cmd[160];
	snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", t->dir);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	int n = -1;
	cr_assert_eq(fscanf(p, "%d", &n), 1);
	pclose(p);
	return n;
}

tw_engine *engine_at(int64_t wall, uint64_t max_tasks, uint64_t *start)
{
	tw_config cfg = manual_config(1);
	cfg.max_failures = 2;
	cfg.max_tasks = max_tasks;
	tw_engine *e = engine_new(&cfg);
	*start = manual_now(e);
	set_manual_wall(e, wall);
	return e;
}

int app_callback(const tw_fire *fire, void *arg)
{
	struct task_arg *a = arg;
	atomic_fetch_add(&a->app->counts[a->index].runs, 1);
	atomic_store(&a->app->fire_skipped[a->index], fire->skipped);
	return 0;
}

int app_failing(const tw_fire *fire, void *arg)
{
	app_callback(fire, arg);
	return 1;
}

void app_release(void *arg)
{
	struct task_arg *a = arg;
	atomic_fetch_add(&a->app->counts[a->index].releases, 1);
}

int app_index(struct app *app, const char *name)
{
	for (int i = 0; i < NAMES && app->names[i]; i++)
		if (!strcmp(app->names[i], name))
			return i;
	return -1;
}

int app_resolve(const tw_snapshot_task *task, void *ctx, tw_resolved *out)
{
	struct app *app = ctx;
	if (++app->calls == app->fail_at)
		return -TW_ENOMEM;
	int i = app_index(app, task->name);
	if (i < 0 || (app->decline && !strcmp(app->decline, task->name)))
		return TW_RESOLVE_DECLINE;
	app->seen[i] = *task;
	app->seen[i].name = app->names[i];
	if (task->cron) {
		snprintf(app->seen_cron[i], sizeof app->seen_cron[i], "%s", task->cron);
		app->seen[i].cron = app->seen_cron[i];
	}
	app->args[i] = (struct task_arg){ app, i };
	out->callback = strncmp(task->name, "fail", 4) ? app_callback : app_failing;
	out->arg = &app->args[i];
	out->release = app_release;
	return 0;
}

tw_id add_named_at(tw_engine *e, struct app *app, const char *name, uint64_t delay, uint64_t period,
		   const char *cron, unsigned flags, unsigned misfire, int line)
{
	int i = app_index(app, name);
	cr_assert_geq(i, 0, "line %d: %s is not one of the app's names", line, name);
	app->args[i] = (struct task_arg){ app, i };
	tw_task_spec spec =
		spec_of(delay, period, strncmp(name, "fail", 4) ? app_callback : app_failing,
			&app->args[i]);
	spec.release = app_release;
	spec.name = name;
	spec.cron = cron;
	spec.flags = flags;
	spec.misfire = misfire;
	return add_spec_at(e, &spec, line);
}

tw_id find_at(tw_engine *e, const char *name, int line)
{
	tw_id id = 0;
	int rc = tw_find(e, name, &id);
	cr_assert_eq(rc, TW_OK, "line %d: tw_find(%s): %s", line, name, tw_strerror(rc));
	return id;
}

uint64_t snapshot_at(tw_engine *e, const char *path, int line)
{
	uint64_t n = UINT64_MAX;
	int rc = tw_snapshot(e, path, &n);
	cr_assert_eq(rc, TW_OK, "line %d: tw_snapshot: %s (%s)", line, tw_strerror(rc),
		     strerror(errno));
	return n;
}

uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	uint8_t *buf = malloc(1 << 20);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

void spit(const char *path, const uint8_t *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(buf, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}
