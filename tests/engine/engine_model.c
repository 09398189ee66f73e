/*
 * engine_model.c - see engine_model.h. Every rule here is read from
 * api/tickwheel.h; "fine points:" marks a rule its section of that name
 * decides, "header gap:" one the header still leaves open (the model's reading).
 */
#include "engine_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An inconsistency of the model itself, not of the engine: stop at once. */
#define model_bug(...)                                            \
	do {                                                      \
		fprintf(stderr, "engine_model.c:%d: ", __LINE__); \
		fprintf(stderr, __VA_ARGS__);                     \
		fputc('\n', stderr);                              \
		abort();                                          \
	} while (0)

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return b >= MODEL_SKIP_CAP - a ? MODEL_SKIP_CAP : a + b;
}

void model_init(struct model *m, unsigned max_failures, uint64_t max_tasks, uint32_t cap_labels,
		model_plan_fn plan, void *plan_arg)
{
	memset(m, 0, sizeof *m);
	m->max_failures = max_failures;
	m->max_tasks = max_tasks;
	m->cap_labels = cap_labels;
	m->task = calloc(cap_labels, sizeof *m->task);
	m->live = calloc(cap_labels, sizeof *m->live);
	if (m->task == NULL || m->live == NULL)
		model_bug("out of memory");
	m->plan = plan;
	m->plan_arg = plan_arg;
}

void model_free(struct model *m)
{
	free(m->task);
	free(m->live);
	m->task = NULL;
	m->live = NULL;
}

tw_state model_state(const struct model_task *t)
{
	if (t->end)
		return (tw_state)t->end;
	if (t->paused)
		return TW_PAUSED;
	/* fine points: the state of a task paused (or cancelled) while its run goes, and of one
	 * resumed while it goes: here PAUSED (STOPPED) at once, and RUNNING after the resume. */
	if (t->running || t->queued)
		return TW_RUNNING;
	return TW_WAITING;
}

static void live_remove(struct model *m, struct model_task *t)
{
	uint32_t i = t->live_index;
	if (i >= m->n_live || &m->task[m->live[i]] != t)
		model_bug("live list broken");
	uint32_t last = m->live[--m->n_live];
	m->live[i] = last;
	m->task[last].live_index = i;
}

/* ---- filing into the wheel's milliseconds ---- */

static void file_at(struct model *m, struct model_task *t, uint64_t tick)
{
	t->filed = true;
	t->filed_tick = tick;
	t->filed_seq = ++m->seq;
}

/*
 * A new due for a task that is not paused. "A task added, moved earlier or resumed is
 * filed when the wheel thread takes in that change [on the manual clock: at the next
 * tw_advance], and it takes changes in the order they were made - except that a task
 * changed again before its earlier change was taken in keeps that earlier change's place.
 * A task moved later is filed into its new millisecond when its previous due comes round,
 * behind what is there then; a task set to a due in the millisecond it is already filed
 * in keeps its place."
 */
static void set_due(struct model *m, struct model_task *t, uint64_t due)
{
	/* fine points: "moved later" is read against the millisecond the task is filed in (its
	 * previous due), also when it was moved before; TW_NEVER counts as moved later: the
	 * task stays filed, is dropped from the wheel when that millisecond comes round, and a
	 * due set back into that millisecond meanwhile keeps its place. */
	t->due = due;
	bool later = t->filed && (due == MODEL_NO_DUE || due >= t->filed_tick);
	if (!later && !t->change_waits) {
		t->change_waits = true;
		t->change_seq = ++m->seq;
	}
}

struct change {
	uint64_t seq;
	uint32_t label;
};

static int change_cmp(const void *a, const void *b)
{
	const struct change *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The start of a tw_advance: the changes made since the last one are taken in, in the
 * order of each task's first change, each with the task's due as it is now. */
static void take_in_changes(struct model *m)
{
	static struct change order[MODEL_QUEUE_CAP];
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->n_live; i++) {
		const struct model_task *t = &m->task[m->live[i]];
		if (!t->change_waits)
			continue;
		if (n == MODEL_QUEUE_CAP)
			model_bug("too many changes");
		order[n++] = (struct change){ t->change_seq, m->live[i] };
	}
	qsort(order, n, sizeof order[0], change_cmp);
	for (uint32_t i = 0; i < n; i++) {
		struct model_task *t = &m->task[order[i].label];
		t->change_waits = false;
		if (t->paused || t->due == MODEL_NO_DUE)
			t->filed = false;
		else if (!t->filed || t->due < t->filed_tick)
			file_at(m, t, t->due);
	}
}

