/*
 * handover.c - what passes between the wheel thread and the executors.
 *
 * Each executor has its own bounded ring of firings with one producer (the
 * wheel thread). Its owner takes them in order; so may another executor, when
 * the owner's run has held them up for HOLD_NS, and a stop, which drops them:
 * a taker claims the oldest by moving head with a compare-and-swap, which the
 * owner almost always wins at once (its own line). An idle executor sleeps on
 * a futex; the wheel thread wakes it once per round, after handing out the
 * round's firings, and only if it sleeps. A full ring refuses the firing: the
 * wheel thread keeps a one-shot's for later and skips a periodic task's
 * (overload). The other way, an executor hands the tasks that ended on it
 * back through a ring of its own.
 *
 * Every wake-up is made here: the wheel thread's (its eventfd, tw__engine_wake),
 * an executor's (its futex word) and the drain's waiters' (drain_signal, handover.h).
 */
#include "handover.h"

#include <errno.h>
#include <unistd.h>

bool tw__executor_push(struct executor *x, const struct firing *f)
{
	uint64_t tail = atomic_load_explicit(&x->tail, memory_order_relaxed);
	/* The executor's head is read only when the ring looks full. */
	if (tail - x->head_seen >= x->capacity) {
		x->head_seen = atomic_load_explicit(&x->head, memory_order_acquire);
		if (tail - x->head_seen >= x->capacity)
			return false;
	}
	struct ring_slot *slot = &x->ring[tail & x->mask];
	atomic_store_explicit(&slot->task, f->task, memory_order_relaxed);
	atomic_store_explicit(&slot->due_ns, f->due_ns, memory_order_relaxed);
	atomic_store_explicit(&slot->skipped, f->skipped, memory_order_relaxed);
	count_handed(x);
	atomic_store_explicit(&x->tail, tail + 1, memory_order_release);
	x->kick = true;
	return true;
}

bool tw__executor_take(struct executor *x, struct firing *f)
{
	uint64_t head = atomic_load_explicit(&x->head, memory_order_acquire);
	for (;;) {
		uint64_t tail = atomic_load_explicit(&x->tail, memory_order_acquire);
		if (head >= tail)
			return false;
		if (ring_claim(x, &head, f))
			return true;
	}
}

uint64_t tw__executor_queued(struct executor *x)
{
	uint64_t head = atomic_load_explicit(&x->head, memory_order_acquire);
	uint64_t tail = atomic_load_explicit(&x->tail, memory_order_acquire);
	return tail > head ? tail - head : 0;
}

/* Counts as a run in progress, so that stop and quiesce wait for it too. */
void tw__executor_push_release(struct executor *x, struct tw_task *task)
{
	count_handed(x);
	cds_wfcq_node_init(&task->to_release);
	HANDOVER_RELEASE(task);
	cds_wfcq_enqueue(&x->releases_head, &x->releases_tail, &task->to_release);
	x->kick = true;
}

/*
 * One-shots end at the rate they fire: mailing each through the engine's
 * mailbox made both executors write its tail, and the wheel thread chase a
 * list through the tasks, one cache miss after another. An array can be read
 * ahead. The wheel thread looks at the rings before it sleeps (may_sleep), and
 * each round it is awake; a sleeping one is woken only if it would take the
 * task in too late (tw__wake_to_take_in). The seq_cst pair (tail here, sleeps_until
 * in may_sleep) makes sure that either this sees it asleep, or it sees the task.
 */
bool tw__executor_mail_ended(struct executor *x, struct tw_task *task)
{
	TASK_LOCKED(task);
	if (task->mailed)
		return false;
	uint64_t tail = atomic_load_explicit(&x->ended_tail, memory_order_relaxed);
	if (tail - x->ended_head_seen >= ENDED_RING) {
		x->ended_head_seen = atomic_load_explicit(&x->ended_head, memory_order_acquire);
		if (tail - x->ended_head_seen >= ENDED_RING)
			return tw__task_mail(x->engine, task);
	}
	task->mailed = true;
	x->ended[tail & (ENDED_RING - 1)] = task;
	HANDOVER_RELEASE(task);
	atomic_store_explicit(&x->ended_tail, tail + 1, memory_order_seq_cst);
	if (x->engine->cfg.manual_clock) {
		/* Takes the ring in at once, as its time stands still: a tw_advance after this
		 * counts the task's keeping from its end. Woken when the ring was empty. */
		x->ended_head_seen = atomic_load_explicit(&x->ended_head, memory_order_seq_cst);
		return x->ended_head_seen == tail;
	}
	uint64_t until = atomic_load_explicit(&x->engine->sleeps_until, memory_order_seq_cst);
	return until && tw__wake_to_take_in(x->engine, task, until);
}

bool tw__executor_ended_waiting(struct executor *x)
{
	return atomic_load_explicit(&x->ended_tail, memory_order_seq_cst) !=
	       atomic_load_explicit(&x->ended_head, memory_order_relaxed);
}

