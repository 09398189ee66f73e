/*
 * executor.c - an executor thread, which runs callbacks: it takes firings from
 * its own ring (handover.c fills it), runs them (run_firing.h), accounts for
 * failures and slow runs, and ends tasks whose last run it was. An idle
 * executor sleeps on a futex until the wheel thread kicks it. The executors as
 * a group are executor_pool.c's.
 */
#include "run_firing.h"
#include "threads.h"

#include <sched.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static _Thread_local struct tw_engine *executing_for; /* set on executor threads */
static _Thread_local struct executor *executing_on;

bool tw__engine_on_executor(const struct tw_engine *e)
{
	return executing_for == e;
}

struct executor *tw__current_executor(const struct tw_engine *e)
{
	return executing_for == e ? executing_on : NULL;
}

bool tw__engine_on_wheel_run(const struct tw_engine *e)
{
	return executing_for == e && executing_on == wheel_runner(e);
}

/* Claims the oldest firing of x's own ring; loads ahead what the next runs touch. */
static bool pop(struct executor *x, struct firing *f)
{
	uint64_t head = atomic_load_explicit(&x->head, memory_order_relaxed);
	for (;;) {
		/* The wheel thread's tail is read only when the ring looks empty. */
		if (head >= x->tail_seen) {
			x->tail_seen = atomic_load_explicit(&x->tail, memory_order_acquire);
			if (head >= x->tail_seen)
				return false;
		}
		/* Lost only to an executor that took firings held up behind this one's run. */
		if (ring_claim(x, &head, f))
			break;
	}
	uint64_t queued = x->tail_seen - head; /* this one included, as of its last look */
	if (queued > atomic_load_explicit(&x->queued_max, memory_order_relaxed))
		atomic_store_explicit(&x->queued_max, queued, memory_order_relaxed);
	/* Two runs ahead: the task's hot line and cold lines. One run ahead: what
	 * its callback will most likely touch first, its arg, read from the cold
	 * line fetched one pop ago. */
	if (head + 2 < x->tail_seen) {
		struct tw_task *after_next = atomic_load_explicit(
			&x->ring[(head + 2) & x->mask].task, memory_order_relaxed);
		struct task_cold *cold = task_cold(after_next);
		__builtin_prefetch(after_next, 1);
		__builtin_prefetch(cold, 1);
		__builtin_prefetch(&cold->consecutive_failures, 1);
	}
	if (head + 1 < x->tail_seen) {
		struct tw_task *next = atomic_load_explicit(&x->ring[(head + 1) & x->mask].task,
							    memory_order_relaxed);
		void *arg = task_cold(next)->arg;
		if (arg) /* for reading: many tasks may share one arg */
			__builtin_prefetch(arg, 0);
	}
	return true;
}

/* x's own ring is empty and the watch asked for help: takes a firing held up behind another
 * executor's run. Without a request it does not look: reading the others' rings each time
 * it runs dry would move their lines for nothing on the usual round. */
static bool take_held(struct executor *x, struct firing *f)
{
	if (!atomic_exchange_explicit(&x->help, false, memory_order_acq_rel))
		return false;
	struct tw_engine *e = x->engine;
	unsigned running = executors_running(e);
	uint64_t now = monotonic_ns();
	for (unsigned i = 0; i < running; i++) {
		struct executor *v = &e->executors[i];
		if (v != x && tw__executor_queued(v) && executor_held(v, now) &&
		    tw__executor_take(v, f)) {
			/* More may be held up there: look again once this one ran. */
			atomic_store_explicit(&x->help, true, memory_order_relaxed);
			return true;
		}
	}
	return false;
}

/*
 * One handed firing or release call is over. An executor that runs dry wakes
 * whoever waits for runs to finish: the seq_cst store and load pair with the
 * waiter's (wait_runs), so that either it sees this run done or this sees it.
 */
