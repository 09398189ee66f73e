/*
 * metrics_dump.c - prints a running engine's metrics (tw_metrics_write to stdout), for
 * check_promtool.sh to lint: periodic tasks, one that fails, one that sleeps past
 * slow_run_ms, a one-shot that completes and one cancelled, then the exposition with labels
 * whose values need escaping. Exits non-zero if a call fails.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep with -std=c11 */
#include <stdio.h>
#include <time.h>

#include <tickwheel.h>

static int beat(const tw_fire *fire, void *arg)
{
	(void)fire;
	return arg != NULL; /* a non-NULL arg: a failure */
}

static int slow(const tw_fire *fire, void *arg)
{
	(void)fire;
	(void)arg;
	nanosleep(&(struct timespec){ 0, 30000000 }, NULL);
	return 0;
}

static int to_stdout(void *ctx, const char *data, size_t len)
{
	return fwrite(data, 1, len, ctx) != len;
}

int main(int argc, char **argv)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.executors = 2;
	cfg.slow_run_ms = 10;
	tw_engine *e;
	int rc = tw_engine_create(&cfg, &e);
	if (rc) {
		fprintf(stderr, "tw_engine_create: %s\n", tw_strerror(rc));
		return 1;
	}
	static int fails;
	tw_task_spec specs[] = {
		{ .delay_ms = 1, .period_ms = 5, .callback = beat },
		{ .delay_ms = 2, .period_ms = 7, .callback = beat },
		{ .delay_ms = 3, .period_ms = 11, .callback = beat, .arg = &fails },
		{ .delay_ms = 4, .period_ms = 20, .callback = slow },
		{ .delay_ms = 5, .callback = beat },
		{ .delay_ms = 100000, .callback = beat },
	};
	tw_id ids[sizeof specs / sizeof specs[0]];
	for (size_t i = 0; i < sizeof specs / sizeof specs[0] && !rc; i++)
		rc = tw_add(e, &specs[i], &ids[i]);
	if (!rc)
		rc = tw_cancel(e, ids[5]);
	if (!rc)
		rc = tw_pause(e, ids[1]);
	nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
	const char *const labels[] = { "engine", argc > 1 ? argv[1] : "dump \"1\"\\\n", NULL };
	tw_metrics_options opt = { .labels = labels };
	if (!rc)
		rc = tw_metrics_write(e, &opt, to_stdout, stdout);
	tw_engine_destroy(e);
	if (rc)
		fprintf(stderr, "metrics_dump: %s\n", tw_strerror(rc));
	return rc || fflush(stdout) ? 1 : 0;
}
