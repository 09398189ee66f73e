/*
 * ops_engine.c - the engine API's cost per operation at N live tasks, for
 * `tw-perf ops`: tw_add, tw_cancel, tw_set_delay later (postpone) and earlier,
 * tw_set_delay_many later (64 ids a call), tw_get on random and on hot tasks,
 * bytes per live task, and the cost of one cache miss over as much memory.
 *
 * The engine runs on a manual clock: time stands still while we measure, so
 * every tw_set_delay is exactly the kind being timed (later than the task's
 * due: no mail; earlier than where the wheel filed it: mailed), nothing
 * fires, and the wheel thread only files what the mail brings. A real-clock
 * engine also reads CLOCK_MONOTONIC once per tw_add and tw_set_delay, which
 * ops_clock_read_ns() measures on its own.
 *
 * Each timed loop reads ids laid out beforehand in its own random order, so
 * the one random memory access per operation is the engine's. Figures are
 * whole loops over N divided by N, median over the repetitions, like the
 * wheel's (bench_measure.c).
 */
#include "bench.h"
#include "measure.h"
#include "ops.h"
#include "tickwheel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu/urcu-memb.h>

enum {
	POP_MIN_MS = 60 * 1000, /* population dues 1 .. 10 min */
	POP_SPAN_MS = 9 * 60 * 1000,
	POSTPONE_MS = 11 * 60 * 1000, /* later than every due */
	EARLIER_SPAN_MS = 59 * 1000,  /* 1 ms .. 59 s: earlier than every due */
	HOT = 1000,
	HOT_ORDERS = 16,
	HOT_PASSES = 16,
	BYTES_PER_TASK_GUESS = 256, /* the task, its ids here, some slack */
	RESETS_PER_CALL = 64,       /* a gateway's batch of messages */
	MISS_READS = 1000000,       /* at least this many dependent reads timed */
	REQUEST_MS = 30 * 1000,     /* a request's timeout, cancelled before it comes */
};

const char *const engine_op_names[ENG_OPS] = {
	[ENG_ADD] = "add",
	[ENG_ADD_FRESH] = "add_fresh",
	[ENG_CANCEL] = "cancel",
	[ENG_POSTPONE] = "postpone",
	[ENG_POSTPONE_MANY] = "postpone_many",
	[ENG_EARLIER] = "earlier",
	[ENG_GET] = "get",
	[ENG_GET_HOT] = "get_hot",
	[ENG_ADD_CANCEL] = "add_cancel",
};

struct engine_run {
	tw_engine *e;
	size_t n;
	tw_id *ids;         /* ids[i]: the i-th task added */
	tw_id *seq;         /* ids in the order of the loop about to run */
	tw_id *hot;         /* HOT tasks, in HOT_ORDERS random orders */
	uint32_t *perm[3];  /* the orders of the timed loops */
	uint32_t *pop_ms;   /* delay of the i-th task added */
	uint32_t *early_ms; /* delay of the i-th tw_set_delay earlier */
	uint64_t retain_ms; /* how long cancelled tasks keep their slots */
	size_t failed;
};

static int empty_callback(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 0;
}

bool ops_engine_fits(size_t n, char *why, size_t len)
{
	FILE *f = fopen("/proc/meminfo", "r");
	unsigned long long kib = 0;
	char line[256];
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	double need = (double)n * BYTES_PER_TASK_GUESS, have = (double)kib * 1024.0;
	if (kib == 0 || need <= 0.7 * have)
		return true;
	snprintf(why, len, "%zu tasks need about %.1f GiB; %.1f GiB available", n,
		 need / 1073741824.0, have / 1073741824.0);
	return false;
}

double ops_clock_read_ns(void)
{
	enum { READS = 1000000 };
	uint64_t sum = 0, t0 = monotonic_now_ns();
	for (int i = 0; i < READS; i++)
		sum += monotonic_now_ns();
	uint64_t t1 = monotonic_now_ns();
	return sum ? (double)(t1 - t0) / READS : 0;
}

