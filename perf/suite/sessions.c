/*
 * sessions.c - `tw-perf sessions`: the IoT gateway. N sessions, each a
 * one-shot timeout of T; application threads reset the active ones at R
 * resets per second in total (tw_set_delay(T)), while a fraction goes quiet,
 * is never reset and must expire during the run.
 *
 *   defaults: --sessions 1000000 --rate 500000 --timeout 5s --quiet 0.01
 *             --threads 1 --seconds 10 (run at least T + 1 s)
 *   --quick:  --sessions 100000 --rate 100000 --timeout 2s --seconds 3
 *
 * Each thread resets its share of the active sessions in one fixed random
 * order, round after round, so every active session is reset once per round
 * (N active / R seconds): random choice would let some go unreset for longer
 * than T by chance. Sessions are added in memory order and reset in random
 * order, so each reset pays the engine's random access, as in a gateway;
 * the ids are laid out in reset order beforehand, so the thread reads them in
 * sequence and that random access is the engine's only.
 *
 * Reset latency: resets go in batches of 64, paced against the clock (a
 * thread sleeps until its next batch is owed). One reset of each batch, at a
 * random place in it, is timed alone: a clock read each side, so it includes
 * about one clock read (clock_read_ns). The other 63 are timed together.
 * reset_p50 is the median over batches of their mean ns per reset; the tail
 * (reset_p90 .. reset_max) and reset_single_p50 come from the resets timed
 * alone, one in 64. A clock read costs ~25 ns: timing every reset alone
 * would add that to each.
 */
#include "suite.h"
#include "suite_util.h"

#include "alloc.h"
#include "measure.h"
#include "tickwheel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

enum { BATCH = 64 };

struct expiry_sink { /* one for the quiet sessions, one for the active ones */
	_Atomic uint64_t count;
	struct lateness *late;
};

struct resetter {
	tw_engine *e;
	const tw_id *seq; /* this thread's sessions' ids, in reset order */
	size_t len;
	uint64_t timeout_ms, start_ns, end_ns;
	double rate;           /* this thread's share of R */
	_Atomic bool *abandon; /* set when not every thread could be started */
	pthread_t thread;
	struct su_samples batch, single; /* ns per reset */
	uint64_t rng, done, failed, failed_expired, cpu_ns;
};

static int expire(const tw_fire *fire, void *arg)
{
	struct expiry_sink *sink = arg;
	lateness_note(sink->late, monotonic_now_ns(), fire->due_ns);
	atomic_fetch_add_explicit(&sink->count, 1, memory_order_relaxed);
	return 0;
}

/* A reset failed: a session that expired (its one-shot completed, or is
 * already forgotten) is the resetter's lateness, anything else the engine's. */
static void classify_failure(struct resetter *w, tw_id id)
{
	tw_task_info info;
	int rc = tw_get(w->e, id, &info);
	if (rc == -TW_ENOTFOUND || (rc == TW_OK && info.state == TW_COMPLETED))
		w->failed_expired++;
	else
		w->failed++;
}

static void *resetter_main(void *arg)
{
	struct resetter *w = arg;
	monotonic_sleep_until(w->start_ns);
	if (atomic_load(w->abandon))
		return NULL;
	uint64_t cpu0 = su_self_cpu_ns(), now = monotonic_now_ns();
	size_t pos = 0;
	while (now < w->end_ns) {
		double owed = (double)(now - w->start_ns) * w->rate / 1e9;
		if ((double)(w->done + BATCH) > owed) {
			uint64_t at =
				w->start_ns + (uint64_t)((double)(w->done + BATCH) * 1e9 / w->rate);
			monotonic_sleep_until(at < w->end_ns ? at : w->end_ns);
			now = monotonic_now_ns();
			continue;
		}
		tw_id failed[BATCH];
		unsigned nfailed = 0, alone = (unsigned)su_below(&w->rng, BATCH);
		uint64_t t0 = monotonic_now_ns(), ta = 0, tb = 0;
		for (unsigned k = 0; k < BATCH; k++) {
			tw_id id = w->seq[pos];
			pos = pos + 1 < w->len ? pos + 1 : 0;
			if (k == alone)
				ta = monotonic_now_ns();
			if (tw_set_delay(w->e, id, w->timeout_ms) != TW_OK)
				failed[nfailed++] = id;
			if (k == alone)
				tb = monotonic_now_ns();
		}
		now = monotonic_now_ns();
		su_push(&w->single, (double)(tb - ta));
		su_push(&w->batch, (double)(now - t0 - (tb - ta)) / (BATCH - 1));
		w->done += BATCH;
		for (unsigned k = 0; k < nfailed; k++)
			classify_failure(w, failed[k]);
	}
	w->cpu_ns = su_self_cpu_ns() - cpu0;
	return NULL;
}

