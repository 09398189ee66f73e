/*
 * icount.c - `tw-perf icount`: the phases whose instructions perf/gate.py
 * counts with callgrind. The program cannot read callgrind's counters, so it
 * reports no figures itself: each phase is bracketed by CALLGRIND_ZERO_STATS
 * and CALLGRIND_DUMP_STATS_AT("NAME K"), and the gate divides each dump's
 * `totals:` by K. Run it as
 *   valgrind --tool=callgrind --instr-atstart=no ./tw-perf icount
 * with --collect-atstart left at yes: collection is a per-thread state in
 * callgrind, so toggling it here would leave out the engine's wheel thread and
 * executors, whose work is part of each engine operation. Zeroing and dumping
 * then cover every thread, summed into one dump, as long as
 * --separate-threads stays no: with yes, a client request dumps the calling
 * thread alone.
 *
 * Every workload is drawn from --seed, so that two runs of one build execute
 * the same instructions; the engine's phases end once its threads have applied
 * the operation (tw_advance(e, 0) returns after a wheel round that began after
 * the call), so that a phase holds the whole cost of its operations.
 */
#include "suite.h"
#include "suite_util.h"
#include "tickwheel.h"
#include "wheel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CALLGRIND_H
#include <urcu/urcu-memb.h>
#include <valgrind/callgrind.h>
#endif

enum {
	MAX_DELAY_MS = 10 * 60 * 1000, /* dues 1 ms .. 10 min away, as in bench-wheel */
	DISPATCH_WINDOW_MS = 1000,     /* dispatched one-shots are due within 1 s */
	EXECUTORS = 2,                 /* fixed: counts must not depend on the CPU count */
	DEFAULT_N = 100000,
	QUICK_N = 10000,
};

/* lo .. hi inclusive. */
static uint32_t uniform(uint64_t *state, uint32_t lo, uint32_t hi)
{
	return lo + (uint32_t)su_below(state, (uint64_t)hi - lo + 1);
}

/* Each loop visits the entries in its own permutation, so that no operation
 * finds its neighbours hot from the one before (as in bench-wheel). */
struct workload {
	size_t n;
	uint32_t *order[3];
	uint32_t *delay[2]; /* 2 .. MAX_DELAY_MS: room for an earlier due */
	uint32_t *later;    /* 1 .. MAX_DELAY_MS added for a postpone */
	uint32_t *earlier;  /* below delay[0] (both indexed by task) */
	uint32_t *soon;     /* 1 .. DISPATCH_WINDOW_MS */
};

static void workload_free(struct workload *wl)
{
	for (size_t k = 0; k < 3; k++)
		free(wl->order[k]);
	for (size_t k = 0; k < 2; k++)
		free(wl->delay[k]);
	free(wl->later);
	free(wl->earlier);
	free(wl->soon);
}

static bool workload_make(struct workload *wl, size_t n, uint64_t seed)
{
	uint64_t state = seed;
	memset(wl, 0, sizeof *wl);
	wl->n = n;
	uint32_t **arrays[] = { &wl->order[0], &wl->order[1], &wl->order[2], &wl->delay[0],
				&wl->delay[1], &wl->later,    &wl->earlier,  &wl->soon };
	for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++)
		if ((*arrays[k] = malloc(n * sizeof(uint32_t))) == NULL)
			return false;
	for (size_t k = 0; k < 3; k++) {
		uint32_t *p = wl->order[k];
		for (size_t i = 0; i < n; i++)
			p[i] = (uint32_t)i;
		for (size_t i = n - 1; i > 0; i--) {
			uint32_t j = uniform(&state, 0, (uint32_t)i), t = p[i];
			p[i] = p[j];
			p[j] = t;
		}
	}
	for (size_t i = 0; i < n; i++) {
		wl->delay[0][i] = uniform(&state, 2, MAX_DELAY_MS);
		wl->delay[1][i] = uniform(&state, 2, MAX_DELAY_MS);
		wl->later[i] = uniform(&state, 1, MAX_DELAY_MS);
		wl->soon[i] = uniform(&state, 1, DISPATCH_WINDOW_MS);
	}
	for (size_t i = 0; i < n; i++)
		wl->earlier[i] = uniform(&state, 1, wl->delay[0][i] - 1);
	return true;
}

#ifdef HAVE_CALLGRIND_H

/* The dump's name, "NAME K", is what the gate parses; it is formatted before
 * the zeroing so that the phase holds nothing but its operations. */
struct phase {
	char desc[96];
};

static void phase_begin(struct phase *p, const char *name, size_t k)
{
	snprintf(p->desc, sizeof p->desc, "%s %zu", name, k);
	CALLGRIND_ZERO_STATS;
}

