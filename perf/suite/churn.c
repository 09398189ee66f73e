/*
 * churn.c - `tw-perf churn`: 20 000 periodic tasks, periods log-uniform from
 * 100 ms to 3 h, first dues spread over one period; an application thread
 * reschedules a random third of them at random times while they run:
 * tw_set_period (a new period from the next firing on), tw_set_delay (a new
 * phase) or both, a third of the time each. How often the wheel thread wakes
 * up, and what each wake-up costs it.
 *
 *   defaults: --tasks 20000 --seconds 10 --period 100ms-3h
 *             --rate tasks/3 (reschedules per second: each of the third about
 *             once a second)
 *   --quick:  --seconds 3
 *
 * The wheel thread's CPU is read from /proc/self/task/TID/schedstat of the
 * thread named "tw-wheel". If it cannot be read, the figure is the process's
 * CPU minus the rescheduling thread's, executors included.
 */
#include "suite.h"
#include "suite_util.h"

#include "measure.h"
#include "tickwheel.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct churn {
	tw_engine *e;
	size_t n;
	tw_id *ids;
	uint32_t *period_ms; /* each task's period as last set */
	uint32_t *order;     /* the first n / 3: the tasks rescheduled */
	double log_lo, log_hi;
	uint64_t rng;
	uint64_t set_period, set_delay, failed;
};

static int nothing(const tw_fire *fire, void *arg)
{
	(void)fire;
	(void)arg;
	return 0;
}

static uint64_t draw_period_ms(struct churn *c)
{
	return (uint64_t)(exp(c->log_lo + (c->log_hi - c->log_lo) * su_uniform(&c->rng)) + 0.5);
}

static void reschedule_one(struct churn *c)
{
	size_t i = c->order[bench_rng_below(&c->rng, c->n / 3)];
	unsigned what = (unsigned)bench_rng_below(&c->rng, 3);
	if (what != 1) {
		uint64_t p = draw_period_ms(c);
		c->failed += tw_set_period(c->e, c->ids[i], p) != TW_OK;
		c->period_ms[i] = (uint32_t)p;
		c->set_period++;
	}
	if (what != 0) {
		uint64_t delay = 1 + bench_rng_below(&c->rng, c->period_ms[i]);
		c->failed += tw_set_delay(c->e, c->ids[i], delay) != TW_OK;
		c->set_delay++;
	}
}

static int populate(struct churn *c)
{
	for (size_t i = 0; i < c->n; i++) {
		uint64_t p = draw_period_ms(c);
		c->period_ms[i] = (uint32_t)p;
		tw_task_spec spec = { .delay_ms = 1 + bench_rng_below(&c->rng, p),
				      .period_ms = p,
				      .callback = nothing };
		int rc = tw_add(c->e, &spec, &c->ids[i]);
		if (rc)
			return rc;
	}
	return TW_OK;
}

/* Reschedules at random times: gaps drawn exponential around 2 ms, each gap
 * followed by the reschedules the rate owes by then. */
static void churn_for(struct churn *c, double rate, uint64_t start, uint64_t end)
{
	uint64_t done = 0, now = start;
	while (now < end) {
		double gap_ms = -2.0 * log(1.0 - su_uniform(&c->rng));
		uint64_t at = now + (uint64_t)((gap_ms < 20 ? gap_ms : 20) * 1e6);
		monotonic_sleep_until(at < end ? at : end);
		now = monotonic_now_ns();
		uint64_t owed = (uint64_t)((double)(now - start) * rate / 1e9);
		for (; done < owed; done++)
			reschedule_one(c);
	}
}

