/*
 * fork.c - what an engine is in the child of a fork(): the parent's copy,
 * without its threads. Every live engine is on a list; the child's handler
 * marks each HALT_FORKED, so every call answers -TW_EFORKED through the same
 * test that refuses calls after a stop (no cost on the operations' path).
 * The list's lock is held across the fork, so the child finds it consistent,
 * and so are liburcu's call_rcu threads (its own handlers), for the engines a
 * child creates.
 */
#include "lifecycle.h"

static pthread_mutex_t engines_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tw_engine *engines;
static pthread_once_t handlers_once = PTHREAD_ONCE_INIT;
static bool handlers_set;

static void before_fork(void)
{
	pthread_mutex_lock(&engines_lock);
	urcu_memb_call_rcu_before_fork();
}

static void after_fork_parent(void)
{
	urcu_memb_call_rcu_after_fork_parent();
	pthread_mutex_unlock(&engines_lock);
}

static void after_fork_child(void)
{
	urcu_memb_call_rcu_after_fork_child();
	for (struct tw_engine *e = engines; e; e = e->next_engine)
		atomic_fetch_or_explicit(&e->stopping, HALT_FORKED, memory_order_relaxed);
	pthread_mutex_unlock(&engines_lock);
}

static void set_handlers(void)
{
	handlers_set = pthread_atfork(before_fork, after_fork_parent, after_fork_child) == 0;
}

int tw__fork_watch(struct tw_engine *e)
{
	pthread_once(&handlers_once, set_handlers);
	if (!handlers_set)
		return -TW_ENOMEM;
	pthread_mutex_lock(&engines_lock);
	e->prev_engine = NULL;
	e->next_engine = engines;
	if (engines)
		engines->prev_engine = e;
	engines = e;
	pthread_mutex_unlock(&engines_lock);
	return TW_OK;
}

void tw__fork_unwatch(struct tw_engine *e)
{
	pthread_mutex_lock(&engines_lock);
	if (e->prev_engine)
		e->prev_engine->next_engine = e->next_engine;
	else if (engines == e)
		engines = e->next_engine;
	if (e->next_engine)
		e->next_engine->prev_engine = e->prev_engine;
	e->next_engine = e->prev_engine = NULL;
	pthread_mutex_unlock(&engines_lock);
}