static uint64_t due_after(const struct model *m, uint64_t delay)
{
	return delay == TW_NEVER ? MODEL_NO_DUE : m->now + delay;
}

/* ---- skips ---- */

enum reason { OVERLAP, OVERLOAD, MISSED };

static void skip(struct model *m, struct model_task *t, enum reason why, uint64_t n)
{
	uint64_t *own = why == OVERLAP ? &t->overlap : why == OVERLOAD ? &t->overload : &t->missed;
	uint64_t *total = why == OVERLAP  ? &m->totals.overlap :
			  why == OVERLOAD ? &m->totals.overload :
					    &m->totals.missed;
	*own = sat_add(*own, n);
	*total += n;
	t->skipped_since = sat_add(t->skipped_since, n);
}

/*
 * Drops the task's firings that have not started: "a firing handed to an executor but not
 * started is dropped and counted as missed". The skips such a firing would have reported
 * go to the next run that starts, with the dropped firing itself.
 */
static void drop_firings(struct model *m, uint32_t label, struct model_task *t)
{
	for (uint32_t i = m->q_head; i != m->q_tail; i++) {
		struct model_firing *f = &m->queue[i % MODEL_QUEUE_CAP];
		if (f->label != label || f->dropped)
			continue;
		f->dropped = true;
		t->queued--;
		t->undrained++;
		m->undrained_total++;
		skip(m, t, MISSED, 1);
		t->skipped_since = sat_add(t->skipped_since, f->skipped);
	}
	/* fine points: a firing waiting for the task's own run (TW_RUN_LATE, a one-shot) when
	 * the task is paused, cancelled or stopped: dropped and counted as missed, as a firing
	 * handed out and not started. */
	if (t->late) {
		t->late = false;
		skip(m, t, MISSED, 1);
		t->skipped_since = sat_add(t->skipped_since, t->late_skipped);
	}
}

/* fine points: a task paused (or ended) has no due: next_due_ns 0 until tw_resume gives one. */
static void unfile(struct model_task *t)
{
	t->filed = false;
	t->due = MODEL_NO_DUE;
}

static void do_pause(struct model *m, uint32_t label, struct model_task *t)
{
	t->paused = true;
	t->paused_by_failures = false;
	t->due = MODEL_NO_DUE; /* the wheel drops it when its millisecond comes round */
	/* fine points: a delay given before the pause is not one "given while paused". */
	t->pending_delay_set = false;
	drop_firings(m, label, t);
}

static void release(struct model_task *t)
{
	if (t->released)
		model_bug("released twice");
	t->released = true;
}

static void end_task(struct model *m, uint32_t label, struct model_task *t)
{
	t->end = TW_STOPPED;
	m->totals.stopped++;
	unfile(t);
	drop_firings(m, label, t);
	t->hold = false;
	/* "release(arg) is called exactly once, after the last run returned", by tw_cancel
	 * itself when no run is going: "a firing queued but not started counts as none". */
	if (!t->running)
		release(t);
	live_remove(m, t);
}

static void complete(struct model *m, struct model_task *t)
{
	t->end = TW_COMPLETED;
	m->totals.completed++;
	unfile(t);
	release(t);
	live_remove(m, t);
}

/* ---- the executor ---- */

static void push_firing(struct model *m, uint32_t label, struct model_task *t, uint64_t due,
			uint64_t skipped)
{
	if (m->q_tail - m->q_head == MODEL_QUEUE_CAP)
		model_bug("executor queue overflow");
	m->queue[m->q_tail++ % MODEL_QUEUE_CAP] = (struct model_firing){
		.label = label, .due = due, .skipped = skipped, .epoch = m->epoch, .step = m->step
	};
	t->queued++;
}

static void hand_out(struct model *m, uint32_t label, struct model_task *t, uint64_t due)
{
	/* fine points: tw_fire.skipped counts the skips of the dues between the previous run's
	 * and this one's; a skip that comes while this firing waits to start is the next run's. */
	push_firing(m, label, t, due, t->skipped_since);
	t->skipped_since = 0;
}

static void make_late(struct model_task *t, uint64_t due, bool periodic)
{
	t->late = true;
	t->late_oneshot = !periodic;
	t->late_due = due;
	t->late_skipped = t->skipped_since;
	t->skipped_since = 0;
}

