/*
 * names.c - tasks' names in two liburcu lock-free hash tables (see names.h).
 *
 * A claim adds its node to the by-name table with cds_lfht_add_unique, so of many threads
 * adding one name at once exactly one gets it; the node found there instead is its
 * holder's, and if that task has ended the claim replaces the node (cds_lfht_replace fails
 * if another thread replaced or removed it first: then it tries again). A node's id is 0
 * until its task is published, which claims read as live: a task being added holds its name.
 */
#include "names.h"

#include "alloc.h"

#include <string.h>
#include <urcu/rculfhash.h>

struct name_node {
	struct cds_lfht_node by_name, by_id;
	/* Its task's id, for claims and tw_find: 0 while the task is being added, which holds
	 * the name. */
	_Atomic tw_id id;
	/* The same id, for the by-id table, set before the task is published: tw_get and
	 * tw_list show a task's name from the moment they can see the task. */
	_Atomic tw_id shown_id;
	struct rcu_head rcu;
	/* tw_task_spec.misfire: kept here, the task's flags byte has no free bit and only
	 * named tasks are snapshotted */
	unsigned misfire;
	size_t len;
	char name[TW_NAME_MAX + 1];
};

struct name_key {
	const char *name;
	size_t len;
};

/* FNV-1a: names are short, and a table lookup compares them whole anyway. */
static unsigned long hash_name(const char *name, size_t len)
{
	uint64_t h = UINT64_C(14695981039346656037);
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * UINT64_C(1099511628211);
	return (unsigned long)h;
}

static unsigned long hash_id(tw_id id)
{
	return (unsigned long)(id * UINT64_C(0x9e3779b97f4a7c15) >> 17);
}

static int match_name(struct cds_lfht_node *ht_node, const void *key)
{
	const struct name_node *node = caa_container_of(ht_node, struct name_node, by_name);
	const struct name_key *k = key;
	return node->len == k->len && !memcmp(node->name, k->name, k->len);
}

static int match_id(struct cds_lfht_node *ht_node, const void *key)
{
	const struct name_node *node = caa_container_of(ht_node, struct name_node, by_id);
	return atomic_load_explicit(&node->shown_id, memory_order_relaxed) == *(const tw_id *)key;
}

int tw__names_init(struct tw_names *n)
{
	atomic_init(&n->used, false);
	atomic_init(&n->nodes, 0);
	n->by_name = cds_lfht_new_flavor(1, 1, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
					 &urcu_memb_flavor, NULL);
	n->by_id = cds_lfht_new_flavor(1, 1, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
				       &urcu_memb_flavor, NULL);
	if (n->by_name && n->by_id)
		return TW_OK;
	tw__names_fini(n);
	return -TW_ENOMEM;
}

static void drop_table(struct cds_lfht *ht, bool free_nodes)
{
	if (!ht)
		return;
	struct cds_lfht_iter iter;
	struct cds_lfht_node *ht_node;
	read_section_begin();
	cds_lfht_for_each (ht, &iter, ht_node) {
		(void)cds_lfht_del(ht, ht_node);
		if (free_nodes)
			tw__free(caa_container_of(ht_node, struct name_node, by_id),
				 sizeof(struct name_node));
	}
	read_section_end();
	/* Empty now, so it cannot fail; nothing else to do if it did. */
	(void)cds_lfht_destroy(ht, NULL);
}

void tw__names_fini(struct tw_names *n)
{
	/* Every node is in the by-id table (a replaced one too, until its task is reaped);
	 * claims are bound before a stop ends, and fini comes after every add returned. */
	drop_table(n->by_name, false);
	drop_table(n->by_id, true);
	n->by_name = n->by_id = NULL;
}

bool tw__name_valid(const char *name, size_t *len)
{
	size_t i = 0;
	for (; name[i]; i++)
		if (i == TW_NAME_MAX || name[i] < 0x20 || name[i] > 0x7e)
			return false;
	*len = i;
	return i > 0;
}

/* Inside a read-side section: whether node's task holds its name (live, or being added). */
static bool holder_live(struct task_table *t, struct name_node *node)
{
	tw_id id = atomic_load_explicit(&node->id, memory_order_acquire);
	if (!id)
		return true;
	struct tw_task *task = tw__table_find(t, id);
	return task && atomic_load_explicit(&task->state, memory_order_relaxed) <= TW_PAUSED &&
	       atomic_load_explicit(&task->id, memory_order_acquire) == id;
}

/*
 * Outside a read-side section: the tables get a bucket per node each time the named tasks
 * double. liburcu's own lazy growth (CDS_LFHT_AUTO_RESIZE) left chains of dozens of nodes
 * (perf/results/HISTORY.md, "Figures moved out of the code"), so the growth is ours; it waits for a
 * grace period, as the growth of the task table does.
 */
static void grow(struct tw_names *n, uint64_t nodes)
{
	if (nodes < 1024 || (nodes & (nodes - 1)))
		return;
	cds_lfht_resize(n->by_name, (unsigned long)nodes * 2);
	cds_lfht_resize(n->by_id, (unsigned long)nodes * 2);
}