static double per_op(uint64_t start, size_t n)
{
	return (double)(monotonic_now_ns() - start) / (double)n;
}

static void lay_out(struct engine_run *x, const uint32_t *perm)
{
	for (size_t i = 0; i < x->n; i++)
		x->seq[i] = x->ids[perm[i]];
}

static double add_all(struct engine_run *x)
{
	tw_task_spec spec = { .callback = empty_callback };
	uint64_t t0 = monotonic_now_ns();
	for (size_t i = 0; i < x->n; i++) {
		spec.delay_ms = x->pop_ms[i];
		if (tw_add(x->e, &spec, &x->ids[i]) != TW_OK) {
			x->ids[i] = 0;
			x->failed++;
		}
	}
	return per_op(t0, x->n);
}

static double cancel_all(struct engine_run *x)
{
	size_t failed = 0;
	uint64_t t0 = monotonic_now_ns();
	for (size_t i = 0; i < x->n; i++)
		failed += tw_cancel(x->e, x->seq[i]) != TW_OK;
	double ns = per_op(t0, x->n);
	x->failed += failed;
	return ns;
}

static double set_delays(struct engine_run *x, const uint32_t *delay_ms, uint32_t same_ms)
{
	size_t failed = 0;
	uint64_t t0 = monotonic_now_ns();
	for (size_t i = 0; i < x->n; i++)
		failed += tw_set_delay(x->e, x->seq[i], delay_ms ? delay_ms[i] : same_ms) != TW_OK;
	double ns = per_op(t0, x->n);
	x->failed += failed;
	return ns;
}

static double set_delays_many(struct engine_run *x, uint32_t same_ms)
{
	size_t failed = 0;
	uint64_t t0 = monotonic_now_ns();
	for (size_t i = 0; i < x->n; i += RESETS_PER_CALL) {
		size_t k = x->n - i < RESETS_PER_CALL ? x->n - i : RESETS_PER_CALL;
		failed += tw_set_delay_many(x->e, x->seq + i, k, same_ms, NULL) != TW_OK;
	}
	double ns = per_op(t0, x->n);
	x->failed += failed;
	return ns;
}

static double get_all(struct engine_run *x, const tw_id *ids, size_t n, unsigned passes)
{
	size_t failed = 0;
	tw_task_info info;
	uint64_t t0 = monotonic_now_ns();
	for (unsigned p = 0; p < passes; p++)
		for (size_t i = 0; i < n; i++)
			failed += tw_get(x->e, ids[i], &info) != TW_OK;
	double ns = per_op(t0, n * passes);
	x->failed += failed;
	return ns;
}

/* Request timeouts: each added and cancelled at once, into the slots the last reap freed, as
 * a server arms one per request and cancels it when the answer comes. Per pair. */
static double add_cancel_all(struct engine_run *x)
{
	tw_task_spec spec = { .delay_ms = REQUEST_MS, .callback = empty_callback };
	size_t failed = 0;
	uint64_t t0 = monotonic_now_ns();
	for (size_t i = 0; i < x->n; i++) {
		tw_id id;
		failed += tw_add(x->e, &spec, &id) != TW_OK || tw_cancel(x->e, id) != TW_OK;
	}
	double ns = per_op(t0, x->n);
	x->failed += failed;
	return ns;
}

/* The wheel thread has read every mail sent so far once this returns. */
static void wheel_caught_up(struct engine_run *x)
{
	x->failed += tw_advance(x->e, 0) != TW_OK;
}

/* Ends the retention of the cancelled tasks and waits until their slots are
 * back in the table (call_rcu callbacks), so the next adds reuse them. */
static void reap(struct engine_run *x)
{
	x->failed += tw_advance(x->e, x->retain_ms + 1) != TW_OK;
	urcu_memb_barrier();
}

