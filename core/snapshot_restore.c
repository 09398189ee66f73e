/*
 * snapshot_restore.c - tw_restore: a snapshot's tasks added to an engine, all or none.
 *
 * In phases, so that nothing is half-loaded: the file is read and checked whole
 * (snapshot_format.c), every task planned (its misfire judged against one reading of now,
 * its expression parsed) and its name checked free, before the resolver sees any task;
 * the accepted ones are then added with no due, and only once every add succeeded are they
 * given their counters, dues and pauses. A failure before that cancels what was added
 * (their release runs there, as the resolver handed it over) and releases what was accepted
 * and not yet added.
 */
#include "alloc.h"
#include "calendar_tasks.h"
#include "snapshot_file.h"
#include "snapshot_plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A NUL-terminated copy of len bytes in a buffer kept between calls; NULL: no memory. */
static const char *text_of(char **scratch, size_t *cap, const char *text, size_t len)
{
	if (len + 1 > *cap) {
		char *bigger = tw__alloc(len + 1);
		if (!bigger)
			return NULL;
		if (*scratch)
			tw__free(*scratch, *cap);
		*scratch = bigger;
		*cap = len + 1;
	}
	memcpy(*scratch, text, len);
	(*scratch)[len] = '\0';
	return *scratch;
}

/* The due on the engine's clock of a wall-clock time, no further than a delay may be. */
static uint64_t due_of_wall(const struct tw_engine *e, const struct now *now, int64_t wall)
{
	const int64_t max = (int64_t)(TW_MAX_DELAY_MS * NS_PER_MS);
	if (wall > now->wall && wall - now->wall > max)
		wall = now->wall + max;
	return tw__calendar_due(e, wall, now->offset);
}

struct restore {
	struct tw_engine *e;
	struct snap_file file;
	struct plan *plans;
	char *scratch;
	size_t scratch_cap;
	tw_restore_result *res;
};

/* Every record planned and its expression checked, before the resolver sees any. */
static int plan_all(struct restore *s, const struct now *now)
{
	tw_cron *cron = NULL;
	const char *cron_text = NULL; /* the expression cron was parsed from */
	uint32_t cron_len = 0;
	int rc = TW_OK;
	for (size_t i = 0; i < s->file.count && !rc; i++) {
		const struct snap_record *r = &s->file.records[i];
		struct plan *p = &s->plans[i];
		if (r->duplicate) {
			*p = (struct plan){ .action = SKIPPED };
			continue;
		}
		if (r->kind == SNAP_CALENDAR && (!cron || r->cron_len != cron_len ||
						 memcmp(r->cron, cron_text, cron_len) != 0)) {
			tw_cron_free(cron);
			cron = NULL;
			const char *expr =
				text_of(&s->scratch, &s->scratch_cap, r->cron, r->cron_len);
			if (!expr || (rc = tw_cron_parse(expr, &cron, NULL))) {
				rc = expr ? rc : -TW_ENOMEM;
				break;
			}
			cron_text = r->cron;
			cron_len = r->cron_len;
			/* What tw_add refuses, restore refuses, before the resolver sees any: a
			 * schedule that never fires (30 February). */
			int64_t t;
			if (tw_cron_next(cron, now->wall, &t, 1)) {
				rc = -TW_ENOMATCH;
				break;
			}
		}
		tw__snapshot_plan_record(r, cron, now, p);
		if (p->action == SKIPPED) {
			s->res->expired++;
			continue;
		}
		tw_id id;
		const char *name = text_of(&s->scratch, &s->scratch_cap, r->name, r->name_len);
		if (!name)
			rc = -TW_ENOMEM;
		else if (tw_find(s->e, name, &id) == TW_OK)
			rc = -TW_EEXIST;
	}
	tw_cron_free(cron);
	return rc;
}

