/*
 * executor_pool.c - the executors as a group: their rings allocated and their
 * threads started at create, spares started by the watch, all joined and freed
 * at destroy, their queued firings dropped by a stop, and whether any run goes.
 */
#include "alloc.h"
#include "threads.h"

#include <errno.h>

/*
 * Firings and release calls are counted handed by the wheel thread on the
 * executor it gave them to, and done by whoever finished them: the owner,
 * another executor that took them, or a stop that dropped them. So only the
 * sums compare: all done are read before all handed, and a firing is counted
 * handed before anyone can take it, so done never passes handed.
 */
bool tw__runs_idle(struct tw_engine *e, uint64_t except)
{
	for (;;) {
		unsigned running = executors_running(e);
		uint64_t done = atomic_load_explicit(&e->stop_done, memory_order_seq_cst);
		uint64_t handed = 0, again = 0;
		for (unsigned i = 0; i <= running; i++)
			done += atomic_load_explicit(&run_counter(e, i, running)->done,
						     memory_order_seq_cst);
		for (unsigned i = 0; i <= running; i++)
			handed += atomic_load_explicit(&run_counter(e, i, running)->handed,
						       memory_order_seq_cst);
		if (handed - done > except)
			return false;
		/* Nothing handed over during the scan: all were idle at its end. */
		for (unsigned i = 0; i <= running; i++)
			again += atomic_load_explicit(&run_counter(e, i, running)->handed,
						      memory_order_seq_cst);
		if (again == handed && running == executors_running(e))
			return true;
	}
}

static unsigned round_up_pow2(unsigned n)
{
	unsigned p = 1;
	while (p < n && p < (1u << 30))
		p <<= 1;
	return p;
}

static int start_thread(struct executor *x)
{
	int err = pthread_create(&x->thread, NULL, tw__executor_main, x);
	if (err) /* EAGAIN: out of threads (RLIMIT_NPROC, threads-max) or their memory */
		return err == EAGAIN ? -TW_ERESOURCE : -TW_ENOMEM;
	if (!x->spare)
		tw__executor_name(x, x->thread);
	x->started = true;
	return TW_OK;
}

/* Every slot gets its ring now, the spares' too, so that starting a spare while executors are
 * stuck allocates nothing; only the configured executors' threads start. */
int tw__executors_start(struct tw_engine *e)
{
	unsigned capacity = e->cfg.queue_capacity; /* never 0: settled at create */
	unsigned size = round_up_pow2(capacity);
	capacity = capacity < size ? capacity : size;
	struct executor *runner = wheel_runner(e);
	runner->engine = e;
	runner->index = e->executor_slots;
	runner->on_wheel_thread = true;
	for (unsigned i = 0; i < e->executor_slots; i++) {
		struct executor *x = &e->executors[i];
		x->engine = e;
		x->index = i;
		x->spare = i >= e->executor_count;
		x->mask = size - 1;
		x->capacity = capacity;
		cds_wfcq_init(&x->releases_head, &x->releases_tail);
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): the ring holds pointers to tasks */
		x->ended = tw__alloc(ENDED_RING * sizeof *x->ended);
		x->ring = tw__alloc(size * sizeof *x->ring);
		if (!x->ring || !x->ended)
			return -TW_ENOMEM;
	}
	for (unsigned i = 0; i < e->executor_count; i++) {
		int rc = start_thread(&e->executors[i]);
		if (rc)
			return rc;
		atomic_store_explicit(&e->executors_running, i + 1, memory_order_release);
	}
	return TW_OK;
}

bool tw__executor_start_spare(struct tw_engine *e)
{
	unsigned running = executors_running(e);
	if (running >= e->executor_slots || start_thread(&e->executors[running]))
		return false;
	atomic_store_explicit(&e->executors_running, running + 1, memory_order_release);
	return true;
}

void tw__executors_join(struct tw_engine *e, struct executor *self)
{
	for (unsigned i = 0; i < e->executor_slots; i++) {
		struct executor *x = &e->executors[i];
		if (!x->started || x == self || x->abandoned)
			continue;
		atomic_store(&x->quit, true);
		tw__executor_wake(x);
		int err = pthread_join(x->thread, NULL);
		if (err) /* a thread of ours that cannot be joined: say so, go on */
			tw__engine_log(e, TW_LOG_ERROR, "joining executor %u: %s", i,
				       tw__strerror(err));
		x->started = false;
	}
}

void tw__executors_free(struct tw_engine *e)
{
	for (unsigned i = 0; i < e->executor_slots; i++) {
		struct executor *x = &e->executors[i];
		tw__free(x->ring, (x->mask + 1) * sizeof *x->ring);
		x->ring = NULL;
		cds_wfcq_destroy(&x->releases_head, &x->releases_tail);
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): the ring holds pointers to tasks */
		tw__free(x->ended, ENDED_RING * sizeof *x->ended);
		x->ended = NULL;
	}
}

void tw__executors_drop_queued(struct tw_engine *e)
{
	unsigned running = executors_running(e);
	struct firing f;
	for (unsigned i = 0; i < running; i++)
		while (tw__executor_take(&e->executors[i], &f))
			tw__drop_taken(e, &f);
	drain_signal(e);
}
