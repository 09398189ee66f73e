/*
 * blocker.c - `tw-perf blocker`: the heartbeats of `tw-perf heartbeats` (N
 * periodic timers, periods 100-500 ms, for S s) with one more timer beside
 * them on the same loop: a one-shot due 1 s into the run whose callback
 * blocks for B s (nanosleep: a blocking call, not a busy loop). What one
 * callback that blocks does to everyone else's timers.
 *
 *   defaults: --tasks 20000 --seconds 10 (--quick: 3) --period 100-500ms --block 2s;
 *   the peers only when named in --peers (their one thread blocks with it)
 *
 * Figures, over the whole run and, in a column of their own, over the block:
 * the beats' lateness (start - ideal due, as in heartbeats) p50, p99, max and
 * runs late by more than 100 ms; runs; due firings (what the periods imply,
 * dues up to the end of the run) against runs + skips; the skips by reason
 * (tickwheel's counts). The block runs from the blocker's due to the end of
 * its callback: its runs are those whose ideal due falls in it, its skips the
 * counts read by the blocking callback as it begins and as it ends. The
 * machine's wake-up floor, measured first, is a column beside them.
 */
#include "heartbeats.h"
#include "loop_measure.h"
#include "peer.h"
#include "suite_util.h"

#include <stdio.h>
#include <stdlib.h>

enum { BLOCK_AT_MS = 1000, LATE_MS = 100, DEFAULT_BLOCK_MS = 2000, DRAIN_MS = 100 };

/* What a run of the beats beside the blocker comes to, over a stretch of time. */
struct stretch {
	int64_t *late; /* the lateness of the runs due in it, ns */
	size_t runs, late_over;
	uint64_t due;
	struct loop_skips skips;
};

struct blocker {
	uint64_t block_ns, due_ns, end_ns; /* the blocker's own due, the run's end */
	/* the blocking run's start and end (0: not yet), published after the
	 * loop's skips it read then */
	_Atomic uint64_t began_ns, ended_ns;
	struct loop_skips at_begin, at_end, at_stop; /* at_stop: when the run's time was up */
	struct stretch all, block;
};

static void block(struct beats *b, uint64_t start_ns)
{
	struct blocker *k = b->extra->ctx;
	if (b->impl->skips)
		b->impl->skips(b->loop, &k->at_begin);
	atomic_store_explicit(&k->began_ns, start_ns, memory_order_release);
	monotonic_sleep_until(start_ns + k->block_ns);
	if (b->impl->skips)
		b->impl->skips(b->loop, &k->at_end);
	atomic_store_explicit(&k->ended_ns, monotonic_now_ns(), memory_order_release);
}

/* The run's time is up. A blocker still going (--block up to the end) holds
 * firings due in the run: the loop runs on until it ended and DRAIN_MS more,
 * and runs due after the end are dropped from the records (take_records). */
static void run_ended(struct beats *b)
{
	struct blocker *k = b->extra->ctx;
	k->due_ns = b->start_ns + b->extra->offset_ns;
	k->end_ns = b->end_ns;
	if (b->impl->skips)
		b->impl->skips(b->loop, &k->at_stop);
	uint64_t give_up = b->end_ns + k->block_ns + 1000 * NS_PER_MS;
	while (!atomic_load(&k->ended_ns) && monotonic_now_ns() < give_up)
		b->impl->run_until(b->loop, monotonic_now_ns() + NS_PER_MS);
	uint64_t ended = atomic_load(&k->ended_ns);
	if (ended > b->end_ns)
		b->impl->run_until(b->loop, ended + DRAIN_MS * NS_PER_MS);
}

static void note_run(struct stretch *s, int64_t late_ns)
{
	s->late[s->runs++] = late_ns;
	s->late_over += late_ns > (int64_t)(LATE_MS * NS_PER_MS);
}

/* The beats' records, final: each run's ideal due is first due + k x period,
 * k counting the runs and skips before it. */
static void take_records(struct beats *b)
{
	struct blocker *k = b->extra->ctx;
	size_t room = 1;
	for (size_t i = 0; i < b->count; i++)
		room += b->beat[i].n;
	k->all.late = malloc(room * sizeof *k->all.late);
	k->block.late = malloc(room * sizeof *k->block.late);
	if (!k->all.late || !k->block.late)
		return;
	uint64_t from = k->due_ns, ended = atomic_load(&k->ended_ns);
	uint64_t to = ended && ended < b->end_ns ? ended : b->end_ns;
	for (size_t i = 0; i < b->count; i++) {
		struct beat *t = &b->beat[i];
		uint64_t due_index = 0;
		for (size_t j = 0; j < t->n; j++) {
			due_index += t->skips_before[j];
			uint64_t due = t->first_due_ns + due_index++ * t->period_ns;
			if (due > b->end_ns) {
				t->n = j; /* due after the end: the loop ran on (run_ended) */
				break;
			}
			note_run(&k->all, t->late[j]);
			if (atomic_load(&k->began_ns) && due >= from && due <= to)
				note_run(&k->block, t->late[j]);
		}
		k->all.due +=
			su_dues_in(t->first_due_ns, t->period_ns, t->first_due_ns - 1, b->end_ns);
		if (atomic_load(&k->began_ns))
			k->block.due += su_dues_in(t->first_due_ns, t->period_ns, from - 1, to);
	}
	k->all.skips = k->at_stop;
	/* a blocker still going when the time was up ended after at_stop was read */
	const struct loop_skips *end = ended && ended < b->end_ns ? &k->at_end : &k->at_stop;
	k->block.skips = (struct loop_skips){ end->overlap - k->at_begin.overlap,
					      end->overload - k->at_begin.overload,
					      end->missed - k->at_begin.missed };
}