/* A later due while a firing waits for the task's run: "one firing waits at most", the
 * later one; the one it replaces is skipped for overlap and reported by the run. */
static void replace_late(struct model *m, struct model_task *t, uint64_t due, bool periodic)
{
	skip(m, t, OVERLAP, 1);
	t->late_due = due;
	t->late_oneshot = !periodic;
	t->late_skipped = sat_add(t->late_skipped, t->skipped_since);
	t->skipped_since = 0;
}

/* A due firing: run it, let it wait for the task's run, or skip it. */
static void dispose(struct model *m, uint32_t label, struct model_task *t, uint64_t due,
		    bool periodic)
{
	/* A firing dropped by tw_pause keeps the task's place until an executor takes it out:
	 * dues meanwhile are judged as if it still waited. */
	bool going = t->running > 0, waiting = t->queued > 0 || t->undrained > 0;
	if (periodic) {
		if (!t->concurrent && going) {
			if (!t->run_late)
				skip(m, t, OVERLAP, 1);
			else if (t->late)
				replace_late(m, t, due, true);
			else
				make_late(t, due, true);
		} else if (waiting) {
			/* fine points: concurrent tasks too: a second firing never waits */
			skip(m, t, OVERLOAD, 1);
		} else {
			hand_out(m, label, t, due);
		}
		return;
	}
	/*
	 * A one-shot's firing is never lost; a task made a one-shot by tw_set_period(0) is one
	 * at this firing (fine points: the header's example is a one-shot re-armed from its own
	 * callback). fine points: a TW_CONCURRENT one-shot due while its
	 * previous run goes is handed out at once (its runs may overlap); one due while its
	 * previous firing waits to start (or, serial, while its run goes) waits and is handed
	 * out when that run returns; a second due while one waits (a re-arm meanwhile)
	 * replaces it, since "a task has at most one firing waiting".
	 */
	if ((!t->concurrent && going) || waiting || t->late) {
		if (t->late)
			replace_late(m, t, due, false);
		else
			make_late(t, due, false);
		return;
	}
	hand_out(m, label, t, due);
}

/* The wheel reaches a task's due D. */
static void fire_due(struct model *m, uint32_t label, struct model_task *t, uint64_t due)
{
	if (t->period) {
		/* "the engine fell behind by whole periods: the task runs once for its latest
		 * due and stays on its phase"; the manual clock jumps to the new time at once
		 * ("callbacks see the new time as now"). fine points: the firing is handed out
		 * in the walk at the millisecond it was filed in, not at the latest due's; and
		 * the missed periods are counted first, then the latest due is judged like any
		 * firing (overlap, overload, or a wait with TW_RUN_LATE). */
		uint64_t behind = (m->now - due) / t->period;
		if (behind)
			skip(m, t, MISSED, behind);
		uint64_t latest = due + behind * t->period;
		t->due = latest + t->period;
		file_at(m, t, t->due);
		dispose(m, label, t, latest, true);
	} else {
		t->due = MODEL_NO_DUE;
		t->armed = false;
		dispose(m, label, t, due, false);
	}
}

struct cand {
	uint64_t tick, seq;
	uint32_t label;
};

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	if (x->tick != y->tick)
		return x->tick < y->tick ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static struct cand cands[2 * MODEL_QUEUE_CAP];

/* tw_advance's hand-out: everything filed up to now, by millisecond, then by filing order. */
static void walk(struct model *m)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->n_live; i++) {
		struct model_task *t = &m->task[m->live[i]];
		if (t->filed && t->filed_tick <= m->now) {
			if (n == MODEL_QUEUE_CAP)
				model_bug("too many due tasks");
			cands[n++] = (struct cand){ t->filed_tick, t->filed_seq, m->live[i] };
		}
	}
	qsort(cands, n, sizeof cands[0], cand_cmp);
	for (uint32_t i = 0; i < n; i++) {
		struct cand c = cands[i];
		struct model_task *t = &m->task[c.label];
		if (!t->filed || t->filed_tick != c.tick || t->filed_seq != c.seq)
			model_bug("stale walk entry");
		m->step++;
		t->filed = false;
		if (t->due == MODEL_NO_DUE)
			continue;
		if (t->due < c.tick)
			model_bug("due %llu before its millisecond %llu",
				  (unsigned long long)t->due, (unsigned long long)c.tick);
		if (t->due > c.tick) {
			/* moved later: filed into its new millisecond now, behind what is there */
			file_at(m, t, t->due);
			if (t->due <= m->now) {
				uint32_t j = n++;
				if (n > sizeof cands / sizeof cands[0])
					model_bug("walk overflow");
				struct cand nc = { t->filed_tick, t->filed_seq, c.label };
				while (j > i + 1 && cand_cmp(&cands[j - 1], &nc) > 0) {
					cands[j] = cands[j - 1];
					j--;
				}
				cands[j] = nc;
			}
			continue;
		}
		fire_due(m, c.label, t, c.tick);
	}
}

