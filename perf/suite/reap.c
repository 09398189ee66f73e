/*
 * reap.c - `tw-perf reap`: do the engine's bulk chores delay other tasks?
 *
 * Heartbeats at 10 ms run the whole time, 100 on the executors and 100 on the
 * wheel thread (TW_ON_WHEEL_THREAD), while the engine takes in N adds (the
 * slot table grows by chunks, the wheel files each), then N cancels at once
 * (each ended task mailed to the wheel thread, filed for reaping), and reaps
 * the N ended tasks retain_ms later (each slot given back after an RCU grace
 * period). Each second's largest heartbeat lateness (start - due) is
 * reported, and the largest of each phase next to the machine's own: a
 * thread that does nothing but wake on a 1 ms timerfd grid (wake_floor.h),
 * measured first. The target: no phase's heartbeats later than the floor's
 * largest lateness + 1 ms.
 *
 *   defaults: --tasks 1000000 (the tasks added and cancelled), executors one
 *   per online CPU (--executors N); --quick: 100 000 tasks, retain_ms 1000
 */
#include "suite.h"
#include "suite_util.h"

#include "measure.h"
#include "tickwheel.h"
#include "wake_floor.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

enum {
	BEATS = 100,       /* heartbeats of each kind */
	BEAT_MS = 10,      /* their period */
	MAX_SECONDS = 64,  /* the run's length, at most */
	SLACK_MS = 1000,   /* the target: the floor's largest lateness + this */
	FLOOR_SECONDS = 3, /* how long the floor is measured */
	TASKS = 1000000,   /* added, then cancelled */
	QUICK_TASKS = 100000,
	QUICK_RETAIN_MS = 1000,
};

/* One kind of heartbeat: each second's largest lateness and runs, from t0. */
struct beats {
	uint64_t t0;
	_Atomic uint64_t max_late_ns[MAX_SECONDS];
	_Atomic uint64_t runs[MAX_SECONDS];
};

static int beat(const tw_fire *fire, void *arg)
{
	uint64_t start = monotonic_now_ns();
	struct beats *b = arg;
	uint64_t second = (start - b->t0) / 1000000000u;
	if (second >= MAX_SECONDS)
		return 0;
	uint64_t late = start > fire->due_ns ? start - fire->due_ns : 0;
	uint64_t max = atomic_load_explicit(&b->max_late_ns[second], memory_order_relaxed);
	while (late > max &&
	       !atomic_compare_exchange_weak_explicit(&b->max_late_ns[second], &max, late,
						      memory_order_relaxed, memory_order_relaxed)) {
	}
	atomic_fetch_add_explicit(&b->runs[second], 1, memory_order_relaxed);
	return 0;
}

static int never_runs(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 0;
}

/* A phase: the seconds from first to last (both included) of the run. */
struct phase {
	const char *name;
	uint64_t first, last;
};

static uint64_t second_of(uint64_t t0, uint64_t ns)
{
	uint64_t s = ns > t0 ? (ns - t0) / 1000000000u : 0;
	return s < MAX_SECONDS ? s : MAX_SECONDS - 1;
}

static double phase_max_us(const struct beats *b, const struct phase *p)
{
	uint64_t max = 0;
	for (uint64_t s = p->first; s <= p->last; s++) {
		uint64_t v = atomic_load_explicit(&b->max_late_ns[s], memory_order_relaxed);
		max = v > max ? v : max;
	}
	return (double)max / 1e3;
}

static bool add_beats(tw_engine *e, struct beats *b, unsigned flags)
{
	for (unsigned i = 0; i < BEATS; i++) {
		tw_task_spec spec = { .delay_ms = 1 + i % BEAT_MS,
				      .period_ms = BEAT_MS,
				      .callback = beat,
				      .arg = b,
				      .flags = flags };
		tw_id id;
		if (tw_add(e, &spec, &id) != TW_OK)
			return false;
	}
	return true;
}

/* N tasks that never come due in the run, then cancelled; the times of both loops. */
static int adds_then_cancels(tw_engine *e, size_t n, uint64_t window[4])
{
	tw_id *ids = malloc(n * sizeof *ids);
	if (!ids)
		return -TW_ENOMEM;
	tw_task_spec spec = { .delay_ms = 3600 * 1000, .callback = never_runs };
	int rc = TW_OK;
	window[0] = monotonic_now_ns();
	for (size_t i = 0; rc == TW_OK && i < n; i++)
		rc = tw_add(e, &spec, &ids[i]);
	window[1] = monotonic_now_ns();
	monotonic_sleep_until(window[1] + 1000000000u); /* a quiet second between */
	window[2] = monotonic_now_ns();
	for (size_t i = 0; rc == TW_OK && i < n; i++)
		rc = tw_cancel(e, ids[i]);
	window[3] = monotonic_now_ns();
	free(ids);
	return rc;
}

static void report_series_of(struct report *r, const char *impl, const struct beats *b,
			     uint64_t seconds)
{
	double x[MAX_SECONDS], y[MAX_SECONDS];
	for (uint64_t s = 0; s < seconds; s++) {
		x[s] = (double)s;
		y[s] = (double)atomic_load_explicit(&b->max_late_ns[s], memory_order_relaxed) / 1e3;
	}
	report_series(r, impl, "max_lateness_per_second", x, y, seconds);
}

