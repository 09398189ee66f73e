/*
 * bench_wheel.c - the wheel microbenchmark: ns per add, cancel, reschedule,
 * reset and expired timer, and bytes per timer, for the tickwheel wheel and,
 * side by side, libuv, libevent and libev; then the lumps case (lumps.c).
 * `bench-wheel --callgrind OP N [IMPL]` runs one operation for callgrind
 * (callgrind_mode.c). See README.md for what each figure means.
 */
#include "bench.h"
#include "bench_modes.h"
#include "wheel.h"

#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct timer_impl *const bench_impls[] = {
	&wheel_impl,
#ifdef HAVE_LIBUV
	&libuv_impl,
#endif
#ifdef HAVE_LIBEVENT
	&libevent_impl,
#endif
#ifdef HAVE_LIBEV
	&libev_impl,
#endif
	NULL,
};

/* The peer columns of the tables, whether built in or not. */
static const char *const peer_names[] = { "libuv", "libevent", "libev" };
enum { PEER_COUNT = 3, COLUMN_COUNT = 1 + PEER_COUNT };

const struct timer_impl *bench_find_impl(const char *name)
{
	for (size_t i = 0; bench_impls[i] != NULL; i++)
		if (strcmp(bench_impls[i]->name, name) == 0)
			return bench_impls[i];
	return NULL;
}

enum figure {
	FIG_ADD,
	FIG_CANCEL,
	FIG_RESCHEDULE,
	FIG_RESET,
	FIG_EXPIRY,       /* wheel: dues 1 ms .. 10 min; peers: 1 .. 1000 ms */
	FIG_EXPIRY_SHORT, /* everyone: dues 1 .. 1000 ms */
	FIG_BYTES,
	FIG_COUNT
};

struct figure_row {
	const char *label;
	const char *target; /* from the issue, for the wheel at 1 000 000 */
};

static const struct figure_row figure_rows[FIG_COUNT] = {
	[FIG_ADD] = { "add", "<= 0.6x libev" },
	[FIG_CANCEL] = { "cancel", "<= 0.5x libev" },
	[FIG_RESCHEDULE] = { "reschedule", "<= 1.0x libev" },
	[FIG_RESET] = { "reset to now+30 s", "" },
	[FIG_EXPIRY] = { "expiry per fired (a)", "<= 0.6x libev" },
	[FIG_EXPIRY_SHORT] = { "expiry, due 1..1000 ms", "" },
	[FIG_BYTES] = { "bytes per timer (b)", "wheel <= 40 B" },
};

struct options {
	size_t sizes[8];
	size_t size_count;
	unsigned reps; /* 0: depends on N */
	bool peers;
	const char *peer_filter; /* comma-separated peer names, or NULL: all */
	bool peers_at_10m;
	bool lumps;
	bool tables;
	int cpu; /* -1: the last CPU we may run on; -2: do not pin */
	uint64_t seed;
};

static unsigned default_reps(size_t n)
{
	if (n <= 1000)
		return 101;
	if (n <= 100000)
		return 9;
	if (n <= 1000000)
		return 7;
	return 1; /* 10 000 000: one run, to stay within a few minutes */
}

static double ns_per_op(uint64_t start, uint64_t end, size_t ops)
{
	return ops ? (double)(end - start) / (double)ops : NAN;
}

/* Fires what one expire_all() left behind, so that every timer is idle. */
static void expire_leftovers(const struct timer_impl *impl, void *set, size_t left)
{
	for (int tries = 0; left > 0 && tries < 200; tries++) {
		sleep_until_ns(now_ns() + 10000000u);
		size_t fired = impl->expire_all(set);
		left = fired < left ? left - fired : 0;
	}
	if (left > 0) {
		fprintf(stderr, "%s: %zu timers never fired; giving up\n", impl->name, left);
		exit(1);
	}
}

static double measure_expiry(const struct timer_impl *impl, void *set, const struct workload *wl,
			     const uint32_t *delay_ms, uint32_t max_delay_ms)
{
	impl->expiry_arm(set, wl->order[0], delay_ms, wl->n, max_delay_ms);
	uint64_t start = now_ns();
	size_t fired = impl->expire_all(set);
	uint64_t end = now_ns();
	if (fired != wl->n) {
		fprintf(stderr, "warning: %s fired %zu of %zu timers in one pass\n", impl->name,
			fired, wl->n);
		expire_leftovers(impl, set, wl->n - fired);
	}
	return ns_per_op(start, end, fired);
}

