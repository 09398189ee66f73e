/*
 * engine_stats.c - tw_stats and tw_executor_stats: the engine's counters,
 * each summed over the threads that write it, read without a lock.
 */
#include "threads.h"

#include <errno.h>
#include <string.h>

static void gather_stats(tw_engine *e, tw_engine_stats *out)
{
	memset(out, 0, sizeof *out);
	uint64_t in_state[TW_PAUSED + 1];
	tw__states_total(e, in_state); /* counted as tasks move: no walk over the table */
	out->tasks_waiting = in_state[TW_WAITING];
	out->tasks_running = in_state[TW_RUNNING];
	out->tasks_paused = in_state[TW_PAUSED];
	out->tasks_live = out->tasks_waiting + out->tasks_running + out->tasks_paused;
	tw__ends_total(e, &out->tasks_completed, &out->tasks_stopped);
	out->skipped_overlap =
		atomic_load(&e->skipped_overlap) + atomic_load(&e->api_skipped_overlap);
	out->skipped_overload = atomic_load(&e->skipped_overload);
	out->skipped_missed = atomic_load(&e->skipped_missed) + atomic_load(&e->api_skipped_missed);
	out->wheel_wakeups = atomic_load(&e->wakeups);
	out->stuck_runs = atomic_load(&e->stuck_runs);
	unsigned running = executors_running(e);
	out->spare_executors = running > e->executor_count ? running - e->executor_count : 0;
	out->executors = running;
	out->wheel_busy_ns = atomic_load(&e->wheel_busy_ns);
	out->over_budget_runs = atomic_load(&e->over_budget_runs);
	out->tasks_moved_off_wheel_thread = atomic_load(&e->moved_off_wheel);
	/* The wheel runner counts as an executor but for its queue, which it has not, and its
	 * busy time, which is the wheel thread's. */
	for (unsigned i = 0; i <= running; i++) {
		struct executor *x = run_counter(e, i, running);
		out->failures += atomic_load(&x->failures);
		out->slow_runs += atomic_load(&x->slow_runs);
		out->skipped_missed += atomic_load(&x->dropped);
		for (unsigned b = 0; b < TW_LATENESS_BUCKETS; b++) {
			uint64_t runs = atomic_load(&x->lateness[b]);
			out->lateness_us[b] += runs;
			out->lateness_count += runs;
		}
		out->lateness_sum_ns += atomic_load(&x->lateness_sum_ns);
		uint64_t max = atomic_load(&x->lateness_max_ns);
		if (max > out->lateness_max_ns)
			out->lateness_max_ns = max;
		if (x->on_wheel_thread) {
			for (unsigned b = 0; b < TW_LATENESS_BUCKETS; b++)
				out->wheel_thread_runs += atomic_load(&x->lateness[b]);
			continue;
		}
		out->executor_busy_ns += atomic_load(&x->busy_ns);
		out->queued += tw__executor_queued(x);
	}
	out->runs = out->lateness_count; /* each run started counts in one bucket */
	const struct executor *x0 = &e->executors[0];
	uint64_t per_executor = sizeof *x0 + ENDED_RING * sizeof(struct tw_task *) +
				((uint64_t)x0->mask + 1) * sizeof *x0->ring;
	out->memory_bytes =
		sizeof *e + tw__table_bytes(&e->table) + e->executor_slots * per_executor;
	if (e->recorder)
		tw__record_stats(e->recorder, out);
}

int tw_executor_stats_sized(tw_engine *e, unsigned index, tw_executor_info *out, size_t size)
{
	if (!e || !out)
		return -TW_EINVAL;
	if (engine_forked(e))
		return -TW_EFORKED;
	if (index >= executors_running(e))
		return -TW_ENOTFOUND;
	struct executor *x = &e->executors[index];
	uint64_t runs = 0;
	for (unsigned b = 0; b < TW_LATENESS_BUCKETS; b++)
		runs += atomic_load_explicit(&x->lateness[b], memory_order_relaxed);
	uint64_t start = atomic_load_explicit(&x->run_start_ns, memory_order_acquire);
	uint64_t now = start ? monotonic_ns() : 0;
	tw_executor_info stats = {
		.queued = tw__executor_queued(x),
		.queued_max = atomic_load_explicit(&x->queued_max, memory_order_relaxed),
		.busy_ns = atomic_load_explicit(&x->busy_ns, memory_order_relaxed),
		.runs = runs,
		.run_ns = start && now > start ? now - start : 0,
		.spare = x->spare,
	};
	tw__struct_out(out, size, &stats, sizeof stats);
	return TW_OK;
}

int tw_record_status(tw_engine *e)
{
	if (!e)
		return -TW_EINVAL;
	if (engine_forked(e))
		return -TW_EFORKED;
	int err = e->recorder ? tw__record_error(e->recorder) : 0;
	if (!err)
		return TW_OK;
	errno = err;
	return -TW_EIO;
}

int tw_stats_sized(tw_engine *e, tw_engine_stats *out, size_t size)
{
	if (!e || !out)
		return -TW_EINVAL;
	if (engine_forked(e))
		return -TW_EFORKED;
	if (size == sizeof *out) {
		gather_stats(e, out);
	} else {
		tw_engine_stats stats;
		gather_stats(e, &stats);
		tw__struct_out(out, size, &stats, sizeof stats);
	}
	return TW_OK;
}
