/*
 * names.h - tasks' names (names.c): unique among live tasks, found by name, shown by id.
 * Uses task.h.
 *
 * The task record has no room for a name, and most tasks have none, so names live beside the
 * table: one allocation per named task, in two liburcu lock-free hash tables, by name (the
 * uniqueness and tw_find) and by id (tw_get, tw_list, reaping). An engine none of whose tasks
 * was ever named pays a load and a branch where a task is read or reaped, and no byte.
 *
 * A name is held by a node until the task is reaped (so tw_get shows an ended task's name
 * as long as it shows the task), but it counts as taken only while its task is live: a claim
 * that finds the node of an ended task replaces it in the by-name table.
 */
#ifndef TICKWHEEL_CORE_NAMES_H
#define TICKWHEEL_CORE_NAMES_H

#include "task.h"

struct cds_lfht;

struct tw_names {
	struct cds_lfht *by_name, *by_id;
	_Atomic bool used;      /* a task was ever named */
	_Atomic uint64_t nodes; /* named tasks not yet reaped: the tables grow with them */
};

struct name_node; /* names.c */

int tw__names_init(struct tw_names *n);
/* Frees every name and the tables; no reader left, call_rcu callbacks done. */
void tw__names_fini(struct tw_names *n);
/* Whether name is one a task may have (TW_NAME_MAX bytes of printable ASCII, at least one),
 * and its length. */
bool tw__name_valid(const char *name, size_t *len);
/* Takes name for a task being added (its id not yet known: the name counts as taken):
 * TW_OK with *node, -TW_EEXIST when a live task has it, -TW_ENOMEM. */
int tw__name_claim(struct tw_names *n, struct task_table *t, const char *name, size_t len,
		   unsigned misfire, struct name_node **node);
/* The claimed name is shown for task id (tw_get, tw_list): call before the task is
 * published. */
void tw__name_show_as(struct tw_names *n, struct name_node *node, tw_id id);
/* The claimed name goes to task id (claims, tw_find), once that task is published. */
void tw__name_bind(struct name_node *node, tw_id id);
/* A claim whose task was never added. */
void tw__name_abandon(struct tw_names *n, struct name_node *node);
/* The live task named name, or -TW_ENOTFOUND. */
int tw__name_find(struct tw_names *n, struct task_table *t, const char *name, size_t len,
		  tw_id *id);
unsigned tw__name_show_slow(struct tw_names *n, tw_id id, char *out);
void tw__name_forget_slow(struct tw_names *n, tw_id id);

/* Inside a read-side section: task id's name into out (TW_NAME_MAX + 1 bytes, zeroed
 * before), if it has one; returns its misfire policy (0 without a name). */
static inline unsigned tw__name_show(struct tw_names *n, tw_id id, char *out)
{
	if (__builtin_expect(atomic_load_explicit(&n->used, memory_order_relaxed), 0))
		return tw__name_show_slow(n, id, out);
	return 0;
}

/* Whether any task of the engine was ever named (a snapshot of none has nothing to walk). */
static inline bool tw__names_used(struct tw_names *n)
{
	return atomic_load_explicit(&n->used, memory_order_relaxed);
}

/* Task id is reaped: its name, if any, goes (freed after a grace period). */
static inline void tw__name_forget(struct tw_names *n, tw_id id)
{
	if (__builtin_expect(atomic_load_explicit(&n->used, memory_order_relaxed), 0))
		tw__name_forget_slow(n, id);
}

#endif
