/*
 * calendar_tasks.c - calendar tasks: their records, their fire times turned into
 * dues on the engine's clock, and their re-planning when the wall clock is
 * set (see calendar_tasks.h).
 */
#include "calendar_tasks.h"
#include "alloc.h"
#include "cron.h"

#include <errno.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/*
 * A firing that comes after a stall counts the fire times it passed one by one (they are
 * skipped as missed); past this many it jumps to the latest, and counts no more: a long
 * stall of a schedule that fires every second must not hold the wheel thread for long.
 */
enum { MISSED_COUNTED = 100000 };

static int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

int64_t tw__wall_offset_ns(const struct tw_engine *e)
{
	if (e->cfg.manual_clock)
		return atomic_load_explicit(&e->manual_wall_offset_ns, memory_order_relaxed);
	/* The wall clock read between two monotonic reads: the offset is off by at most half
	 * their distance. The clocks exist and ts is ours: clock_gettime cannot fail. */
	struct timespec m1, wall, m2;
	(void)clock_gettime(CLOCK_MONOTONIC, &m1);
	(void)clock_gettime(CLOCK_REALTIME, &wall);
	(void)clock_gettime(CLOCK_MONOTONIC, &m2);
	return ns_of(&wall) - (ns_of(&m1) + (ns_of(&m2) - ns_of(&m1)) / 2);
}

uint64_t tw__calendar_due(const struct tw_engine *e, int64_t wall_ns, int64_t offset_ns)
{
	/* A fire time before the engine's clock began (a wall clock set far back) is due at
	 * once; int64 ns run to 2262, so the difference cannot overflow for any offset a
	 * clock gives. */
	int64_t at = wall_ns - offset_ns;
	return tw__engine_due_at_ns(e, at > 0 ? (uint64_t)at : 0, 0);
}

uint64_t tw__calendar_plan(const struct tw_engine *e, struct calendar *c, int64_t after_wall,
			   int64_t offset_ns)
{
	int64_t next;
	if (tw_cron_next(c->cron, after_wall, &next, 1)) {
		c->planned_due = 0;
		return DUE_NEVER;
	}
	c->next_wall_ns = next;
	c->planned_due = tw__calendar_due(e, next, offset_ns);
	return c->planned_due;
}

/*
 * The latest fire time at or before target, from one (known) at or before it. Halves the span
 * it may lie in at each search, so that a stall of any length costs some 64 of them.
 */
static int64_t latest_fire(const struct tw_cron *cron, int64_t known, int64_t target)
{
	/* lo is a fire time; none lies in (hi, target] */
	int64_t lo = known, hi = target, next;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		if (tw_cron_next(cron, mid, &next, 1) == TW_OK && next <= hi)
			lo = next;
		else
			hi = mid;
	}
	return lo;
}

uint64_t tw__calendar_fire(const struct tw_engine *e, struct tw_task *task, uint64_t due,
			   uint64_t target_ns, uint64_t *fire_due, uint64_t *missed)
{
	TASK_LOCKED(task);
	struct calendar *c = task_calendar(task);
	int64_t offset = tw__wall_offset_ns(e);
	int64_t target_wall = (int64_t)target_ns + offset;
	/* The fire time this firing stands for: the planned one, not the due plus the offset
	 * now, which a slewing clock may have moved a little before it (it would fire twice). A
	 * due set by tw_set_delay stands for its own time. */
	int64_t wall = due == c->planned_due ? c->next_wall_ns : (int64_t)due + offset;
	int64_t next;
	int rc = tw_cron_next(c->cron, wall, &next, 1);
	uint64_t n = 0;
	while (rc == TW_OK && next <= target_wall) {
		if (++n == MISSED_COUNTED) {
			/* the firing stands for the latest fire time, not for target itself */
			wall = latest_fire(c->cron, next, target_wall);
			rc = tw_cron_next(c->cron, target_wall, &next, 1);
			break;
		}
		wall = next;
		rc = tw_cron_next(c->cron, wall, &next, 1);
	}
	*missed = n;
	/* The latest fire time passed is at or before target_ns, which is on the grid. */
	*fire_due = n ? tw__calendar_due(e, wall, offset) : due;
	if (rc) {
		/* No fire time left: fire() files every due it plans, so this one is the farthest
		 * a delay may be, standing for no fire time (next_wall_ns 0). */
		c->next_wall_ns = 0;
		c->planned_due = *fire_due + TW_MAX_DELAY_MS * NS_PER_MS;
		return c->planned_due;
	}
	c->next_wall_ns = next;
	c->planned_due = tw__calendar_due(e, next, offset);
	return c->planned_due;
}

int tw__calendar_new(struct tw_engine *e, const tw_task_spec *spec, struct calendar **out)
{
	struct calendar *c = tw__alloc(sizeof *c);
	if (!c)
		return -TW_ENOMEM;
	*c = (struct calendar){
		.callback = spec->callback, .arg = spec->arg, .release = spec->release, .engine = e
	};
	int rc = tw_cron_parse(spec->cron, &c->cron, NULL);
	if (rc) {
		tw__free(c, sizeof *c);
		return rc;
	}
	if (spec->name && spec->name[0]) {
		c->expr_len = strlen(spec->cron);
		c->expr = tw__alloc(c->expr_len + 1);
		if (!c->expr) {
			tw__calendar_discard(c);
			return -TW_ENOMEM;
		}
		memcpy(c->expr, spec->cron, c->expr_len + 1);
	}
	*out = c;
	return TW_OK;
}