static void run_finished(struct executor *x)
{
	struct tw_engine *e = x->engine;
	uint64_t done = atomic_load_explicit(&x->done, memory_order_relaxed) + 1;
	/* Not dry while the ring holds a firing: its end will look again. */
	if (atomic_load_explicit(&x->head, memory_order_relaxed) < x->tail_seen) {
		atomic_store_explicit(&x->done, done, memory_order_release);
		return;
	}
	atomic_store_explicit(&x->done, done, memory_order_seq_cst);
	drain_signal(e);
}

/* Calls the release of one-shots that ended without a run, then lets the
 * wheel thread reap them (not before: the call reads the task). The executor
 * is the queue's one reader, so it needs no lock; it never waits for the wheel
 * thread halfway through queueing (liburcu's blocking read would sleep 10 ms):
 * what is not linked yet is taken the next time round. */
static void run_releases(struct executor *x)
{
	struct cds_wfcq_node *node;
	if (cds_wfcq_empty(&x->releases_head, &x->releases_tail))
		return;
	x->last_end_ns = 0; /* user code runs: the next run reads the clock */
	while ((node = __cds_wfcq_dequeue_nonblocking(&x->releases_head, &x->releases_tail)) &&
	       node != CDS_WFCQ_WOULDBLOCK) {
		struct tw_task *task = caa_container_of(node, struct tw_task, to_release);
		HANDOVER_ACQUIRE(task);
		struct task_cold *cold = task_cold(task);
		if (cold->release)
			cold->release(cold->arg);
		tw__task_lock(task);
		task->release_queued = false;
		bool wake = tw__task_mail(x->engine, task);
		tw__task_unlock(task);
		if (wake)
			tw__engine_wake(x->engine);
		run_finished(x);
	}
}

/*
 * Wheel thread: runs a TW_ON_WHEEL_THREAD firing (handed to the wheel runner by dispatch)
 * as an executor would, in a callback's context (tw__engine_on_executor answers true).
 */
void tw__run_on_wheel_thread(struct tw_engine *e, struct firing *f)
{
	struct executor *runner = wheel_runner(e);
	/* What the callback most likely touches first: fetched while the run is set up, as an
	 * executor fetches its next run's (dispatch fetched the cold part that holds it). */
	void *arg = task_cold(f->task)->arg;
	if (arg) /* for reading: many tasks may share one arg */
		__builtin_prefetch(arg, 0);
	executing_for = e;
	executing_on = runner;
	runner->last_end_ns = 0; /* the wheel thread did its own work since its last run */
	run_firing(runner, f);
	executing_for = NULL;
	executing_on = NULL;
	run_finished(runner);
}

static bool idle(struct executor *x)
{
	return !tw__executor_queued(x) && cds_wfcq_empty(&x->releases_head, &x->releases_tail);
}

/*
 * The wheel thread told x the tick its next firing is likely at (wake_at_ns: wheel_sleep.c,
 * plan_prewake). True once x woke for it: from wake_lead_ns before the tick it polled its
 * ring until a firing came, or the wheel thread, done with the tick, told it another time
 * (the firing went elsewhere, or the task was cancelled or moved meanwhile), or SPIN_PAST_NS
 * after the tick (the wheel thread is held up itself); then x goes back to sleep. Else *until
 * is when to wake for it (0: no tick to wake for).
 */
/* Long enough for the wheel thread's own late wake-ups: a spin given up before the kick
 * comes adds a futex wake-up to the run, and such runs made most of a lone heartbeat's
 * interval spread (perf/results/HISTORY.md, "A lone executor heartbeat told of its tick"). */
enum { SPIN_PAST_NS = 500000 };

/* Whether an executor spinning for the tick would hold up the wheel thread that brings its
 * firing: the wheel thread's timer wakes it on the CPU it armed it on, where it may well
 * have to wait for this thread's spin to end, the other CPUs being busy. */
static bool in_wheel_way(struct tw_engine *e)
{
	return atomic_load_explicit(&e->wheel_cpu, memory_order_relaxed) == sched_getcpu();
}

