/*
 * tickwheel.h - a timer engine for millisecond jobs: very many timers that
 * change all the time, fired on a 1 ms grid, run on executor threads.
 *
 * Every function returns TW_OK (0) or a negated TW_E* code; tw_strerror()
 * names it. Times handed to the user are CLOCK_MONOTONIC nanoseconds. Any
 * thread may call any function, callbacks included, without registering.
 *
 * Task states and what may be done in each (anything else: -TW_ESTATE; an id
 * the engine does not know, or no longer keeps: -TW_ENOTFOUND):
 *
 *   state        pause resume cancel set_delay set_period get
 *   TW_WAITING     x           x        x         x       x
 *   TW_RUNNING     x           x        x         x       x   (the run going on finishes)
 *   TW_PAUSED            x     x        x         x       x   (delay, period apply on resume)
 *   TW_COMPLETED                                          x
 *   TW_STOPPED                                            x
 *
 * "now" is read on the engine's 1 ms grid, rounded up: a delay is never
 * shortened, may be lengthened by less than 1 ms, and a due time falls on a
 * tick, so a run's lateness (start minus due_ns) is the engine's own.
 * A periodic task's next due is its previous due plus its period, never
 * "now + period": it does not drift. A firing that cannot run is skipped and
 * counted, by reason: the task's previous run is still going (serial tasks),
 * the executor's queue is full, or the engine fell behind by whole periods.
 * Due firings always equal runs plus skips; nothing is queued as backlog.
 *
 * Once tw_pause or tw_cancel returns, no new run of the task starts: a run
 * already going finishes; a firing handed to an executor but not started is
 * dropped and counted as missed. release(arg) is called exactly once, after
 * the last run returned: on cancel, on a one-shot's completion, at stop. It
 * runs in the thread that ended the task (the canceller, the stopper) or on
 * an executor, never on the wheel thread. A tw_add that fails never calls it.
 *
 * tw_stats and tw_quiesce answer after a stop too; every other call then answers
 * -TW_ESHUTDOWN, except tw_engine_destroy.
 */
#ifndef TICKWHEEL_H
#define TICKWHEEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tw_engine tw_engine;
typedef uint64_t tw_id; /* engine-assigned, never reused; 0 is never an id */

enum {
	TW_OK = 0,
	TW_EINVAL,    /* a NULL pointer, a missing callback, unknown flags */
	TW_ENOTFOUND, /* no such task (or it ended longer ago than retain_ms) */
	TW_ESTATE,    /* the operation is not allowed in the task's state */
	TW_ERANGE,    /* a delay or period that would overflow */
	TW_ENOMEM,    /* out of memory */
	TW_ESHUTDOWN, /* the engine is stopping or stopped */
	TW_ELIMIT,    /* max_tasks live tasks already */
	TW_ETIMEDOUT, /* tw_engine_stop: runs were still going at the drain limit */
};

typedef enum { TW_WAITING, TW_RUNNING, TW_PAUSED, TW_COMPLETED, TW_STOPPED } tw_state;

enum { TW_CONCURRENT = 1u << 0 }; /* runs of the task may overlap */

/* The longest delay or period accepted: about 278 years (due times in ns fit 64 bits). */
#define TW_MAX_DELAY_MS (UINT64_C(1) << 43)

typedef struct {
	tw_id id;
	uint64_t due_ns;  /* the ideal due time this run stands for (a tick of the 1 ms grid) */
	uint64_t run;     /* runs of this task started so far, this one included: 1, 2, 3 ... */
	uint64_t skipped; /* due firings skipped since the previous run */
} tw_fire;

/* Runs on an executor thread, never on the wheel thread. Nonzero = failure. */
typedef int (*tw_callback)(const tw_fire *fire, void *arg);

typedef struct {
	uint64_t delay_ms;    /* first due = now (rounded up to the ms grid) + delay; 0: at once */
	uint64_t period_ms;   /* 0 = one-shot */
	tw_callback callback; /* required */
	void *arg;
	void (*release)(void *arg); /* optional, called exactly once when the task is gone */
	unsigned flags;             /* TW_CONCURRENT: runs may overlap (default: serial) */
} tw_task_spec;

typedef struct {
	tw_state state;
	uint64_t period_ms, next_due_ns; /* next_due_ns: 0 when nothing is due */
	uint64_t runs, failures, consecutive_failures, slow_runs;
	/* Skips by reason; a task's own counts stop at 2^32 - 1 (the engine's
	 * totals in tw_engine_stats do not). */
	uint64_t skipped_overlap, skipped_overload, skipped_missed;
	uint64_t last_run_ns, longest_run_ns; /* durations of runs */
	bool paused_by_failures;
	bool concurrent;
	uint32_t running; /* runs in progress */
} tw_task_info;

enum { TW_LOG_ERROR, TW_LOG_WARNING, TW_LOG_INFO };

