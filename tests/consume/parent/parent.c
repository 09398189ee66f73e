#include <tickwheel.h>

#include <stdio.h>
#include <string.h>

static int ran(const tw_fire *fire, void *arg)
{
	(void)fire;
	++*(int *)arg;
	return 0;
}

int main(void)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.manual_clock = true;
	tw_engine *e;
	int runs = 0;
	tw_task_spec spec = { .delay_ms = 1, .period_ms = 1, .callback = ran, .arg = &runs };
	tw_id id;
	if (tw_engine_create(&cfg, &e) || tw_add(e, &spec, &id))
		return 1;
	for (int i = 0; i < 3; i++)
		if (tw_advance(e, 1) || tw_quiesce(e))
			return 1;
	tw_engine_destroy(e);
	printf("parent: tickwheel %s as a subproject, %d runs\n", tw_version(), runs);
	return runs == 3 && !strcmp(tw_version(), TW_VERSION_STRING) ? 0 : 1;
}
