/*
 * stall.c - `tw-perf stall`: periodic tasks run for 2 s, then a forked helper
 * stops the whole process (SIGSTOP), waits 2 s and lets it go on (SIGCONT);
 * the tasks run 3 s more. Afterwards there must be no burst of catch-up runs,
 * every period that fell inside the stop must be counted as skipped, and
 * every task must be back on its own phase.
 *
 *   defaults: --tasks 1000 --period 100-500ms (whole ms); --quick: the same
 *
 * Every run's start, due_ns and skipped are recorded per task. The helper
 * reads the clock on both sides of each kill() and hands the times back
 * through a pipe; the stop began after the last run before it started.
 *
 * Checks, from the records: a task's dues are d0 + k x period (d0: its first
 * run's due); after SIGCONT a task runs at most once for a due already past
 * (catch-up), besides a firing handed out before the stop (held over: the
 * next due in order, nothing skipped before it); every due firing up to the
 * end is a run or a skip the engine counted for the task (tw_get), the last
 * 2 ms excepted (a firing may be handed out but not started), and the
 * engine's totals agree. skipped_in_stop_expected is the dues inside the
 * stop but each task's latest; skipped_missed may differ from it by the
 * dues at its edges, and catch-up runs still queued when the next due comes
 * make serial tasks skip it as overlap (skipped_other).
 *
 * Run from an interactive shell, the shell sees the process stop and reports
 * it; after SIGCONT it finishes as a background job.
 */
#include "suite.h"
#include "suite_util.h"

#include "measure.h"
#include "tickwheel.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS UINT64_C(1000000)

enum { BEFORE_MS = 2000, STOP_MS = 2000, AFTER_MS = 3000, BURST_WINDOW_MS = 50 };

struct run {
	uint64_t start_ns, due_ns, skipped;
};

struct task {
	uint64_t period_ns, skips; /* skips: the engine's count for the task, all reasons */
	tw_id id;
	struct run *runs; /* written by the task's own runs only: serial, never overlapping */
	size_t n, cap, lost;
};

static int record(const tw_fire *fire, void *arg)
{
	struct task *t = arg;
	uint64_t now = monotonic_now_ns();
	if (t->n < t->cap)
		t->runs[t->n++] = (struct run){ now, fire->due_ns, fire->skipped };
	else
		t->lost++;
	return 0;
}

/* The helper: only async-signal-safe calls, the parent being multithreaded. */
static void helper(pid_t parent, int fd)
{
	uint64_t window[4];
	window[0] = monotonic_now_ns();
	kill(parent, SIGSTOP);
	window[1] = monotonic_now_ns();
	struct timespec left = { .tv_sec = STOP_MS / 1000, .tv_nsec = STOP_MS % 1000 * 1000000L };
	while (nanosleep(&left, &left) && errno == EINTR)
		;
	window[2] = monotonic_now_ns();
	kill(parent, SIGCONT);
	window[3] = monotonic_now_ns();
	_exit(write(fd, window, sizeof window) == sizeof window ? 0 : 1);
}

/* Stops this process for STOP_MS by a child; 0 and its four readings, or -1. */
static int stop_process(uint64_t window[4])
{
	int fds[2];
	if (pipe(fds))
		return -1;
	pid_t parent = getpid(), child = fork();
	if (child == 0)
		helper(parent, fds[1]);
	close(fds[1]);
	int status = 0;
	pid_t got = -1;
	while (child > 0 && (got = waitpid(child, &status, 0)) < 0 && errno == EINTR)
		;
	ssize_t n = got == child ? read(fds[0], window, 4 * sizeof *window) : -1;
	close(fds[0]);
	bool ok = got == child && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
		  n == 4 * sizeof *window;
	return ok ? 0 : -1;
}

struct tally {
	uint64_t runs, lost, skips_seen, skips_counted, expected, tolerated, unaccounted;
	uint64_t in_stop, off_phase, not_resumed, held_over, burst_max, in_window, catchup_last;
	struct su_samples late_us;
};

/* The runs after SIGCONT: catch-up (for a due already past), held over, or on time. */
static uint64_t tally_resume(struct tally *y, const struct task *t, size_t k, uint64_t cont)
{
	uint64_t catchup = 0;
	for (size_t first = k; k < t->n; k++) {
		const struct run *u = &t->runs[k];
		y->in_window += u->start_ns <= cont + BURST_WINDOW_MS * MS;
		if (u->due_ns >= cont) {
			su_push(&y->late_us, (double)(u->start_ns - u->due_ns) / 1e3);
		} else if (k == first && k > 0 && !u->skipped &&
			   u->due_ns == t->runs[k - 1].due_ns + t->period_ns) {
			y->held_over++;
		} else {
			catchup++;
			if (u->start_ns - cont > y->catchup_last)
				y->catchup_last = u->start_ns - cont;
		}
	}
	return catchup;
}

