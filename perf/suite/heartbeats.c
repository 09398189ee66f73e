/*
 * heartbeats.c - `tw-perf heartbeats`: N periodic timers, periods drawn in
 * whole ms from 100-500 ms, first dues spread over the first period, on
 * tickwheel and then on each peer loop, with the same draws.
 *
 * A run's lateness is its start minus its ideal due, first due + k x period,
 * where k counts the timer's runs and skips so far: a loop that re-arms from
 * "now" shows its drift as growing lateness instead of hiding it in the
 * intervals. Dues fall on whole ms of CLOCK_MONOTONIC, which every API here
 * can express, so no loop pays for rounding another's cannot avoid.
 *
 * Each timer records into its own slots (its runs never overlap), so the
 * callback neither locks nor allocates, and writes nothing shared: a shared
 * histogram would charge tickwheel's executors for cache lines bouncing
 * between them, which a peer's single thread never pays. The interval
 * histogram is built from the records afterwards.
 */
#include "heartbeats.h"
#include "loop_measure.h"
#include "peer.h"
#include "suite_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_fire(void *ctx, size_t timer, uint64_t start_ns, uint64_t skipped)
{
	struct beats *b = ctx;
	if (timer >= b->count) {
		b->extra->fire(b, start_ns);
		return;
	}
	if (!atomic_load_explicit(&b->recording, memory_order_relaxed))
		return;
	struct beat *t = &b->beat[timer];
	struct intervals *iv = &b->iv[timer];
	t->k += skipped;
	t->skipped += skipped;
	int64_t late = (int64_t)(start_ns - (t->first_due_ns + t->k++ * t->period_ns));
	if (t->n < t->cap) {
		t->skips_before[t->n] = skipped < UINT32_MAX ? (uint32_t)skipped : UINT32_MAX;
		t->late[t->n++] = late;
	} else {
		atomic_fetch_add_explicit(&b->overflow, 1, memory_order_relaxed);
	}
	intervals_note(iv, start_ns, skipped);
}

static void beats_free(struct beats *b)
{
	if (!b)
		return;
	free(b->beat);
	free(b->iv);
	free(b->late);
	free(b->skips_before);
	free(b);
}

/* Periods and first dues (offsets from the start, whole ms) drawn from the
 * seed, so that every loop gets the same; room for every run. */
static struct beats *beats_new(const struct params *p)
{
	struct beats *b = calloc(1, sizeof *b);
	if (!b || !(b->beat = calloc(p->tasks, sizeof *b->beat)) ||
	    !(b->iv = calloc(p->tasks, sizeof *b->iv))) {
		beats_free(b);
		return NULL;
	}
	b->count = p->tasks;
	uint64_t rng = p->opt->seed;
	size_t room = 0;
	for (size_t i = 0; i < b->count; i++) {
		struct beat *t = &b->beat[i];
		uint64_t period = p->lo_ms + bench_rng_below(&rng, p->hi_ms - p->lo_ms + 1);
		t->period_ns = b->iv[i].period_ns = period * NS_PER_MS;
		t->first_due_ns = bench_rng_below(&rng, period) * NS_PER_MS;
		t->cap = (size_t)(p->seconds * 1000 / (double)period) + 3;
		room += t->cap;
	}
	b->late = malloc(room * sizeof *b->late);
	b->skips_before = malloc(room * sizeof *b->skips_before);
	if (!b->late || !b->skips_before) {
		beats_free(b);
		return NULL;
	}
	/* written now, so that no callback takes a page fault on its first record */
	memset(b->late, 0, room * sizeof *b->late);
	memset(b->skips_before, 0, room * sizeof *b->skips_before);
	for (size_t i = 0, at = 0; i < b->count; at += b->beat[i].cap, i++) {
		b->beat[i].late = b->late + at;
		b->beat[i].skips_before = b->skips_before + at;
	}
	return b;
}

/* Arms the beats, their first dues after start_ns, and the extra timer if any. */
static int arm_all(const struct loop_impl *impl, void *loop, struct beats *b, uint64_t start_ns)
{
	for (size_t i = 0; i < b->count; i++) {
		struct beat *t = &b->beat[i];
		t->first_due_ns += start_ns;
		if (impl->arm(loop, i, t->first_due_ns, t->period_ns / NS_PER_MS))
			return -1;
	}
	return b->extra ? impl->arm(loop, b->count, start_ns + b->extra->offset_ns, 0) : 0;
}

