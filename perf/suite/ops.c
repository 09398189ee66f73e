/*
 * ops.c - `tw-perf ops`: ns per operation at N = 1000 .. 10 000 000 live
 * timers, first of the timing wheel side by side with libuv, libevent and
 * libev (the wheel microbenchmark's workload and method: bench_measure.c,
 * perf/README.md), then of the engine API (ops_engine.c); series and
 * pictures: ops_series.c.
 *
 * Figures: "wheel_<op>_ns@N" per implementation (the wheel reports as
 * "tickwheel") and "engine_<op>_ns@N", with the bytes per entry and per task.
 */
#include "ops.h"
#include "bench.h"
#include "suite.h"
#include "suite_util.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* bench_measure.c's names of the implementations. */
static const char *const impl_names[IMPLS] = { "wheel", "libuv", "libevent", "libev" };
const char *const report_names[IMPLS] = { "tickwheel", "libuv", "libevent", "libev" };

/* What each peer does differently (perf/README.md has the long form). */
static const char *const peer_differs[IMPLS] = {
	NULL,
	"libuv: binary min-heap of pointers inside uv_timer_t; reschedule = stop + start",
	"libevent: binary min-heap array of struct event *; evtimer_add reads the clock each "
	"call; reschedule = remove + add",
	"libev: 4-ary heap array of {due, watcher}; reschedule and reset = ev_timer_again, "
	"adjusted in place",
};

const struct wheel_op wheel_ops[WHEEL_OPS] = {
	{ FIG_ADD, "add", "add", 0.6 },
	{ FIG_CANCEL, "cancel", "cancel", 0.5 },
	{ FIG_RESCHEDULE, "reschedule", "reschedule", 1.0 },
	{ FIG_RESET, "reset", "reset to now + 30 s", 0 },
	{ FIG_EXPIRY, "expiry", "expiry per fired timer", 0.6 },
	{ FIG_EXPIRY_SHORT, "expiry_1s", "expiry per fired timer, dues 1 .. 1000 ms", 0 },
};
static bool parse_sizes(struct ops_run *o, const char *text)
{
	o->count = 0;
	for (const char *p = text; *p;) {
		char *end = (char *)p;
		/* digits only: strtoull would take blanks and signs too */
		unsigned long long v = *p >= '0' && *p <= '9' ? strtoull(p, &end, 10) : 0;
		if (v == 0 || v > UINT32_MAX || o->count == MAX_SIZES ||
		    (*end != ',' && *end != '\0') || (*end == ',' && !end[1]))
			return false;
		o->sizes[o->count++] = (size_t)v;
		p = *end ? end + 1 : end;
	}
	return o->count > 0;
}

static const char *fig_name(const char *fmt, const char *op, size_t n)
{
	static char name[96];
	char base[64];
	snprintf(base, sizeof base, fmt, op);
	snprintf(name, sizeof name, "%s@%zu", base, n);
	return name;
}

static void wheel_size(struct ops_run *o, size_t k)
{
	size_t n = o->sizes[k];
	/* At 10M the peers take minutes and gigabytes: only when named. */
	bool peers_here = n < BIG_N || (o->opt->peers && strcmp(o->opt->peers, "none") != 0);
	struct bench_column *cols = o->wheel[k];
	for (int c = 0; c < IMPLS; c++) {
		/* --quick: one real-clock expiry per peer, each costs a 1 s sleep */
		cols[c] = (struct bench_column){ .missing = "-", .expiry_reps = o->opt->quick };
		if (c == 0 || (peers_here && suite_peer_wanted(o->opt, impl_names[c])))
			cols[c].impl = bench_find_impl(impl_names[c]);
	}
	struct workload wl;
	/* bench_default_reps(), but 5 rather than 7 at 1M: the peers take
	 * about 20 s per repetition there, and the engine's part follows. */
	unsigned reps = n == TARGET_N ? 5 : bench_default_reps(n);
	fprintf(stderr, "tw-perf ops: wheel%s at N = %zu, %u repetitions\n",
		cols[1].impl || cols[2].impl || cols[3].impl ? " and peers" : "", n, reps);
	if (!workload_make(&wl, n, o->opt->seed ^ n)) {
		report_note(o->r, "wheel at N = %zu: out of memory for the workload", n);
		cols[0].impl = cols[1].impl = cols[2].impl = cols[3].impl = NULL;
		return;
	}
	bench_measure(&wl, reps, cols, IMPLS);
	workload_free(&wl);
	report_param(o->r, fig_name("%s", "wheel_reps", n), reps);
	for (int c = 0; c < IMPLS; c++) {
		if (!cols[c].impl)
			continue;
		for (size_t i = 0; i < WHEEL_OPS; i++)
			report_add(o->r, report_names[c],
				   fig_name("wheel_%s_ns", wheel_ops[i].name, n),
				   cols[c].fig[wheel_ops[i].fig], "ns", BETTER_LOWER);
		/* mallinfo2 sees nothing under the sanitizers: no figure rather than 0 */
		if (cols[c].fig[FIG_BYTES] > 0)
			report_add(o->r, report_names[c],
				   fig_name("%s", "wheel_bytes_per_entry", n),
				   cols[c].fig[FIG_BYTES], "B", BETTER_LOWER);
	}
}

