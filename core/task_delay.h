/*
 * task_delay.h - a task's period and delay as its record keeps them: 31 bits
 * in the hot part, or WIDE_BIT there and the bits above in the cold part;
 * TW_NEVER and a time asked of a paused task (DELAY_AT_DUE) as marked wide
 * delays; and, once the task ended, the tick it ended at in the delay's place.
 * Part of task.h, which includes it.
 */
#ifndef TICKWHEEL_CORE_TASK_DELAY_H
#define TICKWHEEL_CORE_TASK_DELAY_H

#include "task.h"

/* A period or delay of 31 bits or more: WIDE_BIT and its low 31 bits in the
 * hot part, its bits above in the cold part. */
static inline uint64_t wide_ms(uint32_t low, uint16_t high)
{
	return (uint64_t)high << 31 | (low & ~WIDE_BIT);
}

/* The period a value of the task's period_ms field stands for (the caller read the field
 * once; a wide one also needs the lock, see task_period_ms). */
static inline uint64_t period_of_field(const struct tw_task *task, uint32_t ms)
{
	return ms & WIDE_BIT ? wide_ms(ms, task_cold(task)->period_hi & PERIOD_HI_MASK) : ms;
}

/* Lock held, or readers of a task that cannot change (tw_get takes the lock
 * for a wide period: its two halves are only consistent under it). */
static inline uint64_t task_period_ms(const struct tw_task *task)
{
	uint32_t ms = atomic_load_explicit(&task->period_ms, memory_order_relaxed);
	return period_of_field(task, ms);
}

/* Lock held, or the task not yet published. */
static inline void task_set_period_ms(struct tw_task *task, uint64_t ms)
{
	struct task_cold *cold = task_cold(task);
	if (ms >= WIDE_BIT)
		cold->period_hi = (uint16_t)((cold->period_hi & ~PERIOD_HI_MASK) | (ms >> 31));
	atomic_store_explicit(&task->period_ms,
			      ms < WIDE_BIT ? (uint32_t)ms : (uint32_t)ms | WIDE_BIT,
			      memory_order_relaxed);
}

/* Lock held: runs of the task over the wheel-thread budget so far. */
static inline unsigned task_strikes(const struct tw_task *task)
{
	return task_cold(task)->period_hi >> PERIOD_HI_BITS;
}

static inline void task_set_strikes(struct tw_task *task, unsigned strikes)
{
	struct task_cold *cold = task_cold(task);
	cold->period_hi =
		(uint16_t)((cold->period_hi & PERIOD_HI_MASK) | strikes << PERIOD_HI_BITS);
}

/* Not a delay: tw_set_due on a paused task, whose due_ns holds the time asked until
 * tw_resume places it (task_delay_at_due_ms: the delay that time stood for when asked). */
#define DELAY_AT_DUE (UINT64_MAX - 1)

/* In delay_hi, above any delay's high part (TW_MAX_DELAY_MS >> 31 is 4096): TW_NEVER is all
 * ones; AT_DUE_HI marks DELAY_AT_DUE, the delay the time stood for kept in the bits below. */
enum { NEVER_HI = UINT16_MAX, AT_DUE_HI = 1 << 14 };
_Static_assert((TW_MAX_DELAY_MS >> 31) < AT_DUE_HI, "a delay's high part is below AT_DUE_HI");

/* Lock held, both. TW_NEVER and DELAY_AT_DUE are kept as wide delays (see NEVER_HI). */
static inline uint64_t task_delay_ms(const struct tw_task *task)
{
	if (!(task->delay_ms & WIDE_BIT))
		return task->delay_ms;
	uint16_t high = task_cold(task)->delay_hi;
	if (high & AT_DUE_HI)
		return high == NEVER_HI ? TW_NEVER : DELAY_AT_DUE;
	return wide_ms(task->delay_ms, high);
}

static inline void task_set_delay_ms(struct tw_task *task, uint64_t ms)
{
	if (ms < WIDE_BIT) {
		task->delay_ms = (uint32_t)ms;
		return;
	}
	task->delay_ms = (uint32_t)ms | WIDE_BIT;
	task_cold(task)->delay_hi = ms == TW_NEVER ? NEVER_HI : (uint16_t)(ms >> 31);
}

/* DELAY_AT_DUE, for a time that stood for a delay of ms when it was asked. */
static inline void task_set_delay_at_due(struct tw_task *task, uint64_t ms)
{
	task->delay_ms = (uint32_t)ms | WIDE_BIT;
	task_cold(task)->delay_hi = (uint16_t)(AT_DUE_HI | ms >> 31);
}

/* A task_delay_ms of DELAY_AT_DUE: the delay its time stood for when it was asked. */
static inline uint64_t task_delay_at_due_ms(const struct tw_task *task)
{
	return wide_ms(task->delay_ms, task_cold(task)->delay_hi & (AT_DUE_HI - 1));
}

/*
 * Lock held, a released task: nothing reads its delay once it ended, so delay_ms keeps the
 * tick it ended at (mod 2^32; delay_pending says it is kept) when the wheel thread takes it
 * in later than that, so that it is kept retain_ms from its end.
 */
enum { END_TICK_SPAN = 1 << 30 }; /* ticks between the end and its taking in, at most */

static inline void task_note_end_tick(struct tw_task *task, uint64_t tick)
{
	task->delay_ms = (uint32_t)tick;
	task->delay_pending = true;
}

/* The tick the task ended at, as noted, near tick `now`; else `now`. */
static inline uint64_t task_end_tick(const struct tw_task *task, uint64_t now)
{
	if (!task->delay_pending)
		return now;
	int32_t ahead = (int32_t)(task->delay_ms - (uint32_t)now);
	return ahead < 0 && (uint64_t) - (int64_t)ahead > now ? 0 : now + (uint64_t)(int64_t)ahead;
}

#endif