void tw__calendar_discard(struct calendar *c)
{
	tw_cron_free(c->cron);
	if (c->expr)
		tw__free(c->expr, c->expr_len + 1);
	tw__free(c, sizeof *c);
}

uint64_t tw__calendar_every_ns(const struct calendar *c)
{
	return c->cron->every_ns;
}

int64_t tw__calendar_wall_due(const struct tw_task *task)
{
	TASK_LOCKED(task);
	const struct calendar *c = task_calendar(task);
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	uint64_t due = atomic_load_explicit(&task->due_ns, memory_order_relaxed);
	if ((state != TW_WAITING && state != TW_RUNNING) || !due || due == DUE_NEVER)
		return 0;
	return due == c->planned_due ? c->next_wall_ns :
				       (int64_t)due + tw__wall_offset_ns(c->engine);
}

void tw__calendar_link(struct tw_engine *e, struct calendar *c, struct tw_task *task)
{
	c->task = task;
	pthread_mutex_lock(&e->calendar_lock);
	c->prev = NULL;
	c->next = e->calendars;
	if (c->next)
		c->next->prev = c;
	e->calendars = c;
	pthread_mutex_unlock(&e->calendar_lock);
}

static void unlink_calendar(struct tw_engine *e, struct calendar *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		e->calendars = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

int tw__calendar_callback(const tw_fire *fire, void *arg)
{
	struct calendar *c = arg;
	return c->callback(fire, c->arg);
}

/* Called exactly once, with no task lock held, after the task's last run: nothing reads the
 * record after this (the task is ended and released: every reader checks that first). */
void tw__calendar_release(void *arg)
{
	struct calendar *c = arg;
	struct tw_engine *e = c->engine;
	if (c->release)
		c->release(c->arg);
	pthread_mutex_lock(&e->calendar_lock);
	unlink_calendar(e, c);
	pthread_mutex_unlock(&e->calendar_lock);
	tw__calendar_discard(c);
}

void tw__calendar_replan(struct tw_engine *e)
{
	bool wake = false;
	/* The list's lock, then each task's: nothing takes them the other way round (a task's
	 * release, which unlinks it, is called with no task lock held). */
	pthread_mutex_lock(&e->calendar_lock);
	int64_t offset = tw__wall_offset_ns(e);
	for (struct calendar *c = e->calendars; c; c = c->next) {
		struct tw_task *task = c->task;
		tw__task_lock(task);
		uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
		uint64_t due = atomic_load_explicit(&task->due_ns, memory_order_relaxed);
		/* A task linked by tw_add and not yet published (id 0) is planned by its add. */
		if (atomic_load_explicit(&task->id, memory_order_acquire) && !task->released &&
		    (state == TW_WAITING || state == TW_RUNNING) && due && due == c->planned_due &&
		    c->next_wall_ns) {
			uint64_t again = tw__calendar_due(e, c->next_wall_ns, offset);
			c->planned_due = again;
			atomic_store_explicit(&task->due_ns, again, memory_order_relaxed);
			/* Earlier: the wheel must move it (a due already passed fires at once);
			 * later: fire() files it again when its old tick comes. */
			if (task->filing != FILED_DUE ||
			    tw__engine_tick_of(e, again) < wheel_entry_due(&task->entry))
				wake |= tw__task_mail(e, task);
		}
		tw__task_unlock(task);
	}
	pthread_mutex_unlock(&e->calendar_lock);
	if (wake)
		tw__engine_wake(e);
}

/* Armed far ahead (2200-01-01): only a set clock wakes it, the expiry never comes. */
static int wall_watch_arm(struct tw_engine *e)
{
	struct itimerspec at = { .it_value.tv_sec = 7258118400 };
	return timerfd_settime(e->wall_fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &at, NULL);
}

/* Without it the engine works, but for the re-planning: a refusal is logged, not fatal. */
void tw__wall_watch_open(struct tw_engine *e)
{
	e->wall_fd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
	if (e->wall_fd >= 0 && !wall_watch_arm(e))
		return;
	tw__engine_log(e, TW_LOG_WARNING,
		       "no CLOCK_REALTIME timer (%s): calendar tasks are not re-planned when the "
		       "clock is set",
		       tw__strerror(errno));
	if (e->wall_fd >= 0)
		close(e->wall_fd);
	e->wall_fd = -1;
}

void tw__wall_watch_event(struct tw_engine *e)
{
	uint64_t expirations;
	if (read(e->wall_fd, &expirations, sizeof expirations) >= 0 || errno != ECANCELED)
		return; /* EAGAIN: nothing after all (a set clock is told once) */
	/* Armed again before the walk: a clock set during it is told again. */
	if (wall_watch_arm(e))
		tw__engine_log(e, TW_LOG_ERROR,
			       "arming the CLOCK_REALTIME timer: %s; calendar tasks are no longer "
			       "re-planned when the clock is set",
			       tw__strerror(errno));
	tw__engine_log(e, TW_LOG_INFO, "the wall clock was set: calendar tasks re-planned");
	tw__calendar_replan(e);
}

void tw__calendar_fini(struct tw_engine *e)
{
	struct calendar *c = e->calendars;
	while (c) {
		struct calendar *next = c->next;
		tw__calendar_discard(c);
		c = next;
	}
	e->calendars = NULL;
	pthread_mutex_destroy(&e->calendar_lock);
}