static struct model_run *expect_push(struct model *m)
{
	if (m->n_expect == MODEL_EXPECT_CAP) {
		m->expect_overflow = true;
		return &m->expect[MODEL_EXPECT_CAP - 1];
	}
	return &m->expect[m->n_expect++];
}

static int act(struct model *m, uint32_t label, struct model_plan *plan)
{
	switch (plan->action) {
	case ACT_SET_DELAY:
		return model_set_delay(m, label, plan->arg);
	case ACT_SET_PERIOD:
		return model_set_period(m, label, plan->arg);
	case ACT_PAUSE:
		return model_pause(m, label);
	case ACT_CANCEL:
		return model_cancel(m, label);
	case ACT_QUIESCE:
		return -TW_ECALLBACK;
	default:
		return 0;
	}
}

/*
 * A firing of the task left the executor (its run returned, or it was dropped): the one
 * that waits for it "runs once right after that run returns", next on the same executor,
 * before the firings queued there; while another firing of the task still waits to start,
 * when that one leaves ("a task has at most one firing waiting"), also one dropped by
 * tw_pause (it keeps the task's place until the executor takes it out).
 */
static void run_late_firing(struct model *m, uint32_t label, struct model_task *t)
{
	if (!t->late || t->queued || t->undrained)
		return;
	push_firing(m, label, t, t->late_due, t->late_skipped);
	struct model_firing f = m->queue[--m->q_tail % MODEL_QUEUE_CAP];
	m->queue[--m->q_head % MODEL_QUEUE_CAP] = f;
	t->late = false;
}

static void finish_run(struct model *m, uint32_t label, struct model_task *t, bool fail)
{
	if (!t->running)
		model_bug("finish without a run");
	t->running--;
	if (fail) {
		t->failures++;
		m->totals.failures++;
		t->consecutive++;
		/* "max_failures failures in a row pause the task, one-shots included". header
		 * gap: a task already paused or ended stays so, and paused_by_failures is set
		 * only when the failure pauses it; failures still count on an ended task. */
		if (m->max_failures && t->consecutive >= m->max_failures && !t->end && !t->paused) {
			do_pause(m, label, t);
			t->paused_by_failures = true;
		}
	} else {
		t->consecutive = 0;
	}
	if (t->end == TW_STOPPED) {
		if (!t->running && !t->released)
			release(t);
		return;
	}
	if (t->end || t->paused)
		return;
	if (t->late) {
		run_late_firing(m, label, t);
		return;
	}
	/* "0 makes the task a one-shot that completes after that run". fine points: a one-shot
	 * given a period after its firing was handed out still completes, unless re-armed. */
	if (!t->armed && !t->running && !t->queued)
		complete(m, t);
}

static void start_run(struct model *m, uint32_t label, struct model_task *t,
		      const struct model_firing *f)
{
	t->queued--;
	t->running++;
	t->runs++;
	t->last_late = m->now - f->due;
	if (t->last_late > t->max_late)
		t->max_late = t->last_late;
	m->totals.runs++;
	struct model_run *r = expect_push(m);
	struct model_plan plan;
	memset(&plan, 0, sizeof plan);
	m->plan(m, label, t->runs, &plan);
	plan.run = t->runs;
	plan.hold = false;
	if (t->hold) {
		plan.hold = true;
		t->hold = false;
		if (t->hold_action) {
			plan.action = t->hold_action;
			plan.arg = 0;
		}
	}
	*r = (struct model_run){
		.label = label, .due = f->due, .run = t->runs, .skipped = f->skipped
	};
	if (plan.action != ACT_STOP && plan.action != ACT_DESTROY)
		r->action_rc = act(m, label, &plan);
	r->plan = plan;
	if (plan.hold) {
		m->held = true;
		m->held_label = label;
		m->held_plan = plan;
		m->hold_started = true;
		return;
	}
	finish_run(m, label, t, plan.fail);
}

