/*
 * wheel_mail.c - the wheel thread takes in the mail: tasks changed by other
 * threads (the mailbox) and tasks ended on the executors (their rings), each
 * filed where it now wants to be, or kept for reaping.
 */
#include "wheel_round.h"

/*
 * Reaping a task costs a lock, a store and a call_rcu, and a million tasks
 * cancelled at once end within a few rounds: filed in one tick, they would be
 * reaped in one round while every firing due waits. The ticks of reaping are
 * filled up to REAPS_PER_TICK each, the rest going to the ticks after: a task
 * may be kept a little longer than retain_ms, never less. Not on the manual
 * clock, where tw_advance(retain_ms + 1) reaps every task ended before it.
 */
enum { REAPS_PER_TICK = 1024 };

static __attribute__((noinline)) uint64_t reaping_tick(struct tw_engine *e, uint64_t earliest)
{
	if (earliest > e->reap_tick) {
		e->reap_tick = earliest;
		e->reaps_in_tick = 0;
	} else if (e->reaps_in_tick >= REAPS_PER_TICK) {
		e->reap_tick++;
		e->reaps_in_tick = 0;
	}
	e->reaps_in_tick++;
	return e->reap_tick;
}

/*
 * Lock held. Makes the wheel agree with what the task now wants. A due the
 * wheel has already passed (the mail came in while it advanced) goes to the
 * ready list, handed out this round (on the manual clock: by the next
 * tw_advance): re-filing it would make it wait for the next tick.
 */
static inline __attribute__((always_inline)) void reconcile(struct tw_engine *e,
							    struct tw_task *task)
{
	TASK_LOCKED(task);
	WHEEL_THREAD_ONLY();
	if (task->released) {
		/* Not reaped before an executor has made its release call, nor while a firing
		 * dropped by a cancel still waits in a ring (it points to the task). Kept
		 * retain_ms whole: the reaping tick comes after retain_ms more ticks have passed. */
		if (task->filing != FILED_REAP && !task->release_queued &&
		    !atomic_load_explicit(&task->running, memory_order_relaxed)) {
			uint64_t keep = e->cfg.retain_ms < TW_MAX_DELAY_MS ? e->cfg.retain_ms :
									     TW_MAX_DELAY_MS;
			if (task->filing == FILED_READY)
				ready_remove(e, task);
			/* from its end, which it noted if it was taken in late */
			uint64_t now = wheel_now(&e->wheel);
			uint64_t ended =
				task_end_tick(task, e->take_in_tick > now ? e->take_in_tick : now);
			uint64_t tick = ended + keep + 1;
			if (tick <= now)
				tick = now + 1;
			file_task(e, task, e->cfg.manual_clock ? tick : reaping_tick(e, tick),
				  FILED_REAP);
		}
		return;
	}
	uint64_t due = atomic_load_explicit(&task->due_ns, memory_order_relaxed);
	if (!task_wants_due(task, due)) {
		if (task->filing == FILED_DUE || task->filing == FILED_READY)
			unfile(e, task);
		return;
	}
	uint64_t tick = tw__engine_tick_of(e, due);
	if (tick <= wheel_now(&e->wheel)) {
		if (task->filing != FILED_READY) {
			unfile(e, task);
			ready_append(e, task);
		}
	} else if (task->filing == FILED_NONE || task->filing == FILED_READY ||
		   tick < wheel_entry_due(&task->entry)) {
		file_task(e, task, tick, FILED_DUE);
	}
}

/* Inlined into the mailbox's loop, where it runs once per change. */
static inline __attribute__((always_inline)) void take_mail(struct tw_task *task, void *ctx)
{
	struct tw_engine *e = ctx;
	tw__task_lock(task);
	task->mailed = false;
	reconcile(e, task);
	tw__task_unlock(task);
}

/*
 * Mail read in one round on the real clock, at most: a million adds or
 * cancels in a burst would otherwise be filed in one round, and every firing
 * due meanwhile would wait for the lot. The rest waits in the backlog, read
 * first the next round, which comes at once (the thread does not sleep on a
 * backlog), after the round's firings are handed out.
 */
enum { MAIL_PER_ROUND = 2048 };

/*
 * Takes in what the executors mailed (ended tasks) and, with changes, the
 * mailbox, in the order it was mailed. On the manual clock the mailbox waits
 * for the next tw_advance, and is then read whole, so that the place a change
 * gets does not depend on when this thread woke: the changes made between two
 * advances are filed in the order they were made, a task changed twice
 * meanwhile at the place of its first change.
 *
 * On the real clock the wheel thread never waits for a mailer: one preempted
 * halfway through queueing leaves a link unset, and liburcu's blocking reads
 * then sleep 10 ms. A read that would block stops there; false says so, and
 * the rest is read the next round.
 */
bool tw__wheel_read_mail(struct tw_engine *e, bool changes)
{
	unsigned running = executors_running(e);
	for (unsigned i = 0; i < running; i++)
		tw__executor_take_ended(&e->executors[i], take_mail, e);
	if (!changes)
		return true;
	if (e->cfg.manual_clock) {
		struct __cds_wfcq_head head;
		struct cds_wfcq_tail tail;
		struct cds_wfcq_node *node, *next;
		__cds_wfcq_init(&head, &tail);
		if (__cds_wfcq_splice_blocking(&head, &tail, &e->mail_head, &e->mail_tail) ==
		    CDS_WFCQ_RET_SRC_EMPTY)
			return true;
		__cds_wfcq_for_each_blocking_safe (&head, &tail, node, next) {
			struct tw_task *task = task_of_mail_link(node);
			HANDOVER_ACQUIRE(task);
			take_mail(task, e);
		}
		return true;
	}
	if (__cds_wfcq_splice_nonblocking(&e->backlog_head, &e->backlog_tail, &e->mail_head,
					  &e->mail_tail) == CDS_WFCQ_RET_WOULDBLOCK)
		return false;
	for (unsigned budget = MAIL_PER_ROUND; budget; budget--) {
		struct cds_wfcq_node *node =
			__cds_wfcq_dequeue_nonblocking(&e->backlog_head, &e->backlog_tail);
		if (node == CDS_WFCQ_WOULDBLOCK)
			return false;
		if (!node)
			break;
		struct tw_task *task = task_of_mail_link(node);
		HANDOVER_ACQUIRE(task);
		take_mail(task, e);
	}
	return true;
}

bool tw__wheel_backlog_empty(struct tw_engine *e)
{
	return cds_wfcq_empty(&e->backlog_head, &e->backlog_tail);
}
