/*
 * engine_test_support.h - helpers shared by the engine test suites (and the
 * snapshot suites), defined in engine_test_support.c.
 *
 * The suites use the public API only. Timing is driven by the manual clock:
 * time moves only by tw_advance(), which returns once the due firings are
 * handed to executors, and tw_quiesce() then waits for the runs to return.
 *
 * Callbacks run on executor threads, where Criterion's assertions must not be
 * used: callbacks record what they see in atomics and the test thread asserts.
 * A callback that must block waits on a gate the test opens; every wait has a
 * generous limit so that a broken engine fails a test instead of hanging it.
 *
 * The helpers named *_at take the caller's line for their failure messages;
 * the macro without _at passes it.
 */
#ifndef TICKWHEEL_TESTS_ENGINE_TEST_SUPPORT_H
#define TICKWHEEL_TESTS_ENGINE_TEST_SUPPORT_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../test_util.h"
#include "tickwheel.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* A leak reported when the worker exits does not fail a Criterion test. */
#define assert_no_leaks() cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "leaks found")
#else
#define assert_no_leaks() ((void)0)
#endif

/* How long a test waits for something that must happen "soon" before it
 * declares failure: long enough for a slow, loaded machine. */
enum { WAIT_LIMIT_MS = 10000 };

void sleep_ms(unsigned ms);

/* How many threads of this process are named name now. */
unsigned threads_named(const char *name);

/* ---- engines ---- */

/* A config for the manual clock with `executors` executor threads. */
tw_config manual_config(unsigned executors);
tw_engine *engine_new_at(const tw_config *cfg, int line);
#define engine_new(cfg) engine_new_at(cfg, __LINE__)
tw_engine *manual_engine_at(unsigned executors, int line);
#define manual_engine(executors) manual_engine_at(executors, __LINE__)

/* A manual engine whose executors' queues hold queue_capacity firings each. */
tw_engine *queue_limited_engine_at(unsigned executors, unsigned queue_capacity, int line);
#define queue_limited_engine(executors, queue_capacity) \
	queue_limited_engine_at(executors, queue_capacity, __LINE__)

/* Advances only: the runs may still be going when it returns. */
void advance_at(tw_engine *e, uint64_t ms, int line);
#define advance(e, ms) advance_at(e, ms, __LINE__)
void quiesce_at(tw_engine *e, int line);
#define quiesce(e) quiesce_at(e, __LINE__)
/* Advances the manual clock and waits until the runs it started returned. */
void step_at(tw_engine *e, uint64_t ms, int line);
#define step(e, ms) step_at(e, ms, __LINE__)

/* Sets the manual clock's wall time (ns since the epoch) to read wall_ns now:
 * the engine's test hook below the API, named in engine_test_support.c only. */
void set_manual_wall(tw_engine *e, int64_t wall_ns);

/* ---- tasks ---- */

tw_task_spec spec_of(uint64_t delay_ms, uint64_t period_ms, tw_callback cb, void *arg);
tw_id add_spec_at(tw_engine *e, const tw_task_spec *spec, int line);
#define add_spec(e, spec) add_spec_at(e, spec, __LINE__)
tw_id add_task_at(tw_engine *e, uint64_t delay_ms, uint64_t period_ms, tw_callback cb, void *arg,
		  int line);
#define add_task(e, delay_ms, period_ms, cb, arg) \
	add_task_at(e, delay_ms, period_ms, cb, arg, __LINE__)
tw_task_info info_of_at(tw_engine *e, tw_id id, int line);
#define info_of(e, id) info_of_at(e, id, __LINE__)
/* Every field of two tw_task_info alike, the name's bytes past its end too. */
void assert_same_info(const tw_task_info *a, const tw_task_info *b);
tw_engine_stats stats_of_at(tw_engine *e, int line);
#define stats_of(e) stats_of_at(e, __LINE__)
uint64_t info_skips(const tw_task_info *info);

/* A callback that does nothing. */
int probe_callback(const tw_fire *fire, void *arg);
/* The manual time now: the due of a probe task added with a known delay.
 * The probe is cancelled at once (it counts in tasks_stopped). */
uint64_t manual_now_at(tw_engine *e, int line);
#define manual_now(e) manual_now_at(e, __LINE__)

/* ---- waiting ---- */

/* Poll until *v == want (>= want) or WAIT_LIMIT_MS passed; say whether it got there. */
bool wait_eq(_Atomic uint64_t *v, uint64_t want);
bool wait_ge(_Atomic uint64_t *v, uint64_t want);

/* A one-way gate: callbacks wait on it, the test opens it. */
struct gate {
	sem_t sem;
};

void gate_init(struct gate *g);
void gate_destroy(struct gate *g);
/* Lets `n` waiters through. */
void gate_open(struct gate *g, unsigned n);
/* Waits for one pass; false if none came within limit_ms. */
bool gate_pass(struct gate *g, unsigned limit_ms);

