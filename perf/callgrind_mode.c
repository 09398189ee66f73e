/*
 * callgrind_mode.c - `bench-wheel --callgrind OP N [IMPL]`: sets up N timers,
 * then runs one kind of operation over all of them with callgrind collecting
 * only around that loop. Run it as
 *   valgrind --tool=callgrind --collect-atstart=no --instr-atstart=no \
 *       ./bench-wheel --callgrind add 100000
 * and divide the `totals:` line of the callgrind.out file by the operation
 * count printed on stdout (callgrind.sh does both).
 */
#include "bench.h"
#include "bench_modes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CALLGRIND_H
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_TOGGLE_COLLECT
#endif

enum callgrind_op { OP_ADD, OP_CANCEL, OP_RESCHEDULE, OP_RESET, OP_EXPIRY, OP_EXPIRY_SHORT };

static const char *const op_names[] = { "add",   "cancel", "reschedule",
					"reset", "expiry", "expiry-short" };

static int find_op(const char *name)
{
	for (int i = 0; i < (int)(sizeof op_names / sizeof op_names[0]); i++)
		if (strcmp(op_names[i], name) == 0)
			return i;
	return -1;
}

/* Untimed: brings the set to the state the measured operation starts from. */
static void prepare(const struct timer_impl *impl, void *set, const struct workload *wl, int op)
{
	switch (op) {
	case OP_ADD:
		break;
	case OP_CANCEL:
	case OP_RESCHEDULE:
	case OP_RESET:
		impl->add(set, wl->order[0], wl->delay[0], wl->n);
		break;
	case OP_EXPIRY:
		if (!impl->real_clock) {
			impl->expiry_arm(set, wl->order[0], wl->delay[0], wl->n,
					 BENCH_MAX_DELAY_MS);
			break;
		}
		/* a real-clock loop cannot wait 10 minutes: same as expiry-short */
		/* fall through */
	case OP_EXPIRY_SHORT:
		impl->expiry_arm(set, wl->order[0], wl->short_delay, wl->n,
				 BENCH_SHORT_MAX_DELAY_MS);
		break;
	}
}

/* The measured loop; returns how many operations it did. */
static size_t run_op(const struct timer_impl *impl, void *set, const struct workload *wl, int op)
{
	switch (op) {
	case OP_ADD:
		impl->add(set, wl->order[0], wl->delay[0], wl->n);
		return wl->n;
	case OP_CANCEL:
		impl->cancel(set, wl->order[2], wl->n);
		return wl->n;
	case OP_RESCHEDULE:
		impl->reschedule(set, wl->order[1], wl->delay[1], wl->n);
		return wl->n;
	case OP_RESET:
		impl->reset(set, wl->order[1], wl->n, BENCH_RESET_DELAY_MS);
		return wl->n;
	default:
		return impl->expire_all(set);
	}
}

int run_callgrind_mode(int argc, char **argv, uint64_t seed)
{
	int op = argc >= 2 ? find_op(argv[0]) : -1;
	size_t n = argc >= 2 ? strtoul(argv[1], NULL, 10) : 0;
	const struct timer_impl *impl = bench_find_impl(argc >= 3 ? argv[2] : "wheel");
	if (op < 0 || n == 0 || n > UINT32_MAX || impl == NULL) {
		fprintf(stderr, "usage: bench-wheel --callgrind OP N [IMPL]\n  OP: %s\n  IMPL:",
			CALLGRIND_OPS);
		for (size_t i = 0; bench_impls[i] != NULL; i++)
			fprintf(stderr, " %s", bench_impls[i]->name);
		fprintf(stderr, " (default wheel)\n");
		return 2;
	}
#ifndef HAVE_CALLGRIND_H
	fprintf(stderr, "built without <valgrind/callgrind.h>: nothing is instrumented\n");
#endif
	struct workload wl;
	void *set = NULL;
	if (!workload_make(&wl, n, seed ^ n) || (set = impl->create(n)) == NULL) {
		fprintf(stderr, "out of memory\n");
		workload_free(&wl);
		return 1;
	}
	prepare(impl, set, &wl, op);

	CALLGRIND_START_INSTRUMENTATION;
	CALLGRIND_ZERO_STATS;
	CALLGRIND_TOGGLE_COLLECT;
	size_t ops = run_op(impl, set, &wl, op);
	CALLGRIND_TOGGLE_COLLECT;
	CALLGRIND_STOP_INSTRUMENTATION;

	printf("callgrind: impl %s op %s n %zu ops %zu\n", impl->name, op_names[op], n, ops);
	if (op != OP_CANCEL && op < OP_EXPIRY)
		impl->cancel(set, wl.order[2], n); /* every timer idle before destroy */
	impl->destroy(set);
	workload_free(&wl);
	return ops == n ? 0 : 1;
}