int tw__name_claim(struct tw_names *n, struct task_table *t, const char *name, size_t len,
		   unsigned misfire, struct name_node **out)
{
	struct name_node *node = tw__alloc(sizeof *node);
	if (!node)
		return -TW_ENOMEM;
	cds_lfht_node_init(&node->by_name);
	cds_lfht_node_init(&node->by_id);
	atomic_init(&node->id, 0);
	atomic_init(&node->shown_id, 0);
	node->len = len;
	node->misfire = misfire;
	memcpy(node->name, name, len);
	node->name[len] = '\0';
	unsigned long hash = hash_name(name, len);
	struct name_key key = { node->name, len };
	if (!atomic_load_explicit(&n->used, memory_order_relaxed))
		atomic_store_explicit(&n->used, true, memory_order_relaxed);
	int rc = TW_OK;
	/* The tables publish the node in liburcu's code, which ThreadSanitizer does not see:
	 * what was written to it before is handed over (HANDOVER_ACQUIRE where it is found). */
	HANDOVER_RELEASE(node);
	read_section_begin();
	for (;;) {
		struct cds_lfht_node *old =
			cds_lfht_add_unique(n->by_name, hash, match_name, &key, &node->by_name);
		if (old == &node->by_name)
			break;
		HANDOVER_ACQUIRE(caa_container_of(old, struct name_node, by_name));
		if (holder_live(t, caa_container_of(old, struct name_node, by_name))) {
			rc = -TW_EEXIST;
			break;
		}
		struct cds_lfht_iter iter;
		cds_lfht_lookup(n->by_name, hash, match_name, &key, &iter);
		if (cds_lfht_iter_get_node(&iter) == old &&
		    !cds_lfht_replace(n->by_name, &iter, hash, match_name, &key, &node->by_name))
			break;
		/* replaced or removed by another thread meanwhile: look again */
	}
	read_section_end();
	if (rc) {
		tw__free(node, sizeof *node); /* never published */
		return rc;
	}
	*out = node;
	grow(n, atomic_fetch_add_explicit(&n->nodes, 1, memory_order_relaxed) + 1);
	return TW_OK;
}

/*
 * In two steps, because the two tables serve two kinds of reader. The by-id table gets the
 * node before the task is published, so that a reader that sees the task (tw_get, tw_list)
 * finds its name; the node's id, which claims and tw_find read, is set only after, as until
 * then a claim must see the name held by a task being added, not by one that is not live.
 * Set the other way round, tw_find gave the id of a task whose name tw_get did not yet show.
 */
void tw__name_show_as(struct tw_names *n, struct name_node *node, tw_id id)
{
	atomic_store_explicit(&node->shown_id, id, memory_order_relaxed);
	read_section_begin();
	HANDOVER_RELEASE(node);
	cds_lfht_add(n->by_id, hash_id(id), &node->by_id);
	read_section_end();
}

void tw__name_bind(struct name_node *node, tw_id id)
{
	atomic_store_explicit(&node->id, id, memory_order_release);
}

static void free_node(struct rcu_head *head)
{
	struct name_node *node = caa_container_of(head, struct name_node, rcu);
	tw__free(node, sizeof *node);
}

void tw__name_abandon(struct tw_names *n, struct name_node *node)
{
	atomic_fetch_sub_explicit(&n->nodes, 1, memory_order_relaxed);
	read_section_begin();
	(void)cds_lfht_del(n->by_name, &node->by_name);
	read_section_end();
	urcu_memb_call_rcu(&node->rcu, free_node);
}

int tw__name_find(struct tw_names *n, struct task_table *t, const char *name, size_t len, tw_id *id)
{
	struct name_key key = { name, len };
	struct cds_lfht_iter iter;
	int rc = -TW_ENOTFOUND;
	read_section_begin();
	cds_lfht_lookup(n->by_name, hash_name(name, len), match_name, &key, &iter);
	struct cds_lfht_node *found = cds_lfht_iter_get_node(&iter);
	if (found) {
		struct name_node *node = caa_container_of(found, struct name_node, by_name);
		HANDOVER_ACQUIRE(node);
		tw_id holder = atomic_load_explicit(&node->id, memory_order_acquire);
		if (holder && holder_live(t, node)) {
			*id = holder;
			rc = TW_OK;
		}
	}
	read_section_end();
	return rc;
}

static struct name_node *node_of_id(struct tw_names *n, tw_id id)
{
	struct cds_lfht_iter iter;
	cds_lfht_lookup(n->by_id, hash_id(id), match_id, &id, &iter);
	struct cds_lfht_node *found = cds_lfht_iter_get_node(&iter);
	struct name_node *node = found ? caa_container_of(found, struct name_node, by_id) : NULL;
	if (node)
		HANDOVER_ACQUIRE(node);
	return node;
}

unsigned tw__name_show_slow(struct tw_names *n, tw_id id, char *out)
{
	struct name_node *node = node_of_id(n, id);
	if (!node)
		return 0;
	memcpy(out, node->name, node->len + 1);
	return node->misfire;
}

void tw__name_forget_slow(struct tw_names *n, tw_id id)
{
	read_section_begin();
	struct name_node *node = node_of_id(n, id);
	if (node) {
		atomic_fetch_sub_explicit(&n->nodes, 1, memory_order_relaxed);
		(void)cds_lfht_del(n->by_id, &node->by_id);
		(void)cds_lfht_del(n->by_name, &node->by_name); /* -ENOENT if replaced */
		urcu_memb_call_rcu(&node->rcu, free_node);
	}
	read_section_end();
}
