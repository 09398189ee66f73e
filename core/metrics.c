/*
 * metrics.c - the engine's statistics in the Prometheus text exposition
 * format, version 0.0.4 (tickwheel.h, "Prometheus metrics").
 *
 * The stats are read once (tw_stats), then every line is put into a sink:
 * the caller's buffer (tw_metrics_format), or a chunk on the stack that goes
 * to the caller's writer when full (tw_metrics_write). No lock is held and
 * nothing is allocated while formatting.
 */
#include "engine.h"
#include "metrics_sink.h"

#include <string.h>

enum { CHUNK = 4096 };

#define DEFAULT_PREFIX "tickwheel_" /* tickwheel.h, "Prometheus metrics" */

static void put_lateness(struct sink *s, const tw_engine_stats *st)
{
	static const char name[] = "lateness_seconds";
	tw__sink_family(s, name, "histogram",
			"How late runs started: run start minus the due time they stand for.");
	char le[24];
	uint64_t count = 0;
	for (unsigned b = 0; b < TW_LATENESS_BUCKETS - 1; b++) {
		count += st->lateness_us[b];
		/* Bucket b holds runs later than 2^(b-1) us and less than 2^b us late. */
		struct sink text = { .buf = le, .cap = sizeof le - 1 };
		tw__sink_seconds(&text, (UINT64_C(1000) << b));
		le[text.used] = '\0';
		tw__sink_name(s, name, "_bucket", "le", le);
		tw__sink_put(s, " ", 1);
		tw__sink_u64(s, count);
		tw__sink_put(s, "\n", 1);
	}
	count += st->lateness_us[TW_LATENESS_BUCKETS - 1];
	tw__sink_sample(s, "lateness_seconds_bucket", "le", "+Inf", count);
	tw__sink_name(s, name, "_sum", NULL, NULL);
	tw__sink_put(s, " ", 1);
	tw__sink_seconds(s, st->lateness_sum_ns);
	tw__sink_put(s, "\n", 1);
	tw__sink_sample(s, "lateness_seconds_count", NULL, NULL, count);

	tw__sink_family(s, "lateness_max_seconds", "gauge", "The latest any run has started.");
	tw__sink_name(s, "lateness_max_seconds", "", NULL, NULL);
	tw__sink_put(s, " ", 1);
	tw__sink_seconds(s, st->lateness_max_ns);
	tw__sink_put(s, "\n", 1);
}

static void put_all(struct sink *s, const tw_engine_stats *st)
{
	tw__sink_one(s, "runs_total", "counter", "Runs started.", st->runs);
	tw__sink_one(s, "failures_total", "counter", "Runs whose callback returned nonzero.",
		     st->failures);
	tw__sink_one(s, "slow_runs_total", "counter", "Runs that lasted longer than slow_run_ms.",
		     st->slow_runs);
	tw__sink_family(s, "skipped_total", "counter",
			"Periodic firings skipped, by reason (overlap, overload, missed).");
	tw__sink_sample(s, "skipped_total", "reason", "overlap", st->skipped_overlap);
	tw__sink_sample(s, "skipped_total", "reason", "overload", st->skipped_overload);
	tw__sink_sample(s, "skipped_total", "reason", "missed", st->skipped_missed);
	tw__sink_one(s, "tasks_completed_total", "counter", "One-shot tasks that completed.",
		     st->tasks_completed);
	tw__sink_one(s, "tasks_stopped_total", "counter",
		     "Tasks cancelled or stopped with the engine.", st->tasks_stopped);
	tw__sink_one(s, "wheel_wakeups_total", "counter", "Times the wheel thread woke up.",
		     st->wheel_wakeups);
	tw__sink_one(s, "stuck_runs_total", "counter", "Runs that went on past run_limit_ms.",
		     st->stuck_runs);
	tw__sink_one(s, "wheel_thread_runs_total", "counter",
		     "Runs of TW_ON_WHEEL_THREAD tasks on the wheel thread.",
		     st->wheel_thread_runs);
	tw__sink_one(s, "over_budget_runs_total", "counter",
		     "Runs on the wheel thread longer than wheel_run_budget_us.",
		     st->over_budget_runs);
	tw__sink_one(s, "tasks_moved_off_wheel_thread_total", "counter",
		     "Tasks moved from the wheel thread to the executors for runs over budget.",
		     st->tasks_moved_off_wheel_thread);
	tw__sink_one(s, "tasks_live", "gauge", "Tasks live now: waiting, running or paused.",
		     st->tasks_live);
	tw__sink_family(s, "tasks", "gauge", "Live tasks now, by state.");
	tw__sink_sample(s, "tasks", "state", "waiting", st->tasks_waiting);
	tw__sink_sample(s, "tasks", "state", "running", st->tasks_running);
	tw__sink_sample(s, "tasks", "state", "paused", st->tasks_paused);
	tw__sink_one(s, "spare_executors", "gauge", "Spare executors started and running now.",
		     st->spare_executors);
	tw__sink_one(s, "memory_bytes", "gauge",
		     "Bytes the engine holds: task table, queues, records.", st->memory_bytes);
	tw__sink_family(s, "wheel_busy_seconds_total", "counter",
			"Time the wheel thread spent in its rounds.");
	tw__sink_name(s, "wheel_busy_seconds_total", "", NULL, NULL);
	tw__sink_put(s, " ", 1);
	tw__sink_seconds(s, st->wheel_busy_ns);
	tw__sink_put(s, "\n", 1);
	put_lateness(s, st);
}

