/* wake_floor.c - see wake_floor.h. */
#include "wake_floor.h"

#include "measure.h"
#include "report.h"

#include <errno.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* late[i]: how late the wake-up for grid time first + i steps came; after(arg), if given,
 * follows each wake-up (0, or -1 with errno set). */
static int wake_on_grid(int64_t *late, size_t n, uint64_t first, uint64_t step_ns,
			int (*after)(void *), void *arg)
{
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (fd < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		uint64_t due = first + i * step_ns, expirations;
		struct itimerspec at = { .it_value = { .tv_sec = (time_t)(due / 1000000000u),
						       .tv_nsec = (long)(due % 1000000000u) } };
		bool failed = timerfd_settime(fd, TFD_TIMER_ABSTIME, &at, NULL) != 0;
		while (!failed && read(fd, &expirations, sizeof expirations) < 0)
			failed = errno != EINTR;
		failed = failed || (after && after(arg));
		if (failed) {
			int saved = errno;
			close(fd);
			errno = saved;
			return -1;
		}
		late[i] = (int64_t)(monotonic_now_ns() - due);
	}
	close(fd);
	return 0;
}

static double quantile_us(const int64_t *sorted, size_t n, double p)
{
	return n ? (double)sorted[(size_t)((double)(n - 1) * p)] / 1e3 : 0;
}

