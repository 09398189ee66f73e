/*
 * snapshot.c - `tw-perf snapshot`: what tw_snapshot and tw_restore cost at N named tasks.
 *
 * N named periodic tasks (default 1 000 000; names "task-0" ..., periods 1 .. 10 min, none
 * due while we measure) are added to an engine, timed as a reference. Each round snapshots
 * them all to one file (a temporary file, fsync, rename, fsync of the directory) and
 * restores that file into a fresh engine with a resolver that accepts every task. Figures:
 * the median round's seconds and ns per task, the file's bytes per task, and the adds' ns
 * per task beside them. The file goes to $TW_PERF_DIR, else /var/tmp (a disk, where fsync
 * costs what it costs; /tmp may be tmpfs), and is removed at the end.
 *
 *   defaults: --tasks 1000000, 3 rounds, executors one per online CPU (--executors N),
 *   --seed; --quick: 100 000 tasks, 2 rounds
 */
#include "suite.h"
#include "suite_util.h"

#include "bench.h"
#include "measure.h"
#include "tickwheel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int empty_callback(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 0;
}

static int accept_all(const tw_snapshot_task *task, void *ctx, tw_resolved *out)
{
	(void)task;
	++*(size_t *)ctx;
	out->callback = empty_callback;
	return 0;
}

static tw_engine *new_engine(unsigned executors)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = executors;
	tw_engine *e = NULL;
	return tw_engine_create(&cfg, &e) == TW_OK ? e : NULL;
}

static void end_engine(tw_engine *e)
{
	if (!e)
		return;
	tw_engine_stop(e, 5000);
	tw_engine_destroy(e);
}

int scenario_snapshot(const struct suite_options *opt, struct report *r)
{
	size_t n = opt->tasks ? opt->tasks : opt->quick ? 100000 : 1000000;
	unsigned rounds = opt->quick ? 2 : 3;
	const char *base = getenv("TW_PERF_DIR") ? getenv("TW_PERF_DIR") : "/var/tmp";
	char dir[256], path[300];
	snprintf(dir, sizeof dir, "%s/tw-perf-snapshot-XXXXXX", base);
	if (!mkdtemp(dir)) {
		fprintf(stderr, "tw-perf snapshot: mkdtemp in %s failed\n", base);
		return 2;
	}
	snprintf(path, sizeof path, "%s/snap", dir);
	report_param(r, "tasks", (double)n);
	report_param(r, "rounds", rounds);
	report_param(r, "executors", opt->executors);
	report_param(r, "seed", (double)opt->seed);
	tw_engine *e = new_engine(opt->executors);
	int rc = e ? TW_OK : -TW_ENOMEM;
	uint64_t rng = opt->seed;
	uint64_t t0 = monotonic_now_ns();
	for (size_t i = 0; rc == TW_OK && i < n; i++) {
		char name[32];
		snprintf(name, sizeof name, "task-%zu", i);
		uint64_t period = 60000 + bench_rng_below(&rng, 540000);
		tw_task_spec spec = { .delay_ms = period,
				      .period_ms = period,
				      .callback = empty_callback,
				      .name = name };
		rc = tw_add(e, &spec, &(tw_id){ 0 });
	}
	double add_ns = (double)(monotonic_now_ns() - t0) / (double)n;
	struct su_samples snap = { 0 }, restore = { 0 };
	uint64_t written = 0;
	size_t restored_short = 0;
	off_t bytes = 0;
	for (unsigned k = 0; rc == TW_OK && k < rounds; k++) {
		t0 = monotonic_now_ns();
		rc = tw_snapshot(e, path, &written);
		su_push(&snap, (double)(monotonic_now_ns() - t0));
		struct stat st;
		if (rc == TW_OK && !stat(path, &st))
			bytes = st.st_size;
		tw_engine *b = rc == TW_OK ? new_engine(opt->executors) : NULL;
		if (rc == TW_OK && !b)
			rc = -TW_ENOMEM;
		size_t resolved = 0;
		tw_restore_result res = { 0 };
		t0 = monotonic_now_ns();
		if (rc == TW_OK)
			rc = tw_restore(b, path, accept_all, &resolved, &res);
		su_push(&restore, (double)(monotonic_now_ns() - t0));
		restored_short += res.restored < n;
		end_engine(b);
	}
	end_engine(e);
	(void)unlink(path);
	(void)rmdir(dir);
	if (rc != TW_OK) {
		fprintf(stderr, "tw-perf snapshot: %s\n", tw_strerror(rc));
		su_samples_free(&snap);
		su_samples_free(&restore);
		return 2;
	}
	double snap_ns = su_quantile(&snap, 0.5), restore_ns = su_quantile(&restore, 0.5);
	report_add(r, "tickwheel", "snapshot_s", snap_ns / 1e9, "s", BETTER_LOWER);
	report_add(r, "tickwheel", "snapshot_ns_per_task", snap_ns / (double)n, "ns", BETTER_LOWER);
	report_add(r, "tickwheel", "bytes_per_task", (double)bytes / (double)n, "B", BETTER_LOWER);
	report_add(r, "tickwheel", "restore_s", restore_ns / 1e9, "s", BETTER_LOWER);
	report_add(r, "tickwheel", "restore_ns_per_task", restore_ns / (double)n, "ns",
		   BETTER_LOWER);
	report_add(r, "tickwheel", "add_named_ns_per_task", add_ns, "ns", BETTER_LOWER);
	report_note(r,
		    "%zu named periodic tasks (periods 1 .. 10 min); file in %s, %lld bytes; "
		    "median of %u rounds (snapshot %.3g .. %.3g s, restore %.3g .. %.3g s)",
		    n, base, (long long)bytes, rounds, su_quantile(&snap, 0) / 1e9,
		    su_quantile(&snap, 1) / 1e9, su_quantile(&restore, 0) / 1e9,
		    su_quantile(&restore, 1) / 1e9);
	report_note(r, "restore: into a fresh engine, every task resolved (the file read, "
		       "checked whole, each task added as tw_add, then armed); add_named: the "
		       "same tasks' tw_add calls, for comparison");
	if (written != n || restored_short)
		report_note(r, "WARNING: %llu tasks written of %zu; %zu rounds restored fewer",
			    (unsigned long long)written, n, restored_short);
	su_samples_free(&snap);
	su_samples_free(&restore);
	return 0;
}
