/*
 * sessions.h - what the two files of `tw-perf sessions` share: the resetting
 * threads' records (sessions.c runs them) and the figures made of them
 * (sessions_report.c).
 */
#ifndef TICKWHEEL_PERF_SUITE_SESSIONS_H
#define TICKWHEEL_PERF_SUITE_SESSIONS_H

#include "measure.h"
#include "report.h"
#include "suite_util.h"
#include "tickwheel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { BATCH = 64 };

struct expiry_sink { /* one for the quiet sessions, one for the active ones */
	_Atomic uint64_t count;
	struct lateness *late;
};

struct resetter {
	tw_engine *e;
	const tw_id *seq; /* this thread's sessions' ids, in reset order */
	size_t len;
	uint64_t timeout_ms, start_ns, end_ns;
	double rate;           /* this thread's share of R */
	_Atomic bool *abandon; /* set when not every thread could be started */
	bool many;             /* --reset-many: a batch is one tw_set_delay_many */
	pthread_t thread;
	struct su_samples batch, single; /* ns per reset */
	uint64_t rng, done, failed, failed_expired, cpu_ns;
};

struct setup {
	size_t n, n_quiet, n_active;
	uint64_t timeout_ms;
	double rate, seconds, run_s;
	unsigned threads;
	bool many; /* --reset-many */
};

void sessions_report(struct report *r, const struct setup *c, struct resetter *w,
		     struct expiry_sink *quiet, struct expiry_sink *active, double wall_s,
		     double cpu_s, uint64_t alloc_growth);

#endif
