/*
 * replay.c - `tw-perf replay FILE`: re-issues a recording's operations
 * (measure/recording.h) against a fresh engine, with their recorded timing,
 * and measures the runs they cause beside the machine's wake-up floor.
 *
 * One replay thread per recorded thread issues that thread's operations in
 * their order, each at its recorded offset from the recording's start divided
 * by --speed (a thread that falls behind issues at once; how late it issued is
 * op_lag). Delays, periods, run lengths and absolute dues (first_due_ns,
 * SET_DUE) are scaled by the same factor, dues shifted onto the replay's
 * timeline; cron tasks keep their calendar. A recorded id is mapped to the id
 * the replay's add returned; an operation on an id another thread adds waits
 * for that add (at most WAIT_S, then it is counted in ops_waited_out and left
 * out). A run of task T takes as long as T's recorded run of the same number
 * did (past its last recorded run: as long as its last) and returns what that
 * run returned: up to SPIN_MAX_NS by spinning, so that the replay costs the
 * CPU the original did; longer by sleeping, since a callback that long in a
 * real program mostly waits (I/O, locks), and a replay that spun it would
 * take CPUs the engine needs.
 *
 * The engine gets the recording's executors, queue capacity, coarse_clock and
 * pin_executors; the rest of its configuration is not recorded (defaults).
 */
#include "replay.h"
#include "suite.h"
#include "suite_util.h"

#include "hgrm.h"
#include "tickwheel.h"
#include "wake_floor.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SPIN_MAX_NS (1000 * 1000)       /* longer runs sleep */
#define WAIT_S      2                   /* for another thread's add */
#define LEAD_NS     (100 * 1000 * 1000) /* from set-up to the replay's start */
#define FLOOR_MIN_S 2.0                 /* the floor measured at least this long */
#define FLOOR_MAX_S 60.0                /* and at most (its samples take memory) */

static int replay_run(const tw_fire *fire, void *arg)
{
	uint64_t start = monotonic_now_ns();
	struct rp_task *t = arg;
	struct rp_plan *p = t->plan;
	lateness_note(&p->late, start, fire->due_ns);
	atomic_fetch_add_explicit(&p->runs, 1, memory_order_relaxed);
	if (!t->concurrent) { /* serial: its runs never overlap */
		bool next = t->last_run && fire->run == t->last_run + 1 &&
			    fire->due_ns - t->last_due_ns == t->iv.period_ns;
		intervals_note(&t->iv, start, !next);
		t->last_run = fire->run;
		t->last_due_ns = fire->due_ns;
	}
	if (!t->runs)
		return 0;
	uint64_t k = fire->run - 1 < t->runs ? fire->run - 1 : t->runs - 1;
	uint64_t len = p->run_ns[t->first_run + k];
	if (len <= SPIN_MAX_NS) {
		while (monotonic_now_ns() - start < len) {
		}
		atomic_fetch_add_explicit(&p->spin_ns, len, memory_order_relaxed);
	} else {
		monotonic_sleep_until(start + len);
		atomic_fetch_add_explicit(&p->sleep_runs, 1, memory_order_relaxed);
	}
	return p->run_result[t->first_run + k];
}

/* A call answered otherwise than it was when recorded: most often one that raced its task's end
 * (a session reset as the session times out), which the replay's timing puts on the other side. */
static void count_answer(struct rp_thread *th, int recorded, int replayed)
{
	if (replayed == recorded)
		return;
	th->mismatches++;
	th->refused_here += recorded == TW_OK;
}
/* The replay's id of the op's task; 0 when there is none to act on (counted). */
static tw_id id_of(struct rp_thread *th, const struct rp_op *op)
{
	struct rp_task *t = &th->plan->tasks[op->task];
	uint64_t id = atomic_load_explicit(&t->new_id, memory_order_acquire);
	if (!id) { /* added by another thread that has not got there yet */
		uint64_t deadline = monotonic_now_ns() + WAIT_S * UINT64_C(1000000000);
		struct timespec pause = { 0, 20000 };
		while (!(id = atomic_load_explicit(&t->new_id, memory_order_acquire))) {
			if (monotonic_now_ns() > deadline) {
				th->waited_out++;
				return 0;
			}
			nanosleep(&pause, NULL);
		}
	}
	if (id == RP_FAILED) {
		th->on_failed_adds++;
		return 0;
	}
	return id;
}

static uint64_t due_at(const struct rp_plan *p, uint64_t a)
{
	int64_t due = (int64_t)p->t0 + (int64_t)a;
	return due > 0 ? (uint64_t)due : 1;
}

