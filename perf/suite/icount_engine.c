/*
 * icount_engine.c - the engine's phases of `tw-perf icount` (icount.h): on the
 * manual clock, each ends once the engine's threads have applied what its
 * operations mailed them.
 */
#include "icount.h"

#include <stdlib.h>

#ifdef HAVE_CALLGRIND_H
#include <urcu/urcu-memb.h>

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
static bool recycle_slots(tw_engine *e, const struct icount_workload *wl, tw_id *ids)
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
int icount_engine_phases(const struct icount_workload *shared, tw_id *ids)
{
	/* A copy no other function can see, so that the loops keep its arrays in
	 * registers: the gate counts the loops' own instructions too. */
	const struct icount_workload copy = *shared, *wl = &copy;
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
	tw_id *many = malloc(n * sizeof *many); /* the ids in a third order, untimed */
	if (!many) {
		tw_engine_destroy(e);
		fprintf(stderr, "tw-perf icount: out of memory\n");
		return 2;
	}
	for (size_t i = 0; i < n; i++)
		many[i] = ids[wl->order[2][n - 1 - i]];
	phase_begin(&p, "engine_postpone", n);
	for (size_t i = 0; i < n; i++) {
		uint32_t t = wl->order[1][i];
		fine &= tw_set_delay(e, ids[t], (uint64_t)wl->delay[0][t] + wl->later[i]) == TW_OK;
	}
	fine &= tw_advance(e, 0) == TW_OK;
	phase_end(&p);

	/* Later again, in calls of MANY_PER_CALL: past every due so far (the
	 * longest is two MAX_DELAY_MS), so each is a postpone, recorded only. */
	phase_begin(&p, "engine_postpone_many", n);
	for (size_t i = 0; i < n; i += MANY_PER_CALL) {
		size_t k = n - i < MANY_PER_CALL ? n - i : MANY_PER_CALL;
		fine &= tw_set_delay_many(e, many + i, k, 3 * (uint64_t)MAX_DELAY_MS, NULL) ==
			TW_OK;
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

	free(many);
	tw_engine_destroy(e);
	if (!fine)
		fprintf(stderr, "tw-perf icount: an engine operation failed\n");
	return fine ? 0 : 2;
}

/* K one-shots due within a second, one advance over all of them: the wheel's
 * expiry, the hand-over, the run on an executor and the completion. */
int icount_dispatch_phase(const struct icount_workload *wl, tw_id *ids)
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

/* K tasks due on the same tick, each fired once by one advance of a second: the firing's
 * cost, with what it takes to plan the next due. */
static int fire_phase(const char *name, const char *cron, size_t n, tw_id *ids)
{
	tw_engine *e = manual_engine(n);
	if (!e)
		return 2;
	bool fine = true;
	for (size_t i = 0; i < n; i++) {
		tw_task_spec spec = { .delay_ms = cron ? 0 : 1000,
				      .period_ms = cron ? 0 : 1000,
				      .callback = nothing,
				      .cron = cron };
		fine &= tw_add(e, &spec, &ids[i]) == TW_OK;
	}
	/* Every task has fired once: its next due is planned as the phase's will be. */
	fine &= ok(tw_advance(e, 1000), "tw_advance");
	fine &= tw_quiesce(e) == TW_OK && tw_advance(e, 0) == TW_OK;
	tw_engine_stats before, after;
	fine &= ok(tw_stats(e, &before), "tw_stats");
	struct phase p;
	phase_begin(&p, name, n);
	fine &= tw_advance(e, 1000) == TW_OK;
	fine &= tw_quiesce(e) == TW_OK;
	fine &= tw_advance(e, 0) == TW_OK;
	phase_end(&p);
	fine &= ok(tw_stats(e, &after), "tw_stats");
	tw_engine_destroy(e);
	if (!fine || after.runs - before.runs != n) {
		fprintf(stderr, "tw-perf icount: %s: %llu runs of %zu tasks\n", name,
			(unsigned long long)(after.runs - before.runs), n);
		return 2;
	}
	return 0;
}

/* A calendar task's firing beside a periodic one's: the same K tasks, every second. */
int icount_fire_phases(const struct icount_workload *wl, tw_id *ids)
{
	int rc = fire_phase("engine_fire_periodic", NULL, wl->n, ids);
	return rc ? rc : fire_phase("engine_fire_calendar", "CRON_TZ=UTC * * * * * *", wl->n, ids);
}

#endif
