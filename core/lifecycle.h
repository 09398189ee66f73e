/*
 * lifecycle.h - an engine's creation, stop and destruction (engine.c,
 * stop.c) and its life across fork() (fork.c). Uses threads.h.
 */
#ifndef TICKWHEEL_CORE_LIFECYCLE_H
#define TICKWHEEL_CORE_LIFECYCLE_H

#include "threads.h"

/* fork.c: every live engine is known, so that a fork's child can mark them all. */
int tw__fork_watch(struct tw_engine *e);
void tw__fork_unwatch(struct tw_engine *e);

/* engine.c: tw_engine_destroy called in a callback on x, completed once it returned. */
void tw__engine_destroy_deferred(struct tw_engine *e, struct executor *x);
/* stop.c: one holder of the engine (destroy, an abandoned executor) lets go; the last
 * frees it. */
void tw__engine_unref(struct tw_engine *e);
/* engine.c: frees what the engine holds once its threads are gone. */
void tw__engine_free(struct tw_engine *e);

#endif
