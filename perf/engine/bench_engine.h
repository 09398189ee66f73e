/*
 * bench_engine.h - what the engine benchmark's files share: options, the
 * clock and CPU time, statistics over samples, random numbers, and the
 * table every subcommand prints (figure, measured value, target, verdict).
 *
 * The benchmark uses the public API only (tickwheel.h); the memory figure is
 * tw_stats' memory_bytes.
 */
#ifndef TICKWHEEL_PERF_ENGINE_BENCH_ENGINE_H
#define TICKWHEEL_PERF_ENGINE_BENCH_ENGINE_H

#include "tickwheel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	BATCH = 1000, /* operations timed together; one clock read per batch */
};

/* Command-line options; 0 = the subcommand's default. */
struct options {
	size_t tasks;
	size_t real_tasks; /* dispatch on the real clock: tasks at a 1 ms period */
	double seconds;
	unsigned executors;
	unsigned rounds;
	uint64_t seed;
};

/* The subcommands; table_row() counts the targets missed. */
void run_ops(const struct options *opt);
void run_dispatch(const struct options *opt);
void run_idle(const struct options *opt);
void run_heartbeats(const struct options *opt);
void run_list(const struct options *opt);

/* ---- clock and CPU ---- */
uint64_t now_ns(void);              /* CLOCK_MONOTONIC */
uint64_t cpu_ns(void);              /* user + system time of the process (getrusage) */
void sleep_until_ns(uint64_t when); /* CLOCK_MONOTONIC, absolute */
void sleep_ms(uint64_t ms);

/* ---- random numbers: splitmix64 ---- */
uint64_t rng_next(uint64_t *state);
uint32_t rng_below(uint64_t *state, uint32_t bound); /* uniform in [0, bound) */
/* A random permutation of 0 .. n-1 (malloc'ed; exits on failure). */
uint32_t *random_permutation(size_t n, uint64_t *state);

/* ---- samples ---- */
struct samples {
	double *v;
	size_t n, cap;
};
void samples_init(struct samples *s, size_t cap);
void samples_add(struct samples *s, double x);
void samples_free(struct samples *s);
void sort_doubles(double *v, size_t n);
/* Value at quantile q (0..1) of v sorted ascending; n > 0. */
double quantile_sorted(const double *v, size_t n, double q);

/* Batched latency figures: per-batch ns per op, pooled over rounds, and the
 * spread of the per-round medians. */
struct latency {
	struct samples all;
	struct samples round_medians;
	size_t round_start;
};
void latency_init(struct latency *l, size_t batches);
void latency_batch(struct latency *l, double ns_per_op);
void latency_end_round(struct latency *l);
void latency_free(struct latency *l);
/* Sorts in place and returns median, p99, min and max of the round medians. */
void latency_summary(struct latency *l, double *med, double *p99, double *round_min,
		     double *round_max);

/* ---- output ---- */
void table_header(const char *title);
/* One row: figure, value (already formatted), target, verdict. A target of
 * NULL means "for information" and counts neither as met nor as missed. */
void table_row(const char *figure, const char *value, const char *target, int verdict);
enum { INFO = -1, MISSED = 0, MET = 1 };
int verdict_le(double value, double limit); /* MET if value <= limit */
int verdict_ge(double value, double limit);
void table_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- the engine ---- */
void check(int rc, const char *what); /* exits with a message unless rc == TW_OK */
tw_engine *engine_new(unsigned executors, bool manual_clock, unsigned queue_capacity);
void engine_end(tw_engine *e); /* stop, then destroy */
/* "N executors" for titles; 0 reads as one per online CPU. Static buffer. */
const char *executors_label(unsigned executors);
int empty_callback(const tw_fire *fire, void *arg);
/* A callback that does what most do first: touches its own state (arg, one
 * struct user_state of a line each, runs is counted there). */
struct user_state {
	uint64_t runs;
	char rest[56];
};
int touching_callback(const tw_fire *fire, void *arg);
void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);

#endif
