/*
 * callgrind_op.c - `tw-perf callgrind-op --op OP --tasks N --impl IMPL`: sets
 * up N timers of the wheel or of a peer (peer.h's timer_impl, the ones `ops`
 * times), then runs one kind of operation over all of them with callgrind
 * collecting only around that loop. Run it as
 *   valgrind --tool=callgrind --collect-atstart=no --instr-atstart=no \
 *       tw-perf callgrind-op --op add --tasks 100000
 * and divide the `totals:` line of the callgrind.out file by the figure
 * `operations` (perf/callgrind.sh does both). Outside valgrind it runs all
 * the same, uninstrumented.
 *
 *   defaults: --tasks 100000, --impl wheel, --seed; --op is required:
 *   add, cancel, reschedule, reset, expiry, expiry-short
 */
#include "bench.h"
#include "suite.h"

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

#define OP_NAMES "add, cancel, reschedule, reset, expiry, expiry-short"

enum callgrind_op { OP_ADD, OP_CANCEL, OP_RESCHEDULE, OP_RESET, OP_EXPIRY, OP_EXPIRY_SHORT };

static const char *const op_names[] = { "add",   "cancel", "reschedule",
					"reset", "expiry", "expiry-short" };

static int find_op(const char *name)
{
	for (int i = 0; name && i < (int)(sizeof op_names / sizeof op_names[0]); i++)
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

int scenario_callgrind_op(const struct suite_options *opt, struct report *r)
{
	int op = find_op(opt->op);
	size_t n = opt->tasks ? opt->tasks : 100000;
	const struct timer_impl *impl = bench_find_impl(opt->impl ? opt->impl : "wheel");
	if (op < 0 || n > UINT32_MAX || impl == NULL) {
		if (!opt->op)
			fprintf(stderr, "tw-perf callgrind-op: --op OP is needed, OP one of %s\n",
				OP_NAMES);
		else if (op < 0)
			fprintf(stderr, "tw-perf callgrind-op: --op '%s': one of %s\n", opt->op,
				OP_NAMES);
		else if (n > UINT32_MAX)
			fprintf(stderr, "tw-perf callgrind-op: --tasks: at most %u timers\n",
				UINT32_MAX);
		else
			fprintf(stderr,
				"tw-perf callgrind-op: --impl '%s': not wheel nor a peer built in\n",
				opt->impl);
		return 2;
	}
#ifndef HAVE_CALLGRIND_H
	report_note(r, "built without <valgrind/callgrind.h>: nothing was instrumented");
#endif
	report_param(r, "timers", (double)n);
	report_param(r, "seed", (double)opt->seed);
	struct workload wl;
	void *set = NULL;
	if (!workload_make(&wl, n, opt->seed ^ n) || (set = impl->create(n)) == NULL) {
		fprintf(stderr, "tw-perf callgrind-op: out of memory\n");
		workload_free(&wl);
		return 2;
	}
	prepare(impl, set, &wl, op);

	CALLGRIND_START_INSTRUMENTATION;
	CALLGRIND_ZERO_STATS;
	CALLGRIND_TOGGLE_COLLECT;
	size_t ops = run_op(impl, set, &wl, op);
	CALLGRIND_TOGGLE_COLLECT;
	CALLGRIND_STOP_INSTRUMENTATION;

	if (op != OP_CANCEL && op < OP_EXPIRY)
		impl->cancel(set, wl.order[2], n); /* every timer idle before destroy */
	impl->destroy(set);
	workload_free(&wl);
	const char *name = impl == &wheel_impl ? "tickwheel" : impl->name;
	report_add(r, name, "operations", (double)ops, "ops", BETTER_NEITHER);
	report_note(r,
		    "%s %s over %zu timers: instructions per operation = callgrind's totals / "
		    "operations",
		    impl->name, op_names[op], n);
	if (ops != n) {
		fprintf(stderr, "tw-perf callgrind-op: %zu operations, %zu expected\n", ops, n);
		return 2;
	}
	return 0;
}