static void drain(struct model *m)
{
	while (!m->held && m->q_head != m->q_tail) {
		struct model_firing f = m->queue[m->q_head++ % MODEL_QUEUE_CAP];
		struct model_task *t = &m->task[f.label];
		if (f.dropped) {
			t->undrained--;
			m->undrained_total--;
			if (!t->end && !t->paused)
				run_late_firing(m, f.label, t);
			continue;
		}
		start_run(m, f.label, t, &f);
	}
}

/* ---- operations ---- */

int model_add(struct model *m, uint32_t label, const struct model_spec *spec)
{
	if (label >= m->cap_labels || (label < m->n_labels && m->task[label].added))
		model_bug("bad label %u", label);
	if (label >= m->n_labels)
		m->n_labels = label + 1;
	/* fine points: which error wins when several apply; the driver never mixes them. */
	if (m->stopped)
		return -TW_ESHUTDOWN;
	if (spec->no_callback || spec->no_out ||
	    (spec->flags & ~(unsigned)(TW_CONCURRENT | TW_RUN_LATE)))
		return -TW_EINVAL;
	/* "The longest delay or period accepted"; TW_NEVER "is not a period" */
	if ((spec->delay > TW_MAX_DELAY_MS && spec->delay != TW_NEVER) ||
	    spec->period > TW_MAX_DELAY_MS)
		return -TW_ERANGE;
	/* fine points: "live" tasks for max_tasks are those not completed or stopped. */
	if (m->max_tasks && m->n_live >= m->max_tasks)
		return -TW_ELIMIT;
	struct model_task *t = &m->task[label];
	memset(t, 0, sizeof *t);
	t->added = true;
	/* fine points: TW_RUN_LATE is accepted on any task and matters only while it is
	 * periodic and serial. */
	t->concurrent = spec->flags & TW_CONCURRENT;
	t->run_late = spec->flags & TW_RUN_LATE;
	t->period = spec->period;
	t->due = MODEL_NO_DUE;
	t->last_delay = spec->delay;
	t->armed = true;
	t->plan_seed = spec->plan_seed;
	t->live_index = m->n_live;
	m->live[m->n_live++] = label;
	set_due(m, t, due_after(m, spec->delay));
	return TW_OK;
}

/* The checks every call on a task makes. fine points: their order (an argument error before
 * an unknown id or a wrong state; -TW_ESHUTDOWN before all). */
static int lookup(struct model *m, uint32_t label, struct model_task **out)
{
	if (m->stopped)
		return -TW_ESHUTDOWN;
	*out = model_task(m, label);
	return *out ? TW_OK : -TW_ENOTFOUND;
}

int model_set_delay(struct model *m, uint32_t label, uint64_t delay)
{
	if (m->stopped)
		return -TW_ESHUTDOWN;
	if (delay > TW_MAX_DELAY_MS && delay != TW_NEVER)
		return -TW_ERANGE;
	struct model_task *t;
	int rc = lookup(m, label, &t);
	if (rc)
		return rc;
	if (t->end)
		return -TW_ESTATE;
	t->last_delay = delay;
	if (t->paused) {
		t->pending_delay_set = true;
		t->pending_delay = delay;
		return TW_OK;
	}
	/* "On a one-shot whose firing was handed out it re-arms the task". fine points: TW_NEVER
	 * re-arms it too (it waits, no due, instead of completing). "The new due replaces a
	 * firing that came due and waits for the task's run to return: that firing counts as
	 * overlap, in skipped_overlap and the next run's tw_fire.skipped". */
	t->armed = true;
	if (t->late) { /* the skips it would have reported go to the next run, with it */
		t->late = false;
		skip(m, t, OVERLAP, 1);
		t->skipped_since = sat_add(t->skipped_since, t->late_skipped);
	}
	set_due(m, t, due_after(m, delay));
	return TW_OK;
}

int model_set_delay_many(struct model *m, const uint32_t *labels, size_t n, bool null_ids,
			 uint64_t delay, int *results)
{
	if (m->stopped)
		return -TW_ESHUTDOWN;
	if (null_ids && n > 0)
		return -TW_EINVAL;
	if (delay > TW_MAX_DELAY_MS && delay != TW_NEVER)
		return -TW_ERANGE;
	/* fine points: the ids are set in array order, as that many tw_set_delay calls. */
	int first = TW_OK;
	for (size_t i = 0; i < n; i++) {
		int rc = model_set_delay(m, labels[i], delay);
		results[i] = rc;
		if (rc && !first)
			first = rc;
	}
	return first;
}