/* ---- a callback that records and can block ---- */

enum { MAX_RECORDED = 8192 };

/* What a recording callback saw; shared with the executor threads. */
struct recorder {
	tw_engine *engine;
	_Atomic uint64_t runs;          /* callbacks entered */
	_Atomic uint64_t returned;      /* callbacks returned */
	_Atomic uint64_t releases;      /* release calls */
	_Atomic uint64_t release_early; /* releases seen while a run was going */
	_Atomic uint64_t in_flight;     /* runs going now */
	_Atomic uint64_t max_in_flight;
	_Atomic uint64_t bad_fire;       /* tw_fire fields that were wrong */
	_Atomic uint64_t on_test_thread; /* runs on the thread that made the recorder */
	_Atomic uint64_t gate_timeouts;  /* blocked runs that were never let through */
	_Atomic uint64_t skipped_seen;   /* sum of tw_fire.skipped */
	_Atomic int fail;                /* return value of the callback */
	_Atomic bool block;              /* wait on `gate` in every run */
	struct gate gate;                /* opened by the test */
	struct gate started;             /* posted at the start of every run */
	pthread_t test_thread;
	_Atomic tw_id id;               /* the task, for checking tw_fire.id (0: not yet known) */
	bool concurrent;                /* runs may overlap: tw_fire.run may come out of order */
	uint64_t due[MAX_RECORDED];     /* tw_fire.due_ns by run number - 1 */
	uint64_t skipped[MAX_RECORDED]; /* tw_fire.skipped by run number - 1 */
};

struct recorder *recorder_new(tw_engine *e);
void recorder_free(struct recorder *r);
/* Raises *max to v if v is larger, with other threads doing the same. */
void note_max(_Atomic uint64_t *max, uint64_t v);
int record_callback(const tw_fire *fire, void *arg);
void record_release(void *arg);

/* A task whose runs are recorded in r and whose release counts in r. */
tw_id add_recorded_at(tw_engine *e, struct recorder *r, uint64_t delay_ms, uint64_t period_ms,
		      unsigned flags, int line);
#define add_recorded(e, r, delay_ms, period_ms, flags) \
	add_recorded_at(e, r, delay_ms, period_ms, flags, __LINE__)

/* Waits until a run of r's task has started (a blocked one, typically). */
void wait_started_at(struct recorder *r, int line);
#define wait_started(r) wait_started_at(r, __LINE__)

/* r's runs block on its gate from now; the manual clock moves 1 ms, and the first run of a
 * task due then (r's, added with a delay of 1) has started when this returns. */
void start_blocked_run_at(tw_engine *e, struct recorder *r, int line);
#define start_blocked_run(e, r) start_blocked_run_at(e, r, __LINE__)

/* Adds a one-shot of r's due in 1 ms, and starts its run blocked as
 * start_blocked_run does: the executor it holds is busy until r's gate opens. */
tw_id run_blocked_one_shot_at(tw_engine *e, struct recorder *r, int line);
#define run_blocked_one_shot(e, r) run_blocked_one_shot_at(e, r, __LINE__)

/* The checks every recorder ends with. */
void assert_recorder_sane(struct recorder *r);

/* The end of a test whose recorder's task may not have been released once (or
 * is checked otherwise): destroys the engine, then the checks every recorder
 * ends with, and no task memory left. */
void destroy_checking_recorder(tw_engine *e, struct recorder *r);

/* What most one-task suites start from: an engine on the manual clock with
 * `executors` executors, a recorder for the task, and the manual time then
 * (found with manual_now, so a probe task counts in tasks_stopped). */
struct one_task {
	tw_engine *e;
	struct recorder *r;
	uint64_t t0;
};

struct one_task one_task_begin_at(unsigned executors, int line);
#define one_task_begin(executors) one_task_begin_at(executors, __LINE__)

/* The usual end of a one-task test: destroys the engine, then checks that the
 * task was released exactly once, that every firing was sane, and that no
 * task memory is left. */
void destroy_expecting_one_release(tw_engine *e, struct recorder *r);

/* ---- plain counting ---- */

struct counts {
	_Atomic uint64_t runs, releases;
};

int count_callback(const tw_fire *fire, void *arg);
void count_release(void *arg);
/* The usual end of a test of counted tasks: destroys the engine, then checks
 * that c's tasks were released `releases` times and no task memory is left. */
void destroy_expecting_releases_at(tw_engine *e, struct counts *c, uint64_t releases, int line);
#define destroy_expecting_releases(e, c, releases) \
	destroy_expecting_releases_at(e, c, releases, __LINE__)
tw_id add_counted_at(tw_engine *e, struct counts *c, uint64_t delay_ms, uint64_t period_ms,
		     int line);
#define add_counted(e, c, delay_ms, period_ms) add_counted_at(e, c, delay_ms, period_ms, __LINE__)

#endif