void tw__executor_take_ended(struct executor *x, void (*take)(struct tw_task *, void *), void *ctx)
{
	enum { AHEAD = 8 }; /* tasks whose line 0 is loaded ahead of their turn */
	uint64_t head = atomic_load_explicit(&x->ended_head, memory_order_relaxed), tail;
	/* Most rounds find the ring empty: head is then not written, so that its line stays in
	 * the executor's cache. A task mailed just after this look is seen by may_sleep's. */
	if (atomic_load_explicit(&x->ended_tail, memory_order_acquire) == head)
		return;
	do {
		tail = atomic_load_explicit(&x->ended_tail, memory_order_acquire);
		for (uint64_t i = head; i < tail; i++) {
			if (i + AHEAD < tail)
				__builtin_prefetch(x->ended[(i + AHEAD) & (ENDED_RING - 1)], 1);
			struct tw_task *task = x->ended[i & (ENDED_RING - 1)];
			HANDOVER_ACQUIRE(task);
			take(task, ctx);
		}
		head = tail;
		atomic_store_explicit(&x->ended_head, head, memory_order_seq_cst);
	} while (atomic_load_explicit(&x->ended_tail, memory_order_seq_cst) != head);
}

/* The first waker of a sleep marks the executor awake: a kick later in the same round (the
 * wheel thread kicks every KICK_BATCH firings) then makes no futex call, which would find no
 * waiter while the woken thread is on its way out of the wait. */
void tw__executor_wake(struct executor *x)
{
	atomic_fetch_add_explicit(&x->signal, 1, memory_order_seq_cst);
	if (atomic_exchange_explicit(&x->sleeping, false, memory_order_seq_cst))
		tw__futex_wake_all(&x->signal);
}

void tw__executors_kick(struct tw_engine *e)
{
	unsigned running = executors_running(e);
	for (unsigned i = 0; i < running; i++) {
		struct executor *x = &e->executors[i];
		if (x->kick)
			tw__executor_wake(x);
		x->kick = false;
	}
}

/*
 * The wheel thread is woken only when it must act before the tick it sleeps
 * until (sleeps_until, 0 while it is awake): for a due before that tick, or to
 * take in an ended task that it would otherwise take in too late to reap it
 * retain_ms after its end (a request timeout cancelled while the wheel thread
 * sleeps until a due 30 s ahead wakes it once per retain_ms, not once per
 * cancel: the next cancels find it armed for that first one's reaping). A due at or after
 * it, a pause, or a task left without a due waits in the mailbox for that
 * wake-up, which takes the mailbox in before it expires the tick, where the
 * task is looked at anyway. The wheel thread publishes the tick and then looks
 * at the mailbox; a mailer queues and then reads the tick (both orders
 * seq_cst): either the wheel thread sees the mail, or the mailer sees the tick.
 * One mailer per sleep writes the eventfd: the one that swaps the tick for 0.
 */
enum { TAKE_IN_TICKS = 4 };

static bool claim_wake(struct tw_engine *e, uint64_t until)
{
	return atomic_compare_exchange_strong_explicit(&e->sleeps_until, &until, 0,
						       memory_order_seq_cst, memory_order_relaxed);
}

/* Ended task `task` was mailed while the wheel thread sleeps until tick `until`: whether
 * this caller is to wake it. Not if it wakes in time to keep the task retain_ms from now:
 * then the task keeps the tick it ended at. The clock is read only here, off the path of a
 * thread that is awake. */
bool tw__wake_to_take_in(struct tw_engine *e, struct tw_task *task, uint64_t until)
{
	TASK_LOCKED(task);
	uint64_t now_tick = tw__engine_tick_of(e, tw__engine_now_ns(e));
	if (until <= now_tick + TAKE_IN_TICKS)
		return false;
	/* the tick it is to be reaped at (reconcile), or sooner */
	if (e->cfg.retain_ms <= END_TICK_SPAN && until <= now_tick + e->cfg.retain_ms + 1) {
		task_note_end_tick(task, now_tick);
		return false;
	}
	return claim_wake(e, until);
}

/* The wheel thread sleeps until tick `until`: whether this caller is to wake it. */
static __attribute__((noinline)) bool wake_for(struct tw_engine *e, struct tw_task *task,
					       uint64_t until)
{
	uint64_t due = atomic_load_explicit(&task->due_ns, memory_order_relaxed);
	if (task_wants_due(task, due))
		return tw__engine_tick_of(e, due) < until && claim_wake(e, until);
	if (!task->released)
		return false; /* filed at or after `until`, where the wheel drops it */
	return tw__wake_to_take_in(e, task, until);
}

bool tw__task_mail(struct tw_engine *e, struct tw_task *task)
{
	TASK_LOCKED(task);
	if (!task->mailed) {
		task->mailed = true;
		struct cds_wfcq_node *mail = task_mail_link(task);
		cds_wfcq_node_init(mail);
		HANDOVER_RELEASE(task);
		(void)cds_wfcq_enqueue(&e->mail_head, &e->mail_tail, mail);
	}
	uint64_t until = atomic_load_explicit(&e->sleeps_until, memory_order_seq_cst);
	return until && wake_for(e, task, until);
}

/* Writes the wheel thread's eventfd: a system call, made with no task lock held. */
void tw__engine_wake(struct tw_engine *e)
{
	uint64_t one = 1;
	/* EAGAIN: the counter is already non-zero, the thread will wake. Nothing else can
	 * fail on an eventfd that the engine holds open until the wheel thread is joined. */
	if (write(e->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
		tw__engine_log(e, TW_LOG_ERROR, "waking the wheel thread: %s", tw__strerror(errno));
}
