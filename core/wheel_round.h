/*
 * wheel_round.h - what the wheel thread's files share: where a task is filed
 * (the wheel or the ready list, inline: each firing and each change files its
 * task), and the parts of one round (wheel_thread.c runs them in order):
 * the mail taken in (wheel_mail.c), due firings handed out (wheel_fire.c), and
 * the sleep until the next tick with work (wheel_sleep.c). Uses
 * calendar_tasks.h.
 */
#ifndef TICKWHEEL_CORE_WHEEL_ROUND_H
#define TICKWHEEL_CORE_WHEEL_ROUND_H

#include "calendar_tasks.h"

static inline struct tw_task *task_of_entry(struct wheel_entry *entry)
{
	return (struct tw_task *)((char *)entry - offsetof(struct tw_task, entry));
}

/*
 * The ready list: tasks whose due has come and whose firing is not handed out
 * yet, oldest first, linked through the task's entry while out of the wheel.
 * A one-shot waits there when every executor's queue is full; on the manual
 * clock, so does a task that came due between two tw_advance calls.
 */
static inline void ready_link(struct tw_engine *e, struct tw_task *task, struct tw_task *prev,
			      struct tw_task *next)
{
	task->ready.prev = prev;
	task->ready.next = next;
	*(prev ? &prev->ready.next : &e->ready_head) = task;
	*(next ? &next->ready.prev : &e->ready_tail) = task;
	e->ready_count++;
	task->filing = FILED_READY;
}

static inline void ready_append(struct tw_engine *e, struct tw_task *task)
{
	ready_link(e, task, e->ready_tail, NULL);
}

static inline void ready_remove(struct tw_engine *e, struct tw_task *task)
{
	struct tw_task *next = task->ready.next, *prev = task->ready.prev;
	if (prev)
		prev->ready.next = next;
	else
		e->ready_head = next;
	if (next)
		next->ready.prev = prev;
	else
		e->ready_tail = prev;
	e->ready_count--;
	if (e->ready_owed > e->ready_count)
		e->ready_owed = e->ready_count; /* an owed one left the list another way */
	wheel_entry_init(&task->entry);         /* the links were the entry's */
	task->filing = FILED_NONE;
}

/* Takes the task out of the wheel or the ready list, wherever it is filed. */
static inline void unfile(struct tw_engine *e, struct tw_task *task)
{
	if (task->filing == FILED_READY)
		ready_remove(e, task);
	else if (task->filing != FILED_NONE)
		tw__wheel_remove(&e->wheel, &task->entry);
	task->filing = FILED_NONE;
}

static inline void file_task(struct tw_engine *e, struct tw_task *task, uint64_t tick,
			     enum task_filing why)
{
	WHEEL_THREAD_ONLY();
	if (task->filing == FILED_READY)
		ready_remove(e, task);
	if (task->filing != FILED_NONE)
		tw__wheel_reschedule(&e->wheel, &task->entry, tick);
	else
		tw__wheel_add(&e->wheel, &task->entry, tick);
	task->filing = why;
}

/* wheel_mail.c: takes in what the executors mailed and, with changes, the mailbox; false
 * when a read would have waited for a mailer (the rest is read the next round). */
bool tw__wheel_read_mail(struct tw_engine *e, bool changes);
/* Whether the backlog is empty: no mail read out of the mailbox waits for a round. */
bool tw__wheel_backlog_empty(struct tw_engine *e);

/* wheel_fire.c: a round starts filling the executors from the first. */
void tw__wheel_plan_round(struct tw_engine *e);
/* Hands out up to n of the ready list, oldest first, at tick target. */
void tw__wheel_hand_out_ready(struct tw_engine *e, uint64_t target, uint64_t n);
/* Advances the wheel to tick target, handing out (or reaping) every task due by then. */
void tw__wheel_fire_due(struct tw_engine *e, uint64_t target);

/* wheel_sleep.c: arms the timerfd for the next tick with work (*until: that tick); returns
 * epoll_wait's timeout (-1, or the ms to it while the timerfd cannot be armed). */
int tw__wheel_arm_for_next(struct tw_engine *e, uint64_t *armed, uint64_t *until);
/* The timerfd's state before it was first armed. */
#define ARM_NONE UINT64_MAX
/* Real clock: tells the mailers the tick it sleeps until; whether nothing waits. */
bool tw__wheel_may_sleep(struct tw_engine *e, uint64_t until);
/* Sleeps in epoll until the timerfd, the mailbox's eventfd or the wall clock's timerfd. */
void tw__wheel_wait(struct tw_engine *e, int timeout_ms);
/* Manual clock: epoll_wait's timeout (the watch, one-shots waiting for room). */
int tw__wheel_manual_timeout_ms(struct tw_engine *e);

#endif
