/*
 * A kernel that refuses timerfd_settime: the engine must say so through the
 * log hook and keep firing (by epoll_wait's timeout), not stop in silence.
 * The program's own timerfd_settime interposes on the C library's for the
 * shared libtickwheel; it fails while `failing` is set, then lets the real
 * one through, and the engine must say it works again.
 */
#include <tickwheel.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>

static atomic_bool failing = true;
static atomic_int refused, errors_logged, recoveries_logged, runs;

int timerfd_settime(int fd, int flags, const struct itimerspec *new_value,
		    struct itimerspec *old_value)
{
	if (atomic_load(&failing)) {
		atomic_fetch_add(&refused, 1);
		errno = ENOMEM;
		return -1;
	}
	int (*real)(int, int, const struct itimerspec *, struct itimerspec *);
	*(void **)&real = dlsym(RTLD_NEXT, "timerfd_settime"); /* POSIX's way for a function */
	return real ? real(fd, flags, new_value, old_value) : -1;
}

static void on_log(int level, const char *message, void *arg)
{
	(void)arg;
	if (level == TW_LOG_ERROR && strstr(message, "timerfd_settime"))
		atomic_fetch_add(&errors_logged, 1);
	if (level == TW_LOG_WARNING && strstr(message, "works again"))
		atomic_fetch_add(&recoveries_logged, 1);
}

static int ran(const tw_fire *fire, void *arg)
{
	(void)fire;
	(void)arg;
	atomic_fetch_add(&runs, 1);
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000 };
	while (nanosleep(&t, &t) && errno == EINTR)
		;
}

/* Waits until `more` runs were added to `from`, or limit_ms passed; returns the runs then. */
static int wait_runs(int from, int more, long limit_ms)
{
	for (long waited = 0; atomic_load(&runs) < from + more && waited < limit_ms; waited += 5)
		sleep_ms(5);
	return atomic_load(&runs);
}

int main(void)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 1;
	cfg.log = on_log;
	tw_engine *e;
	if (tw_engine_create(&cfg, &e))
		return 1;
	tw_task_spec spec = { .delay_ms = 10, .period_ms = 10, .callback = ran };
	tw_id id;
	if (tw_add(e, &spec, &id))
		return 1;
	/* What is asserted is that firing goes on, not how punctually: wait for the runs, with a
	 * generous bound (a sanitizer build on a shared VM is slow to start). */
	int while_failing = wait_runs(0, 10, 10000);
	atomic_store(&failing, false);
	int after = wait_runs(while_failing, 10, 10000) - while_failing;
	tw_engine_destroy(e);
	printf("timerfd_settime refused %d times: %d runs while it failed, then %d; "
	       "%d error(s) and %d recovery logged\n",
	       atomic_load(&refused), while_failing, after, atomic_load(&errors_logged),
	       atomic_load(&recoveries_logged));
	bool ok = atomic_load(&refused) > 0 && while_failing >= 10 && after >= 10 &&
		  atomic_load(&errors_logged) == 1 && atomic_load(&recoveries_logged) == 1;
	return ok ? 0 : 1;
}