static int issue_add(struct rp_thread *th, tw_engine *e, const struct rp_op *op)
{
	struct rp_plan *p = th->plan;
	struct rp_task *t = &p->tasks[op->task];
	tw_task_spec spec = { .period_ms = op->b,
			      .callback = replay_run,
			      .arg = t,
			      .flags = REC_ADD_FLAGS(op->u),
			      .misfire = REC_ADD_MISFIRE(op->u),
			      .name = op->name ? p->strings + op->name : NULL,
			      .cron = op->cron ? p->strings + op->cron : NULL };
	if (REC_ADD_FIRST_DUE(op->u))
		spec.first_due_ns = due_at(p, op->a);
	else
		spec.delay_ms = op->a;
	tw_id id = 0;
	int rc = tw_add(e, &spec, &id);
	atomic_store_explicit(&t->new_id, rc == TW_OK ? id : RP_FAILED, memory_order_release);
	return rc;
}

static void issue(struct rp_thread *th, tw_engine *e, const struct rp_op *op)
{
	int rc = 0;
	tw_id id = 0;
	if (op->type == REC_ADD)
		rc = issue_add(th, e, op);
	else if (!(id = id_of(th, op)))
		return;
	switch (op->type) {
	case REC_SET_DELAY:
		rc = tw_set_delay(e, id, op->a);
		break;
	case REC_SET_DUE:
		rc = tw_set_due(e, id, op->b ? 0 : due_at(th->plan, op->a));
		break;
	case REC_SET_PERIOD:
		rc = tw_set_period(e, id, op->a);
		break;
	case REC_PAUSE:
		rc = tw_pause(e, id);
		break;
	case REC_RESUME:
		rc = tw_resume(e, id);
		break;
	case REC_CANCEL:
		rc = tw_cancel(e, id);
		break;
	}
	th->issued++;
	count_answer(th, op->result, rc);
}

/* The elements of one recorded tw_set_delay_many from ops[0] on, as one call; how many. */
static size_t issue_many(struct rp_thread *th, tw_engine *e, const struct rp_op *ops, size_t n)
{
	tw_id *ids = th->many_ids;
	int *results = th->many_results;
	int32_t *recorded = th->many_recorded;
	size_t k = rp_many_call_length(ops, n), used = 0;
	for (size_t i = 0; i < k; i++)
		if ((ids[used] = id_of(th, &ops[i])))
			recorded[used++] = ops[i].result;
	if (used) {
		int rc = tw_set_delay_many(e, ids, used, ops[0].a, results);
		for (size_t i = 0; i < used; i++)
			count_answer(th, recorded[i], rc == -TW_ESHUTDOWN ? rc : results[i]);
		th->issued += used;
	}
	return k;
}

struct run_args {
	struct rp_thread *th;
	tw_engine *e;
};

static void *replay_thread(void *arg)
{
	struct run_args *a = arg;
	struct rp_thread *th = a->th;
	struct rp_plan *p = th->plan;
	for (size_t i = 0; i < th->n;) {
		const struct rp_op *op = &th->ops[i];
		uint64_t at = p->t0 + op->t_ns;
		if (monotonic_now_ns() < at)
			monotonic_sleep_until(at);
		lateness_note(&p->lag, monotonic_now_ns(), at);
		if (op->type == REC_SET_DELAY && (op->u & REC_SET_DELAY_MANY)) {
			i += issue_many(th, a->e, op, th->n - i);
		} else {
			issue(th, a->e, op);
			i++;
		}
	}
	th->cpu_ns = su_self_cpu_ns();
	return NULL;
}

struct floor_args {
	double seconds;
	struct wake_floor f;
	int rc, err;
};

static void *floor_thread(void *arg)
{
	struct floor_args *a = arg;
	a->rc = wake_floor_measure(a->seconds, 1, 10, &a->f);
	a->err = errno;
	return NULL;
}

static tw_engine *engine_for(const struct rp_plan *p, struct report *r)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = p->h.executors <= TW_MAX_EXECUTORS ? p->h.executors : 0;
	cfg.queue_capacity = p->h.queue_capacity <= TW_MAX_QUEUE_CAPACITY ? p->h.queue_capacity : 0;
	cfg.coarse_clock = p->h.config & REC_CONFIG_COARSE_CLOCK;
	cfg.pin_executors = p->h.config & REC_CONFIG_PIN_EXECUTORS;
	cfg.retain_ms = p->h.retain_ms;
	cfg.max_failures = p->h.max_failures;
	report_param(r, "executors", cfg.executors);
	report_param(r, "queue_capacity", cfg.queue_capacity);
	report_param(r, "retain_ms", (double)cfg.retain_ms);
	tw_engine *e = NULL;
	int rc = tw_engine_create(&cfg, &e);
	if (rc != TW_OK)
		fprintf(stderr, "tw-perf replay: tw_engine_create: %s\n", tw_strerror(rc));
	return e;
}

