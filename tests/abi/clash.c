/*
 * A program whose own functions bear the names the library's internals used
 * to export (table_init, task_lock, wheel_add ...). Linked against the shared
 * or the static library, the engine must neither call these nor clash with
 * them: each one aborts if called by anyone but main.
 */
#include <tickwheel.h>

#include <stdio.h>
#include <stdlib.h>

static int own_calls;

#define OWN(name)                                                                               \
	int name(void);                                                                         \
	int name(void)                                                                          \
	{                                                                                       \
		if (!own_calls) {                                                               \
			fprintf(stderr, "clash: the library called the program's " #name "\n"); \
			abort();                                                                \
		}                                                                               \
		return 1;                                                                       \
	}

OWN(table_init)
OWN(table_find)
OWN(table_take)
OWN(task_lock)
OWN(task_unlock)
OWN(task_mail)
OWN(task_end)
OWN(wheel_init)
OWN(wheel_add)
OWN(wheel_remove)
OWN(wheel_check)
OWN(futex_wait)
OWN(futex_wake_all)
OWN(engine_wake)
OWN(engine_log)
OWN(executor_push)
OWN(executors_start)
OWN(rcu_ensure_registered)
OWN(ends_total)
OWN(runs_idle)

static int fired(const tw_fire *fire, void *arg)
{
	(void)fire;
	++*(int *)arg;
	return 0;
}

#define CHECK(call)                                                                  \
	do {                                                                         \
		int rc_ = (call);                                                    \
		if (rc_) {                                                           \
			fprintf(stderr, "clash: %s: %s\n", #call, tw_strerror(rc_)); \
			return 1;                                                    \
		}                                                                    \
	} while (0)

int main(void)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.manual_clock = true;
	cfg.executors = 1;
	tw_engine *e;
	CHECK(tw_engine_create(&cfg, &e));
	int runs = 0;
	tw_task_spec spec = { .delay_ms = 5, .period_ms = 10, .callback = fired, .arg = &runs };
	tw_id id;
	CHECK(tw_add(e, &spec, &id));
	for (int ms = 0; ms < 25; ms++) {
		CHECK(tw_advance(e, 1));
		CHECK(tw_quiesce(e));
	}
	tw_task_info info;
	CHECK(tw_get(e, id, &info));
	CHECK(tw_engine_stop(e, 1000));
	tw_engine_destroy(e);
	own_calls = 1;
	int own = table_init() + task_lock() + wheel_add() + futex_wait() + runs_idle();
	if (runs != 3 || info.runs != 3 || own != 5) {
		fprintf(stderr, "clash: %d runs (want 3), info.runs %llu, own calls %d\n", runs,
			(unsigned long long)info.runs, own);
		return 1;
	}
	printf("clash: the engine ran 3 times beside the program's own table_init, wheel_add ...\n");
	return 0;
}