static void phase_end(struct phase *p)
{
	CALLGRIND_DUMP_STATS_AT(p->desc);
	printf("icount: dumped %s\n", p->desc);
}

static int wheel_phases(const struct workload *wl)
{
	size_t n = wl->n;
	struct wheel *w = malloc(sizeof *w);
	struct wheel_entry *entries = malloc(n * sizeof *entries);
	if (!w || !entries) {
		free(w);
		free(entries);
		fprintf(stderr, "tw-perf icount: out of memory\n");
		return 2;
	}
	wheel_init(w, 0);
	for (size_t i = 0; i < n; i++)
		wheel_entry_init(&entries[i]);
	struct phase p;

	phase_begin(&p, "wheel_add", n);
	for (size_t i = 0; i < n; i++)
		wheel_add(w, &entries[wl->order[0][i]], wl->delay[0][i]);
	phase_end(&p);

	phase_begin(&p, "wheel_reschedule", n);
	for (size_t i = 0; i < n; i++)
		wheel_reschedule(w, &entries[wl->order[1][i]], wl->delay[1][i]);
	phase_end(&p);

	phase_begin(&p, "wheel_cancel", n);
	for (size_t i = 0; i < n; i++)
		wheel_remove(w, &entries[wl->order[2][i]]);
	phase_end(&p);

	for (size_t i = 0; i < n; i++)
		wheel_add(w, &entries[wl->order[0][i]], wl->delay[0][i]);
	size_t fired = 0;
	phase_begin(&p, "wheel_expiry", n);
	while (wheel_expire(w, MAX_DELAY_MS))
		fired++;
	phase_end(&p);

	free(entries);
	free(w);
	if (fired != n) {
		fprintf(stderr, "tw-perf icount: the wheel fired %zu of %zu entries\n", fired, n);
		return 2;
	}
	return 0;
}

static int nothing(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 0;
}

static bool ok(int rc, const char *what)
{
	if (rc != TW_OK)
		fprintf(stderr, "tw-perf icount: %s: %s\n", what, tw_strerror(rc));
	return rc == TW_OK;
}

static tw_engine *manual_engine(size_t n)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.manual_clock = true;
	cfg.executors = EXECUTORS;
	/* Every dispatched firing fits in the rings: a firing skipped for
	 * overload would depend on how the threads were scheduled. */
	cfg.queue_capacity = (unsigned)n;
	tw_engine *e = NULL;
	return ok(tw_engine_create(&cfg, &e), "tw_engine_create") ? e : NULL;
}

/*
 * Untimed: fills the task table and empties it again, so that the adds
 * measured take free slots, as they do in an engine that has been running.
 * A table that grows clears each new chunk with memset, which glibc does
 * with `rep stosb` on CPUs that have ERMS and callgrind counts per byte: the
 * figure would then depend on the CPU more than on the engine's code.
 */
static bool recycle_slots(tw_engine *e, const struct workload *wl, tw_id *ids)
{
	bool fine = true;
	for (size_t i = 0; i < wl->n; i++) {
		tw_task_spec spec = { .delay_ms = wl->delay[0][i], .callback = nothing };
		fine &= tw_add(e, &spec, &ids[i]) == TW_OK;
	}
	for (size_t i = 0; i < wl->n; i++)
		fine &= tw_cancel(e, ids[i]) == TW_OK;
	tw_config defaults;
	tw_config_init(&defaults);
	/* past the retention: the wheel thread reaps every slot through call_rcu */
	fine &= tw_advance(e, defaults.retain_ms + 1) == TW_OK;
	urcu_memb_barrier(); /* every reaped slot is back on the free list */
	return fine;
}

/* add, postpone, reschedule earlier, cancel: each ends with the wheel thread
 * having applied what the operations mailed it. */