static int resolve_all(struct restore *s, tw_resolver resolve, void *ctx)
{
	char name[TW_NAME_MAX + 1];
	for (size_t i = 0; i < s->file.count; i++) {
		const struct snap_record *r = &s->file.records[i];
		struct plan *p = &s->plans[i];
		if (p->action == SKIPPED)
			continue;
		memcpy(name, r->name, r->name_len);
		name[r->name_len] = '\0';
		tw_snapshot_task task = {
			.name = name,
			.period_ms = r->period_ms,
			.flags = r->flags,
			.misfire = r->misfire,
			.paused = r->bits & SNAP_PAUSED,
			.paused_by_failures = r->bits & SNAP_PAUSED_BY_FAILURES,
			.next_due_wall_ns = r->due_wall_ns,
			.misfired = p->action == DUE_NOW && r->due_wall_ns,
			.missed = p->missed,
			.runs = r->counters[SNAP_RUNS],
			.failures = r->counters[SNAP_FAILURES],
			.consecutive_failures = r->counters[SNAP_CONSECUTIVE_FAILURES],
			.slow_runs = r->counters[SNAP_SLOW_RUNS],
			.skipped_overlap = r->counters[SNAP_SKIPPED_OVERLAP],
			.skipped_overload = r->counters[SNAP_SKIPPED_OVERLOAD],
			.skipped_missed = r->counters[SNAP_SKIPPED_MISSED],
		};
		if (r->cron_len &&
		    !(task.cron = text_of(&s->scratch, &s->scratch_cap, r->cron, r->cron_len)))
			return -TW_ENOMEM;
		tw_resolved to = { 0 };
		int rc = resolve(&task, ctx, &to);
		if (rc == TW_RESOLVE_DECLINE) {
			p->action = SKIPPED;
			s->res->declined++;
			continue;
		}
		if (rc < 0)
			return rc;
		if (rc)
			return -TW_EINVAL; /* no answer a resolver has: nothing was handed over */
		/* Accepted: ours to release from here on, whatever follows. */
		p->resolved = true;
		p->to = to;
		if (!to.callback)
			return -TW_EINVAL;
	}
	return TW_OK;
}

static int add_all(struct restore *s)
{
	for (size_t i = 0; i < s->file.count; i++) {
		const struct snap_record *r = &s->file.records[i];
		struct plan *p = &s->plans[i];
		if (!p->resolved)
			continue;
		char name[TW_NAME_MAX + 1];
		memcpy(name, r->name, r->name_len);
		name[r->name_len] = '\0';
		tw_task_spec spec = {
			.delay_ms = TW_NEVER,
			.period_ms = r->period_ms,
			.callback = p->to.callback,
			.arg = p->to.arg,
			.release = p->to.release,
			.flags = r->flags,
			.name = name,
			.misfire = r->misfire,
		};
		if (r->cron_len &&
		    !(spec.cron = text_of(&s->scratch, &s->scratch_cap, r->cron, r->cron_len)))
			return -TW_ENOMEM;
		int rc = tw_add(s->e, &spec, &p->id);
		if (rc)
			return rc;
		p->added = true;
	}
	return TW_OK;
}

/* Lock held: a restored task's counts as the file has them, and the firings it missed. */
static void arm_counts(struct tw_engine *e, struct tw_task *task, const struct snap_record *r,
		       const struct plan *p)
{
	struct task_cold *c = task_cold(task);
	const uint64_t *n = r->counters;
	atomic_store_explicit(&c->runs, n[SNAP_RUNS], memory_order_relaxed);
	/* The parser saw these fit 32 bits. */
	atomic_store_explicit(&c->failures, (uint32_t)n[SNAP_FAILURES], memory_order_relaxed);
	atomic_store_explicit(&c->consecutive_failures, (uint32_t)n[SNAP_CONSECUTIVE_FAILURES],
			      memory_order_relaxed);
	atomic_store_explicit(&c->slow_runs, (uint32_t)n[SNAP_SLOW_RUNS], memory_order_relaxed);
	atomic_store_explicit(&c->skipped_overlap, (uint32_t)n[SNAP_SKIPPED_OVERLAP],
			      memory_order_relaxed);
	atomic_store_explicit(&c->skipped_overload, (uint32_t)n[SNAP_SKIPPED_OVERLOAD],
			      memory_order_relaxed);
	atomic_store_explicit(&c->skipped_missed, (uint32_t)n[SNAP_SKIPPED_MISSED],
			      memory_order_relaxed);
	if (p->missed) {
		/* The first run reports them in tw_fire.skipped only when it is the run at
		 * restore (TW_MISFIRE_RUN_ONCE); with SKIP the task chose to pass over them, and
		 * its first run is an ordinary one. */
		if (p->action == DUE_NOW)
			task_skip(task, &c->skipped_missed, p->missed);
		else
			bump_skips(&c->skipped_missed, p->missed);
		atomic_fetch_add_explicit(&e->api_skipped_missed, p->missed, memory_order_relaxed);
		tw__engine_note_skip(e, task, REC_SKIP_MISSED, 0, p->missed);
	}
}