int scenario_reap(const struct suite_options *opt, struct report *r)
{
	size_t n = opt->tasks ? opt->tasks : opt->quick ? QUICK_TASKS : TASKS;
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = opt->executors;
	if (opt->quick)
		cfg.retain_ms = QUICK_RETAIN_MS;
	report_param(r, "tasks", (double)n);
	report_param(r, "heartbeats", BEATS);
	report_param(r, "heartbeat_ms", BEAT_MS);
	report_param(r, "retain_ms", (double)cfg.retain_ms);
	report_param(r, "executors", opt->executors);
	struct wake_floor floor;
	bool floor_ok = wake_floor_measure(FLOOR_SECONDS, BEAT_MS, BEAT_MS, &floor) == 0;
	struct beats *on_executors = calloc(1, sizeof *on_executors);
	struct beats *on_wheel = calloc(1, sizeof *on_wheel);
	tw_engine *e = NULL;
	int rc = on_executors && on_wheel ? tw_engine_create(&cfg, &e) : -TW_ENOMEM;
	if (rc == TW_OK) {
		on_executors->t0 = on_wheel->t0 = monotonic_now_ns();
		if (!add_beats(e, on_executors, 0) || !add_beats(e, on_wheel, TW_ON_WHEEL_THREAD))
			rc = -TW_ENOMEM;
	}
	uint64_t t0 = on_executors ? on_executors->t0 : 0, w[4] = { 0 };
	if (rc == TW_OK) {
		monotonic_sleep_until(t0 + 1000000000u); /* a steady second first */
		rc = adds_then_cancels(e, n, w);
	}
	uint64_t reap_from = w[2] + cfg.retain_ms * 1000000u,
		 reap_to = w[3] + cfg.retain_ms * 1000000u;
	uint64_t end = reap_to + n * 1000u + 1500000000u; /* about a thousand reaped a ms */
	if (rc == TW_OK && second_of(t0, end) >= MAX_SECONDS - 1) {
		fprintf(stderr, "tw-perf reap: the run would last over %d s\n", MAX_SECONDS);
		rc = -TW_ERANGE;
	}
	if (rc == TW_OK)
		monotonic_sleep_until(end);
	tw_engine_stats st = { 0 };
	if (e) {
		tw_stats(e, &st);
		tw_engine_stop(e, 1000);
		tw_engine_destroy(e);
	}
	if (rc != TW_OK) {
		fprintf(stderr, "tw-perf reap: %s\n", tw_strerror(rc));
		free(on_executors);
		free(on_wheel);
		return 2;
	}
	uint64_t seconds = second_of(t0, end) + 1;
	struct phase phases[] = {
		{ "steady", 0, 0 },
		{ "adds", second_of(t0, w[0]), second_of(t0, w[1]) },
		{ "cancels", second_of(t0, w[2]), second_of(t0, w[3]) },
		/* reaped up to about a thousand a ms (retain_ms in tickwheel.h): to the end */
		{ "reaping", second_of(t0, reap_from), second_of(t0, end) },
	};
	double limit = (floor_ok ? floor.lateness_max_us : 0) + SLACK_MS;
	for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
		char name[64];
		snprintf(name, sizeof name, "%s_max_late", phases[i].name);
		report_add(r, "tickwheel", name, phase_max_us(on_executors, &phases[i]), "us",
			   BETTER_LOWER);
		report_add(r, "tickwheel-wheel-thread", name, phase_max_us(on_wheel, &phases[i]),
			   "us", BETTER_LOWER);
		if (floor_ok)
			report_add(r, "wake-up floor", name, floor.lateness_max_us, "us",
				   BETTER_LOWER);
		if (i > 0)
			report_target(r, name, "<=", limit);
	}
	report_add(r, "tickwheel", "adds_seconds", (double)(w[1] - w[0]) / 1e9, "s", BETTER_LOWER);
	report_add(r, "tickwheel", "cancels_seconds", (double)(w[3] - w[2]) / 1e9, "s",
		   BETTER_LOWER);
	report_add(r, "tickwheel", "wheel_thread_runs", (double)st.wheel_thread_runs, "runs",
		   BETTER_NEITHER);
	report_add(r, "tickwheel", "skipped",
		   (double)(st.skipped_overlap + st.skipped_overload + st.skipped_missed),
		   "firings", BETTER_LOWER);
	report_series_of(r, "tickwheel", on_executors, seconds);
	report_series_of(r, "tickwheel-wheel-thread", on_wheel, seconds);
	report_note(r,
		    "seconds: adds %llu-%llu, cancels %llu-%llu, reaping %llu-%llu (retain_ms "
		    "after the cancels), of %llu",
		    (unsigned long long)phases[1].first, (unsigned long long)phases[1].last,
		    (unsigned long long)phases[2].first, (unsigned long long)phases[2].last,
		    (unsigned long long)phases[3].first, (unsigned long long)phases[3].last,
		    (unsigned long long)seconds);
	report_note(r,
		    "target: each phase's largest heartbeat lateness <= the floor's largest "
		    "(%s) + %d ms",
		    floor_ok ? "measured first" : "not measured: 0", SLACK_MS / 1000);
	free(on_executors);
	free(on_wheel);
	return 0;
}
