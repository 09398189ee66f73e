/*
 * list.c - `tw-perf list`: what tw_list costs per task visited, and what
 * tw_stats and tw_metrics_format cost per call, at N live tasks.
 *
 * N one-shot tasks (default 1 000 000) are added with delays of 30 s .. 10 min,
 * so none fires while we measure. Each round walks all of them with tw_list
 * and divides the walk's time by the tasks visited; a figure is the median
 * round, with the lowest and highest rounds in a note. Walks:
 *  count: a visitor that only counts: the walk's own cost;
 *  read: a visitor that reads the info (sums runs and dues), as a dump would;
 *  busy: the counting walk while another thread resets random tasks with
 *     tw_set_delay all the time: the walk holds up no one, and the resets'
 *     own cost during the walks is shown next to the same without a walk and
 *     during a plain sequential read of as much memory as the tasks take (a
 *     reference: what any stream over that memory does to the resets).
 * tw_stats and tw_metrics_format are O(executors): --tasks 1000 and the
 * default give the same.
 *
 *   defaults: --tasks 1000000, 5 rounds, executors one per online CPU
 *   (--executors N), --seed; --quick: 100 000 tasks, 3 rounds
 */
#include "suite.h"
#include "suite_util.h"

#include "measure.h"
#include "tickwheel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define MS UINT64_C(1000000)

enum {
	MIN_MS = 30 * 1000,
	SPAN_MS = 570 * 1000,
	RESET_BATCH = 1000,
	CALLS = 1000,     /* tw_stats and tw_metrics_format calls timed together */
	TASK_BYTES = 152, /* what a task takes (tw-perf ops' engine_bytes_per_task) */
};

struct tally {
	uint64_t visits, sum;
};

static int count_visit(tw_id id, const tw_task_info *info, void *ctx)
{
	(void)id, (void)info;
	((struct tally *)ctx)->visits++;
	return 0;
}

static int read_visit(tw_id id, const tw_task_info *info, void *ctx)
{
	struct tally *t = ctx;
	t->visits++;
	t->sum += id + info->runs + info->next_due_ns + info->period_ms + info->state;
	return 0;
}

static int empty_callback(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 0;
}

struct resetter {
	tw_engine *e;
	const tw_id *ids;
	size_t n;
	uint64_t seed;
	_Atomic bool quit;
	_Atomic uint64_t ops, ns; /* read by the main thread while it runs */
	uint64_t bad;
};

static void *reset_main(void *arg)
{
	struct resetter *r = arg;
	uint64_t rng = r->seed;
	while (!atomic_load_explicit(&r->quit, memory_order_relaxed)) {
		uint64_t t0 = monotonic_now_ns();
		for (int i = 0; i < RESET_BATCH; i++)
			r->bad += tw_set_delay(r->e, r->ids[bench_rng_below(&rng, r->n)], MIN_MS) !=
				  TW_OK;
		atomic_fetch_add_explicit(&r->ns, monotonic_now_ns() - t0, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->ops, RESET_BATCH, memory_order_relaxed);
	}
	return NULL;
}

struct list_run {
	struct report *r;
	tw_engine *e;
	size_t n;
	unsigned rounds;
	size_t short_walks, failed;
};

/* Walks rounds times; name (ns per task visited, median round) and the walk's ms. */
static void time_walks(struct list_run *x, tw_visit_fn visit, const char *name)
{
	struct su_samples s = { 0 };
	for (unsigned k = 0; k < x->rounds; k++) {
		struct tally t = { 0 };
		uint64_t t0 = monotonic_now_ns();
		x->failed += tw_list(x->e, 0, visit, &t) != TW_OK;
		uint64_t ns = monotonic_now_ns() - t0;
		x->short_walks += t.visits < x->n;
		su_push(&s, (double)ns / (double)(t.visits ? t.visits : 1));
	}
	double med = su_quantile(&s, 0.5);
	char fig[64];
	snprintf(fig, sizeof fig, "%s_ns_per_task", name);
	report_add(x->r, "tickwheel", fig, med, "ns", BETTER_LOWER);
	report_note(x->r, "%s: rounds %.1f .. %.1f ns per task, %.3g ms a walk", name,
		    su_quantile(&s, 0), su_quantile(&s, 1), med * (double)x->n / 1e6);
	su_samples_free(&s);
}

/* Reads n tasks' worth of memory in order, a word per line, rounds times. */
static void stream_reads(size_t n, unsigned rounds)
{
	size_t words = n * TASK_BYTES / 8;
	volatile uint64_t *mem = calloc(words, 8); /* volatile: every read happens */
	for (unsigned k = 0; mem && k < rounds; k++)
		for (size_t i = 0; i < words; i += 8)
			(void)mem[i];
	free((void *)mem);
}

