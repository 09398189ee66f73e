/*
 * snapshot_race.c - snapshots taken while the engine fires, and while other threads add,
 * cancel, pause, resume and move named tasks (calendar tasks among them, whose expression a
 * snapshot copies while another thread may release it); each file is restored into a second
 * engine at once. Every call must succeed and every file restore whole. A plain program, so
 * that the ThreadSanitizer build runs it (tools/run.sh test-tsan).
 *
 * Usage: snapshot_race [milliseconds] [seed]
 */
#include "../test_util.h"
#include "tickwheel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { NAMES = 64, CHURNERS = 2, ROOM = 40000 };

static tw_engine *engine;
static _Atomic bool quit;
static _Atomic uint64_t runs, failures, snapshots, restored, adds;
static char path[64];

static int callback(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	atomic_fetch_add_explicit(&runs, 1, memory_order_relaxed);
	return 0;
}

static void failed(const char *what, int rc)
{
	fprintf(stderr, "snapshot_race: %s: %s\n", what, tw_strerror(rc));
	atomic_fetch_add(&failures, 1);
}

static void add(int i)
{
	char name[24];
	snprintf(name, sizeof name, "task-%d", i);
	tw_task_spec spec = { .delay_ms = 1 + (uint64_t)i % 3,
			      .period_ms = i % 4 ? 1 + (uint64_t)i % 3 : 0,
			      .callback = callback,
			      .name = name,
			      .misfire = (unsigned)i % 2 };
	if (i % 4 == 0) {
		spec.delay_ms = 0;
		spec.cron = "CRON_TZ=UTC * * * * * *";
	}
	int rc = tw_add(engine, &spec, &(tw_id){ 0 });
	if (rc && rc != -TW_EEXIST) /* another churner added it first */
		failed("tw_add", rc);
	atomic_fetch_add(&adds, 1);
}

static void *churn(void *arg)
{
	uint64_t rng = (uint64_t)(uintptr_t)arg;
	while (!atomic_load(&quit)) {
		int i = (int)(test_rng_next(&rng) % NAMES);
		char name[24];
		snprintf(name, sizeof name, "task-%d", i);
		tw_id id;
		if (tw_find(engine, name, &id)) {
			add(i);
			continue;
		}
		/* The task may end or change under us (the other churner): ENOTFOUND and
		 * ESTATE are its answers then, not failures. */
		int rc;
		switch (test_rng_next(&rng) % 4) {
		case 0:
			rc = tw_cancel(engine, id);
			break;
		case 1:
			rc = tw_pause(engine, id);
			break;
		case 2:
			rc = tw_resume(engine, id);
			break;
		default:
			rc = tw_set_delay(engine, id, test_rng_next(&rng) % 5);
		}
		if (rc && rc != -TW_ENOTFOUND && rc != -TW_ESTATE)
			failed("an operation", rc);
	}
	return NULL;
}

static int accept_all(const tw_snapshot_task *task, void *ctx, tw_resolved *out)
{
	(void)task, (void)ctx;
	out->callback = callback;
	return 0;
}

static void *snapshotter(void *arg)
{
	(void)arg;
	while (!atomic_load(&quit)) {
		uint64_t n;
		int rc = tw_snapshot(engine, path, &n);
		if (rc) {
			failed("tw_snapshot", rc);
			continue;
		}
		atomic_fetch_add(&snapshots, 1);
		tw_engine *b;
		if ((rc = tw_engine_create(NULL, &b))) {
			failed("tw_engine_create", rc);
			continue;
		}
		tw_restore_result res;
		rc = tw_restore(b, path, accept_all, NULL, &res);
		if (rc)
			failed("tw_restore", rc);
		else if (res.records != n ||
			 res.restored + res.expired + res.duplicates != res.records)
			failed("a restore that does not add up", 0);
		atomic_fetch_add(&restored, res.restored);
		tw_engine_destroy(b);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 1500;
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : test_now_ns();
	snprintf(path, sizeof path, "/tmp/tw-snapshot-race-%ld.snap", (long)getpid());
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 2;
	/* Ended tasks are forgotten at once: their slots are reaped and reused while the other
	 * threads still find them by name (tw_add once mailed such a slot: ops_add.c). */
	cfg.retain_ms = 1;
	int rc = tw_engine_create(&cfg, &engine);
	if (rc) {
		failed("tw_engine_create", rc);
		return 1;
	}
	/* The slot table is grown first, with room for the slots the churn's ended tasks hold
	 * until they are reaped, so that its directory is never replaced while the threads
	 * run: the swap's rcu_assign_pointer and the readers' rcu_dereference are liburcu's,
	 * whose ordering ThreadSanitizer does not see (tests/stress/tsan.supp), and it would
	 * report them. */
	static tw_id room[ROOM];
	for (size_t i = 0; i < sizeof room / sizeof room[0]; i++) {
		tw_task_spec spec = { .delay_ms = TW_NEVER, .callback = callback };
		if ((rc = tw_add(engine, &spec, &room[i])))
			failed("tw_add", rc);
	}
	for (size_t i = 0; i < sizeof room / sizeof room[0]; i++)
		if ((rc = tw_cancel(engine, room[i])))
			failed("tw_cancel", rc);
	for (int i = 0; i < NAMES; i++)
		add(i);
	pthread_t threads[CHURNERS + 1];
	for (int i = 0; i < CHURNERS; i++)
		if (pthread_create(&threads[i], NULL, churn,
				   (void *)(uintptr_t)(seed + (uint64_t)i)))
			return 1;
	if (pthread_create(&threads[CHURNERS], NULL, snapshotter, NULL))
		return 1;
	nanosleep(&(struct timespec){ ms / 1000, ms % 1000 * 1000000 }, NULL);
	atomic_store(&quit, true);
	for (int i = 0; i <= CHURNERS; i++)
		pthread_join(threads[i], NULL);
	tw_engine_destroy(engine);
	unlink(path);
	printf("snapshot_race: seed %llu, %llu adds, %llu runs, %llu snapshots, %llu tasks "
	       "restored, %llu failures\n",
	       (unsigned long long)seed, (unsigned long long)atomic_load(&adds),
	       (unsigned long long)atomic_load(&runs), (unsigned long long)atomic_load(&snapshots),
	       (unsigned long long)atomic_load(&restored),
	       (unsigned long long)atomic_load(&failures));
	return atomic_load(&failures) || !atomic_load(&snapshots);
}
