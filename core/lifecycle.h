/*
 * lifecycle.h - an engine's creation (engine_create.c), stop and destruction
 * (stop.c), its life across fork() (fork.c), and the manual clock
 * (manual_clock.c). Uses threads.h.
 */
#ifndef TICKWHEEL_CORE_LIFECYCLE_H
#define TICKWHEEL_CORE_LIFECYCLE_H

#include "threads.h"

/* fork.c: every live engine is known, so that a fork's child can mark them all. */
int tw__fork_watch(struct tw_engine *e);
void tw__fork_unwatch(struct tw_engine *e);

/* stop.c: tw_engine_destroy called in a callback on x, completed once it returned. */
void tw__engine_destroy_deferred(struct tw_engine *e, struct executor *x);
/* stop.c: one holder of the engine (destroy, an abandoned executor) lets go; the last
 * frees it. */
void tw__engine_unref(struct tw_engine *e);
/* stop.c: frees what the engine holds once its threads are gone. */
void tw__engine_free(struct tw_engine *e);

/* manual_clock.c, for tests: the manual clock's wall-clock time is wall_ns now; calendar dues
 * are re-planned. */
void tw__engine_set_manual_wall(struct tw_engine *e, int64_t wall_ns);

#endif