static void engine_size(struct ops_run *o, size_t k)
{
	size_t n = o->sizes[k];
	char why[160];
	if (!ops_engine_fits(n, why, sizeof why)) {
		report_note(o->r, "engine at N = %zu skipped: %s", n, why);
		return;
	}
	fprintf(stderr, "tw-perf ops: engine at N = %zu\n", n);
	struct engine_figures *f = &o->engine[k];
	if (ops_engine_measure(n, o->opt->seed, o->opt->reserve, f) != 0)
		return;
	o->engine_done[k] = true;
	report_param(o->r, fig_name("%s", "engine_reps", n), f->reps);
	for (int op = 0; op < ENG_OPS; op++)
		report_add(o->r, "tickwheel", fig_name("engine_%s_ns", engine_op_names[op], n),
			   f->ns[op], "ns", BETTER_LOWER);
	report_add(o->r, "tickwheel", fig_name("%s", "engine_bytes_per_task", n), f->bytes_per_task,
		   "B", BETTER_LOWER);
	report_add(o->r, "tickwheel", fig_name("%s", "engine_create_ms", n), f->create_ms, "ms",
		   BETTER_LOWER);
	report_add(o->r, "tickwheel", fig_name("%s", "engine_kept_ended_mb", n),
		   f->kept_ended_bytes / 1048576.0, "MiB", BETTER_LOWER);
	if (f->miss_ns > 0)
		report_add(o->r, "tickwheel", fig_name("%s", "engine_miss_ns", n), f->miss_ns, "ns",
			   BETTER_NEITHER);
	if (f->failed)
		report_note(o->r, "WARNING: %zu engine operations at N = %zu did not return TW_OK",
			    f->failed, n);
}

/*
 * Issue 14's ratios: the engine API, one caller, against libev's timers of the same
 * invocation at the same N. The engine's figures are the caller's time on a manual clock
 * (its threads file the mail meanwhile, on the other core); libev's add + cancel stands for
 * its request timeout.
 */
static void engine_against_libev(struct ops_run *o, size_t k, const struct bench_column *libev)
{
	if (!libev->impl)
		return;
	const struct engine_figures *f = &o->engine[k];
	static const struct {
		const char *name;
		int eng;
		int fig, fig2; /* libev's figure, or the sum of two; -1: none */
		double limit;
	} ratios[] = {
		{ "add", ENG_ADD, FIG_ADD, -1, 2.0 },
		{ "cancel", ENG_CANCEL, FIG_CANCEL, -1, 2.0 },
		{ "reschedule earlier", ENG_EARLIER, FIG_RESCHEDULE, -1, 2.0 },
		{ "postpone (session reset)", ENG_POSTPONE, FIG_RESET, -1, 1.0 },
		{ "add + cancel (request timeout)", ENG_ADD_CANCEL, FIG_ADD, FIG_CANCEL, 2.0 },
	};
	for (size_t i = 0; i < sizeof ratios / sizeof ratios[0]; i++) {
		double theirs = libev->fig[ratios[i].fig] +
				(ratios[i].fig2 >= 0 ? libev->fig[ratios[i].fig2] : 0);
		double ratio = theirs > 0 ? f->ns[ratios[i].eng] / theirs : 0;
		report_note(o->r,
			    "N = %zu: engine %s %.0f ns, %.2fx libev's %.0f (target <= %.1fx): %s",
			    o->sizes[k], ratios[i].name, f->ns[ratios[i].eng], ratio, theirs,
			    ratios[i].limit,
			    ratio > 0 && ratio <= ratios[i].limit ? "met" : "MISSED");
	}
}

/* The targets at N = 1 000 000: absolute ones as targets, those
 * relative to libev as notes. */
static void judge(struct ops_run *o)
{
	for (size_t k = 0; k < o->count; k++) {
		if (o->sizes[k] != TARGET_N)
			continue;
		const struct bench_column *wheel = &o->wheel[k][0], *libev = &o->wheel[k][3];
		if (wheel->impl && wheel->fig[FIG_BYTES] > 0)
			report_target(o->r, fig_name("%s", "wheel_bytes_per_entry", TARGET_N),
				      "<=", 40);
		for (size_t i = 0; wheel->impl && i < WHEEL_OPS; i++) {
			if (!wheel_ops[i].ratio_target)
				continue;
			if (!libev->impl) {
				report_note(o->r,
					    "N = %d: no libev figures, the wheel's ratio "
					    "targets were not judged",
					    TARGET_N);
				break;
			}
			double ratio = wheel->fig[wheel_ops[i].fig] / libev->fig[wheel_ops[i].fig];
			report_note(o->r, "N = %d: wheel %s %.2fx libev (target <= %.1fx): %s",
				    TARGET_N, wheel_ops[i].name, ratio, wheel_ops[i].ratio_target,
				    ratio <= wheel_ops[i].ratio_target ? "met" : "MISSED");
		}
		if (!o->engine_done[k])
			continue;
		engine_against_libev(o, k, libev);
		report_target(o->r, fig_name("%s", "engine_postpone_ns", TARGET_N), "<=", 100);
		report_target(o->r, fig_name("%s", "engine_get_hot_ns", TARGET_N), "<=", 60);
		report_target(o->r, fig_name("%s", "engine_bytes_per_task", TARGET_N), "<=", 160);
	}
}

