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

/* The peer columns of the tables, whether built in or not. */
static const char *const peer_names[] = { "libuv", "libevent", "libev" };
enum { PEER_COUNT = 3, COLUMN_COUNT = 1 + PEER_COUNT };

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

static void print_cell(double v, const char *why_missing)
{
	if (isnan(v))
		printf(" %10s", why_missing);
	else
		printf(" %10.1f", v);
}

static void print_table(size_t n, unsigned reps, const struct bench_column columns[COLUMN_COUNT])
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
		const struct bench_column *wheel = &columns[0], *libev = &columns[COLUMN_COUNT - 1];
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
static void choose_columns(const struct options *opt, size_t n,
			   struct bench_column columns[COLUMN_COUNT])
{
	memset(columns, 0, COLUMN_COUNT * sizeof *columns);
	columns[0].impl = &wheel_impl;
	columns[0].missing = "-";
	for (int p = 0; p < PEER_COUNT; p++) {
		struct bench_column *col = &columns[1 + p];
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

/* Measures every column at one N (bench_measure.c) and prints its table. */
static void run_size(const struct options *opt, size_t n)
{
	struct workload wl;
	if (!workload_make(&wl, n, opt->seed ^ n)) {
		fprintf(stderr, "N = %zu: out of memory for the workload\n", n);
		return;
	}
	unsigned reps = opt->reps ? opt->reps : bench_default_reps(n);
	struct bench_column columns[COLUMN_COUNT];
	choose_columns(opt, n, columns);
	bench_measure(&wl, reps, columns, COLUMN_COUNT);
	print_table(n, reps, columns);
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
	for (const char *p = text; *p != '\0';) {
		char *end;
		unsigned long long v = strtoull(p, &end, 10);
		if (end == p || v == 0 || v > UINT32_MAX || opt->size_count == 8)
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
