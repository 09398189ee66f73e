/*
 * calendar_tasks.h - calendar tasks: tasks that repeat by a cron expression
 * (tw_task_spec.cron) rather than a fixed period (calendar_tasks.c). Uses
 * threads.h; the schedules themselves are calendar/'s (cron.h).
 *
 * The task record has no room left (task.h), so a calendar task keeps what
 * its schedule needs in a struct calendar of its own, found through the cold
 * part's arg: the task's callback, arg and release are trampolines that call
 * the user's through it. Fixed-period tasks never look at it: a calendar task
 * is marked by a period field that no fixed period has (WIDE_BIT and no bits
 * above: a "wide" period of 0), which only the paths that already handle wide
 * periods, off the common path, test for.
 *
 * Fire times are wall-clock times (CLOCK_REALTIME); each is turned into a due
 * on the engine's clock when it is planned, through the offset between the
 * two read at that moment (tw__wall_offset_ns). When the wall clock is set,
 * the wheel thread learns it from a CLOCK_REALTIME timerfd armed with
 * TFD_TIMER_CANCEL_ON_SET and plans every calendar task's due again
 * (tw__calendar_replan): the list of calendar tasks is for that walk.
 */
#ifndef TICKWHEEL_CORE_CALENDAR_TASKS_H
#define TICKWHEEL_CORE_CALENDAR_TASKS_H

#include "threads.h"

struct calendar {
	tw_cron *cron;
	tw_callback callback; /* the user's */
	void *arg;
	void (*release)(void *arg);
	struct tw_engine *engine;
	struct tw_task *task;
	struct calendar *next, *prev; /* e->calendars, under e->calendar_lock */
	/* Under the task's lock. planned_due is the due the schedule gave (0: none planned);
	 * a due_ns that differs was set by tw_set_delay (or a pause), and the schedule goes
	 * on from that firing. */
	int64_t next_wall_ns; /* the fire time planned_due stands for */
	uint64_t planned_due;
	uint64_t rerun_due; /* TW_RUN_LATE: the due of the firing waiting for the task's run */
	/* A named task's expression as tw_add was given it, for tw_snapshot (a parsed schedule
	 * cannot be written back); NULL for an unnamed one, which no snapshot holds. */
	char *expr;
	size_t expr_len;
};

#define PERIOD_CALENDAR WIDE_BIT

/* Lock held, or the task not yet published. */
static inline bool task_is_calendar(const struct tw_task *task)
{
	return atomic_load_explicit(&task->period_ms, memory_order_relaxed) == PERIOD_CALENDAR &&
	       !(task_cold(task)->period_hi & PERIOD_HI_MASK);
}

static inline struct calendar *task_calendar(const struct tw_task *task)
{
	return task_cold(task)->arg;
}

/* Wall-clock time minus the engine's time, now. On the manual clock: fixed at create
 * (tw__engine_set_manual_wall moves it). */
int64_t tw__wall_offset_ns(const struct tw_engine *e);
/* The due on the engine's 1 ms grid (rounded up) of a wall-clock time, for that offset. */
uint64_t tw__calendar_due(const struct tw_engine *e, int64_t wall_ns, int64_t offset_ns);
/* Lock held, or the task not yet published: plans the first fire time after after_wall;
 * returns its due, DUE_NEVER when the schedule has none. */
uint64_t tw__calendar_plan(const struct tw_engine *e, struct calendar *c, int64_t after_wall,
			   int64_t offset_ns);
/* Lock held, wheel thread: the task's firing at due comes at the engine's time target_ns.
 * Says the due this firing stands for (*fire_due: the latest fire time passed by then) and
 * how many fire times before it were missed; returns the next due (with no fire time left,
 * TW_MAX_DELAY_MS after *fire_due, standing for none: next_wall_ns 0). */
uint64_t tw__calendar_fire(const struct tw_engine *e, struct tw_task *task, uint64_t due,
			   uint64_t target_ns, uint64_t *fire_due, uint64_t *missed);
/* A new calendar task's record (tw_add): parses expr. */
int tw__calendar_new(struct tw_engine *e, const tw_task_spec *spec, struct calendar **out);
/* Frees a record whose task was never added (no release call). */
void tw__calendar_discard(struct calendar *c);
/* "@every D": D in ns, which tw_add makes a fixed period; 0 for a calendar schedule. */
uint64_t tw__calendar_every_ns(const struct calendar *c);
/* Lock held, a calendar task not released: its next due in wall-clock time, 0 for none
 * (tw_task_info.next_due_wall_ns). */
int64_t tw__calendar_wall_due(const struct tw_task *task);
/* tw_add, before the task is published (a thread that finds it then may release it, which
 * unlinks it): puts it in the list the re-planning walks, which skips it until published. */
void tw__calendar_link(struct tw_engine *e, struct calendar *c, struct tw_task *task);
/* The trampolines that stand for the user's callback and release. */
int tw__calendar_callback(const tw_fire *fire, void *arg);
void tw__calendar_release(void *arg);
/* The wall clock was set: every calendar task's due planned from its schedule is planned
 * again from its fire time with the new offset. Any thread, no lock held. */
void tw__calendar_replan(struct tw_engine *e);
/* The CLOCK_REALTIME timerfd that tells of a set clock (real clock only): opens and arms it
 * at create; and, on the wheel thread when epoll says it is readable, reads it, re-plans if
 * the clock was set, and arms it again. Opening logs a refusal and leaves wall_fd -1. */
void tw__wall_watch_open(struct tw_engine *e);
void tw__wall_watch_event(struct tw_engine *e);
/* stop.c's: frees what is left at destroy (records of tasks never released). */
void tw__calendar_fini(struct tw_engine *e);

#endif
