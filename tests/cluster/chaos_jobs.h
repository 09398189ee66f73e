/*
 * tests/cluster/chaos_jobs.h - the chaos test's jobs and settings, shared by the replicas and
 * the checker: 20 periodic jobs of 100 ms to 1 s, and a calendar job every second.
 */
#ifndef TW_TESTS_CHAOS_JOBS_H
#define TW_TESTS_CHAOS_JOBS_H

#include <stdint.h>
#include <stdio.h>

#define CHAOS_JOBS           21
#define CHAOS_GROUPS         8
#define CHAOS_TTL_S          2
#define CHAOS_CLAIM_AHEAD_MS 400

/* Job i: its name, and a period (ms) or a cron expression. */
static inline void chaos_job(int i, char *name, size_t cap, uint64_t *period_ms, const char **cron)
{
	static const uint64_t periods[] = { 100, 150, 200, 250, 300, 400, 500, 600, 750, 1000 };
	snprintf(name, cap, "job%02d", i);
	*period_ms = 0;
	*cron = NULL;
	if (i == CHAOS_JOBS - 1)
		*cron = "* * * * * *";
	else
		*period_ms = periods[i % 10];
}

#endif
