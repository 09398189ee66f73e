/* suite_util.c - see suite_util.h. */
#include "suite_util.h"
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double su_uniform(uint64_t *state)
{
	return (double)(bench_rng_next(state) >> 11) * 0x1.0p-53;
}

uint64_t su_dues_in(uint64_t d0, uint64_t p, uint64_t a, uint64_t b)
{
	if (b <= a || b < d0)
		return 0;
	uint64_t first = a < d0 ? 0 : (a - d0) / p + 1, last = (b - d0) / p;
	return last >= first ? last - first + 1 : 0;
}

void su_push(struct su_samples *s, double x)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4096;
		double *v = realloc(s->v, cap * sizeof *v);
		if (!v) {
			s->oom = true;
			return;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = x;
	s->sorted = false;
}

double su_quantile(struct su_samples *s, double p)
{
	if (!s->n)
		return 0;
	if (!s->sorted)
		bench_sort_doubles(s->v, s->n);
	s->sorted = true;
	return bench_quantile_sorted(s->v, s->n, p);
}

void su_samples_free(struct su_samples *s)
{
	free(s->v);
	*s = (struct su_samples){ 0 };
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double su_clock_read_ns(void)
{
	struct su_samples s = { 0 };
	for (unsigned b = 0; b < 200; b++) {
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC), t = t0;
		for (unsigned i = 0; i < 1000; i++)
			t = clock_ns(CLOCK_MONOTONIC);
		su_push(&s, (double)(t - t0) / 1000);
	}
	double med = su_quantile(&s, 0.5);
	su_samples_free(&s);
	return med;
}

uint64_t su_self_cpu_ns(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

int su_pin_last_cpu(cpu_set_t *saved)
{
	cpu_set_t one;
	if (sched_getaffinity(0, sizeof *saved, saved) != 0)
		return -1;
	int cpu = -1;
	for (int c = CPU_SETSIZE - 1; c >= 0 && cpu < 0; c--)
		if (CPU_ISSET(c, saved))
			cpu = c;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return sched_setaffinity(0, sizeof one, &one) == 0 ? cpu : -1;
}

size_t su_threads(pid_t *out, size_t max)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return 0;
	size_t n = 0;
	struct dirent *ent;
	while ((ent = readdir(d)) != NULL) {
		long tid = strtol(ent->d_name, NULL, 10);
		if (tid <= 0)
			continue;
		if (n < max)
			out[n] = (pid_t)tid;
		n++;
	}
	closedir(d);
	return n;
}

static FILE *open_task_file(pid_t tid, const char *name)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/%s", (int)tid, name);
	return fopen(path, "r");
}

/* Whether thread tid's name begins with prefix. */
static bool thread_named(pid_t tid, const char *prefix)
{
	FILE *f = open_task_file(tid, "comm");
	if (!f)
		return false;
	char name[32] = "";
	bool named = fgets(name, sizeof name, f) && strncmp(name, prefix, strlen(prefix)) == 0;
	fclose(f);
	return named;
}

bool su_threads_sched(const char *prefix, struct su_sched *out)
{
	enum { MAX_THREADS = 4096 };
	static pid_t tids[MAX_THREADS]; /* the suite's scenarios run one at a time */
	size_t n = su_threads(tids, MAX_THREADS);
	*out = (struct su_sched){ 0 };
	bool found = false;
	for (size_t i = 0; i < n && i < MAX_THREADS; i++) {
		if (!thread_named(tids[i], prefix))
			continue;
		/* schedstat: run time (ns), wait time (ns), timeslices run */
		FILE *f = open_task_file(tids[i], "schedstat");
		unsigned long long run_ns, wait_ns, slices;
		int got = f ? fscanf(f, "%llu %llu %llu", &run_ns, &wait_ns, &slices) : 0;
		if (f)
			fclose(f);
		if (got != 3)
			return false;
		out->cpu_ns += run_ns;
		out->slices += slices;
		found = true;
	}
	return found;
}
