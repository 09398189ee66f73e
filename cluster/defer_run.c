/*
 * cluster/defer_run.c - a held task's local task fires: at its alarm it is queued for the
 * defer worker's claim; at its due, once claimed, its handler runs here on an executor, and
 * its result is queued for the worker to write. The local task never completes: each run
 * re-arms it (to TW_NEVER when it has nothing more to wait for), so that the map alone
 * decides when it goes.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

/* A claimed task whose owner is fenced, or whose group moved, looks again this much later:
 * the fence lifts with the next renewal, and a lost group is dropped by the loader. */
#define RECHECK_MS 50

static bool still_owner(struct tw_cluster *c, const struct cl_task *t)
{
	pthread_mutex_lock(&c->lock);
	bool mine = c->group[t->group].token == t->token;
	pthread_mutex_unlock(&c->lock);
	return mine && !tw__cl_fenced(c, tw__cl_mono_ns());
}

/* HELD at its alarm: claimed if this replica handles its kind, else it waits, counted. */
static void at_alarm(struct tw_cluster *c, struct cl_task *t)
{
	struct cl_defer *d = c->defer;
	tw__cl_task_arm(c, t, INT64_MAX);
	if (atomic_load(&d->draining))
		return;
	if (!tw__cl_kind_find(d, t->rec.kind)) {
		if (!t->unhandled) {
			t->unhandled = true;
			d->stats.unhandled++;
		}
		return;
	}
	if (t->unhandled) {
		t->unhandled = false;
		d->stats.unhandled--;
	}
	t->state = CL_CLAIMING;
	atomic_fetch_add(&d->busy[t->group], 1);
	tw__cl_task_enqueue(d, t, false);
}

int tw__cl_task_fire(const tw_fire *fire, void *arg)
{
	struct cl_task *t = arg;
	struct cl_defer *d = t->defer;
	struct tw_cluster *c = NULL;
	pthread_mutex_lock(&d->lock);
	c = d->cluster;
	if (t->state == CL_HELD) {
		at_alarm(c, t);
		pthread_mutex_unlock(&d->lock);
		return 0;
	}
	if (t->state != CL_CLAIMED) {
		/* A firing handed out before the task moved on (claimed, dropped). */
		pthread_mutex_unlock(&d->lock);
		return 0;
	}
	int64_t now = tw__cl_wall_ms();
	if (t->rec.due_ms > now) {
		/* The wall clock was set back since the task was armed: never early. */
		tw__cl_task_arm(c, t, t->rec.due_ms);
		pthread_mutex_unlock(&d->lock);
		return 0;
	}
	struct cl_kind *k = tw__cl_kind_find(d, t->rec.kind);
	if (!k || atomic_load(&d->draining) || !still_owner(c, t)) {
		tw__cl_task_arm(c, t, now + RECHECK_MS);
		pthread_mutex_unlock(&d->lock);
		return 0;
	}
	tw__cl_task_arm(c, t, INT64_MAX);
	t->state = CL_RUNNING;
	d->stats.runs++;
	d->stats.inflight++;
	tw_cluster_task task = { .kind = t->rec.kind,
				 .key = t->key,
				 .payload = t->payload,
				 .payload_len = t->payload_len,
				 .attempt = t->attempt,
				 .max_attempts = t->rec.max_attempts,
				 .token = t->token,
				 .due_ms = t->rec.due_ms,
				 .group = t->group,
				 .due_ns = fire->due_ns };
	tw_cluster_handler handler = k->handler;
	void *harg = k->arg;
	pthread_mutex_unlock(&d->lock);
	task.start_lateness_ns = tw__cl_mono_ns() - (int64_t)fire->due_ns;
	int result = handler(&task, harg);
	pthread_mutex_lock(&d->lock);
	d->stats.inflight--;
	if (result != 0)
		d->stats.failures++;
	t->result = result;
	if (t->state == CL_RUNNING) {
		t->state = CL_DONE;
		tw__cl_task_enqueue(d, t, true);
	}
	pthread_mutex_unlock(&d->lock);
	return 0;
}