static void pick_hot(struct engine_run *x, uint64_t *rng)
{
	size_t hot = x->n < HOT ? x->n : HOT;
	uint32_t perm[HOT];
	for (size_t k = 0; k < HOT_ORDERS; k++) {
		for (size_t i = 0; i < hot; i++)
			perm[i] = (uint32_t)i;
		bench_shuffle_u32(perm, hot, rng);
		for (size_t i = 0; i < hot; i++)
			x->hot[k * hot + i] = x->seq[perm[i]];
	}
}

/* One repetition; the table holds no live task before and after. */
static void repetition(struct engine_run *x, uint64_t *rng, double out[ENG_OPS])
{
	out[ENG_ADD] = add_all(x);
	wheel_caught_up(x);
	lay_out(x, x->perm[1]);
	out[ENG_POSTPONE] = set_delays(x, NULL, POSTPONE_MS);
	lay_out(x, x->perm[0]);
	out[ENG_POSTPONE_MANY] = set_delays_many(x, POSTPONE_MS + 1000);
	lay_out(x, x->perm[2]);
	out[ENG_EARLIER] = set_delays(x, x->early_ms, 0);
	wheel_caught_up(x);
	lay_out(x, x->perm[0]);
	out[ENG_GET] = get_all(x, x->seq, x->n, 1);
	pick_hot(x, rng);
	size_t hot = x->n < HOT ? x->n : HOT;
	out[ENG_GET_HOT] = get_all(x, x->hot, hot * HOT_ORDERS, HOT_PASSES);
	lay_out(x, x->perm[1]);
	out[ENG_CANCEL] = cancel_all(x);
	reap(x);
	out[ENG_ADD_CANCEL] = add_cancel_all(x);
	reap(x);
}

static unsigned engine_reps(size_t n)
{
	if (n <= 1000)
		return 31;
	if (n <= 100000)
		return 9;
	if (n <= 1000000)
		return 5;
	return 1;
}

static bool run_alloc(struct engine_run *x, size_t n, uint64_t *rng)
{
	memset(x, 0, sizeof *x);
	x->n = n;
	x->ids = malloc(n * sizeof *x->ids);
	x->seq = malloc(n * sizeof *x->seq);
	x->hot = malloc(HOT * HOT_ORDERS * sizeof *x->hot);
	x->pop_ms = malloc(n * sizeof *x->pop_ms);
	x->early_ms = malloc(n * sizeof *x->early_ms);
	bool ok = x->ids && x->seq && x->hot && x->pop_ms && x->early_ms;
	for (size_t k = 0; k < 3; k++)
		ok = ok && (x->perm[k] = malloc(n * sizeof *x->perm[k])) != NULL;
	if (!ok)
		return false;
	/* Written by the first pass of adds, which would otherwise count its page faults. */
	memset(x->ids, 0, n * sizeof *x->ids);
	for (size_t k = 0; k < 3; k++) {
		for (size_t i = 0; i < n; i++)
			x->perm[k][i] = (uint32_t)i;
		bench_shuffle_u32(x->perm[k], n, rng);
	}
	for (size_t i = 0; i < n; i++) {
		x->pop_ms[i] = POP_MIN_MS + bench_rng_below(rng, POP_SPAN_MS + 1);
		x->early_ms[i] = 1 + bench_rng_below(rng, EARLIER_SPAN_MS);
	}
	return true;
}

static void run_free(struct engine_run *x)
{
	if (x->e)
		tw_engine_destroy(x->e);
	free(x->ids);
	free(x->seq);
	free(x->hot);
	free(x->pop_ms);
	free(x->early_ms);
	for (size_t k = 0; k < 3; k++)
		free(x->perm[k]);
}

/*
 * What one random memory access costs here: a chain of dependent reads over
 * n records of the task's size (as much memory as the tasks took), so each
 * read waits for the previous one; ns per read, 0 if out of memory.
 */