/*
 * One repetition of the operation sequence; each timed loop touches the
 * timers in a permutation independent of the one that filed them:
 *   add (order 0) | reschedule (order 1) | cancel (order 2) |
 *   add untimed | reset (order 1) | cancel untimed.
 */
static void measure_operations(const struct timer_impl *impl, void *set, const struct workload *wl,
			       double out[FIG_COUNT])
{
	size_t n = wl->n;
	uint64_t t0 = now_ns();
	impl->add(set, wl->order[0], wl->delay[0], n);
	uint64_t t1 = now_ns();
	impl->reschedule(set, wl->order[1], wl->delay[1], n);
	uint64_t t2 = now_ns();
	impl->cancel(set, wl->order[2], n);
	uint64_t t3 = now_ns();
	impl->add(set, wl->order[0], wl->delay[0], n);
	uint64_t t4 = now_ns();
	impl->reset(set, wl->order[1], n, BENCH_RESET_DELAY_MS);
	uint64_t t5 = now_ns();
	impl->cancel(set, wl->order[2], n);
	out[FIG_ADD] = ns_per_op(t0, t1, n);
	out[FIG_RESCHEDULE] = ns_per_op(t1, t2, n);
	out[FIG_CANCEL] = ns_per_op(t2, t3, n);
	out[FIG_RESET] = ns_per_op(t4, t5, n);
}

/* Heap bytes a set of n armed timers takes, per timer: handles, the
 * implementation's own arrays and structures (growth slack included). */
static double measure_bytes(const struct timer_impl *impl, const struct workload *wl)
{
	size_t before = heap_in_use();
	void *set = impl->create(wl->n);
	if (set == NULL)
		return NAN;
	impl->add(set, wl->order[0], wl->delay[0], wl->n);
	size_t after = heap_in_use();
	impl->cancel(set, wl->order[2], wl->n);
	impl->destroy(set);
	return (double)(after - before) / (double)wl->n;
}

/* One column of a table: an implementation, its timer set and its samples. */
struct column {
	const struct timer_impl *impl; /* NULL: not measured, see missing */
	const char *missing;           /* what the cells say when there is no figure */
	void *set;
	unsigned expiry_reps;
	double *samples; /* [FIG_COUNT][reps] */
	double fig[FIG_COUNT];
};

static double *sample(const struct column *col, unsigned reps, int figure, unsigned rep)
{
	return &col->samples[(size_t)figure * reps + rep];
}

static bool column_start(struct column *col, const struct workload *wl, unsigned reps)
{
	const struct timer_impl *impl = col->impl;
	col->expiry_reps = impl->real_clock && reps > 3 ? 3 : reps;
	col->fig[FIG_BYTES] = measure_bytes(impl, wl);
	col->samples = malloc((size_t)FIG_COUNT * reps * sizeof *col->samples);
	col->set = col->samples ? impl->create(wl->n) : NULL;
	if (col->set != NULL)
		return true;
	free(col->samples);
	col->samples = NULL;
	col->impl = NULL;
	col->missing = "failed";
	return false;
}

static void column_measure_expiry(struct column *col, const struct workload *wl, unsigned reps,
				  unsigned r)
{
	const struct timer_impl *impl = col->impl;
	double ns_short =
		measure_expiry(impl, col->set, wl, wl->short_delay, BENCH_SHORT_MAX_DELAY_MS);
	*sample(col, reps, FIG_EXPIRY_SHORT, r) = ns_short;
	*sample(col, reps, FIG_EXPIRY, r) =
		impl->real_clock ?
			ns_short :
			measure_expiry(impl, col->set, wl, wl->delay[0], BENCH_MAX_DELAY_MS);
}

/* Medians into col->fig (sorting the samples); frees the set. */
static void column_finish(struct column *col, unsigned reps)
{
	for (int f = FIG_ADD; f <= FIG_EXPIRY_SHORT; f++) {
		unsigned count = f >= FIG_EXPIRY ? col->expiry_reps : reps;
		col->fig[f] = median(sample(col, reps, f, 0), count);
	}
	col->impl->destroy(col->set);
	col->set = NULL;
}

static void print_cell(double v, const char *why_missing)
{
	if (isnan(v))
		printf(" %10s", why_missing);
	else
		printf(" %10.1f", v);
}

