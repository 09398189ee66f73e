/*
 * replay.h - `tw-perf replay FILE`: a recording (measure/recording.h) loaded
 * into a plan (replay_load.c), played against a fresh engine by one thread per
 * recorded thread (replay.c), and reported beside what the recording itself
 * says (replay_report.c). Times in the plan are offsets from the recording's
 * start_mono_ns already divided by --speed, so the replay adds them to its own
 * start.
 */
#ifndef TICKWHEEL_PERF_REPLAY_H
#define TICKWHEEL_PERF_REPLAY_H

#include "measure.h"
#include "recording.h"
#include "report.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define RP_NONE   UINT32_MAX
#define RP_FAILED UINT64_MAX /* rp_task.new_id: its add failed in the replay */

/* A task the recording added (successfully). */
struct rp_task {
	uint64_t rec_id;
	_Atomic uint64_t new_id;  /* 0 until the replay's add returns; RP_FAILED if it failed */
	uint32_t first_run, runs; /* its recorded runs: plan->run_ns[first_run ..], by run number */
	bool concurrent;
	struct rp_plan *plan;
	/* Runs whose dues are one period of its add apart, as the recording's are counted:
	 * serial tasks only (a concurrent task's runs may overlap). */
	uint64_t last_run, last_due_ns;
	struct intervals iv, rec_iv; /* the replay's, the recording's */
};

/* An operation, as a replay thread issues it. */
struct rp_op {
	uint64_t t_ns; /* offset from the start */
	uint64_t a;    /* delay_ms, period_ms, or a due as an offset from the start (signed) */
	uint64_t b;    /* ADD: period_ms; SET_DUE: 1 if the due was 0 */
	uint64_t rec_id;
	uint32_t task;       /* index in plan->tasks, RP_NONE for an id never added */
	uint32_t u;          /* ADD: flags, misfire, first-due bit; SET_DELAY: the _MANY bits */
	uint32_t name, cron; /* ADD: offsets into plan->strings (0: "") */
	int32_t result;      /* the recorded call's */
	uint8_t type;
};

struct rp_thread {
	uint16_t number;
	char name[65];
	struct rp_op *ops;
	size_t n, cap;
	struct rp_plan *plan;
	pthread_t th;
	/* room for its largest tw_set_delay_many, made at load: one call replays as one call */
	tw_id *many_ids;
	int *many_results;
	int32_t *many_recorded;
	/* what it did */
	uint64_t issued, mismatches, on_failed_adds, waited_out, cpu_ns;
	uint64_t refused_here; /* mismatches that succeeded when recorded and failed here */
};

/* Counts of what the replay could not re-issue, and of the recording's own gaps. */
struct rp_counts {
	uint64_t ops;           /* operations recorded (types 1-7) */
	uint64_t adds_failed;   /* ADDs that failed when recorded (id 0, result < 0): skipped */
	uint64_t unknown_ids;   /* operations on ids the recording never added: skipped */
	uint64_t engine_ops;    /* operations from thread 0: not replayed */
	uint64_t runs, skips;   /* RUN events; SKIP events' counts */
	uint64_t dropped;       /* events the recorder dropped (DROPPED events) */
	uint64_t drop_gaps;     /* DROPPED events: places where some are missing */
	uint64_t unknown_types; /* events of types v1 does not define: skipped */
	uint64_t orphan_runs;   /* RUN events of tasks never added */
	bool has_end;
};

struct rp_plan {
	struct rec_header h;
	double speed;
	struct rp_task *tasks;
	size_t ntasks;
	struct rp_thread *threads;
	size_t nthreads;
	uint64_t *run_ns; /* each recorded run's length, scaled */
	int32_t *run_result;
	size_t nruns;
	char *strings;
	size_t strings_len, strings_cap;
	uint64_t end_ns; /* the recording's last moment, offset */
	struct rp_counts rec;
	double rec_run_ns_sum; /* the recorded runs' lengths, unscaled */
	struct lateness rec_late;
	struct deviations rec_dev;
	/* the replay's */
	uint64_t t0;
	struct lateness late, lag; /* runs: start - due; operations: issued - planned */
	struct deviations dev;
	_Atomic uint64_t runs, spin_ns, sleep_runs;
};

/* How many of ops[0 .. n) are the elements of one recorded tw_set_delay_many: the
 * consecutive SET_DELAYs from a _many call with ops[0]'s time and delay; 0 if ops[0] is none.
 * The replay issues them as one call, into room made at load by the same rule. */
size_t rp_many_call_length(const struct rp_op *ops, size_t n);

/* The plan for the file; NULL after saying why on stderr. */
struct rp_plan *rp_load(const char *path, double speed);
void rp_free(struct rp_plan *p);

/* Plays the plan: 0, or 2 after saying why on stderr. */
struct rp_outcome {
	uint64_t ops_issued, mismatches, on_failed_adds, waited_out, refused_here;
	uint64_t engine_cpu_ns, threads_cpu_ns, skipped, failures;
	double seconds;
	struct interval_summary iv, rec_iv;
};
struct suite_options;
/* The figures, notes and series; with --plot, the lateness by percentile. */
void rp_report(struct report *r, struct rp_plan *p, const struct rp_outcome *o,
	       const struct suite_options *opt);

/* a delay, period or run length divided by the speed */
uint64_t rp_scale_ms(uint64_t ms, double speed);

#endif
