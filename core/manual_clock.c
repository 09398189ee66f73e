/*
 * manual_clock.c - the manual clock (tw_config.manual_clock): tw_advance moves
 * it and waits until the wheel thread has handed out what came due; tests set
 * its wall-clock time.
 */
#include "calendar_tasks.h"
#include "lifecycle.h"

int tw_advance(tw_engine *e, uint64_t ms)
{
	if (!e)
		return -TW_EINVAL;
	if (engine_forked(e))
		return -TW_EFORKED;
	if (!e->cfg.manual_clock)
		return -TW_ESTATE;
	if (ms > TW_MAX_DELAY_MS)
		return -TW_ERANGE;
	if (atomic_load(&e->stopping))
		return halted_code(e);
	if (tw__engine_on_wheel_run(e))
		return -TW_ECALLBACK; /* it would wait for the thread it runs on */
	pthread_mutex_lock(&e->lock);
	/* Time stays where now + the longest delay still fits 64 bits of ns. */
	uint64_t now = atomic_load_explicit(&e->manual_now_ns, memory_order_relaxed);
	if (ms * NS_PER_MS > UINT64_MAX - TW_MAX_DELAY_MS * NS_PER_MS - now) {
		pthread_mutex_unlock(&e->lock);
		return -TW_ERANGE;
	}
	atomic_store_explicit(&e->manual_now_ns, now + ms * NS_PER_MS, memory_order_release);
	uint64_t asked = ++e->advance_asked;
	e->advance_callers++;
	tw__engine_wake(e);
	while (e->advance_done < asked && !atomic_load(&e->stopping))
		pthread_cond_wait(&e->cond, &e->lock);
	bool done =
		e->advance_done >= asked; /* read under the lock the wheel thread writes it in */
	if (--e->advance_callers == 0 && atomic_load(&e->stopping))
		pthread_cond_broadcast(&e->cond); /* a destroy waits for the last to leave */
	pthread_mutex_unlock(&e->lock);
	return done ? TW_OK : -TW_ESHUTDOWN;
}

void tw__engine_set_manual_wall(struct tw_engine *e, int64_t wall_ns)
{
	int64_t now = (int64_t)tw__engine_now_ns(e);
	atomic_store_explicit(&e->manual_wall_offset_ns, wall_ns - now, memory_order_relaxed);
	tw__calendar_replan(e);
}