struct setup {
	size_t n, n_quiet, n_active;
	uint64_t timeout_ms;
	double rate, seconds, run_s;
	unsigned threads;
};

static void report_figures(struct report *r, const struct setup *c, struct resetter *w,
			   struct expiry_sink *quiet, struct expiry_sink *active, double wall_s,
			   double cpu_s, uint64_t alloc_growth)
{
	struct su_samples batch = { 0 }, single = { 0 };
	uint64_t done = 0, failed = 0, failed_expired = 0, reset_cpu = 0;
	for (unsigned t = 0; t < c->threads; t++) {
		for (size_t i = 0; i < w[t].batch.n; i++)
			su_push(&batch, w[t].batch.v[i]);
		for (size_t i = 0; i < w[t].single.n; i++)
			su_push(&single, w[t].single.v[i]);
		done += w[t].done;
		failed += w[t].failed;
		failed_expired += w[t].failed_expired;
		reset_cpu += w[t].cpu_ns;
	}
	const char *tw = "tickwheel";
	report_add(r, tw, "reset_p50", su_quantile(&batch, 0.5), "ns", BETTER_LOWER);
	report_add(r, tw, "reset_batch_p99", su_quantile(&batch, 0.99), "ns", BETTER_LOWER);
	report_add(r, tw, "reset_single_p50", su_quantile(&single, 0.5), "ns", BETTER_LOWER);
	report_add(r, tw, "reset_p90", su_quantile(&single, 0.9), "ns", BETTER_LOWER);
	report_add(r, tw, "reset_p99", su_quantile(&single, 0.99), "ns", BETTER_LOWER);
	report_add(r, tw, "reset_p999", su_quantile(&single, 0.999), "ns", BETTER_LOWER);
	report_add(r, tw, "reset_max", su_quantile(&single, 1), "ns", BETTER_LOWER);
	report_add(r, tw, "clock_read_ns", su_clock_read_ns(), "ns", BETTER_NEITHER);
	report_add(r, tw, "resets_done", (double)done, "resets", BETTER_NEITHER);
	report_add(r, tw, "reset_rate", (double)done / wall_s, "resets/s", BETTER_HIGHER);
	report_add(r, tw, "resets_failed", (double)failed, "resets", BETTER_LOWER);
	report_add(r, tw, "resets_failed_expired", (double)failed_expired, "resets", BETTER_LOWER);
	uint64_t q = atomic_load(&quiet->count), a = atomic_load(&active->count);
	report_add(r, tw, "expiries", (double)(q + a), "sessions", BETTER_NEITHER);
	report_add(r, tw, "quiet_not_expired", (double)(c->n_quiet - q), "sessions", BETTER_LOWER);
	report_add(r, tw, "expired_while_active", (double)a, "sessions", BETTER_LOWER);
	struct lateness *late = quiet->late;
	report_add(r, tw, "expiry_late_p50", (double)lateness_percentile_us(late, 0.5), "us",
		   BETTER_LOWER);
	report_add(r, tw, "expiry_late_p99", (double)lateness_percentile_us(late, 0.99), "us",
		   BETTER_LOWER);
	report_add(r, tw, "expiry_late_max", (double)atomic_load(&late->max_ns) / 1e3, "us",
		   BETTER_LOWER);
	report_add(r, tw, "expiries_early", (double)atomic_load(&late->early), "runs",
		   BETTER_LOWER);
	report_add(r, tw, "cpu_per_second", cpu_s * 1e3 / wall_s, "ms/s", BETTER_LOWER);
	report_add(r, tw, "engine_cpu_per_second", (cpu_s - (double)reset_cpu / 1e9) * 1e3 / wall_s,
		   "ms/s", BETTER_LOWER);
	report_add(r, tw, "memory_per_session", (double)alloc_growth / (double)c->n, "B",
		   BETTER_LOWER);
	report_target(r, "reset_p50", "<=", 100);
	report_target(r, "reset_p99", "<=", 2000);
	report_target(r, "resets_failed", "<=", 0);
	report_target(r, "quiet_not_expired", "<=", 0);
	report_note(r, "reset_p50: median over batches of 63 resets timed together (ns per reset); "
		       "reset_p90..max and reset_single_p50: one reset in 64 timed alone, which "
		       "includes about one clock read (clock_read_ns)");
	report_note(r, "resets_failed_expired: resets of active sessions that had already "
		       "expired (expired_while_active: the resetting threads fell behind)");
	report_note(r, "cpu_per_second: the process (getrusage); engine_cpu_per_second: minus "
		       "the resetting threads' own CPU; memory_per_session: growth of "
		       "tw_alloc_bytes() over the adds / sessions");
	if (batch.oom || single.oom)
		report_note(r, "out of memory for some latency samples: they were dropped");
	su_samples_free(&batch);
	su_samples_free(&single);
}