static double miss_ns(size_t n, double bytes_per_task, uint64_t *rng)
{
	size_t stride = bytes_per_task < 64 ? 64 : ((size_t)bytes_per_task + 7) / 8 * 8;
	char *mem = malloc(n * stride);
	uint32_t *perm = malloc(n * sizeof *perm);
	double ns = 0;
	if (mem && perm) {
		for (size_t i = 0; i < n; i++)
			perm[i] = (uint32_t)i;
		bench_shuffle_u32(perm, n, rng);
		for (size_t i = 0; i < n; i++)
			*(uint32_t *)(mem + (size_t)perm[i] * stride) = perm[(i + 1) % n];
		size_t reads = n < MISS_READS ? (MISS_READS / n) * n : n;
		uint32_t at = perm[0];
		uint64_t t0 = monotonic_now_ns();
		for (size_t i = 0; i < reads; i++)
			at = *(volatile uint32_t *)(mem + (size_t)at * stride);
		ns = per_op(t0, reads);
	}
	free(mem);
	free(perm);
	return ns;
}

/* memory_bytes of an engine of cfg with no task: what the figures of memory leave out. */
static uint64_t empty_engine_bytes(const tw_config *cfg)
{
	tw_engine *e;
	if (tw_engine_create(cfg, &e) != TW_OK)
		return 0;
	uint64_t bytes = engine_memory_bytes(e);
	tw_engine_destroy(e);
	return bytes;
}

int ops_engine_measure(size_t n, uint64_t seed, bool reserve, struct engine_figures *out)
{
	struct engine_run x;
	uint64_t rng = seed ^ n;
	memset(out, 0, sizeof *out);
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.manual_clock = true;
	cfg.executors = 1; /* nothing runs: one idle executor is enough */
	int rc = -TW_ENOMEM;
	uint64_t empty = empty_engine_bytes(&cfg);
	cfg.reserve_tasks = reserve ? n : 0;
	bool ok = run_alloc(&x, n, &rng);
	if (ok) {
		uint64_t t0 = monotonic_now_ns();
		rc = tw_engine_create(&cfg, &x.e);
		out->create_ms = (double)(monotonic_now_ns() - t0) / 1e6;
	}
	if (!ok || rc != TW_OK) {
		fprintf(stderr, "tw-perf ops: engine at N = %zu: %s\n", n, tw_strerror(rc));
		run_free(&x);
		return -1;
	}
	x.retain_ms = cfg.retain_ms;
	/* The first pass grows the table (or fills the reserved one): its adds and its bytes. */
	out->ns[ENG_ADD_FRESH] = add_all(&x);
	wheel_caught_up(&x);
	out->bytes_per_task = (double)(engine_memory_bytes(x.e) - empty) / (double)n;
	lay_out(&x, x.perm[2]);
	cancel_all(&x);
	wheel_caught_up(&x);
	out->kept_ended_bytes = (double)(engine_memory_bytes(x.e) - empty);
	reap(&x);

	out->reps = engine_reps(n);
	double *samples = malloc((size_t)ENG_OPS * out->reps * sizeof *samples);
	if (!samples) {
		fprintf(stderr, "tw-perf ops: out of memory\n");
		run_free(&x);
		return -1;
	}
	for (unsigned r = 0; r < out->reps; r++) {
		double one[ENG_OPS] = { 0 };
		repetition(&x, &rng, one);
		for (int op = 0; op < ENG_OPS; op++)
			samples[(size_t)op * out->reps + r] = one[op];
	}
	for (int op = 0; op < ENG_OPS; op++)
		if (op != ENG_ADD_FRESH)
			out->ns[op] = bench_median(&samples[(size_t)op * out->reps], out->reps);
	out->failed = x.failed;
	free(samples);
	run_free(&x);
	out->miss_ns = miss_ns(n, out->bytes_per_task, &rng);
	return 0;
}