/* The replay threads and the floor's, started; false if one could not be. */
static bool start(struct rp_plan *p, tw_engine *e, struct run_args *args, struct floor_args *fa,
		  pthread_t *floor_th)
{
	fa->seconds = (double)p->end_ns / 1e9;
	fa->seconds = fa->seconds < FLOOR_MIN_S ? FLOOR_MIN_S :
		      fa->seconds > FLOOR_MAX_S ? FLOOR_MAX_S :
						  fa->seconds;
	p->t0 = monotonic_now_ns() + LEAD_NS;
	if (pthread_create(floor_th, NULL, floor_thread, fa)) {
		fprintf(stderr, "tw-perf replay: cannot start a thread\n");
		return false;
	}
	for (size_t k = 0; k < p->nthreads; k++) {
		args[k] = (struct run_args){ .th = &p->threads[k], .e = e };
		if (pthread_create(&p->threads[k].th, NULL, replay_thread, &args[k])) {
			fprintf(stderr, "tw-perf replay: cannot start a thread\n");
			for (size_t j = 0; j < k; j++)
				pthread_join(p->threads[j].th, NULL);
			pthread_join(*floor_th, NULL);
			return false;
		}
	}
	return true;
}

/* Sums what the threads did, reads the engine's counters and CPU, ends it. */
static void finish(struct rp_plan *p, tw_engine *e, struct rp_outcome *o)
{
	for (size_t k = 0; k < p->nthreads; k++) {
		struct rp_thread *th = &p->threads[k];
		pthread_join(th->th, NULL);
		o->ops_issued += th->issued;
		o->mismatches += th->mismatches;
		o->refused_here += th->refused_here;
		o->on_failed_adds += th->on_failed_adds;
		o->waited_out += th->waited_out;
		o->threads_cpu_ns += th->cpu_ns;
	}
	monotonic_sleep_until(p->t0 + p->end_ns);
	o->seconds = (double)(monotonic_now_ns() - p->t0) / 1e9;
	tw_engine_stats st = { 0 };
	tw_stats(e, &st);
	o->skipped = st.skipped_overlap + st.skipped_overload + st.skipped_missed;
	o->failures = st.failures;
	struct su_sched wheel = { 0 }, executors = { 0 }; /* tickwheel.h names its threads */
	if (su_threads_sched("tw-wheel", &wheel) && su_threads_sched("tw-exec-", &executors))
		o->engine_cpu_ns = wheel.cpu_ns + executors.cpu_ns;
	tw_engine_stop(e, 1000);
	tw_engine_destroy(e);
}

/* The replay's lateness to path, the recording's beside it: "-recording" before ".hgrm". */
static int write_hgrm(struct rp_plan *p, const char *path)
{
	char rec[4096];
	hgrm_path_beside(rec, sizeof rec, path, "recording");
	if (hgrm_write(&p->late, path) || (p->rec.runs && hgrm_write(&p->rec_late, rec)))
		return 2;
	return 0;
}

int scenario_replay(const struct suite_options *opt, struct report *r)
{
	if (!opt->file) {
		fprintf(stderr, "tw-perf replay: which recording? tw-perf replay FILE\n");
		return 2;
	}
	double speed = opt->speed > 0 ? opt->speed : 1;
	struct rp_plan *p = rp_load(opt->file, speed);
	if (!p)
		return 2;
	report_param(r, "speed", speed);
	if (p->rec.drop_gaps)
		fprintf(stderr,
			"tw-perf replay: warning: %s: the recorder dropped %llu events in %llu "
			"places; they are not replayed\n",
			opt->file, (unsigned long long)p->rec.dropped,
			(unsigned long long)p->rec.drop_gaps);
	tw_engine *e = engine_for(p, r);
	struct run_args *args = calloc(p->nthreads + 1, sizeof *args);
	struct floor_args fa = { 0 };
	pthread_t floor_th;
	if (!e || !args || !start(p, e, args, &fa, &floor_th)) {
		if (e)
			tw_engine_destroy(e);
		free(args);
		rp_free(p);
		return 2;
	}
	struct rp_outcome o = { 0 };
	finish(p, e, &o);
	pthread_join(floor_th, NULL);
	rp_report(r, p, &o, opt);
	int rc = opt->hgrm ? write_hgrm(p, opt->hgrm) : 0;
	if (fa.rc == 0)
		wake_floor_report(r, "wake-up floor", &fa.f);
	else
		report_note(r, "wake-up floor: not measured (%s)", strerror(fa.err));
	free(args);
	rp_free(p);
	return rc;
}