static void configure(const struct suite_options *opt, struct setup *c, struct report *r)
{
	c->n = opt->sessions ? opt->sessions : opt->quick ? 100000 : 1000000;
	c->rate = opt->rate > 0 ? opt->rate : opt->quick ? 100000 : 500000;
	double timeout_s = opt->timeout_s > 0 ? opt->timeout_s : opt->quick ? 2 : 5;
	c->timeout_ms = (uint64_t)(timeout_s * 1e3 + 0.5);
	double quiet = opt->quiet > 0 ? opt->quiet : 0.01;
	c->threads = opt->threads ? opt->threads : 1;
	c->seconds = opt->seconds > 0 ? opt->seconds : opt->quick ? 3 : 10;
	/* The quiet sessions are due T after they were added: the run must see them expire. */
	c->run_s = c->seconds > timeout_s + 1 ? c->seconds : timeout_s + 1;
	c->n_quiet = (size_t)((double)c->n * quiet + 0.5);
	c->n_active = c->n - c->n_quiet;
	report_param(r, "sessions", (double)c->n);
	report_param(r, "rate", c->rate);
	report_param(r, "timeout_s", timeout_s);
	report_param(r, "quiet", quiet);
	report_param(r, "threads", c->threads);
	report_param(r, "seconds", c->run_s);
	report_param(r, "executors", opt->executors);
	report_param(r, "batch", BATCH);
	report_param(r, "coarse_clock", opt->coarse_clock);
}