static void time_stats(struct list_run *x)
{
	static char text[65536];
	struct su_samples stats = { 0 }, metrics = { 0 };
	for (unsigned k = 0; k < x->rounds; k++) {
		tw_engine_stats st;
		uint64_t t0 = monotonic_now_ns();
		for (int i = 0; i < CALLS; i++)
			x->failed += tw_stats(x->e, &st) != TW_OK;
		uint64_t t1 = monotonic_now_ns();
		size_t len;
		for (int i = 0; i < CALLS; i++)
			x->failed +=
				tw_metrics_format(x->e, NULL, text, sizeof text, &len) != TW_OK;
		uint64_t t2 = monotonic_now_ns();
		su_push(&stats, (double)(t1 - t0) / CALLS);
		su_push(&metrics, (double)(t2 - t1) / CALLS / 1e3);
	}
	report_add(x->r, "tickwheel", "stats_ns_per_call", su_quantile(&stats, 0.5), "ns",
		   BETTER_LOWER);
	report_add(x->r, "tickwheel", "metrics_format_us_per_call", su_quantile(&metrics, 0.5),
		   "us", BETTER_LOWER);
	su_samples_free(&stats);
	su_samples_free(&metrics);
}

static double resets_ns(struct resetter *r, uint64_t *ops0, uint64_t *ns0)
{
	uint64_t ops = atomic_load(&r->ops), ns = atomic_load(&r->ns);
	double per = ops > *ops0 ? (double)(ns - *ns0) / (double)(ops - *ops0) : 0;
	*ops0 = ops;
	*ns0 = ns;
	return per;
}

/* ns 0: no batch of resets ended in the window (walks of a few thousand
 * tasks are shorter than a batch): no figure rather than a false 0. */
static void report_resets(struct list_run *x, const char *name, double ns)
{
	if (ns > 0)
		report_add(x->r, "tickwheel", name, ns, "ns", BETTER_LOWER);
	else
		report_note(x->r, "%s: no batch of %d resets ended in that window", name,
			    RESET_BATCH);
}

/* The counting walk while another thread resets, and that thread's resets. */
static int walks_under_resets(struct list_run *x, const tw_id *ids, uint64_t seed)
{
	struct resetter rs = { .e = x->e, .ids = ids, .n = x->n, .seed = seed };
	pthread_t thread;
	if (pthread_create(&thread, NULL, reset_main, &rs)) {
		fprintf(stderr, "tw-perf list: pthread_create failed\n");
		return 2;
	}
	monotonic_sleep_until(monotonic_now_ns() + 300 * MS);
	uint64_t ops0 = 0, ns0 = 0;
	resets_ns(&rs, &ops0, &ns0);
	monotonic_sleep_until(monotonic_now_ns() + 300 * MS);
	double alone = resets_ns(&rs, &ops0, &ns0);
	time_walks(x, count_visit, "busy");
	double during = resets_ns(&rs, &ops0, &ns0);
	stream_reads(x->n, x->rounds);
	double streaming = resets_ns(&rs, &ops0, &ns0);
	atomic_store(&rs.quit, true);
	pthread_join(thread, NULL);
	report_resets(x, "reset_alone_ns", alone);
	report_resets(x, "reset_during_walks_ns", during);
	report_resets(x, "reset_during_read_ns", streaming);
	if (rs.bad)
		report_note(x->r, "WARNING: %llu resets did not return TW_OK",
			    (unsigned long long)rs.bad);
	return 0;
}

int scenario_list(const struct suite_options *opt, struct report *r)
{
	struct list_run x = { .r = r,
			      .n = opt->tasks ? opt->tasks :
				   opt->quick ? 100000 :
						1000000,
			      .rounds = opt->quick ? 3 : 5 };
	report_param(r, "tasks", (double)x.n);
	report_param(r, "rounds", x.rounds);
	report_param(r, "executors", opt->executors);
	report_param(r, "seed", (double)opt->seed);
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = opt->executors;
	tw_id *ids = malloc(x.n * sizeof *ids);
	int rc = ids ? tw_engine_create(&cfg, &x.e) : -TW_ENOMEM;
	uint64_t rng = opt->seed;
	for (size_t i = 0; rc == TW_OK && i < x.n; i++) {
		tw_task_spec spec = { .delay_ms = MIN_MS + bench_rng_below(&rng, SPAN_MS),
				      .callback = empty_callback };
		rc = tw_add(x.e, &spec, &ids[i]);
	}
	if (rc != TW_OK) {
		fprintf(stderr, "tw-perf list: set-up: %s\n", tw_strerror(rc));
	} else {
		time_walks(&x, count_visit, "count");
		time_walks(&x, read_visit, "read");
		time_stats(&x);
		rc = walks_under_resets(&x, ids, opt->seed + 1);
	}
	if (x.e) {
		tw_engine_stop(x.e, 5000);
		tw_engine_destroy(x.e);
	}
	free(ids);
	if (rc)
		return 2;
	report_note(r,
		    "%zu live one-shot tasks due in 30 s .. 10 min; walk figures: ns per task "
		    "visited, median of %u rounds",
		    x.n, x.rounds);
	report_note(r, "count: a visitor that counts; read: one that reads the info; busy: the "
		       "counting walk while another thread resets random tasks (tw_set_delay); "
		       "reset_*: that thread's ns per reset without a walk, during the walks, "
		       "during a plain read of as much memory as the tasks take");
	report_note(r,
		    "stats and metrics_format: median of %u rounds of %d calls; both "
		    "O(executors), not O(tasks)",
		    x.rounds, CALLS);
	if (x.short_walks)
		report_note(r, "WARNING: %zu walks visited fewer than %zu tasks", x.short_walks,
			    x.n);
	if (x.failed)
		report_note(r, "WARNING: %zu engine calls did not return TW_OK", x.failed);
	return 0;
}
