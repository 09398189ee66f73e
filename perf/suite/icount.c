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
#include "icount.h"
#include "suite.h"
#include "suite_util.h"
#include "wheel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* lo .. hi inclusive. */
static uint32_t uniform(uint64_t *state, uint32_t lo, uint32_t hi)
{
	return lo + bench_rng_below(state, hi - lo + 1);
}

static void icount_workload_free(struct icount_workload *wl)
{
	for (size_t k = 0; k < 3; k++)
		free(wl->order[k]);
	for (size_t k = 0; k < 2; k++)
		free(wl->delay[k]);
	free(wl->later);
	free(wl->earlier);
	free(wl->soon);
}

static bool icount_workload_make(struct icount_workload *wl, size_t n, uint64_t seed)
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

static int wheel_phases(const struct icount_workload *shared)
{
	/* A copy no other function can see, so that the loops keep its arrays in
	 * registers: the gate counts the loops' own instructions too. */
	const struct icount_workload copy = *shared, *wl = &copy;
	size_t n = wl->n;
	struct wheel *w = malloc(sizeof *w);
	struct wheel_entry *entries = malloc(n * sizeof *entries);
	if (!w || !entries) {
		free(w);
		free(entries);
		fprintf(stderr, "tw-perf icount: out of memory\n");
		return 2;
	}
	tw__wheel_init(w, 0);
	for (size_t i = 0; i < n; i++)
		wheel_entry_init(&entries[i]);
	struct phase p;

	phase_begin(&p, "wheel_add", n);
	for (size_t i = 0; i < n; i++)
		tw__wheel_add(w, &entries[wl->order[0][i]], wl->delay[0][i]);
	phase_end(&p);

	phase_begin(&p, "wheel_reschedule", n);
	for (size_t i = 0; i < n; i++)
		tw__wheel_reschedule(w, &entries[wl->order[1][i]], wl->delay[1][i]);
	phase_end(&p);

	phase_begin(&p, "wheel_cancel", n);
	for (size_t i = 0; i < n; i++)
		tw__wheel_remove(w, &entries[wl->order[2][i]]);
	phase_end(&p);

	for (size_t i = 0; i < n; i++)
		tw__wheel_add(w, &entries[wl->order[0][i]], wl->delay[0][i]);
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
		fprintf(stderr, "tw-perf icount: --tasks %zu: needs 2 .. %u\n", n, UINT32_MAX / 2);
		return 2;
	}
	struct icount_workload wl = { 0 };
	tw_id *ids = malloc(n * sizeof *ids);
	if (!ids || !icount_workload_make(&wl, n, opt->seed)) {
		free(ids);
		icount_workload_free(&wl);
		fprintf(stderr, "tw-perf icount: out of memory\n");
		return 2;
	}
	CALLGRIND_START_INSTRUMENTATION;
	int rc = wheel_phases(&wl);
	if (rc == 0)
		rc = icount_engine_phases(&wl, ids);
	if (rc == 0)
		rc = icount_dispatch_phase(&wl, ids);
	if (rc == 0)
		rc = icount_fire_phases(&wl, ids);
	CALLGRIND_STOP_INSTRUMENTATION;
	free(ids);
	icount_workload_free(&wl);
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
	(void)opt, (void)r, (void)icount_workload_make, (void)icount_workload_free;
	fprintf(stderr, "tw-perf icount: built without <valgrind/callgrind.h> (Debian: valgrind); "
			"install it and rebuild\n");
	return 2;
}

#endif