static void report_run(struct report *r, const struct churn *c, const tw_engine_stats *s0,
		       const tw_engine_stats *s1, double wall_s, double wheel_cpu_s, bool found)
{
	const char *tw = "tickwheel";
	uint64_t wakeups = s1->wheel_wakeups - s0->wheel_wakeups;
	report_add(r, tw, "wheel_wakeups_per_second", (double)wakeups / wall_s, "1/s",
		   BETTER_LOWER);
	report_add(r, tw, "wheel_cpu_per_wakeup", wakeups ? wheel_cpu_s * 1e6 / (double)wakeups : 0,
		   "us", BETTER_LOWER);
	report_add(r, tw, "wheel_cpu_percent", 100 * wheel_cpu_s / wall_s, "%", BETTER_LOWER);
	report_add(r, tw, "runs", (double)(s1->runs - s0->runs), "runs", BETTER_NEITHER);
	report_add(r, tw, "skipped_overlap", (double)(s1->skipped_overlap - s0->skipped_overlap),
		   "firings", BETTER_LOWER);
	report_add(r, tw, "skipped_overload", (double)(s1->skipped_overload - s0->skipped_overload),
		   "firings", BETTER_LOWER);
	report_add(r, tw, "skipped_missed", (double)(s1->skipped_missed - s0->skipped_missed),
		   "firings", BETTER_LOWER);
	report_add(r, tw, "reschedules_set_period", (double)c->set_period, "calls", BETTER_NEITHER);
	report_add(r, tw, "reschedules_set_delay", (double)c->set_delay, "calls", BETTER_NEITHER);
	report_add(r, tw, "reschedule_failures", (double)c->failed, "calls", BETTER_LOWER);
	report_target(r, "reschedule_failures", "<=", 0);
	if (found)
		report_note(r, "wheel CPU: the thread named tw-wheel, from "
			       "/proc/self/task/TID/schedstat");
	else
		report_note(r, "wheel thread not found: wheel CPU is the process's minus the "
			       "rescheduling thread's, executors included");
}

int scenario_churn(const struct suite_options *opt, struct report *r)
{
	struct churn c = { .n = opt->tasks ? opt->tasks : 20000, .rng = opt->seed };
	double seconds = opt->seconds > 0 ? opt->seconds : opt->quick ? 3 : 10;
	uint64_t lo = opt->period_lo_ms ? opt->period_lo_ms : 100;
	uint64_t hi = opt->period_hi_ms ? opt->period_hi_ms : 3 * 3600 * 1000;
	double rate = opt->rate > 0 ? opt->rate : (double)(c.n / 3);
	if (c.n < 3 || c.n > UINT32_MAX) {
		fprintf(stderr, "tw-perf churn: --tasks %zu: needs 3 .. %u\n", c.n, UINT32_MAX);
		return 2;
	}
	if (hi > UINT32_MAX) {
		fprintf(stderr,
			"tw-perf churn: --period %" PRIu64 "-%" PRIu64 "ms: periods up to %u ms\n",
			lo, hi, UINT32_MAX);
		return 2;
	}
	c.log_lo = log((double)lo);
	c.log_hi = log((double)hi);
	report_param(r, "tasks", (double)c.n);
	report_param(r, "seconds", seconds);
	report_param(r, "period_lo_ms", (double)lo);
	report_param(r, "period_hi_ms", (double)hi);
	report_param(r, "rescheduled_tasks", (double)(c.n / 3));
	report_param(r, "reschedule_rate", rate);
	report_param(r, "executors", opt->executors);

	c.ids = malloc(c.n * sizeof *c.ids);
	c.period_ms = malloc(c.n * sizeof *c.period_ms);
	c.order = bench_permutation(c.n, &c.rng);
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = opt->executors;
	int rc = !c.ids || !c.period_ms || !c.order ? -TW_ENOMEM : tw_engine_create(&cfg, &c.e);
	if (!rc)
		rc = populate(&c);
	if (rc) {
		fprintf(stderr, "tw-perf churn: set-up: %s\n", tw_strerror(rc));
	} else {
		tw_engine_stats s0, s1;
		tw_stats(c.e, &s0);
		double cpu0 = process_cpu_seconds();
		uint64_t mine0 = su_self_cpu_ns();
		struct su_sched wheel0, wheel1;
		bool found = su_threads_sched("tw-wheel", &wheel0); /* tickwheel.h names it */
		uint64_t start = monotonic_now_ns();
		churn_for(&c, rate, start, start + (uint64_t)(seconds * 1e9));
		found = found && su_threads_sched("tw-wheel", &wheel1);
		double wall_s = (double)(monotonic_now_ns() - start) / 1e9;
		tw_stats(c.e, &s1);
		double wheel_cpu_s = found ? (double)(wheel1.cpu_ns - wheel0.cpu_ns) / 1e9 :
					     process_cpu_seconds() - cpu0 -
						     (double)(su_self_cpu_ns() - mine0) / 1e9;
		tw_engine_stop(c.e, 1000);
		report_run(r, &c, &s0, &s1, wall_s, wheel_cpu_s, found);
	}
	if (c.e)
		tw_engine_destroy(c.e);
	free(c.ids);
	free(c.period_ms);
	free(c.order);
	return rc ? 2 : 0;
}