typedef struct {
	unsigned executors;      /* executor threads; 0 = one per online CPU */
	bool pin_executors;      /* pin executor i to CPU i % online CPUs */
	unsigned queue_capacity; /* firings each executor may hold; default 4096 */
	unsigned max_failures;   /* consecutive failures that pause a task; default 10, 0 = never */
	uint64_t slow_run_ms;    /* a run longer than this counts as slow; default 100 */
	uint64_t max_tasks;      /* cap on live tasks; 0 = none */
	uint64_t retain_ms;      /* how long ended tasks stay queryable; default 5000 */
	void (*log)(int level, const char *message, void *log_arg); /* the library never prints */
	void *log_arg;
	bool manual_clock; /* time moves only by tw_advance(); for tests */
	bool coarse_clock; /* "now" of add, set_delay, resume from CLOCK_MONOTONIC_COARSE; below */
} tw_config;

/*
 * coarse_clock, for programs that reset very many timeouts (session
 * timeouts pushed back on every message): tw_add, tw_set_delay and tw_resume
 * count their delay from CLOCK_MONOTONIC_COARSE plus two of its ticks
 * (clock_getres; 4 ms each at HZ=250) instead of CLOCK_MONOTONIC. A precise
 * clock read waits for the caller's earlier memory accesses to complete, so
 * back-to-back resets of random tasks each pay a whole cache miss; a coarse
 * read does not, and their misses overlap. The price: a due may be up to
 * three coarse ticks later than asked; it would be earlier only if the
 * kernel's coarse clock lagged by more than two ticks (its worst lag measured
 * here: 4.6 ms, with 4 ms ticks). Firing, lateness and periods stay on the
 * precise clock. Ignored with manual_clock.
 */

enum { TW_LATENESS_BUCKETS = 24 }; /* bucket i: lateness < 2^i us (the last: the rest) */

typedef struct {
	uint64_t tasks_live, tasks_waiting, tasks_running, tasks_paused; /* now */
	uint64_t tasks_completed, tasks_stopped;                         /* ever */
	uint64_t runs, failures, slow_runs;
	uint64_t skipped_overlap, skipped_overload, skipped_missed;
	uint64_t wheel_wakeups;
	uint64_t lateness_us[TW_LATENESS_BUCKETS]; /* run start minus due */
	uint64_t lateness_max_ns;
} tw_engine_stats;

void tw_config_init(tw_config *cfg);
int tw_engine_create(const tw_config *cfg, tw_engine **out); /* cfg may be NULL */
/* Stops firing, refuses new operations, waits up to drain_timeout_ms for runs
 * in progress (-TW_ETIMEDOUT if some are still going) and releases every task. */
int tw_engine_stop(tw_engine *e, uint64_t drain_timeout_ms);
/* Stops the engine if needed, waits for every run still going, frees all. */
void tw_engine_destroy(tw_engine *e);

int tw_add(tw_engine *e, const tw_task_spec *spec, tw_id *out);
int tw_set_delay(tw_engine *e, tw_id id, uint64_t delay_ms); /* next due = now + delay */
/*
 * tw_set_delay on many tasks at once, as a gateway that reads its messages in
 * batches resets their sessions: each task's next due = now + delay_ms, now
 * read once per 256 ids. The tasks are fetched ahead of their turn, so the
 * cache misses of random tasks overlap instead of adding up. results, if not
 * NULL, gets each id's code (0 or -TW_E*, what tw_set_delay would return);
 * the call returns 0 if every one succeeded, else the first failure's code.
 * -TW_EINVAL for a NULL engine or NULL ids with n > 0, -TW_ERANGE for a
 * delay that would overflow, -TW_ESHUTDOWN after stop: then no task is
 * touched and results is left as it was.
 */
int tw_set_delay_many(tw_engine *e, const tw_id *ids, size_t n, uint64_t delay_ms, int *results);
int tw_set_period(tw_engine *e, tw_id id, uint64_t period_ms); /* from the next firing on */
int tw_pause(tw_engine *e, tw_id id);
int tw_resume(tw_engine *e, tw_id id); /* next due = now + period (one-shot: + its delay) */
int tw_cancel(tw_engine *e, tw_id id);
int tw_get(tw_engine *e, tw_id id, tw_task_info *out); /* lock-free read */
int tw_stats(tw_engine *e, tw_engine_stats *out);
const char *tw_strerror(int code);
int tw_advance(tw_engine *e, uint64_t ms); /* manual clock only */
int tw_quiesce(tw_engine *e);              /* waits until no run is in progress */

/*
 * Parses a duration as people write it into nanoseconds: a decimal number and
 * a unit, ns, us, ms, s, m (or min) or h ("200ms", "1.5s", "2m"); a bare
 * number is milliseconds. -TW_EINVAL for anything else (a range included),
 * -TW_ERANGE beyond 2^64 ns. Fractions finer than 1 ns are dropped.
 */
int tw_parse_duration(const char *text, uint64_t *out_ns);

/* The same for a range, "100-500ms" or "1s-2m" (a unit written once, after
 * the range, applies to both ends); a single duration gives lo == hi.
 * -TW_EINVAL when the low end is above the high end. */
int tw_parse_duration_range(const char *text, uint64_t *lo_ns, uint64_t *hi_ns);

#ifdef __cplusplus
}
#endif
#endif
