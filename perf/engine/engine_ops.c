/*
 * engine_ops.c - `bench-engine ops`: the cost of single operations at a
 * million live tasks, from application threads.
 *
 * N one-shot tasks (default 1 000 000) are added with delays of 30 s .. 10 min,
 * so none fires while we measure. Every figure is timed in batches of 1000
 * operations (one clock read per batch) and reported as the median and p99
 * over batches of the ns per operation, pooled over R rounds (default 5), with
 * the lowest and highest round median as the spread. Each round touches the
 * tasks in a new random order. The ids are laid out in that order beforehand,
 * so the timed loop reads them sequentially and the one random access per
 * operation is the engine's own.
 *
 * Order of the measurements:
 *  1. tw_add of the N tasks (information), tw_stats' memory_bytes before and after;
 *  2. tw_set_delay(29 s) on every task: earlier than its due, so the wheel
 *     thread is mailed (information); meanwhile, as a reference, the cost of
 *     one dependent random read over as much memory as the tasks take;
 *  3. tw_set_delay(30 s) rounds: each moves the due later than the current one
 *     (the session-timeout reset), first from one thread, then from two
 *     threads at once, each on its own half of the tasks;
 *  4. tw_get on a hot set of 1000 tasks, and on random tasks (information);
 *  5. add+cancel pairs: cancel a random live task and add its replacement
 *     (the live count stays N); and add a task then cancel it at once; both
 *     first while the table grows, then, after the retention of cancelled
 *     tasks (5 s), while adds reuse freed slots.
 */
#include "bench_engine.h"
#include "measure.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum {
	POP_MIN_MS = 30 * 1000,
	POP_SPAN_MS = 570 * 1000, /* population dues: 30 s .. 10 min */
	EARLIER_MS = 29 * 1000,   /* the pre-pass that mails the wheel */
	RESET_MS = 30 * 1000,     /* the session-timeout reset */
	HOT = 1000,               /* the hot set of tw_get */
	HOT_ORDERS = 16,          /* random orders of the hot set */
	PAIRS_PER_ROUND = 100000, /* add+cancel pairs per round */
	DEFAULT_TASKS = 1000000,
	DEFAULT_ROUNDS = 5,
	RETAIN_MS = 5000, /* tw_config.retain_ms, the default */
};

struct ops_bench {
	tw_engine *e;
	size_t n;
	unsigned rounds;
	tw_id *ids; /* ids[k]: the task of slot k of the population */
	tw_id *seq; /* ids in the order of the current round */
	uint32_t *order;
	uint64_t rng;
	size_t bad; /* operations that did not return TW_OK */
};

static tw_task_spec long_task(uint64_t *rng)
{
	tw_task_spec spec = { .delay_ms = POP_MIN_MS + rng_below(rng, POP_SPAN_MS + 1),
			      .callback = empty_callback };
	return spec;
}

/* Lays the ids out in a new random order (untimed). */
static void new_order(struct ops_bench *b)
{
	free(b->order);
	b->order = random_permutation(b->n, &b->rng);
	for (size_t i = 0; i < b->n; i++)
		b->seq[i] = b->ids[b->order[i]];
}

static size_t batch_end(size_t start, size_t n)
{
	return start + BATCH < n ? start + BATCH : n;
}

enum { RESETS_PER_CALL = 64 };

static void time_set_delay(tw_engine *e, const tw_id *seq, size_t n, uint64_t delay_ms,
			   struct latency *l, size_t *bad)
{
	size_t failed = 0;
	for (size_t s = 0; s < n; s += BATCH) {
		size_t end = batch_end(s, n);
		uint64_t t0 = now_ns();
		for (size_t i = s; i < end; i++)
			failed += tw_set_delay(e, seq[i], delay_ms) != TW_OK;
		latency_batch(l, (double)(now_ns() - t0) / (double)(end - s));
	}
	*bad += failed;
}

/* The same through tw_set_delay_many, `many` ids a call. */
static void time_set_delay_many(tw_engine *e, const tw_id *seq, size_t n, size_t many,
				uint64_t delay_ms, struct latency *l, size_t *bad)
{
	size_t failed = 0;
	for (size_t s = 0; s < n; s += BATCH) {
		size_t end = batch_end(s, n);
		uint64_t t0 = now_ns();
		for (size_t i = s; i < end; i += many)
			failed += tw_set_delay_many(e, seq + i, end - i < many ? end - i : many,
						    delay_ms, NULL) != TW_OK;
		latency_batch(l, (double)(now_ns() - t0) / (double)(end - s));
	}
	*bad += failed;
}