/* Lock held: a restored task paused, or given its due, as its plan says. */
static void arm_due(struct tw_engine *e, struct tw_task *task, const struct snap_record *r,
		    const struct plan *p, const struct now *now, struct after_unlock *after)
{
	if (r->kind == SNAP_ONESHOT)
		task_set_delay_ms(task, r->delay_ms);
	uint64_t due = DUE_NEVER;
	if (p->action == DUE || p->action == DUE_NEXT)
		due = due_of_wall(e, now, p->wall);
	else if (p->action == DUE_NOW)
		due = tw__engine_due_at_ns(e, now->ns, 0);
	if (p->action == PAUSED) {
		task_move(task, &e->api_ends, TW_PAUSED, true);
		task_set_paused_by_failures(task, r->bits & SNAP_PAUSED_BY_FAILURES);
	} else if (due != DUE_NEVER) {
		if (r->kind == SNAP_CALENDAR) {
			/* A due now stands for no fire time: the calendar goes on after that
			 * firing, as after tw_set_delay. */
			struct calendar *cal = task_calendar(task);
			cal->next_wall_ns = p->action == DUE_NOW ? 0 : p->wall;
			cal->planned_due = p->action == DUE_NOW ? 0 : due;
		}
		atomic_store_explicit(&task->due_ns, due, memory_order_relaxed);
		mail_after_unlock(e, task, after);
	}
}

/* A restored task, still waiting with no due, gets what the file and its plan say. */
static void arm(struct tw_engine *e, const struct snap_record *r, const struct plan *p,
		const struct now *now)
{
	struct after_unlock after = { 0 };
	read_section_begin();
	struct tw_task *task = tw__table_find(&e->table, p->id);
	if (task) {
		tw__task_lock(task);
		/* Another thread may have found it by name meanwhile, and changed or ended it:
		 * its change stands. */
		if (atomic_load_explicit(&task->id, memory_order_relaxed) == p->id &&
		    atomic_load_explicit(&task->state, memory_order_relaxed) == TW_WAITING &&
		    atomic_load_explicit(&task->due_ns, memory_order_relaxed) == DUE_NEVER) {
			arm_counts(e, task, r, p);
			arm_due(e, task, r, p, now, &after);
		}
		tw__task_unlock(task);
	}
	read_section_end();
	after_unlock_run(after);
}

/* A failed restore: nothing it added stays, every release it was handed is called once. */
static void undo(struct restore *s)
{
	for (size_t i = 0; i < s->file.count; i++) {
		struct plan *p = &s->plans[i];
		/* An added task: its cancel releases it; if the engine stopped meanwhile, or
		 * another thread ended it, that did. */
		if (p->added)
			(void)tw_cancel(s->e, p->id);
		else if (p->resolved && p->to.release)
			p->to.release(p->to.arg);
	}
}

static int restore(struct restore *s, const char *path, tw_resolver resolve, void *ctx)
{
	struct tw_engine *e = s->e;
	uint8_t *buf = NULL;
	size_t len = 0;
	if (tw__snapshot_read_file(path, &buf, &len))
		return errno == ENOMEM ? -TW_ENOMEM : -TW_EIO;
	int rc = tw__snapshot_parse(buf, len, &s->file);
	if (rc)
		goto out;
	s->res->records = s->file.count;
	s->res->duplicates = s->file.duplicates;
	s->res->written_wall_ns = s->file.written_wall_ns;
	rc = -TW_ENOMEM;
	if (s->file.count && !(s->plans = calloc(s->file.count, sizeof *s->plans)))
		goto out;
	struct now now = { .offset = tw__wall_offset_ns(e), .ns = tw__engine_now_ns(e) };
	now.wall = (int64_t)now.ns + now.offset;
	if ((rc = plan_all(s, &now)) || (rc = resolve_all(s, resolve, ctx)) || (rc = add_all(s))) {
		undo(s);
		goto out;
	}
	for (size_t i = 0; i < s->file.count; i++) {
		const struct plan *p = &s->plans[i];
		if (!p->added)
			continue;
		arm(e, &s->file.records[i], p, &now);
		s->res->restored++;
		s->res->skipped_missed += p->missed;
		s->res->misfired_run += p->action == DUE_NOW;
		s->res->misfired_skipped += p->action == DUE_NEXT ||
					    (p->action == NO_DUE && s->file.records[i].due_wall_ns);
	}
out:
	free(s->plans);
	tw__snapshot_file_free(&s->file);
	free(buf);
	return rc;
}

int tw_restore_sized(tw_engine *e, const char *path, tw_resolver resolve, void *ctx,
		     tw_restore_result *out, size_t size)
{
	if (!e || !path || !resolve)
		return -TW_EINVAL;
	if (atomic_load(&e->stopping))
		return halted_code(e);
	tw_restore_result res = { 0 };
	struct restore s = { .e = e, .res = &res };
	int saved = errno;
	int rc = restore(&s, path, resolve, ctx);
	if (rc == -TW_EIO)
		saved = errno; /* the failed call's */
	if (s.scratch)
		tw__free(s.scratch, s.scratch_cap);
	if (out)
		tw__struct_out(out, size, &res, sizeof res);
	errno = saved;
	return rc;
}