static void explain(struct ops_run *o, double clock_ns)
{
	struct report *r = o->r;
	for (int c = 1; c < IMPLS; c++)
		for (size_t k = 0; k < o->count; k++)
			if (o->wheel[k][c].impl) {
				report_note(r, "%s", peer_differs[c]);
				break;
			}
	report_note(r, "wheel: random dues 1 ms .. 10 min, timers touched in random "
		       "permutations; whole loops timed, median over repetitions "
		       "(perf/README.md)");
	bool bytes = false;
	for (size_t k = 0; k < o->count; k++)
		bytes |= o->wheel[k][0].impl && o->wheel[k][0].fig[FIG_BYTES] > 0;
	if (bench_malloc_is_jemalloc())
		report_note(
			r, "malloc is jemalloc here, linked for the engine; the peers' heap arrays "
			   "grow in it, bytes are its size classes");
	if (!bytes)
		report_note(r, "no bytes per wheel entry: the heap counters see nothing in this "
			       "build (sanitizers)");
	report_note(r, "wheel_expiry: the wheel advances virtual time over dues 1 ms .. 10 min; "
		       "the peers are real-clock loops, timed on one pass that fires timers due "
		       "in 1 .. 1000 ms; wheel_expiry_1s: the wheel on those dues too");
	report_note(r,
		    "engine: manual clock, nothing fires; postpone = tw_set_delay later than "
		    "the due (no mail), earlier = before where the wheel filed it (mailed), "
		    "postpone_many = postpone through tw_set_delay_many, 64 ids a call; "
		    "add = into freed slots, add_fresh = while the table grows (with "
		    "--reserve: into the room tw_config.reserve_tasks made at create); "
		    "add_cancel = a request timeout added and cancelled at once, into freed "
		    "slots; miss = one dependent random read over as much memory as the tasks "
		    "took; create = tw_engine_create; kept_ended = memory_bytes with the N tasks "
		    "cancelled and kept for retain_ms, less an empty engine's (N ended tasks kept: "
		    "N / retain_ms adds and cancels a ms)");
	report_note(r,
		    "engine on a real clock: + one CLOCK_MONOTONIC read (%.1f ns here) per "
		    "tw_add and tw_set_delay",
		    clock_ns);
}

/* Request timeouts on the real clock: what the manual clock's figures leave out. */
static void request_timeouts_real(struct report *r)
{
	struct real_figures f;
	if (ops_request_timeouts_real(&f)) {
		report_note(r, "WARNING: the real-clock request timeouts were not measured");
		return;
	}
	report_add(r, "tickwheel", "engine_request_real_ns", f.pair_ns, "ns", BETTER_LOWER);
	report_add(r, "tickwheel", "engine_request_real_wakeups", f.wakeups_per_pair, "1/pair",
		   BETTER_LOWER);
	report_note(r, "engine_request_real: real clock, nothing else armed, a 30 s timeout added "
		       "and cancelled every 50 us, 20 000 times: ns per pair in the caller, and "
		       "the wheel thread's wake-ups per pair");
}

int scenario_ops(const struct suite_options *opt, struct report *r)
{
	struct ops_run *o = calloc(1, sizeof *o);
	if (!o) {
		fprintf(stderr, "tw-perf ops: out of memory\n");
		return 2;
	}
	o->opt = opt;
	o->r = r;
	const char *sizes = opt->sizes ? opt->sizes :
			    opt->quick ? "1000,100000" :
					 "1000,100000,1000000,10000000";
	if (!parse_sizes(o, sizes)) {
		fprintf(stderr,
			"tw-perf ops: --sizes '%s': up to %d whole numbers 1 .. %u, "
			"comma-separated\n",
			sizes, MAX_SIZES, UINT32_MAX);
		free(o);
		return 2;
	}
	report_param(r, "seed", (double)opt->seed);
	report_param(r, "quick", opt->quick);
	cpu_set_t saved;
	/* the wheel alone on one CPU; the engine must not inherit that (its
	 * wheel thread would share the CPU of the caller) */
	int cpu = su_pin_last_cpu(&saved);
	report_param(r, "pinned_cpu", cpu);
	for (size_t k = 0; k < o->count; k++)
		wheel_size(o, k);
	if (cpu >= 0)
		sched_setaffinity(0, sizeof saved, &saved);
	for (size_t k = 0; k < o->count; k++)
		engine_size(o, k);
	judge(o);
	explain(o, ops_clock_read_ns());
	request_timeouts_real(r);
	ops_series(o);
	free(o);
	return 0;
}