int heartbeats_run(const struct loop_impl *impl, const struct params *p, struct report *r,
		   struct outcome *o, const struct beats_extra *extra)
{
	struct beats *b = beats_new(p);
	if (!b) {
		fprintf(stderr, "tw-perf: heartbeats: out of memory for %zu tasks\n", p->tasks);
		return 2;
	}
	b->extra = extra;
	void *loop = impl->create(p->tasks + (extra != NULL), on_fire, b, p->opt->executors);
	if (!loop) {
		beats_free(b);
		return 2;
	}
	b->impl = impl;
	b->loop = loop;
	/* room to arm every timer before the first due */
	uint64_t start = ceil_ms_ns(monotonic_now_ns()) + (50 + p->tasks / 200) * NS_PER_MS;
	b->start_ns = start;
	b->end_ns = start + (uint64_t)(p->seconds * 1e9);
	atomic_store(&b->recording, true);
	if (arm_all(impl, loop, b, start)) {
		impl->destroy(loop);
		beats_free(b);
		return 2;
	}
	uint64_t armed = monotonic_now_ns(), w0 = impl->wakeups(loop);
	struct su_sched wheel0, wheel1, executors0, executors1, all0, all1;
	bool all = su_threads_sched("", &all0);
	bool threads =
		su_threads_sched("tw-wheel", &wheel0) && su_threads_sched("tw-exec-", &executors0);
	double cpu0 = process_cpu_seconds();
	impl->run_until(loop, b->end_ns);
	double cpu = process_cpu_seconds() - cpu0;
	all = all && su_threads_sched("", &all1);
	threads = threads && su_threads_sched("tw-wheel", &wheel1) &&
		  su_threads_sched("tw-exec-", &executors1);
	double wall = (double)(monotonic_now_ns() - armed) / 1e9;
	uint64_t wakeups = impl->wakeups(loop) - w0;
	if (extra && extra->ended)
		extra->ended(b);
	atomic_store(&b->recording, false);
	impl->destroy(loop); /* no run after this: the records are final */
	if (extra && extra->records)
		extra->records(b);

	o->impl = impl->name;
	if (armed > start)
		report_note(r, "%s: arming ended %.1f ms after the first due", impl->name,
			    (double)(armed - start) / 1e6);
	int rc = heartbeats_report_run(r, o, b, cpu, p->opt->hgrm);
	report_add(r, impl->name, "wakeups_per_second", wall > 0 ? (double)wakeups / wall : 0,
		   "1/s", BETTER_LOWER);
	/* Every time a thread of the process was put on a CPU: a loop's wake-ups, and for
	 * tickwheel its executors' too. What one costs a thread sleeping on a timerfd is the
	 * floor's cpu_per_wakeup; a futex wake-up costs less, and its waker more. */
	o->loop_wakeups_per_run = o->other_wakeups_per_run = -1;
	if (all && o->runs) {
		uint64_t slices = all1.slices - all0.slices;
		o->loop_wakeups_per_run = (double)wakeups / (double)o->runs;
		o->other_wakeups_per_run =
			slices > wakeups ? (double)(slices - wakeups) / (double)o->runs : 0;
		report_add(r, impl->name, "thread_wakeups_per_run",
			   (double)slices / (double)o->runs, "1", BETTER_LOWER);
	}
	if (threads) {
		/* tickwheel's threads: what a wake-up costs the wheel thread, what a run costs
		 * the executors; the rest of cpu_per_run is the wheel thread's share */
		report_add(r, impl->name, "wheel_cpu_per_wakeup",
			   wakeups ?
				   (double)(wheel1.cpu_ns - wheel0.cpu_ns) / 1e3 / (double)wakeups :
				   0,
			   "us", BETTER_LOWER);
		report_add(r, impl->name, "executors_cpu_per_run",
			   o->runs ? (double)(executors1.cpu_ns - executors0.cpu_ns) / 1e3 /
					     (double)o->runs :
				     0,
			   "us", BETTER_LOWER);
	}
	if (atomic_load(&b->overflow))
		report_note(r, "%s: %llu runs beyond the room planned (a bug here)", impl->name,
			    (unsigned long long)atomic_load(&b->overflow));
	beats_free(b);
	return rc;
}