static void print_latency(const char *figure, struct latency *l, const char *target, double limit)
{
	double med, p99, lo, hi;
	latency_summary(l, &med, &p99, &lo, &hi);
	char value[96];
	if (l->round_medians.n > 1)
		snprintf(value, sizeof value, "%.1f / %.1f ns (rounds %.1f-%.1f)", med, p99, lo,
			 hi);
	else
		snprintf(value, sizeof value, "%.1f / %.1f ns", med, p99);
	table_row(figure, value, target, target ? verdict_le(med, limit) : INFO);
}

static size_t populate(struct ops_bench *b)
{
	struct latency add;
	latency_init(&add, b->n / BATCH + 1);
	uint64_t before = engine_memory_bytes(b->e);
	for (size_t s = 0; s < b->n; s += BATCH) {
		size_t end = batch_end(s, b->n);
		uint64_t t0 = now_ns();
		for (size_t i = s; i < end; i++) {
			tw_task_spec spec = long_task(&b->rng);
			check(tw_add(b->e, &spec, &b->ids[i]), "tw_add");
		}
		latency_batch(&add, (double)(now_ns() - t0) / (double)(end - s));
	}
	uint64_t after = engine_memory_bytes(b->e);
	print_latency("tw_add, 0 -> N live (median / p99)", &add, NULL, 0);
	latency_free(&add);
	double per_task = (double)(after - before) / (double)b->n;
	char value[96];
	snprintf(value, sizeof value, "%.1f B (%.1f -> %.1f MiB)", per_task,
		 (double)before / 1048576.0, (double)after / 1048576.0);
	table_row("bytes per live task (memory_bytes)", value, "<= 160 B",
		  verdict_le(per_task, 160));
	return (size_t)per_task;
}

/*
 * What one random memory access costs on this machine: a chain of dependent
 * reads over N records of the task's size (as much memory as the tasks take,
 * 4 KiB pages like the engine's), so each read waits for the previous one.
 */
static void reference_read(struct ops_bench *b, size_t stride)
{
	stride = stride < 64 ? 64 : (stride + 7) / 8 * 8;
	char *mem = xmalloc(b->n * stride);
	uint32_t *perm = random_permutation(b->n, &b->rng);
	for (size_t i = 0; i < b->n; i++)
		*(uint32_t *)(mem + (size_t)perm[i] * stride) = perm[(i + 1) % b->n];
	struct latency l;
	latency_init(&l, b->n / BATCH + 1);
	uint32_t x = perm[0];
	for (size_t s = 0; s < b->n; s += BATCH) {
		size_t end = batch_end(s, b->n);
		uint64_t t0 = now_ns();
		for (size_t i = s; i < end; i++)
			x = *(volatile uint32_t *)(mem + (size_t)x * stride);
		latency_batch(&l, (double)(now_ns() - t0) / (double)(end - s));
	}
	char figure[64];
	snprintf(figure, sizeof figure, "reference: dependent read, %zu x %zu B", b->n, stride);
	print_latency(figure, &l, NULL, 0);
	latency_free(&l);
	free(perm);
	free(mem);
}

static void resets_one_thread(struct ops_bench *b)
{
	struct latency l;
	latency_init(&l, b->rounds * (b->n / BATCH + 1));
	for (unsigned r = 0; r < b->rounds; r++) {
		new_order(b);
		time_set_delay(b->e, b->seq, b->n, RESET_MS, &l, &b->bad);
		latency_end_round(&l);
	}
	print_latency("tw_set_delay postpone, 1 thread", &l, "<= 100 ns median", 100);
	latency_free(&l);

	/* The same on a hot set of 1000 tasks: the path without its cache miss. */
	latency_init(&l, b->rounds * 1000);
	for (unsigned r = 0; r < b->rounds; r++) {
		for (unsigned rep = 0; rep < 1000; rep++)
			time_set_delay(b->e, b->seq, HOT, RESET_MS, &l, &b->bad);
		latency_end_round(&l);
	}
	print_latency("  the same on a hot set of 1000 tasks", &l, NULL, 0);
	latency_free(&l);

	/* Batches of resets, as a gateway reading messages in batches makes them. */
	latency_init(&l, b->rounds * (b->n / BATCH + 1));
	for (unsigned r = 0; r < b->rounds; r++) {
		new_order(b);
		time_set_delay_many(b->e, b->seq, b->n, RESETS_PER_CALL, RESET_MS, &l, &b->bad);
		latency_end_round(&l);
	}
	print_latency("tw_set_delay_many postpone, 64 a call", &l, NULL, 0);
	latency_free(&l);
}