int model_set_period(struct model *m, uint32_t label, uint64_t period)
{
	if (m->stopped)
		return -TW_ESHUTDOWN;
	if (period > TW_MAX_DELAY_MS)
		return -TW_ERANGE;
	struct model_task *t;
	int rc = lookup(m, label, &t);
	if (rc)
		return rc;
	if (t->end)
		return -TW_ESTATE;
	/* "From the next firing on": the due already set stays. A periodic firing that waits
	 * for the task's run is skipped for overlap when the period changes. */
	if (t->late && !t->late_oneshot && period != t->period) {
		t->late = false;
		skip(m, t, OVERLAP, 1);
		t->skipped_since = sat_add(t->skipped_since, t->late_skipped);
	}
	t->period = period;
	return TW_OK;
}

int model_pause(struct model *m, uint32_t label)
{
	struct model_task *t;
	int rc = lookup(m, label, &t);
	if (rc)
		return rc;
	if (t->end || t->paused)
		return -TW_ESTATE;
	do_pause(m, label, t);
	return TW_OK;
}

int model_resume(struct model *m, uint32_t label)
{
	struct model_task *t;
	int rc = lookup(m, label, &t);
	if (rc)
		return rc;
	if (t->end || !t->paused)
		return -TW_ESTATE;
	t->paused = false;
	t->paused_by_failures = false;
	t->consecutive = 0;
	/* "Next due = now + period (a one-shot, or a task given a delay while paused: + that
	 * delay)". fine points: a one-shot's delay is the last one given to it (tw_add or
	 * tw_set_delay), TW_NEVER included (then it waits with no due); a task made a one-shot
	 * by tw_set_period(0) likewise; a resumed task is filed anew, behind what is there. */
	uint64_t delay = t->pending_delay_set ? t->pending_delay :
			 t->period            ? t->period :
						t->last_delay;
	t->pending_delay_set = false;
	t->armed = true;
	set_due(m, t, due_after(m, delay));
	return TW_OK;
}

int model_cancel(struct model *m, uint32_t label)
{
	struct model_task *t;
	int rc = lookup(m, label, &t);
	if (rc)
		return rc;
	if (t->end)
		return -TW_ESTATE;
	end_task(m, label, t);
	return TW_OK;
}

int model_get(struct model *m, uint32_t label)
{
	/* After a stop, until destroy, the tasks it keeps answer with their final state. */
	struct model_task *t = model_task(m, label);
	return t ? TW_OK : -TW_ENOTFOUND;
}

int model_advance(struct model *m, uint64_t ms)
{
	m->n_expect = 0;
	m->expect_overflow = false;
	m->hold_started = false;
	if (m->stopped)
		return -TW_ESHUTDOWN;
	take_in_changes(m);
	m->now += ms;
	m->epoch++;
	m->step = 0;
	walk(m);
	drain(m);
	return TW_OK;
}

void model_unhold(struct model *m)
{
	m->n_expect = 0;
	m->expect_overflow = false;
	m->hold_started = false;
	if (!m->held)
		return;
	m->held = false;
	uint32_t label = m->held_label;
	struct model_task *t = &m->task[label];
	if (m->held_plan.action == ACT_STOP || m->held_plan.action == ACT_DESTROY) {
		/* "tw_engine_stop stops the engine and waits for the other runs only (the
		 * caller's task is released after its run returns)"; destroy stops it at once. */
		m->stop_rc = model_stop(m, true);
		if (m->held_plan.action == ACT_DESTROY)
			m->destroyed = true;
	}
	finish_run(m, label, t, m->held_plan.fail);
	drain(m);
}

int model_stop(struct model *m, bool from_callback)
{
	if (m->stopped)
		return -TW_ESHUTDOWN;
	m->stopped = true;
	bool going = false; /* "waits for the runs": of ended tasks too */
	for (uint32_t label = 0; label < m->n_labels; label++)
		going |= m->task[label].running > 0;
	while (m->n_live) {
		uint32_t label = m->live[m->n_live - 1];
		end_task(m, label, &m->task[label]);
	}
	/* The driver stops with a drain limit of 0 when a run is held: it cannot return. */
	return going && !from_callback ? -TW_ETIMEDOUT : TW_OK;
}

void model_destroy(struct model *m)
{
	for (uint32_t i = 0; i < m->n_labels; i++)
		if (m->task[i].added)
			m->task[i].released = true;
	m->destroyed = true;
}
