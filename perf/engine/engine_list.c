/*
 * engine_list.c - `bench-engine list`: what tw_list costs per task visited.
 *
 * N one-shot tasks (default 1 000 000) are added with delays of 30 s .. 10 min,
 * so none fires while we measure. tw_stats and tw_metrics_format are timed at
 * that size too (flat: --tasks 1000 gives the same). Each round walks all of them with tw_list
 * and divides the walk's time by the tasks visited; the figure is the median
 * round (the lowest and highest rounds as the spread). Walks:
 *  1. a visitor that only counts: the walk's own cost;
 *  2. a visitor that reads the info (sums runs and dues), as a dump would;
 *  3. the counting walk while another thread resets random tasks with
 *     tw_set_delay all the time: the walk holds up no one, and the resets'
 *     own cost during the walks is shown next to the same without a walk, and
 *     during a plain sequential read of as much memory as the tasks take (a
 *     reference: what any stream over that memory does to the resets).
 */
#include "bench_engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

enum {
	LIST_DEFAULT_TASKS = 1000000,
	LIST_DEFAULT_ROUNDS = 5,
	LIST_MIN_MS = 30 * 1000,
	LIST_SPAN_MS = 570 * 1000,
	RESET_BATCH = 1000,
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

struct resetter {
	tw_engine *e;
	const tw_id *ids;
	size_t n;
	_Atomic bool quit;
	uint64_t ops, ns, bad;
};

static void *reset_main(void *arg)
{
	struct resetter *r = arg;
	uint64_t rng = 99;
	while (!atomic_load_explicit(&r->quit, memory_order_relaxed)) {
		uint64_t t0 = now_ns();
		for (int i = 0; i < RESET_BATCH; i++)
			r->bad += tw_set_delay(r->e, r->ids[rng_below(&rng, (uint32_t)r->n)],
					       LIST_MIN_MS) != TW_OK;
		r->ns += now_ns() - t0;
		r->ops += RESET_BATCH;
	}
	return NULL;
}

/* Walks rounds times; prints the median ns per task visited and the spread. */
static void time_walks(tw_engine *e, size_t n, unsigned rounds, tw_visit_fn visit,
		       const char *figure)
{
	struct samples s;
	samples_init(&s, rounds);
	for (unsigned r = 0; r < rounds; r++) {
		struct tally t = { 0 };
		uint64_t t0 = now_ns();
		check(tw_list(e, 0, visit, &t), "tw_list");
		uint64_t ns = now_ns() - t0;
		if (t.visits < n)
			table_note("WARNING: a walk visited %llu of %zu tasks",
				   (unsigned long long)t.visits, n);
		samples_add(&s, (double)ns / (double)(t.visits ? t.visits : 1));
	}
	sort_doubles(s.v, s.n);
	char value[96];
	snprintf(value, sizeof value, "%.1f ns (%.1f-%.1f); %.1f ms a walk",
		 quantile_sorted(s.v, s.n, 0.5), s.v[0], s.v[s.n - 1],
		 quantile_sorted(s.v, s.n, 0.5) * (double)n / 1e6);
	table_row(figure, value, NULL, INFO);
	samples_free(&s);
}

/* Reads n * 152 bytes (the tasks' size) in order, a word per line, rounds times. */
static void stream_reads(size_t n, unsigned rounds)
{
	size_t bytes = n * 152;
	volatile uint64_t *mem = xcalloc(bytes / 8, 8);
	uint64_t sum = 0;
	for (unsigned r = 0; r < rounds; r++)
		for (size_t i = 0; i < bytes / 8; i += 8)
			sum += mem[i];
	free((void *)mem);
	if (sum)
		table_note("(sum %llu)", (unsigned long long)sum);
}

/* tw_stats and the Prometheus exposition at this many tasks: both O(executors), so run with
 * --tasks 1000 and the default 1 000 000 to see them flat. Median of rounds x 1000 calls. */
static void time_stats(tw_engine *e, unsigned rounds)
{
	enum { CALLS = 1000 };
	static char text[65536];
	struct samples stats, metrics;
	samples_init(&stats, rounds);
	samples_init(&metrics, rounds);
	for (unsigned r = 0; r < rounds; r++) {
		tw_engine_stats st;
		uint64_t t0 = now_ns();
		for (int i = 0; i < CALLS; i++)
			check(tw_stats(e, &st), "tw_stats");
		uint64_t t1 = now_ns();
		size_t len;
		for (int i = 0; i < CALLS; i++)
			check(tw_metrics_format(e, NULL, text, sizeof text, &len),
			      "tw_metrics_format");
		uint64_t t2 = now_ns();
		samples_add(&stats, (double)(t1 - t0) / CALLS);
		samples_add(&metrics, (double)(t2 - t1) / CALLS);
	}
	sort_doubles(stats.v, stats.n);
	sort_doubles(metrics.v, metrics.n);
	char value[96];
	snprintf(value, sizeof value, "%.0f ns (%.0f-%.0f)", quantile_sorted(stats.v, stats.n, 0.5),
		 stats.v[0], stats.v[stats.n - 1]);
	table_row("tw_stats, per call", value, NULL, INFO);
	snprintf(value, sizeof value, "%.1f us (%.1f-%.1f)",
		 quantile_sorted(metrics.v, metrics.n, 0.5) / 1e3, metrics.v[0] / 1e3,
		 metrics.v[metrics.n - 1] / 1e3);
	table_row("tw_metrics_format, per call", value, NULL, INFO);
	samples_free(&stats);
	samples_free(&metrics);
}

static double resets_ns(struct resetter *r, uint64_t ops0, uint64_t ns0)
{
	return r->ops > ops0 ? (double)(r->ns - ns0) / (double)(r->ops - ops0) : 0;
}

void run_list(const struct options *opt)
{
	size_t n = opt->tasks ? opt->tasks : LIST_DEFAULT_TASKS;
	unsigned rounds = opt->rounds ? opt->rounds : LIST_DEFAULT_ROUNDS;
	uint64_t rng = opt->seed;
	tw_engine *e = engine_new(opt->executors, false, 0);
	char title[160];
	snprintf(title, sizeof title,
		 "list: tw_list over %zu live one-shot tasks due in 30 s .. 10 min, %u rounds, %s",
		 n, rounds, executors_label(opt->executors));
	table_header(title);
	table_note("measured: ns per task visited, median round (lowest-highest round)");
	tw_id *ids = xmalloc(n * sizeof *ids);
	for (size_t i = 0; i < n; i++) {
		tw_task_spec spec = { .delay_ms = LIST_MIN_MS + rng_below(&rng, LIST_SPAN_MS),
				      .callback = empty_callback };
		check(tw_add(e, &spec, &ids[i]), "tw_add");
	}
	time_walks(e, n, rounds, count_visit, "tw_list, visitor counts");
	time_walks(e, n, rounds, read_visit, "tw_list, visitor reads the info");
	time_stats(e, rounds);

	struct resetter r = { .e = e, .ids = ids, .n = n };
	pthread_t thread;
	if (pthread_create(&thread, NULL, reset_main, &r)) {
		fprintf(stderr, "bench-engine: pthread_create failed\n");
		exit(2);
	}
	sleep_ms(300);
	uint64_t ops0 = r.ops, ns0 = r.ns;
	sleep_ms(300);
	double alone = resets_ns(&r, ops0, ns0);
	ops0 = r.ops, ns0 = r.ns;
	time_walks(e, n, rounds, count_visit, "tw_list, another thread resetting");
	double during = resets_ns(&r, ops0, ns0);
	ops0 = r.ops, ns0 = r.ns;
	stream_reads(n, rounds);
	double streaming = resets_ns(&r, ops0, ns0);
	atomic_store(&r.quit, true);
	pthread_join(thread, NULL);
	char value[96];
	snprintf(value, sizeof value, "%.0f ns alone, %.0f during walks", alone, during);
	table_row("  that thread's tw_set_delay, per op", value, NULL, INFO);
	snprintf(value, sizeof value, "%.0f ns", streaming);
	table_row("  same, during a plain read of as much memory", value, NULL, INFO);
	if (r.bad)
		table_note("WARNING: %llu resets did not return TW_OK", (unsigned long long)r.bad);
	engine_end(e);
	free(ids);
}