static void print_table(size_t n, unsigned reps, const struct column columns[COLUMN_COUNT])
{
	printf("\nN = %zu live timers: ns per operation, median of %u run%s "
	       "(real-clock expiry: %u)\n",
	       n, reps, reps > 1 ? "s" : "", reps > 3 ? 3 : reps);
	printf("%-24s %10s %10s %10s %10s %12s  %s\n", "", "wheel", "libuv", "libevent", "libev",
	       "wheel/libev", n == 1000000 ? "target" : "target (at N = 1 000 000)");
	for (int f = 0; f < FIG_COUNT; f++) {
		printf("%-24s", figure_rows[f].label);
		for (int c = 0; c < COLUMN_COUNT; c++)
			print_cell(columns[c].impl ? columns[c].fig[f] : NAN, columns[c].missing);
		const struct column *wheel = &columns[0], *libev = &columns[COLUMN_COUNT - 1];
		double ratio = wheel->impl && libev->impl ? wheel->fig[f] / libev->fig[f] : NAN;
		if (isnan(ratio))
			printf(" %12s", "-");
		else
			printf(" %11.2fx", ratio);
		printf("%s%s\n", *figure_rows[f].target ? "  " : "", figure_rows[f].target);
	}
	fflush(stdout);
}

static bool peer_selected(const struct options *opt, const char *name)
{
	if (!opt->peers)
		return false;
	if (opt->peer_filter == NULL)
		return true;
	size_t len = strlen(name);
	for (const char *p = opt->peer_filter; (p = strstr(p, name)) != NULL; p += len)
		if ((p == opt->peer_filter || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
			return true;
	return false;
}

/* Which implementation each column measures at this N, and why not. */
static void choose_columns(const struct options *opt, size_t n, struct column columns[COLUMN_COUNT])
{
	memset(columns, 0, COLUMN_COUNT * sizeof *columns);
	columns[0].impl = &wheel_impl;
	columns[0].missing = "-";
	for (int p = 0; p < PEER_COUNT; p++) {
		struct column *col = &columns[1 + p];
		col->impl = bench_find_impl(peer_names[p]);
		col->missing = "-";
		if (col->impl == NULL) {
			col->missing = "not built";
		} else if (!peer_selected(opt, peer_names[p]) ||
			   (n >= 10000000 && !opt->peers_at_10m)) {
			col->impl = NULL;
			col->missing = "skipped";
		}
	}
}

/*
 * Measures every column at one N. The implementations take turns within each
 * repetition (wheel, libuv, libevent, libev, then the next repetition), so
 * that a noisy stretch of this shared machine lands on all of them.
 */
static void run_size(const struct options *opt, size_t n)
{
	struct workload wl;
	if (!workload_make(&wl, n, opt->seed ^ n)) {
		fprintf(stderr, "N = %zu: out of memory for the workload\n", n);
		return;
	}
	unsigned reps = opt->reps ? opt->reps : default_reps(n);
	struct column columns[COLUMN_COUNT];
	choose_columns(opt, n, columns);
	for (int c = 0; c < COLUMN_COUNT; c++)
		if (columns[c].impl != NULL)
			column_start(&columns[c], &wl, reps);
	for (unsigned r = 0; r < reps; r++)
		for (int c = 0; c < COLUMN_COUNT; c++) {
			double one[FIG_COUNT];
			if (columns[c].impl == NULL)
				continue;
			measure_operations(columns[c].impl, columns[c].set, &wl, one);
			for (int f = FIG_ADD; f <= FIG_RESET; f++)
				*sample(&columns[c], reps, f, r) = one[f];
		}
	for (unsigned r = 0; r < reps; r++)
		for (int c = 0; c < COLUMN_COUNT; c++)
			if (columns[c].impl != NULL && r < columns[c].expiry_reps)
				column_measure_expiry(&columns[c], &wl, reps, r);
	for (int c = 0; c < COLUMN_COUNT; c++)
		if (columns[c].impl != NULL)
			column_finish(&columns[c], reps);
	print_table(n, reps, columns);
	for (int c = 0; c < COLUMN_COUNT; c++)
		free(columns[c].samples);
	workload_free(&wl);
}

static void pin_to_cpu(int cpu)
{
	cpu_set_t set;
	if (cpu == -2 || sched_getaffinity(0, sizeof set, &set) != 0)
		return;
	if (cpu == -1)
		for (int c = CPU_SETSIZE - 1; c >= 0 && cpu == -1; c--)
			if (CPU_ISSET(c, &set))
				cpu = c;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		perror("sched_setaffinity");
	else
		printf("pinned to CPU %d\n", cpu);
}

static void print_header(const struct options *opt)
{
	printf("tickwheel wheel benchmark: sizeof(struct wheel_entry) = %zu, "
	       "sizeof(struct wheel) = %zu\n",
	       sizeof(struct wheel_entry), sizeof(struct wheel));
	printf("implementations:");
	for (size_t i = 0; bench_impls[i] != NULL; i++)
		printf(" %s %s%s", bench_impls[i]->name, bench_impls[i]->version(),
		       bench_impls[i + 1] ? "," : "\n");
	if (bench_impls[1] == NULL)
		printf("no peer library was built in (meson option peers): the wheel runs alone\n");
	else if (!opt->peers)
		printf("peers skipped (--no-peers): the wheel runs alone\n");
	printf("Random dues 1 ms .. 10 min, timers touched in random permutations; seed %" PRIu64
	       ".\n"
	       "(a) expiry: the wheel advances virtual time to the last due tick in one loop of\n"
	       "    wheel_expire() calls. Peers are real-clock event loops: N timers due in\n"
	       "    1..1000 ms are started, the process sleeps until all are due, and one\n"
	       "    non-blocking loop iteration that fires them all is timed (uv_run NOWAIT,\n"
	       "    event_base_loop NONBLOCK|ONCE, ev_run NOWAIT), callbacks included. The ratio\n"
	       "    compares those; the next row gives the wheel with dues 1..1000 ms as well.\n"
	       "(b) heap bytes per timer with N armed: handles, the structure itself, and the\n"
	       "    implementation's heap arrays with their growth slack (mallinfo2 delta).\n"
	       "libev reschedule/reset: repeat = delay; ev_timer_again (in-place heap adjust).\n",
	       opt->seed);
}

static void usage(FILE *to)
{
	fprintf(to,
		"usage: bench-wheel [--sizes N,N,...] [--reps K] [--peers P,P,... | --no-peers]\n"
		"                   [--peers-10m]"
		" [--no-lumps | --lumps-only] [--cpu K | --no-pin] [--seed S]\n"
		"       bench-wheel --callgrind OP N [IMPL]   OP: %s\n"
		"       bench-wheel --list\n"
		"Default sizes 1000,100000,1000000,10000000; peers are skipped at 10 000 000\n"
		"unless --peers-10m.\n",
		CALLGRIND_OPS);
}

static bool parse_sizes(struct options *opt, const char *text)
{
	opt->size_count = 0;
	for (const char *p = text; *p != '\0' && opt->size_count < 8;) {
		char *end;
		unsigned long long v = strtoull(p, &end, 10);
		if (end == p || v == 0 || v > UINT32_MAX)
			return false;
		opt->sizes[opt->size_count++] = (size_t)v;
		p = *end == ',' ? end + 1 : end;
		if (*end != ',' && *end != '\0')
			return false;
	}
	return opt->size_count > 0;
}

static int parse_options(struct options *opt, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool has_value = i + 1 < argc;
		if (strcmp(a, "--sizes") == 0 && has_value) {
			if (!parse_sizes(opt, argv[++i]))
				return -1;
		} else if (strcmp(a, "--reps") == 0 && has_value) {
			opt->reps = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (strcmp(a, "--cpu") == 0 && has_value) {
			opt->cpu = atoi(argv[++i]);
		} else if (strcmp(a, "--seed") == 0 && has_value) {
			opt->seed = strtoull(argv[++i], NULL, 0);
		} else if (strcmp(a, "--peers") == 0 && has_value) {
			opt->peer_filter = argv[++i];
		} else if (strcmp(a, "--no-pin") == 0) {
			opt->cpu = -2;
		} else if (strcmp(a, "--no-peers") == 0) {
			opt->peers = false;
		} else if (strcmp(a, "--peers-10m") == 0) {
			opt->peers_at_10m = true;
		} else if (strcmp(a, "--no-lumps") == 0) {
			opt->lumps = false;
		} else if (strcmp(a, "--lumps-only") == 0) {
			opt->tables = false;
		} else {
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct options opt = {
		.sizes = { 1000, 100000, 1000000, 10000000 },
		.size_count = 4,
		.peers = true,
		.lumps = true,
		.tables = true,
		.cpu = -1,
		.seed = 20240601,
	};
	if (argc >= 2 && strcmp(argv[1], "--callgrind") == 0)
		return run_callgrind_mode(argc - 2, argv + 2, opt.seed);
	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (size_t i = 0; bench_impls[i] != NULL; i++)
			printf("%s\n", bench_impls[i]->name);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	if (parse_options(&opt, argc, argv) != 0) {
		usage(stderr);
		return 2;
	}
	pin_to_cpu(opt.cpu);
	print_header(&opt);
	for (size_t i = 0; opt.tables && i < opt.size_count; i++)
		run_size(&opt, opt.sizes[i]);
	if (opt.lumps)
		run_lumps_report(opt.seed);
	return 0;
}