static bool ahead_of_tick(struct executor *x, uint32_t signal, uint64_t *until)
{
	uint64_t at = atomic_load_explicit(&x->wake_at_ns, memory_order_acquire);
	*until = 0;
	if (!at || at == x->woke_for_ns)
		return false;
	if (!x->wake_lead_ns)
		x->wake_lead_ns = START_WAKE_LEAD_NS;
	uint64_t from = at > x->wake_lead_ns ? at - x->wake_lead_ns : 0, now = monotonic_ns();
	if (now < from) {
		*until = from;
		return false;
	}
	x->woke_for_ns = at;
	bump(&x->prewakes);
	if (now >= at + SPIN_PAST_NS)
		return true; /* woke or was busy until well past it: nothing to wait for */
	/* Its firing is in the ring before the wheel thread lets go of the task's lock, which an
	 * executor taking it would wait for, yielding its CPU: the kick comes after. */
	while (atomic_load_explicit(&x->signal, memory_order_acquire) == signal &&
	       !atomic_load_explicit(&x->quit, memory_order_relaxed) &&
	       atomic_load_explicit(&x->wake_at_ns, memory_order_relaxed) == at &&
	       now < at + SPIN_PAST_NS && !in_wheel_way(x->engine)) {
		caa_cpu_relax();
		now = monotonic_ns();
	}
	return true;
}

/* Sleeps while x's signal is still signal, until the time given if not 0; a wake-up by that
 * time teaches x how early to arm the next. The timer's slack, which the kernel may add to the
 * time, is set to the least around the sleep alone: callbacks keep the thread's own. */
static void sleep_until(struct executor *x, uint32_t signal, uint64_t until)
{
	if (!until) {
		tw__futex_wait(&x->signal, signal, NULL);
		return;
	}
	int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* a refusal costs precision alone */
	bool timed_out = tw__futex_wait_until(&x->signal, signal, until);
	uint64_t now = monotonic_ns();
	if (slack > 0)
		(void)prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
	if (timed_out)
		x->wake_lead_ns = wake_lead_next(x->wake_lead_ns, now > until ? now - until : 0);
}

static void pin(struct executor *x)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET((int)(x->index % (unsigned)(cpus > 0 ? cpus : 1)), &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof set, &set))
		tw__engine_log(x->engine, TW_LOG_WARNING, "could not pin executor %u", x->index);
}

/* "tw-exec-N": by its creator, so that it is named once tw_engine_create returns (through
 * /proc), and by itself as it starts (through prctl, which needs no /proc). Either fails only
 * without /proc, or for a name longer than the kernel's 15 characters. A spare names itself
 * alone: its creator is the wheel thread, which does no file I/O. */
void tw__executor_name(const struct executor *x, pthread_t thread)
{
	char name[16];
	(void)snprintf(name, sizeof name, "tw-exec-%u", x->index);
	(void)pthread_setname_np(thread, name);
}

void *tw__executor_main(void *arg)
{
	struct executor *x = arg;
	struct tw_engine *e = x->engine;
	struct firing f;
	executing_for = e;
	executing_on = x;
	tw__executor_name(x, pthread_self());
	if (e->cfg.pin_executors)
		pin(x);
	for (;;) {
		uint32_t signal = atomic_load(&x->signal);
		run_releases(x); /* first: a ring that never empties must not hold them */
		if (pop(x, &f) || take_held(x, &f)) {
			run_firing(x, &f);
			run_finished(x);
			if (atomic_load_explicit(&e->destroy_by, memory_order_acquire) == x) {
				e->finish_destroy(e, x);
				e->unref(e); /* may free x */
				return NULL;
			}
			continue;
		}
		x->last_end_ns = 0; /* nothing to run: it will not go straight on */
		if (atomic_load(&x->quit) && idle(x))
			break;
		uint64_t until;
		if (ahead_of_tick(x, signal, &until))
			continue;
		atomic_store(&x->sleeping, true);
		if (idle(x) && !atomic_load(&x->quit))
			sleep_until(x, signal, until);
		atomic_store(&x->sleeping, false);
	}
	if (x->abandoned)
		e->unref(e); /* may free x */
	return NULL;
}
