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
 *
 * --reset-many: each batch is one tw_set_delay_many call, as a gateway that
 * reads its messages in batches would make it. reset_p50 is then the median
 * over calls of their ns per reset, and reset_call_p50/p99 how long a call
 * took, which is what the last message of a batch waits for its reset.
 */
#include "sessions.h"
#include "measure.h"
#include "suite.h"

#include <stdio.h>
#include <stdlib.h>
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

/* One batch in one call; samples: ns per reset, and the call's ns. */
static void reset_many(struct resetter *w, size_t *pos)
{
	tw_id ids[BATCH];
	int results[BATCH];
	for (unsigned k = 0; k < BATCH; k++) {
		ids[k] = w->seq[*pos];
		*pos = *pos + 1 < w->len ? *pos + 1 : 0;
	}
	uint64_t t0 = monotonic_now_ns();
	int rc = tw_set_delay_many(w->e, ids, BATCH, w->timeout_ms, results);
	uint64_t took = monotonic_now_ns() - t0;
	su_push(&w->batch, (double)took / BATCH);
	su_push(&w->single, (double)took);
	w->done += BATCH;
	for (unsigned k = 0; rc != TW_OK && k < BATCH; k++)
		if (rc == -TW_ESHUTDOWN || rc == -TW_EINVAL || results[k] != TW_OK)
			classify_failure(w, ids[k]); /* the first two: results untouched */
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
		if (w->many) {
			reset_many(w, &pos);
			now = monotonic_now_ns();
			continue;
		}
		tw_id failed[BATCH];
		unsigned nfailed = 0, alone = (unsigned)bench_rng_below(&w->rng, BATCH);
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

static void configure(const struct suite_options *opt, struct setup *c, struct report *r)
{
	c->n = opt->sessions ? opt->sessions : opt->quick ? 100000 : 1000000;
	c->rate = opt->rate > 0 ? opt->rate : opt->quick ? 100000 : 500000;
	double timeout_s = opt->timeout_s > 0 ? opt->timeout_s : opt->quick ? 2 : 5;
	c->timeout_ms = (uint64_t)(timeout_s * 1e3 + 0.5);
	double quiet = opt->quiet > 0 ? opt->quiet : 0.01;
	c->threads = opt->threads ? opt->threads : 1;
	c->many = opt->reset_many;
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
	report_param(r, "reset_many", opt->reset_many);
}

int scenario_sessions(const struct suite_options *opt, struct report *r)
{
	struct setup c;
	configure(opt, &c, r);
	/* tw-perf's options are each in range (main.c): what is left is how they go together */
	if (c.n > UINT32_MAX || c.n_active < c.threads || c.rate <= 0) {
		fprintf(stderr,
			"tw-perf sessions: --threads %u: more than the %zu active sessions "
			"(%zu less %zu quiet)\n",
			c.threads, c.n_active, c.n, c.n_quiet);
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
	uint32_t *order = bench_permutation(c.n, &rng);
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
	uint64_t alloc0 = engine_memory_bytes(e), added0 = monotonic_now_ns();
	for (size_t i = 0; !rc && i < c.n; i++) {
		tw_task_spec spec = { .delay_ms = c.timeout_ms,
				      .callback = expire,
				      .arg = is_quiet[i] ? &quiet : &active };
		rc = tw_add(e, &spec, &ids[i]);
	}
	uint64_t alloc_growth = engine_memory_bytes(e) - alloc0;
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
						  .abandon = &abandon,
						  .many = c.many };
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
			sessions_report(r, &c, w, &quiet, &active, wall_s, cpu_s, alloc_growth);
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
