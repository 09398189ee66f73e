/*
 * cluster/schedule.c - a cluster job's fire times: instants in UTC ms that every replica
 * computes alike, with no state of its own. A periodic job fires at k * period + phase since
 * the epoch; a calendar job at its cron expression's fire times.
 */
#include <inttypes.h>
#include <stdio.h>

#include "cluster.h"

/* floor division: fire times before the epoch never occur, but after_ms may be negative. */
static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

int64_t tw__cl_next_fire(const struct cl_job *j, int64_t after_ms)
{
	if (j->period_ms) {
		int64_t p = (int64_t)j->period_ms, ph = (int64_t)j->phase_ms;
		return (floor_div(after_ms - ph, p) + 1) * p + ph;
	}
	int64_t t;
	/* tw_cron_next is strictly after its argument, in ns; fire times fall on whole
	 * seconds, so after the last ns of after_ms is strictly after after_ms. */
	if (tw_cron_next(j->cron, after_ms * 1000000 + 999999, &t, 1) != TW_OK)
		return INT64_MAX;
	return t / 1000000;
}

uint64_t tw__cl_count_fires(const struct cl_job *j, int64_t after_ms, int64_t upto_ms)
{
	if (upto_ms <= after_ms)
		return 0;
	if (j->period_ms) {
		int64_t p = (int64_t)j->period_ms, ph = (int64_t)j->phase_ms;
		return (uint64_t)(floor_div(upto_ms - ph, p) - floor_div(after_ms - ph, p));
	}
	uint64_t n = 0;
	for (int64_t t = tw__cl_next_fire(j, after_ms); t <= upto_ms && n < CL_COUNT_MAX;
	     t = tw__cl_next_fire(j, t))
		n++;
	return n;
}

int64_t tw__cl_latest_fire(const struct cl_job *j, int64_t after_ms, int64_t upto_ms)
{
	if (upto_ms <= after_ms)
		return INT64_MIN;
	if (j->period_ms) {
		int64_t p = (int64_t)j->period_ms, ph = (int64_t)j->phase_ms;
		int64_t t = floor_div(upto_ms - ph, p) * p + ph;
		return t > after_ms ? t : INT64_MIN;
	}
	int64_t last = INT64_MIN;
	uint64_t n = 0;
	for (int64_t t = tw__cl_next_fire(j, after_ms); t <= upto_ms && n < CL_COUNT_MAX;
	     t = tw__cl_next_fire(j, t), n++)
		last = t;
	/* A calendar job far behind: its latest fire time is found from the end instead. */
	if (n == CL_COUNT_MAX) {
		int64_t lo = after_ms, t;
		int64_t step = (upto_ms - after_ms) / 2;
		while (step > 0) {
			t = tw__cl_next_fire(j, lo + step);
			if (t <= upto_ms)
				lo += step;
			step /= 2;
		}
		t = tw__cl_next_fire(j, lo);
		last = t <= upto_ms ? t : last;
	}
	return last;
}

int tw__cl_schedule_text(const struct cl_job *j, char *buf, size_t cap)
{
	int n = j->period_ms ?
			snprintf(buf, cap, "period_ms=%" PRIu64 " phase_ms=%" PRIu64 " misfire=%u",
				 j->period_ms, j->phase_ms, j->misfire) :
			snprintf(buf, cap, "misfire=%u cron=%s", j->misfire, j->cron_text);
	return n < 0 || (size_t)n >= cap ? -1 : n;
}
