/*
 * engine_model.h - a reference model of the engine on the manual clock, written
 * from api/tickwheel.h alone, that test_engine_model.c holds the engine against.
 *
 * The model is single-threaded and deterministic: it plays the wheel's walk of
 * a tw_advance, the executor's queue (one FIFO: with one executor the order of
 * runs is observable) and every callback's action, and says what each call
 * must return, which runs start in which order with which tw_fire, and what
 * tw_get and tw_stats must show after each step. Tasks are named by labels
 * (the index of the operation that added them), never by engine ids, so that
 * an operation sequence stays meaningful when the shrinker removes some.
 *
 * Where the header is silent the model follows one reading, marked
 * "header gap" here and in engine_model.c.
 */
#ifndef TICKWHEEL_TESTS_ENGINE_ENGINE_MODEL_H
#define TICKWHEEL_TESTS_ENGINE_ENGINE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tickwheel.h"

/* A task's due: none (TW_NEVER, paused, ended, a fired one-shot). */
#define MODEL_NO_DUE UINT64_MAX
/* A task's own skip counts and tw_fire.skipped stop here. */
#define MODEL_SKIP_CAP UINT64_C(0xffffffff)

enum {
	MODEL_QUEUE_CAP = 8192, /* firings handed out and not started; far above what a run holds */
	MODEL_EXPECT_CAP = 4096, /* runs started by one step */
};

/* What a callback does in one run, besides returning fail ? -1 : 0. */
enum model_action {
	ACT_NONE,
	ACT_SET_DELAY,  /* tw_set_delay on its own task, arg = delay */
	ACT_SET_PERIOD, /* tw_set_period on its own task, arg = period */
	ACT_PAUSE,      /* tw_pause on its own task */
	ACT_CANCEL,     /* tw_cancel on its own task */
	ACT_QUIESCE,    /* tw_quiesce: -TW_ECALLBACK */
	ACT_STOP,       /* tw_engine_stop (after the hold gate opens) */
	ACT_DESTROY,    /* tw_engine_destroy (after the hold gate opens) */
};

/* One run's script, written before the run by the model and read by the callback. */
struct model_plan {
	uint64_t run; /* the run number it is for (tw_fire.run) */
	uint64_t arg;
	uint8_t action;
	bool fail; /* return nonzero */
	bool hold; /* block on the test's gate until released */
};

/* A run the model expects to start, in start order. */
struct model_run {
	uint32_t label;
	uint64_t due; /* ms, tw_fire.due_ns on the model's clock */
	uint64_t run, skipped;
	struct model_plan plan;
	int action_rc; /* what the plan's call must return */
};

/* A task's next firing queued for the executor. */
struct model_firing {
	uint32_t label;
	uint64_t due, skipped;
	uint64_t epoch, step; /* when it was handed out: advance number, walk step */
	bool dropped;         /* paused, cancelled or stopped before it started */
};

struct model_task {
	bool added;
	int end; /* 0: live, else TW_COMPLETED or TW_STOPPED */
	bool paused, paused_by_failures, concurrent, run_late;
	uint64_t period;
	uint64_t due; /* next due in ms, or MODEL_NO_DUE */
	/* Where the wheel holds it: a task moved later stays in its old millisecond until that
	 * comes round. seq orders tasks filed into the same millisecond. */
	bool filed;
	uint64_t filed_tick, filed_seq;
	/* A change the wheel thread has to take in (at the next tw_advance): change_seq is the
	 * place of the first one since the last advance. */
	bool change_waits;
	uint64_t change_seq;
	/* the last delay given (tw_add, tw_set_delay): a one-shot resumes with it */
	uint64_t last_delay;
	bool pending_delay_set;
	uint64_t pending_delay; /* given while paused: applies on resume */
	bool armed;             /* has a due, or TW_NEVER, not yet fired: it does not complete */
	uint32_t queued, running;
	uint32_t undrained; /* dropped firings still in the executor's queue */
	bool late;          /* a firing waits for the task's run to return */
	bool late_oneshot;  /* the task was a one-shot when that firing came due */
	uint64_t late_due, late_skipped;
	uint64_t skipped_since; /* skips to report in the next tw_fire.skipped */
	uint64_t runs, failures, consecutive, overlap, overload, missed;
	uint64_t last_late, max_late; /* ms: the manual time at a run's start minus its due */
	bool released;
	bool hold;           /* its next run blocks on the gate */
	uint8_t hold_action; /* ACT_NONE, or ACT_STOP / ACT_DESTROY done after the gate */
	uint64_t plan_seed;
	uint32_t live_index;
};

struct model_totals {
	uint64_t completed, stopped, runs, failures, overlap, overload, missed;
};

struct model;
/* Draws the script of a task's run from its plan seed: the driver's choice. */
typedef void (*model_plan_fn)(struct model *m, uint32_t label, uint64_t run,
			      struct model_plan *plan);

struct model {
	uint64_t now; /* ms since the model's origin */
	unsigned max_failures;
	uint64_t max_tasks;
	bool stopped;
	bool destroyed; /* by a callback: the engine is gone */

	struct model_task *task; /* by label */
	uint32_t n_labels, cap_labels;
	uint32_t *live; /* labels of tasks not ended */
	uint32_t n_live;
	struct model_totals totals;
	uint64_t seq;   /* filings so far */
	uint64_t epoch; /* tw_advance calls so far */

	/* the executor: firings not started, and the run held on the gate */
	struct model_firing queue[MODEL_QUEUE_CAP];
	uint32_t q_head, q_tail;
	bool held;
	uint32_t held_label;
	struct model_plan held_plan;
	bool hold_started; /* the last step started the held run */
	uint64_t undrained_total;

	uint64_t step; /* of the walk of the current tw_advance */

	/* what the last step started */
	struct model_run expect[MODEL_EXPECT_CAP];
	uint32_t n_expect;
	bool expect_overflow;
	int stop_rc; /* ACT_STOP's expected result */

	model_plan_fn plan;
	void *plan_arg;
};

void model_init(struct model *m, unsigned max_failures, uint64_t max_tasks, uint32_t cap_labels,
		model_plan_fn plan, void *plan_arg);
void model_free(struct model *m);

/* What tw_get's state field must be. */
tw_state model_state(const struct model_task *t);
/* Whether the engine knows the label (an added task). */
static inline struct model_task *model_task(struct model *m, uint32_t label)
{
	return label < m->n_labels && m->task[label].added ? &m->task[label] : NULL;
}

struct model_spec {
	uint64_t delay, period;
	unsigned flags;
	bool no_callback, no_out;
	uint64_t plan_seed;
};

/* Each returns what the call must return and applies it. tw_add's label must be the next one. */
int model_add(struct model *m, uint32_t label, const struct model_spec *spec);
int model_set_delay(struct model *m, uint32_t label, uint64_t delay);
/* results[i] for each label, the call's code as return; no task touched on a global error */
int model_set_delay_many(struct model *m, const uint32_t *labels, size_t n, bool null_ids,
			 uint64_t delay, int *results);
int model_set_period(struct model *m, uint32_t label, uint64_t period);
int model_pause(struct model *m, uint32_t label);
int model_resume(struct model *m, uint32_t label);
int model_cancel(struct model *m, uint32_t label);
int model_get(struct model *m, uint32_t label);
/* tw_advance, then the runs it starts until the executor is idle or held */
int model_advance(struct model *m, uint64_t ms);
/* The held run returns (after its gate action), then the queue drains */
void model_unhold(struct model *m);
int model_stop(struct model *m, bool from_callback);
/* The engine is destroyed: every task not released yet is released. */
void model_destroy(struct model *m);

#endif