/* off: room for every interval, scratch. */
static void summarise_intervals(const int64_t *late, size_t n, uint64_t lo_ms, uint64_t hi_ms,
				int64_t *off, struct wake_floor *out)
{
	double sum = 0, sum_squares = 0;
	for (uint64_t p = lo_ms; p <= hi_ms; p++) {
		for (size_t i = 0; i + p < n; i += p) {
			int64_t deviation = late[i + p] - late[i];
			sum += (double)deviation;
			sum_squares += (double)deviation * (double)deviation;
			off[out->intervals++] = deviation < 0 ? -deviation : deviation;
		}
	}
	if (!out->intervals)
		return;
	double mean = sum / (double)out->intervals;
	double variance = sum_squares / (double)out->intervals - mean * mean;
	out->interval_sd_us = sqrt(variance > 0 ? variance : 0) / 1e3;
	sort_i64(off, out->intervals);
	for (size_t i = out->intervals; i > 0 && off[i - 1] > 1000000; i--)
		out->intervals_over_1ms++;
	out->interval_off_p50_us = quantile_us(off, out->intervals, 0.5);
	out->interval_off_p99_us = quantile_us(off, out->intervals, 0.99);
	out->interval_worst_us = quantile_us(off, out->intervals, 1);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec t;
	/* cannot fail for the calling thread's own clock */
	(void)clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* wake_on_grid with the calling thread's timer slack at 1 ns meanwhile (then restored);
 * *cpu_ns: the thread's CPU time over it. */
static int timed_grid(int64_t *late, size_t n, uint64_t first, uint64_t step_ns,
		      int (*after)(void *), void *arg, uint64_t *cpu_ns)
{
	int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	uint64_t cpu0 = thread_cpu_ns();
	int rc = wake_on_grid(late, n, first, step_ns, after, arg);
	*cpu_ns = thread_cpu_ns() - cpu0;
	int saved = errno;
	if (slack > 0)
		prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
	errno = saved;
	return rc;
}

/* n wake-ups on a grid step_ms apart from first_ns (timed_grid); intervals lo .. hi steps
 * long, room for that many. */
static int measure(size_t n, size_t room, uint64_t first_ns, uint64_t step_ms, uint64_t lo,
		   uint64_t hi, struct wake_floor *out)
{
	int64_t *late = malloc(n * sizeof *late), *off = malloc(room * sizeof *off);
	if (!late || !off) {
		free(late);
		free(off);
		errno = ENOMEM;
		return -1;
	}
	uint64_t cpu;
	int rc = timed_grid(late, n, first_ns, step_ms * NS_PER_MS, NULL, NULL, &cpu);
	if (rc == 0) {
		out->wakes = n;
		out->cpu_per_wakeup_us = (double)cpu / 1e3 / (double)n;
		out->step_ms = step_ms;
		summarise_intervals(late, n, lo, hi, off, out);
		sort_i64(late, n);
		out->lateness_p50_us = quantile_us(late, n, 0.5);
		out->lateness_p99_us = quantile_us(late, n, 0.99);
		out->lateness_max_us = quantile_us(late, n, 1);
	}
	free(late);
	free(off);
	return rc;
}

int wake_floor_measure(double seconds, uint64_t lo_ms, uint64_t hi_ms, struct wake_floor *out)
{
	memset(out, 0, sizeof *out);
	size_t n = seconds > 0 ? (size_t)(seconds * 1000) : 0;
	if (lo_ms == 0 || lo_ms > hi_ms || n < 2 * hi_ms) {
		errno = EINVAL;
		return -1;
	}
	size_t room = 0; /* intervals */
	for (uint64_t p = lo_ms; p <= hi_ms; p++)
		room += (n - 1) / p;
	return measure(n, room, (monotonic_now_ns() / NS_PER_MS + 2) * NS_PER_MS, 1, lo_ms, hi_ms,
		       out);
}

int wake_floor_every(uint64_t first_ns, uint64_t period_ms, size_t wakes, struct wake_floor *out)
{
	memset(out, 0, sizeof *out);
	if (period_ms == 0 || wakes < 2) {
		errno = EINVAL;
		return -1;
	}
	return measure(wakes, wakes - 1, first_ns, period_ms, 1, 1, out);
}

/* The woken thread of wake_floor_handover: waits on word until stop. */
struct handover {
	_Atomic uint32_t word; /* bumped for each wake-up */
	_Atomic bool stop;
	uint64_t cpu_ns; /* the woken thread's CPU time, once it ended */
	int error;       /* its futex wait's errno if that failed, else 0 */
};

static long futex(_Atomic uint32_t *word, int op, uint32_t value)
{
	return syscall(SYS_futex, word, op, value, NULL, NULL, 0);
}

static void *handover_woken(void *arg)
{
	struct handover *h = arg;
	uint64_t cpu0 = thread_cpu_ns();
	uint32_t seen = atomic_load(&h->word);
	while (!atomic_load(&h->stop)) {
		if (futex(&h->word, FUTEX_WAIT_PRIVATE, seen) && errno != EAGAIN &&
		    errno != EINTR) {
			h->error = errno;
			break;
		}
		seen = atomic_load(&h->word);
	}
	h->cpu_ns = thread_cpu_ns() - cpu0;
	return NULL;
}

static int hand_over(void *arg)
{
	struct handover *h = arg;
	atomic_fetch_add(&h->word, 1);
	return futex(&h->word, FUTEX_WAKE_PRIVATE, 1) < 0 ? -1 : 0;
}

int wake_floor_handover(double seconds, struct wake_floor *out)
{
	size_t n = seconds > 0 ? (size_t)(seconds * 1000) : 0;
	int64_t *late = n ? malloc(n * sizeof *late) : NULL;
	if (!late) {
		errno = n ? ENOMEM : EINVAL;
		return -1;
	}
	struct handover h = { .word = 0 };
	pthread_t woken;
	int rc = pthread_create(&woken, NULL, handover_woken, &h);
	if (rc) {
		free(late);
		errno = rc;
		return -1;
	}
	uint64_t cpu;
	rc = timed_grid(late, n, (monotonic_now_ns() / NS_PER_MS + 2) * NS_PER_MS, NS_PER_MS,
			hand_over, &h, &cpu);
	int saved = errno;
	atomic_store(&h.stop, true);
	/* the stop's wake-up is the woken thread's last, and not one of the grid's */
	(void)hand_over(&h);
	pthread_join(woken, NULL);
	free(late);
	if (rc == 0 && h.error) {
		rc = -1;
		saved = h.error;
	}
	if (rc) {
		errno = saved;
		return -1;
	}
	double both = (double)(cpu + h.cpu_ns) / 1e3 / (double)n;
	out->handover_cpu_us = fmax(both - out->cpu_per_wakeup_us, 0);
	out->handover_woken_cpu_us = (double)h.cpu_ns / 1e3 / (double)n;
	out->handovers = n;
	return 0;
}

void wake_floor_report(struct report *r, const char *impl, const struct wake_floor *f)
{
	report_add(r, impl, "interval_sd", f->interval_sd_us, "us", BETTER_LOWER);
	report_add(r, impl, "interval_worst", f->interval_worst_us, "us", BETTER_LOWER);
	report_add(r, impl, "interval_off_p50", f->interval_off_p50_us, "us", BETTER_LOWER);
	report_add(r, impl, "interval_off_p99", f->interval_off_p99_us, "us", BETTER_LOWER);
	report_add(r, impl, "intervals_off_1ms",
		   f->intervals ? 100.0 * (double)f->intervals_over_1ms / (double)f->intervals : 0,
		   "%", BETTER_LOWER);
	report_add(r, impl, "lateness_p50", f->lateness_p50_us, "us", BETTER_LOWER);
	report_add(r, impl, "lateness_p99", f->lateness_p99_us, "us", BETTER_LOWER);
	report_add(r, impl, "lateness_max", f->lateness_max_us, "us", BETTER_LOWER);
	report_add(r, impl, "cpu_per_wakeup", f->cpu_per_wakeup_us, "us", BETTER_LOWER);
	if (f->handovers) {
		report_add(r, impl, "cpu_per_handover", f->handover_cpu_us, "us", BETTER_LOWER);
		report_note(r,
			    "%s: cpu_per_handover: what waking a second thread by futex at each of "
			    "%llu wake-ups added, the waker's and the woken thread's CPU together",
			    impl, (unsigned long long)f->handovers);
	}
	if (f->step_ms == 1)
		report_note(r,
			    "%s: one thread on an absolute 1 ms timerfd grid (timer slack 1 ns), "
			    "doing nothing else, %.1f s: what this machine's wake-ups alone give "
			    "(%llu intervals)",
			    impl, (double)f->wakes / 1e3, (unsigned long long)f->intervals);
	else
		report_note(
			r,
			"%s: one thread on an absolute %llu ms timerfd grid (timer slack 1 ns), "
			"doing nothing else, beside the run and half a period from its dues: "
			"what a thread that sleeps as long as the task gets (%llu intervals)",
			impl, (unsigned long long)f->step_ms, (unsigned long long)f->intervals);
}