/* Per executor, labelled executor="i": queue depth now and its high-water mark, busy time. */
static void put_executors(struct sink *s, tw_engine *e, uint64_t count)
{
	static const struct {
		const char *name, *type, *help;
	} families[] = {
		{ "executor_queued", "gauge", "Firings in an executor's queue now." },
		{ "executor_queued_max", "gauge",
		  "The most firings an executor's queue held when it took one." },
		{ "executor_busy_seconds_total", "counter",
		  "Time an executor spent in callbacks." },
	};
	for (unsigned f = 0; f < sizeof families / sizeof families[0]; f++) {
		tw__sink_family(s, families[f].name, families[f].type, families[f].help);
		for (uint64_t i = 0; i < count; i++) {
			tw_executor_info x;
			if (tw_executor_stats(e, (unsigned)i, &x) != TW_OK)
				break;
			char index[24];
			struct sink text = { .buf = index, .cap = sizeof index - 1 };
			tw__sink_u64(&text, i);
			index[text.used] = '\0';
			tw__sink_name(s, families[f].name, "", "executor", index);
			tw__sink_put(s, " ", 1);
			if (f == 2)
				tw__sink_seconds(s, x.busy_ns);
			else
				tw__sink_u64(s, f == 0 ? x.queued : x.queued_max);
			tw__sink_put(s, "\n", 1);
		}
	}
}

/* One family of the per-task series: what a visit of tw_list puts for a named task. */
struct task_family {
	struct sink *s;
	const char *name;
	bool skips; /* the skips by reason; else runs or failures */
	bool failures;
};

static int put_task_sample(tw_id id, const tw_task_info *info, void *ctx)
{
	(void)id;
	const struct task_family *f = ctx;
	if (!info->name[0] || info->state >= TW_COMPLETED)
		return 0;
	static const char *const reasons[] = { "overlap", "overload", "missed" };
	uint64_t skips[] = { info->skipped_overlap, info->skipped_overload, info->skipped_missed };
	for (int r = 0; r < (f->skips ? 3 : 1); r++) {
		tw__sink_labelled(f->s, f->name, "", f->skips ? "reason" : NULL, reasons[r],
				  info->name);
		tw__sink_put(f->s, " ", 1);
		tw__sink_u64(f->s, f->skips ? skips[r] : f->failures ? info->failures : info->runs);
		tw__sink_put(f->s, "\n", 1);
	}
	return f->s->failed;
}

/*
 * Series per named live task (per_task), labelled task="NAME": one walk of the table per
 * family, as tw_list walks it, so that no lock or read-side section is held while the
 * writer runs.
 */