static void report_stretch(struct report *r, const char *impl, struct stretch *s, bool lateness)
{
	if (lateness) {
		lateness_sort(s->late, s->runs);
		report_add(r, impl, "lateness_p50", lateness_quantile_us(s->late, s->runs, 0.5),
			   "us", BETTER_LOWER);
		report_add(r, impl, "lateness_p99", lateness_quantile_us(s->late, s->runs, 0.99),
			   "us", BETTER_LOWER);
		report_add(r, impl, "lateness_max", lateness_quantile_us(s->late, s->runs, 1), "us",
			   BETTER_LOWER);
		report_add(r, impl, "runs", (double)s->runs, "runs", BETTER_NEITHER);
	}
	report_add(r, impl, "late_over_100ms", (double)s->late_over, "runs", BETTER_LOWER);
	report_add(r, impl, "due_firings", (double)s->due, "firings", BETTER_NEITHER);
	report_add(r, impl, "skipped_overlap", (double)s->skips.overlap, "firings", BETTER_LOWER);
	report_add(r, impl, "skipped_overload", (double)s->skips.overload, "firings", BETTER_LOWER);
	report_add(r, impl, "skipped_missed", (double)s->skips.missed, "firings", BETTER_LOWER);
	report_add(r, impl, "due_not_run_or_skipped",
		   (double)s->due - (double)s->runs - (double)loop_skips_total(&s->skips),
		   "firings", BETTER_NEITHER);
}

/* The figures of one loop's blocker, after heartbeats' own. */
static void report_blocker(struct report *r, const char *impl, struct blocker *k)
{
	uint64_t began = atomic_load(&k->began_ns), ended = atomic_load(&k->ended_ns);
	if (!k->all.late || !k->block.late) {
		report_note(r, "%s: out of memory for the block's figures", impl);
		return;
	}
	report_stretch(r, impl, &k->all, false); /* heartbeats reported its lateness and runs */
	report_add(r, impl, "blocker_started_late", began ? (double)(began - k->due_ns) / 1e6 : 0,
		   "ms", BETTER_LOWER);
	report_add(r, impl, "blocker_held", began ? (double)(ended - began) / 1e6 : 0, "ms",
		   BETTER_NEITHER);
	if (ended > k->end_ns)
		report_note(r,
			    "%s: the blocker ended %.1f ms after the run's end; the loop ran on "
			    "until %d ms after it, for the firings due in the run",
			    impl, (double)(ended - k->end_ns) / 1e6, DRAIN_MS);
	if (!began) {
		report_note(r, "%s: the blocker never ran", impl);
		return;
	}
	char column[64];
	snprintf(column, sizeof column, "%s in block", impl);
	report_stretch(r, column, &k->block, true);
}

int scenario_blocker(const struct suite_options *opt, struct report *r)
{
	struct params p = heartbeats_params(opt, 20000, r);
	uint64_t block_ms = opt->block_ms ? opt->block_ms : DEFAULT_BLOCK_MS;
	report_param(r, "block_ms", (double)block_ms);
	report_param(r, "block_at_ms", BLOCK_AT_MS);
	if ((double)(BLOCK_AT_MS + block_ms) > p.seconds * 1e3) {
		fprintf(stderr,
			"tw-perf blocker: --block %llu ms: the blocker starts %d ms in and must "
			"end within the run (--seconds %g)\n",
			(unsigned long long)block_ms, BLOCK_AT_MS, p.seconds);
		return 2;
	}
	const struct loop_impl *impls[SUITE_LOOPS_MAX];
	size_t n = opt->peers ? loops_wanted(opt, impls) : (impls[0] = &tickwheel_loop, 1);
	struct outcome *o = calloc(n, sizeof *o);
	struct blocker *k = calloc(n, sizeof *k);
	if (!o || !k) {
		free(o);
		free(k);
		fprintf(stderr, "tw-perf: blocker: out of memory\n");
		return 2;
	}
	struct wake_floor floor;
	bool floor_measured = heartbeats_measure_floor(&p, r, &floor);
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		k[i].block_ns = block_ms * NS_PER_MS;
		struct beats_extra extra = { .offset_ns = BLOCK_AT_MS * NS_PER_MS,
					     .fire = block,
					     .ended = run_ended,
					     .records = take_records,
					     .ctx = &k[i] };
		rc = heartbeats_run(impls[i], &p, r, &o[i], &extra);
		if (!rc)
			report_blocker(r, impls[i]->name, &k[i]);
	}
	if (!rc && floor_measured)
		wake_floor_report(r, "wake-up floor", &floor);
	report_target(r, "late_over_100ms", "<=", 0);
	for (size_t i = 1; i < n; i++)
		report_note(r, "%s: %s", impls[i]->name, impls[i]->differs);
	report_note(r,
		    "the blocker: a one-shot due %d ms after the beats' start, its callback in "
		    "nanosleep for %llu ms; 'in block': runs and dues from its due to its end, "
		    "skips counted by the engine between its callback's start and end",
		    BLOCK_AT_MS, (unsigned long long)block_ms);
	report_note(r, "due_firings: dues the periods imply up to the end of the run; "
		       "due_not_run_or_skipped = due - runs - skips: firings handed out but not "
		       "started when the loop was stopped (the last ms); skipped (from the runs) "
		       "leaves out skips after a timer's last run");
	for (size_t i = 0; i < n; i++) {
		free(k[i].all.late);
		free(k[i].block.late);
	}
	free(k);
	free(o);
	return rc;
}