struct reset_worker {
	struct ops_bench *b;
	pthread_barrier_t *start;
	const tw_id *seq;
	size_t n;
	struct latency l;
	size_t bad;
};

static void *reset_worker_main(void *arg)
{
	struct reset_worker *w = arg;
	pthread_barrier_wait(w->start);
	for (unsigned r = 0; r < w->b->rounds; r++) {
		time_set_delay(w->b->e, w->seq, w->n, RESET_MS, &w->l, &w->bad);
		latency_end_round(&w->l);
	}
	return NULL;
}

static void resets_two_threads(struct ops_bench *b)
{
	enum { THREADS = 2 };
	struct reset_worker w[THREADS];
	pthread_t thread[THREADS];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, THREADS + 1);
	new_order(b);
	for (unsigned t = 0; t < THREADS; t++) {
		size_t lo = b->n * t / THREADS, hi = b->n * (t + 1) / THREADS;
		w[t] = (struct reset_worker){
			.b = b, .start = &start, .seq = b->seq + lo, .n = hi - lo
		};
		latency_init(&w[t].l, b->rounds * (w[t].n / BATCH + 1));
		if (pthread_create(&thread[t], NULL, reset_worker_main, &w[t])) {
			fprintf(stderr, "bench-engine: pthread_create failed\n");
			exit(2);
		}
	}
	pthread_barrier_wait(&start);
	uint64_t t0 = now_ns();
	for (unsigned t = 0; t < THREADS; t++)
		pthread_join(thread[t], NULL);
	double wall = (double)(now_ns() - t0);
	pthread_barrier_destroy(&start);
	/* Pool the two threads' batches; the spread is over both threads' rounds. */
	struct latency *all = &w[0].l;
	latency_end_round(&w[1].l);
	for (size_t i = 0; i < w[1].l.all.n; i++)
		latency_batch(all, w[1].l.all.v[i]);
	for (size_t i = 0; i < w[1].l.round_medians.n; i++)
		samples_add(&all->round_medians, w[1].l.round_medians.v[i]);
	all->round_start = all->all.n;
	b->bad += w[0].bad + w[1].bad;
	print_latency("tw_set_delay postpone, 2 threads (each)", all, "<= 100 ns median", 100);
	char value[64];
	snprintf(value, sizeof value, "%.1f M resets/s", (double)b->n * b->rounds / wall * 1000.0);
	table_row("  both threads together", value, NULL, INFO);
	latency_free(&w[0].l);
	latency_free(&w[1].l);
}

static void time_gets(tw_engine *e, const tw_id *seq, size_t n, struct latency *l, size_t *bad)
{
	size_t failed = 0;
	tw_task_info info;
	for (size_t s = 0; s < n; s += BATCH) {
		size_t end = batch_end(s, n);
		uint64_t t0 = now_ns();
		for (size_t i = s; i < end; i++)
			failed += tw_get(e, seq[i], &info) != TW_OK;
		latency_batch(l, (double)(now_ns() - t0) / (double)(end - s));
	}
	*bad += failed;
}

static void gets(struct ops_bench *b)
{
	/* The hot set: HOT random tasks, visited in HOT_ORDERS random orders. */
	new_order(b);
	tw_id *hot = xmalloc(HOT * HOT_ORDERS * sizeof *hot);
	for (unsigned k = 0; k < HOT_ORDERS; k++) {
		uint32_t *perm = random_permutation(HOT, &b->rng);
		for (unsigned i = 0; i < HOT; i++)
			hot[k * HOT + i] = b->seq[perm[i]];
		free(perm);
	}
	struct latency l;
	latency_init(&l, b->rounds * 1000);
	for (unsigned r = 0; r < b->rounds; r++) {
		for (unsigned rep = 0; rep < 1000 / HOT_ORDERS; rep++)
			time_gets(b->e, hot, HOT * HOT_ORDERS, &l, &b->bad);
		latency_end_round(&l);
	}
	print_latency("tw_get, hot set of 1000 tasks", &l, "<= 60 ns median", 60);
	latency_free(&l);
	free(hot);

	latency_init(&l, b->n / BATCH + 1);
	time_gets(b->e, b->seq, b->n, &l, &b->bad);
	print_latency("tw_get, random task of N", &l, NULL, 0);
	latency_free(&l);
}

