#define _POSIX_C_SOURCE 200809L /* nanosleep with -std=c11 */
#include <stdio.h>
#include <time.h>

#include <tickwheel.h>

static int hello(const tw_fire *fire, void *arg)
{
	(void)arg;
	printf("hello, run %llu\n", (unsigned long long)fire->run);
	return 0; /* nonzero counts as a failure */
}

int main(void)
{
	tw_engine *e;
	int rc = tw_engine_create(NULL, &e); /* NULL: the default config */
	if (rc) {
		fprintf(stderr, "tw_engine_create: %s\n", tw_strerror(rc));
		return 1;
	}
	tw_task_spec spec = { .delay_ms = 100, .period_ms = 100, .callback = hello };
	tw_id id;
	if ((rc = tw_add(e, &spec, &id)) == TW_OK) {
		nanosleep(&(struct timespec){ .tv_sec = 1 }, NULL);
		rc = tw_engine_stop(e, 1000); /* waits up to 1 s for a run still going */
	}
	tw_engine_destroy(e);
	if (rc)
		fprintf(stderr, "tickwheel: %s\n", tw_strerror(rc));
	return rc ? 1 : 0;
}