static void tally_task(struct tally *y, const struct task *t, uint64_t stop, uint64_t cont,
		       uint64_t end)
{
	y->runs += t->n;
	y->lost += t->lost;
	y->skips_counted += t->skips;
	if (!t->n) {
		y->not_resumed++;
		return;
	}
	uint64_t p = t->period_ns, d0 = t->runs[0].due_ns, runs_by_end = 0;
	bool off = false;
	size_t k = 0;
	for (; k < t->n && t->runs[k].start_ns < cont; k++)
		;
	for (size_t j = 0; j < t->n; j++) {
		const struct run *u = &t->runs[j];
		y->skips_seen += u->skipped;
		off |= u->due_ns < d0 || (u->due_ns - d0) % p != 0;
		runs_by_end += u->due_ns <= end;
	}
	y->off_phase += off;
	y->not_resumed += k == t->n;
	uint64_t catchup = tally_resume(y, t, k, cont);
	y->burst_max = catchup > y->burst_max ? catchup : y->burst_max;
	uint64_t inside = su_dues_in(d0, p, stop, cont);
	y->in_stop += inside ? inside - 1 : 0;
	/* Due firings are runs plus skips. */
	uint64_t dues = su_dues_in(d0, p, d0 - 1, end);
	uint64_t expected = dues > runs_by_end ? dues - runs_by_end : 0;
	uint64_t tolerance = su_dues_in(d0, p, end - 2 * MS, end);
	uint64_t diff = t->skips > expected ? t->skips - expected : expected - t->skips;
	y->expected += expected;
	y->tolerated += diff < tolerance ? diff : tolerance;
	y->unaccounted += diff > tolerance ? diff - tolerance : 0;
}

/* The stop began after the last run before SIGCONT started (or after the
 * helper's first reading, if later). */
static uint64_t stop_start(const struct task *tasks, size_t n, const uint64_t h[4])
{
	uint64_t last = h[0];
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < tasks[i].n; k++)
			if (tasks[i].runs[k].start_ns < h[2] && tasks[i].runs[k].start_ns > last)
				last = tasks[i].runs[k].start_ns;
	return last;
}

static void report_tally(struct report *r, struct tally *y, const tw_engine_stats *s, size_t n,
			 double stopped_ms)
{
	const char *tw = "tickwheel";
	uint64_t engine_skips = s->skipped_missed + s->skipped_overlap + s->skipped_overload;
	uint64_t totals_differ = engine_skips > y->skips_counted ? engine_skips - y->skips_counted :
								   y->skips_counted - engine_skips;
	report_add(r, tw, "stopped_ms", stopped_ms, "ms", BETTER_NEITHER);
	report_add(r, tw, "runs", (double)y->runs, "runs", BETTER_NEITHER);
	report_add(r, tw, "runs_within_50ms_of_resume", (double)y->in_window, "runs",
		   BETTER_NEITHER);
	report_add(r, tw, "runs_within_50ms_per_task", (double)y->in_window / (double)n, "runs",
		   BETTER_NEITHER);
	report_add(r, tw, "catchup_burst_max_runs", (double)y->burst_max, "runs", BETTER_LOWER);
	report_add(r, tw, "catchup_last_start", (double)y->catchup_last / 1e6, "ms", BETTER_LOWER);
	report_add(r, tw, "runs_held_over", (double)y->held_over, "runs", BETTER_NEITHER);
	report_add(r, tw, "skipped_in_stop_expected", (double)y->in_stop, "firings",
		   BETTER_NEITHER);
	report_add(r, tw, "skipped_missed", (double)s->skipped_missed, "firings", BETTER_NEITHER);
	report_add(r, tw, "skipped_other", (double)(s->skipped_overlap + s->skipped_overload),
		   "firings", BETTER_NEITHER);
	report_add(r, tw, "skipped_expected", (double)y->expected, "firings", BETTER_NEITHER);
	report_add(r, tw, "skipped_seen_by_runs", (double)y->skips_seen, "firings", BETTER_NEITHER);
	report_add(r, tw, "skips_tolerated_at_end", (double)y->tolerated, "firings", BETTER_LOWER);
	report_add(r, tw, "skipped_unaccounted", (double)(y->unaccounted + totals_differ),
		   "firings", BETTER_LOWER);
	report_add(r, tw, "tasks_off_phase", (double)y->off_phase, "tasks", BETTER_LOWER);
	report_add(r, tw, "tasks_not_resumed", (double)y->not_resumed, "tasks", BETTER_LOWER);
	report_add(r, tw, "late_after_resume_p50", su_quantile(&y->late_us, 0.5), "us",
		   BETTER_LOWER);
	report_add(r, tw, "late_after_resume_p99", su_quantile(&y->late_us, 0.99), "us",
		   BETTER_LOWER);
	report_add(r, tw, "late_after_resume_max", su_quantile(&y->late_us, 1), "us", BETTER_LOWER);
	report_target(r, "catchup_burst_max_runs", "<=", 1);
	report_target(r, "tasks_off_phase", "<=", 0);
	report_target(r, "skipped_unaccounted", "<=", 0);
	report_target(r, "tasks_not_resumed", "<=", 0);
	report_note(r, "catch-up: runs after SIGCONT for a due before it, a firing held over from "
		       "before the stop apart; skipped_expected: due firings minus runs, per task "
		       "(the last 2 ms tolerated); skipped_unaccounted: the engine's per-task and "
		       "total counts against it");
	report_note(r, "skipped_in_stop_expected: dues inside the stop but each task's latest; "
		       "late_after_resume: runs due after SIGCONT");
	if (y->lost)
		report_note(r, "%llu runs not recorded: more runs than expected",
			    (unsigned long long)y->lost);
}

