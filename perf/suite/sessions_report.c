/*
 * sessions_report.c - the figures of `tw-perf sessions`, from the resetting
 * threads' samples and the expiries (sessions.h).
 */
#include "sessions.h"

void sessions_report(struct report *r, const struct setup *c, struct resetter *w,
		     struct expiry_sink *quiet, struct expiry_sink *active, double wall_s,
		     double cpu_s, uint64_t alloc_growth)
{
	struct su_samples batch = { 0 }, single = { 0 };
	uint64_t done = 0, failed = 0, failed_expired = 0, reset_cpu = 0;
	for (unsigned t = 0; t < c->threads; t++) {
		for (size_t i = 0; i < w[t].batch.n; i++)
			su_push(&batch, w[t].batch.v[i]);
		for (size_t i = 0; i < w[t].single.n; i++)
			su_push(&single, w[t].single.v[i]);
		done += w[t].done;
		failed += w[t].failed;
		failed_expired += w[t].failed_expired;
		reset_cpu += w[t].cpu_ns;
	}
	const char *tw = "tickwheel";
	report_add(r, tw, "reset_p50", su_quantile(&batch, 0.5), "ns", BETTER_LOWER);
	report_add(r, tw, "reset_batch_p99", su_quantile(&batch, 0.99), "ns", BETTER_LOWER);
	if (c->many) {
		report_add(r, tw, "reset_call_p50", su_quantile(&single, 0.5), "ns", BETTER_LOWER);
		report_add(r, tw, "reset_call_p99", su_quantile(&single, 0.99), "ns", BETTER_LOWER);
		report_add(r, tw, "reset_call_max", su_quantile(&single, 1), "ns", BETTER_LOWER);
	} else {
		report_add(r, tw, "reset_single_p50", su_quantile(&single, 0.5), "ns",
			   BETTER_LOWER);
		report_add(r, tw, "reset_p90", su_quantile(&single, 0.9), "ns", BETTER_LOWER);
		report_add(r, tw, "reset_p99", su_quantile(&single, 0.99), "ns", BETTER_LOWER);
		report_add(r, tw, "reset_p999", su_quantile(&single, 0.999), "ns", BETTER_LOWER);
		report_add(r, tw, "reset_max", su_quantile(&single, 1), "ns", BETTER_LOWER);
	}
	report_add(r, tw, "clock_read_ns", su_clock_read_ns(), "ns", BETTER_NEITHER);
	report_add(r, tw, "resets_done", (double)done, "resets", BETTER_NEITHER);
	report_add(r, tw, "reset_rate", (double)done / wall_s, "resets/s", BETTER_HIGHER);
	report_add(r, tw, "resets_failed", (double)failed, "resets", BETTER_LOWER);
	report_add(r, tw, "resets_failed_expired", (double)failed_expired, "resets", BETTER_LOWER);
	uint64_t q = atomic_load(&quiet->count), a = atomic_load(&active->count);
	report_add(r, tw, "expiries", (double)(q + a), "sessions", BETTER_NEITHER);
	report_add(r, tw, "quiet_not_expired", (double)(c->n_quiet - q), "sessions", BETTER_LOWER);
	report_add(r, tw, "expired_while_active", (double)a, "sessions", BETTER_LOWER);
	struct lateness *late = quiet->late;
	report_add(r, tw, "expiry_late_p50", (double)lateness_percentile_us(late, 0.5), "us",
		   BETTER_LOWER);
	report_add(r, tw, "expiry_late_p99", (double)lateness_percentile_us(late, 0.99), "us",
		   BETTER_LOWER);
	report_add(r, tw, "expiry_late_max", (double)atomic_load(&late->max_ns) / 1e3, "us",
		   BETTER_LOWER);
	report_add(r, tw, "expiries_early", (double)atomic_load(&late->early), "runs",
		   BETTER_LOWER);
	report_add(r, tw, "cpu_per_second", cpu_s * 1e3 / wall_s, "ms/s", BETTER_LOWER);
	report_add(r, tw, "engine_cpu_per_second", (cpu_s - (double)reset_cpu / 1e9) * 1e3 / wall_s,
		   "ms/s", BETTER_LOWER);
	report_add(r, tw, "memory_per_session", (double)alloc_growth / (double)c->n, "B",
		   BETTER_LOWER);
	report_target(r, "reset_p50", "<=", 100);
	if (!c->many)
		report_target(r, "reset_p99", "<=", 2000);
	report_target(r, "resets_failed", "<=", 0);
	report_target(r, "quiet_not_expired", "<=", 0);
	if (c->many)
		report_note(r,
			    "--reset-many: every batch of %d resets is one tw_set_delay_many "
			    "call; reset_p50 and reset_batch_p99: ns per reset over calls; "
			    "reset_call_*: ns per call (the wait of a batch's last message)",
			    BATCH);
	else
		report_note(r, "reset_p50: median over batches of 63 resets timed together (ns per "
			       "reset); reset_p90..max and reset_single_p50: one reset in 64 timed "
			       "alone, which includes about one clock read (clock_read_ns)");
	report_note(r, "resets_failed_expired: resets of active sessions that had already "
		       "expired (expired_while_active: the resetting threads fell behind)");
	report_note(r, "cpu_per_second: the process (getrusage); engine_cpu_per_second: minus "
		       "the resetting threads' own CPU; memory_per_session: growth of "
		       "tw_stats' memory_bytes over the adds / sessions");
	if (batch.oom || single.oom)
		report_note(r, "out of memory for some latency samples: they were dropped");
	su_samples_free(&batch);
	su_samples_free(&single);
}