int scenario_sessions(const struct suite_options *opt, struct report *r)
{
	struct setup c;
	configure(opt, &c, r);
	if (c.n > UINT32_MAX || c.n_active < c.threads || c.rate <= 0) {
		fprintf(stderr, "tw-perf sessions: need 1 .. 2^32 sessions, at least one active "
				"session per thread and a rate above 0\n");
		return 2;
	}
	double round_s = (double)c.n_active / c.rate;
	if (round_s >= (double)c.timeout_ms / 1e3)
		report_note(r,
			    "a round of resets takes %.2f s, not shorter than the timeout: "
			    "active sessions expire by design",
			    round_s);
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = opt->executors;
	cfg.coarse_clock = opt->coarse_clock;
	if (opt->coarse_clock)
		report_note(r,
			    "coarse_clock: resets count their timeout from CLOCK_MONOTONIC_COARSE "
			    "+ 2 of its ticks (see tickwheel.h): up to 3 ticks longer, and "
			    "resets overlap their cache misses");
	tw_engine *e = NULL;
	uint64_t rng = opt->seed;
	tw_id *ids = malloc(c.n * sizeof *ids);
	uint32_t *order = su_permutation(c.n, &rng);
	struct lateness *late = calloc(1, sizeof *late);
	struct resetter *w = calloc(c.threads, sizeof *w);
	int rc = !ids || !order || !late || !w ? -TW_ENOMEM : tw_engine_create(&cfg, &e);
	struct expiry_sink quiet = { .late = late }, active = { .late = late };
	/* The first n_quiet of the random order go quiet; the rest are reset in that order. */
	uint8_t *is_quiet = rc ? NULL : calloc(c.n, 1);
	if (!rc && !is_quiet)
		rc = -TW_ENOMEM;
	for (size_t i = 0; !rc && i < c.n_quiet; i++)
		is_quiet[order[i]] = 1;
	uint64_t alloc0 = tw_alloc_bytes(), added0 = monotonic_now_ns();
	for (size_t i = 0; !rc && i < c.n; i++) {
		tw_task_spec spec = { .delay_ms = c.timeout_ms,
				      .callback = expire,
				      .arg = is_quiet[i] ? &quiet : &active };
		rc = tw_add(e, &spec, &ids[i]);
	}
	uint64_t alloc_growth = tw_alloc_bytes() - alloc0;
	/* Laid out in reset order, the ids are read in sequence: the one random
	 * access of a reset is the engine's own. */
	tw_id *seq = rc ? NULL : malloc((c.n_active ? c.n_active : 1) * sizeof *seq);
	if (!rc && !seq)
		rc = -TW_ENOMEM;
	for (size_t i = 0; !rc && i < c.n_active; i++)
		seq[i] = ids[order[c.n_quiet + i]];
	free(is_quiet);
	_Atomic bool abandon = false;
	unsigned started = 0;
	if (!rc) {
		double add_s = (double)(monotonic_now_ns() - added0) / 1e9;
		if (add_s + round_s >= (double)c.timeout_ms / 1e3)
			report_note(r,
				    "adding took %.2f s: the first round of resets ends after the "
				    "first sessions added were due",
				    add_s);
		/* The threads start together on the clock, well after they are created. */
		uint64_t start = monotonic_now_ns() + 50000000u;
		double cpu0 = process_cpu_seconds();
		for (unsigned t = 0; t < c.threads; t++) {
			size_t lo = c.n_active * t / c.threads,
			       hi = c.n_active * (t + 1) / c.threads;
			w[t] = (struct resetter){ .e = e,
						  .seq = seq + lo,
						  .len = hi - lo,
						  .timeout_ms = c.timeout_ms,
						  .start_ns = start,
						  .end_ns = start + (uint64_t)(c.run_s * 1e9),
						  .rate = c.rate / c.threads,
						  .rng = opt->seed + t,
						  .abandon = &abandon };
			if (pthread_create(&w[t].thread, NULL, resetter_main, &w[t]))
				break;
			started++;
		}
		if (started < c.threads) {
			fprintf(stderr, "tw-perf sessions: cannot start resetting threads\n");
			atomic_store(&abandon, true);
		}
		for (unsigned t = 0; t < started; t++)
			pthread_join(w[t].thread, NULL);
		if (started == c.threads) {
			double wall_s = (double)(monotonic_now_ns() - start) / 1e9;
			double cpu_s = process_cpu_seconds() - cpu0;
			tw_engine_stop(e, 1000);
			report_figures(r, &c, w, &quiet, &active, wall_s, cpu_s, alloc_growth);
		}
	} else {
		fprintf(stderr, "tw-perf sessions: set-up: %s\n", tw_strerror(rc));
	}
	if (e)
		tw_engine_destroy(e);
	for (unsigned t = 0; t < c.threads && w; t++) {
		su_samples_free(&w[t].batch);
		su_samples_free(&w[t].single);
	}
	free(w);
	free(late);
	free(order);
	free(ids);
	free(seq);
	return !rc && started == c.threads ? 0 : 2;
}