int scenario_stall(const struct suite_options *opt, struct report *r)
{
	size_t n = opt->tasks ? opt->tasks : 1000;
	uint64_t lo = opt->period_lo_ms ? opt->period_lo_ms : 100;
	uint64_t hi = opt->period_hi_ms ? opt->period_hi_ms : 500;
	report_param(r, "tasks", (double)n);
	report_param(r, "period_lo_ms", (double)lo);
	report_param(r, "period_hi_ms", (double)hi);
	report_param(r, "stop_ms", STOP_MS);
	report_param(r, "before_ms", BEFORE_MS);
	report_param(r, "after_ms", AFTER_MS);
	report_param(r, "executors", opt->executors);
	if (!n || lo > hi) {
		fprintf(stderr, "tw-perf stall: needs at least one task\n");
		return 2;
	}
	uint64_t rng = opt->seed;
	struct task *tasks = calloc(n ? n : 1, sizeof *tasks);
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = opt->executors;
	tw_engine *e = NULL;
	int rc = tasks ? tw_engine_create(&cfg, &e) : -TW_ENOMEM;
	for (size_t i = 0; !rc && i < n; i++) {
		struct task *t = &tasks[i];
		uint64_t p = lo + bench_rng_below(&rng, hi - lo + 1);
		t->period_ns = p * MS;
		t->cap = (BEFORE_MS + STOP_MS + AFTER_MS + 1000) / p + 4;
		t->runs = malloc(t->cap * sizeof *t->runs);
		tw_task_spec spec = { .delay_ms = 1 + bench_rng_below(&rng, p),
				      .period_ms = p,
				      .callback = record,
				      .arg = t };
		rc = t->runs ? tw_add(e, &spec, &t->id) : -TW_ENOMEM;
	}
	uint64_t window[4] = { 0 };
	if (!rc) {
		/* Everything is set up and running before the helper exists. */
		monotonic_sleep_until(monotonic_now_ns() + BEFORE_MS * MS);
		if (stop_process(window)) {
			fprintf(stderr, "tw-perf stall: the stopping helper failed\n");
			rc = 2;
		}
	} else {
		fprintf(stderr, "tw-perf stall: set-up: %s\n", tw_strerror(rc));
	}
	if (!rc) {
		monotonic_sleep_until(window[3] + AFTER_MS * MS);
		uint64_t end = monotonic_now_ns();
		for (size_t i = 0; i < n; i++) {
			tw_task_info info;
			if (tw_get(e, tasks[i].id, &info) == TW_OK)
				tasks[i].skips = info.skipped_missed + info.skipped_overlap +
						 info.skipped_overload;
		}
		tw_engine_stats s;
		tw_stats(e, &s);
		/* Destroyed first: joining the executors makes their records ours. */
		tw_engine_destroy(e);
		e = NULL;
		uint64_t stop = stop_start(tasks, n, window);
		struct tally y = { 0 };
		for (size_t i = 0; i < n; i++)
			tally_task(&y, &tasks[i], stop, window[2], end);
		report_tally(r, &y, &s, n, (double)(window[2] - stop) / 1e6);
		su_samples_free(&y.late_us);
	}
	if (e)
		tw_engine_destroy(e);
	for (size_t i = 0; tasks && i < n; i++)
		free(tasks[i].runs);
	free(tasks);
	return rc ? 2 : 0;
}