/* Cancels a random live task and adds its replacement, pairs at a time. */
static void pairs_replace(struct ops_bench *b, const char *figure)
{
	size_t pairs = PAIRS_PER_ROUND < b->n ? PAIRS_PER_ROUND : b->n;
	tw_id *fresh = xmalloc(pairs * sizeof *fresh);
	tw_task_spec *specs = xmalloc(pairs * sizeof *specs);
	struct latency l;
	latency_init(&l, b->rounds * (pairs / BATCH + 1));
	for (unsigned r = 0; r < b->rounds; r++) {
		new_order(b);
		for (size_t i = 0; i < pairs; i++)
			specs[i] = long_task(&b->rng);
		size_t failed = 0;
		for (size_t s = 0; s < pairs; s += BATCH) {
			size_t end = batch_end(s, pairs);
			uint64_t t0 = now_ns();
			for (size_t i = s; i < end; i++) {
				failed += tw_cancel(b->e, b->seq[i]) != TW_OK;
				failed += tw_add(b->e, &specs[i], &fresh[i]) != TW_OK;
			}
			latency_batch(&l, (double)(now_ns() - t0) / (double)(end - s));
		}
		latency_end_round(&l);
		b->bad += failed;
		for (size_t i = 0; i < pairs; i++)
			b->ids[b->order[i]] = fresh[i];
	}
	print_latency(figure, &l, "<= 500 ns median", 500);
	latency_free(&l);
	free(fresh);
	free(specs);
}

/* Adds a task and cancels it at once, pairs at a time. */
static void pairs_same(struct ops_bench *b, const char *figure)
{
	size_t pairs = PAIRS_PER_ROUND;
	tw_task_spec spec = long_task(&b->rng);
	struct latency l;
	latency_init(&l, b->rounds * (pairs / BATCH + 1));
	for (unsigned r = 0; r < b->rounds; r++) {
		size_t failed = 0;
		for (size_t s = 0; s < pairs; s += BATCH) {
			size_t end = batch_end(s, pairs);
			uint64_t t0 = now_ns();
			for (size_t i = s; i < end; i++) {
				tw_id id;
				failed += tw_add(b->e, &spec, &id) != TW_OK;
				failed += tw_cancel(b->e, id) != TW_OK;
			}
			latency_batch(&l, (double)(now_ns() - t0) / (double)(end - s));
		}
		latency_end_round(&l);
		b->bad += failed;
	}
	print_latency(figure, &l, "<= 500 ns median", 500);
	latency_free(&l);
}

/*
 * A cancelled task keeps its slot for retain_ms (5 s by default), so pairs
 * first take fresh slots (the table grows: new memory); once the retention
 * of the first cancels is over, adds reuse the slots they freed.
 */
static void pairs(struct ops_bench *b)
{
	uint64_t first = now_ns();
	pairs_replace(b, "cancel random + add, table growing");
	pairs_same(b, "add + cancel same task, table growing");
	table_note("(waiting for the 5 s retention of cancelled tasks to end)");
	sleep_until_ns(first + (RETAIN_MS + 700) * UINT64_C(1000000));
	pairs_replace(b, "cancel random + add, slots reused");
	pairs_same(b, "add + cancel same task, slots reused");
}

void run_ops(const struct options *opt)
{
	struct ops_bench b = { .n = opt->tasks ? opt->tasks : DEFAULT_TASKS,
			       .rounds = opt->rounds ? opt->rounds : DEFAULT_ROUNDS,
			       .rng = opt->seed };
	b.ids = xmalloc(b.n * sizeof *b.ids);
	b.seq = xmalloc(b.n * sizeof *b.seq);
	b.e = engine_new(opt->executors, false, 0);
	char title[160];
	snprintf(title, sizeof title,
		 "ops: %zu live one-shot tasks due in 30 s .. 10 min, random order, "
		 "batches of %d, %u rounds, %s",
		 b.n, BATCH, b.rounds, executors_label(opt->executors));
	table_header(title);
	table_note("measured: median / p99 of ns per op over batches; rounds: lowest-highest "
		   "round median");
	size_t task_bytes = populate(&b);

	struct latency l;
	latency_init(&l, b.n / BATCH + 1);
	new_order(&b);
	time_set_delay(b.e, b.seq, b.n, EARLIER_MS, &l, &b.bad);
	print_latency("tw_set_delay earlier (mails the wheel)", &l, NULL, 0);
	latency_free(&l);
	reference_read(&b, task_bytes);
	sleep_ms(1000); /* let the wheel thread finish re-filing them before we time */

	resets_one_thread(&b);
	resets_two_threads(&b);
	gets(&b);
	pairs(&b);
	if (b.bad)
		table_note("WARNING: %zu operations did not return TW_OK", b.bad);
	engine_end(b.e);
	free(b.ids);
	free(b.seq);
	free(b.order);
}