static int put_tasks(struct sink *s, tw_engine *e)
{
	static const struct {
		const char *name, *help;
	} families[] = {
		{ "task_runs_total", "Runs started, per named task." },
		{ "task_failures_total", "Runs whose callback returned nonzero, per named task." },
		{ "task_skipped_total", "Periodic firings skipped, per named task and reason." },
	};
	for (unsigned i = 0; i < sizeof families / sizeof families[0]; i++) {
		tw__sink_family(s, families[i].name, "counter", families[i].help);
		struct task_family f = { s, families[i].name, i == 2, i == 1 };
		int rc = tw_list(e, 0, put_task_sample, &f);
		if (rc < 0)
			return rc;
	}
	return TW_OK;
}

static bool name_ok(const char *name, bool colons)
{
	for (const char *p = name; *p; p++) {
		char c = *p;
		bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
			      (colons && c == ':');
		if (!letter && !(p > name && c >= '0' && c <= '9'))
			return false;
	}
	return true;
}

static int check_options(const tw_metrics_options *opt)
{
	if (!name_ok(opt->prefix, true))
		return -TW_EINVAL;
	if (opt->per_task)
		for (const char *const *l = opt->labels; l && *l; l += 2)
			if (!strcmp(l[0], "task"))
				return -TW_EINVAL;
	static const char *const own[] = { "le", "reason", "state" };
	for (const char *const *l = opt->labels; l && *l; l += 2) {
		if (!l[1] || !*l[0] || !name_ok(l[0], false) || !strncmp(l[0], "__", 2))
			return -TW_EINVAL;
		for (unsigned i = 0; i < sizeof own / sizeof own[0]; i++)
			if (!strcmp(l[0], own[i]))
				return -TW_EINVAL;
		for (const char *const *m = opt->labels; m < l; m += 2)
			if (!strcmp(l[0], m[0]))
				return -TW_EINVAL;
	}
	return TW_OK;
}

/* The options and the stats, or a code. */
static int prepare(tw_engine *e, const tw_metrics_options *opt, size_t size, struct sink *s,
		   tw_engine_stats *st)
{
	if (!e)
		return -TW_EINVAL;
	tw_metrics_options o = { 0 };
	if (opt && tw__struct_in(&o, sizeof o, opt, size))
		return -TW_EINVAL;
	if (!o.prefix) /* no options, or no prefix in them */
		o.prefix = DEFAULT_PREFIX;
	int rc = check_options(&o);
	if (rc)
		return rc;
	s->prefix = o.prefix;
	s->labels = o.labels && *o.labels ? o.labels : NULL;
	s->per_task = o.per_task;
	return tw_stats_sized(e, st, sizeof *st);
}

/* The whole text: the engine's families, its executors', its tasks' if asked. */
static int put_text(struct sink *s, tw_engine *e, const tw_engine_stats *st)
{
	put_all(s, st);
	put_executors(s, e, st->executors);
	return s->per_task ? put_tasks(s, e) : TW_OK;
}

int tw_metrics_write_sized(tw_engine *e, const tw_metrics_options *opt, size_t size,
			   tw_metrics_writer write, void *ctx)
{
	if (!write)
		return -TW_EINVAL;
	char chunk[CHUNK];
	struct sink s = { .write = write, .ctx = ctx, .buf = chunk, .cap = sizeof chunk };
	tw_engine_stats st;
	int rc = prepare(e, opt, size, &s, &st);
	if (rc)
		return rc;
	if ((rc = put_text(&s, e, &st)))
		return rc;
	tw__sink_flush(&s);
	return s.failed ? -TW_EWRITE : TW_OK;
}

int tw_metrics_format_sized(tw_engine *e, const tw_metrics_options *opt, size_t size, char *buf,
			    size_t cap, size_t *len)
{
	if (!buf && cap)
		return -TW_EINVAL;
	/* One byte is kept for the NUL. */
	struct sink s = { .buf = buf, .cap = cap ? cap - 1 : 0 };
	tw_engine_stats st;
	int rc = prepare(e, opt, size, &s, &st);
	if (rc)
		return rc;
	if ((rc = put_text(&s, e, &st)))
		return rc;
	if (cap)
		buf[s.used] = '\0';
	if (len)
		*len = s.total;
	return s.total < cap ? TW_OK : -TW_ENOSPACE;
}