static int engine_phases(const struct workload *wl, tw_id *ids)
{
	size_t n = wl->n;
	tw_engine *e = manual_engine(n);
	if (!e)
		return 2;
	bool fine = recycle_slots(e, wl, ids);
	struct phase p;

	phase_begin(&p, "engine_add", n);
	for (size_t i = 0; i < n; i++) {
		tw_task_spec spec = { .delay_ms = wl->delay[0][i], .callback = nothing };
		fine &= tw_add(e, &spec, &ids[i]) == TW_OK;
	}
	fine &= tw_advance(e, 0) == TW_OK;
	phase_end(&p);

	/* A later due is only recorded: the wheel re-files the entry when its old
	 * tick comes round, which is outside this phase (as in real use, where a
	 * session reset many times is re-filed once). */
	phase_begin(&p, "engine_postpone", n);
	for (size_t i = 0; i < n; i++) {
		uint32_t t = wl->order[1][i];
		fine &= tw_set_delay(e, ids[t], (uint64_t)wl->delay[0][t] + wl->later[i]) == TW_OK;
	}
	fine &= tw_advance(e, 0) == TW_OK;
	phase_end(&p);

	phase_begin(&p, "engine_reschedule_earlier", n);
	for (size_t i = 0; i < n; i++) {
		uint32_t t = wl->order[2][i];
		fine &= tw_set_delay(e, ids[t], wl->earlier[t]) == TW_OK;
	}
	fine &= tw_advance(e, 0) == TW_OK;
	phase_end(&p);

	phase_begin(&p, "engine_cancel", n);
	for (size_t i = 0; i < n; i++)
		fine &= tw_cancel(e, ids[wl->order[0][i]]) == TW_OK;
	fine &= tw_advance(e, 0) == TW_OK;
	phase_end(&p);

	tw_engine_destroy(e);
	if (!fine)
		fprintf(stderr, "tw-perf icount: an engine operation failed\n");
	return fine ? 0 : 2;
}

/* K one-shots due within a second, one advance over all of them: the wheel's
 * expiry, the hand-over, the run on an executor and the completion. */
static int dispatch_phase(const struct workload *wl, tw_id *ids)
{
	size_t n = wl->n;
	tw_engine *e = manual_engine(n);
	if (!e)
		return 2;
	bool fine = true;
	for (size_t i = 0; i < n; i++) {
		tw_task_spec spec = { .delay_ms = wl->soon[i], .callback = nothing };
		fine &= tw_add(e, &spec, &ids[i]) == TW_OK;
	}
	fine &= ok(tw_advance(e, 0), "tw_advance");
	struct phase p;
	phase_begin(&p, "engine_dispatch", n);
	fine &= tw_advance(e, DISPATCH_WINDOW_MS) == TW_OK;
	fine &= tw_quiesce(e) == TW_OK;
	/* the completions mailed by the executors */
	fine &= tw_advance(e, 0) == TW_OK;
	phase_end(&p);
	tw_engine_stats st;
	fine &= ok(tw_stats(e, &st), "tw_stats");
	tw_engine_destroy(e);
	if (!fine || st.runs != n || st.tasks_completed != n) {
		fprintf(stderr, "tw-perf icount: %llu runs, %llu completed of %zu one-shots\n",
			(unsigned long long)st.runs, (unsigned long long)st.tasks_completed, n);
		return 2;
	}
	return 0;
}

int scenario_icount(const struct suite_options *opt, struct report *r)
{
	if (!RUNNING_ON_VALGRIND) {
		fprintf(stderr,
			"tw-perf icount: counts nothing by itself; run it under callgrind:\n"
			"  valgrind --tool=callgrind --instr-atstart=no tw-perf icount\n"
			"or let perf/gate.py measure do it and read the dumps\n");
		return 2;
	}
	size_t n = opt->tasks ? opt->tasks : opt->quick ? QUICK_N : DEFAULT_N;
	if (n < 2 || n > UINT32_MAX / 2) {
		fprintf(stderr, "tw-perf icount: --tasks must be 2 .. %u\n", UINT32_MAX / 2);
		return 2;
	}
	struct workload wl = { 0 };
	tw_id *ids = malloc(n * sizeof *ids);
	if (!ids || !workload_make(&wl, n, opt->seed)) {
		free(ids);
		workload_free(&wl);
		fprintf(stderr, "tw-perf icount: out of memory\n");
		return 2;
	}
	CALLGRIND_START_INSTRUMENTATION;
	int rc = wheel_phases(&wl);
	if (rc == 0)
		rc = engine_phases(&wl, ids);
	if (rc == 0)
		rc = dispatch_phase(&wl, ids);
	CALLGRIND_STOP_INSTRUMENTATION;
	free(ids);
	workload_free(&wl);
	if (rc)
		return rc;

	report_param(r, "tasks", (double)n);
	report_param(r, "executors", EXECUTORS);
	report_param(r, "seed", (double)opt->seed);
	report_note(r, "the figures are in callgrind's dumps, one per phase, named \"NAME K\": "
		       "perf/gate.py measure divides each dump's totals by K");
	report_note(r, "every phase holds the instructions of all threads: the caller's, the "
		       "wheel thread's and the executors'");
	return 0;
}

#else /* !HAVE_CALLGRIND_H */

int scenario_icount(const struct suite_options *opt, struct report *r)
{
	(void)opt, (void)r, (void)workload_make, (void)workload_free;
	fprintf(stderr, "tw-perf icount: built without <valgrind/callgrind.h> (Debian: valgrind); "
			"install it and rebuild\n");
	return 2;
}

#endif