struct params heartbeats_params(const struct suite_options *opt, size_t quick_tasks,
				struct report *r)
{
	struct params p = { .opt = opt,
			    .tasks = opt->tasks ? opt->tasks :
				     opt->quick ? quick_tasks :
						  20000,
			    .seconds = opt->seconds > 0 ? opt->seconds :
				       opt->quick       ? 3 :
							  10,
			    .lo_ms = opt->period_lo_ms ? opt->period_lo_ms : 100,
			    .hi_ms = opt->period_hi_ms ? opt->period_hi_ms : 500 };
	report_param(r, "tasks", (double)p.tasks);
	report_param(r, "seconds", p.seconds);
	report_param(r, "period_lo_ms", (double)p.lo_ms);
	report_param(r, "period_hi_ms", (double)p.hi_ms);
	report_param(r, "seed", (double)opt->seed);
	report_param(r, "executors", opt->executors);
	return p;
}

/* The targets against libev: lateness p99 below it, CPU per run no higher, as
 * measured and net of the wake-ups at this machine's floor prices (when net is known). */
static void compare_with_libev(struct report *r, const struct outcome *t,
			       const struct outcome *libev, bool net)
{
	report_note(r,
		    "%s against libev: lateness p99 %.0f us vs %.0f us (%s), CPU per run %.2f "
		    "us vs %.2f us (%s)",
		    t->impl, t->p99_us, libev->p99_us,
		    t->p99_us < libev->p99_us ? "below: met" : "not below: missed",
		    t->cpu_per_run_us, libev->cpu_per_run_us,
		    t->cpu_per_run_us <= libev->cpu_per_run_us ? "no higher: met" :
								 "higher: missed");
	if (net && t->net_cpu_per_run_us >= 0 && libev->net_cpu_per_run_us > 0)
		report_note(r,
			    "%s against libev, net of wake-ups at the floor's prices: CPU per run "
			    "%.2f us vs %.2f us, %.2fx (%s)",
			    t->impl, t->net_cpu_per_run_us, libev->net_cpu_per_run_us,
			    t->net_cpu_per_run_us / libev->net_cpu_per_run_us,
			    t->net_cpu_per_run_us <= libev->net_cpu_per_run_us ? "no higher: met" :
										 "higher: missed");
}

int scenario_heartbeats(const struct suite_options *opt, struct report *r)
{
	struct params p = heartbeats_params(opt, 2000, r);
	const struct loop_impl *impls[SUITE_LOOPS_MAX];
	size_t n = loops_wanted(opt, impls);
	struct outcome *o = calloc(n, sizeof *o);
	if (!o) {
		fprintf(stderr, "tw-perf: heartbeats: out of memory\n");
		return 2;
	}
	struct wake_floor floor;
	bool floor_measured = heartbeats_measure_floor(&p, r, &floor);
	for (size_t k = 0; k < n; k++) {
		int rc = heartbeats_run(impls[k], &p, r, &o[k], NULL);
		if (rc) {
			free(o);
			return rc;
		}
	}
	if (floor_measured)
		heartbeats_report_floor(r, &floor);
	bool net = floor_measured && floor.handovers;
	if (net)
		heartbeats_report_net(r, o, n, &floor);
	report_target(r, "lateness_p99", "<=", 1200);
	report_target(r, "interval_sd", "<=", INTERVAL_SD_TARGET_US);
	report_target(r, "runs_before_due", "<=", 0);
	for (size_t k = 1; k < n; k++)
		report_note(r, "%s: %s", impls[k]->name, impls[k]->differs);
	for (size_t k = 1; k < n; k++) {
		if (strcmp(o[k].impl, "libev"))
			continue;
		for (size_t t = 0; t < n; t++) /* each tickwheel variant */
			if (!strncmp(o[t].impl, "tickwheel", 9))
				compare_with_libev(r, &o[t], &o[k], net);
	}
	report_note(r, "lateness = start - (first due + k x period), k = runs + skips so far; "
		       "CPU from getrusage, all threads, over the timed window");
	heartbeats_pictures(opt, r, o, n);
	free(o);
	return 0;
}
