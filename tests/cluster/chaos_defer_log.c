/*
 * tests/cluster/chaos_defer_log.c - reads the replicas' LOG.defer files and the dead letters
 * for the chaos checker of deferred tasks (chaos_defer_log.h).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos_defer.h"
#include "chaos_defer_log.h"

#define KEY_CAP CHAOS_KEY_CAP

static unsigned bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static unsigned bad(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("chaos: FAIL: defer: ", stdout);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
	return 1;
}

static uint32_t hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

bool chaos_grow(void **p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return true;
	size_t c = *cap ? *cap * 2 : 1024;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * size);
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

static int64_t key_index(struct chaos_log *l, const char *name)
{
	if (strlen(name) >= KEY_CAP)
		return -1;
	if (l->nkeys * 2 >= l->table_size) {
		uint32_t size = l->table_size ? l->table_size * 2 : 65536;
		uint32_t *t = calloc(size, sizeof *t);
		if (!t)
			return -1;
		for (uint32_t i = 0; i < l->nkeys; i++) {
			uint32_t at = hash(l->names[i]) & (size - 1);
			while (t[at])
				at = (at + 1) & (size - 1);
			t[at] = i + 1;
		}
		free(l->table);
		l->table = t;
		l->table_size = size;
	}
	uint32_t at = hash(name) & (l->table_size - 1);
	for (; l->table[at]; at = (at + 1) & (l->table_size - 1))
		if (strcmp(l->names[l->table[at] - 1], name) == 0)
			return l->table[at] - 1;
	size_t cap = l->cap;
	if (!chaos_grow((void **)&l->names, &cap, l->nkeys + 1, KEY_CAP))
		return -1;
	l->cap = (uint32_t)cap;
	memcpy(l->names[l->nkeys], name, strlen(name) + 1);
	l->table[at] = l->nkeys + 1;
	return l->nkeys++;
}

static void note_lease(struct chaos_log *l, const char *line, int64_t ns, int r)
{
	const char *m = strstr(line, "lease expired");
	int group = -1;
	const char *g = strstr(line, "lost group ");
	if (!m && !(g && sscanf(g, "lost group %d", &group) == 1))
		return;
	if (chaos_grow((void **)&l->notes, &l->notecap, l->nnotes + 1, sizeof *l->notes))
		l->notes[l->nnotes++] = (struct lease_note){ ns, r, m ? -1 : group };
}

static unsigned read_log(struct chaos_log *l, const char *dir, int r)
{
	char path[400], line[600], key[KEY_CAP + 8];
	snprintf(path, sizeof path, "%s/r%d.log.defer", dir, r);
	FILE *f = fopen(path, "r");
	unsigned wrong = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		struct ev e = { .replica = r, .type = line[0] };
		int got = 0;
		switch (e.type) {
		case 'D':
			got = sscanf(line + 1, "%" SCNd64 " %70s %" SCNd64 " %*u %" SCNd64, &e.ns,
				     key, &e.due, &e.extra) == 4;
			break;
		case 'd':
		case 'c':
		case 'm':
			got = sscanf(line + 1, "%" SCNd64 " %70s %" SCNd64, &e.ns, key, &e.code) ==
			      3;
			break;
		case 'C':
			got = sscanf(line + 1, "%" SCNd64 " %70s", &e.ns, key) == 2;
			break;
		case 'M':
			got = sscanf(line + 1, "%" SCNd64 " %70s %" SCNd64, &e.ns, key, &e.due) ==
			      3;
			break;
		case 'S':
			got = sscanf(line + 1,
				     "%" SCNd64 " %70s %" SCNd64 " %" SCNu64 " %" SCNd64
				     " %" SCNd64,
				     &e.ns, key, &e.code, &e.token, &e.due, &e.extra) == 6;
			break;
		case 'E':
			got = sscanf(line + 1, "%" SCNd64 " %70s %" SCNd64 " %" SCNd64, &e.ns, key,
				     &e.extra, &e.code) == 4;
			break;
		case 'L':
			if (sscanf(line + 1, "%" SCNd64, &e.ns) == 1)
				note_lease(l, line, e.ns, r);
			continue;
		default:
			break;
		}
		if (!got) {
			if (wrong++ < 10)
				bad("r%d's log has a line it should not: %s", r, line);
			continue;
		}
		int64_t k = key_index(l, key);
		if (k < 0 || !chaos_grow((void **)&l->ev, &l->evcap, l->nev + 1, sizeof *l->ev)) {
			wrong += bad("out of memory, or a key too long: %s", key);
			break;
		}
		e.key = (uint32_t)k;
		e.order = (uint32_t)l->nev;
		l->ev[l->nev++] = e;
	}
	fclose(f);
	return wrong;
}

static int cmp_ev(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

bool chaos_log_is_dead(const struct chaos_log *l, const char *key)
{
	size_t lo = 0, hi = l->ndead;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(l->dead[mid], key);
		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(a, b);
}

unsigned chaos_log_read_dead(struct chaos_log *l, const char *const *endpoints, const char *prefix)
{
	char after[KEY_CAP] = "";
	unsigned wrong = 0;
	for (;;) {
		tw_cluster_task_list *list = NULL;
		int rc = tw_cluster_dead_read(endpoints, prefix, 5000, *after ? after : NULL, 0,
					      &list);
		if (rc != TW_OK) {
			return wrong + bad("the dead letters could not be read: %s",
					   tw_cluster_strerror(rc));
		}
		for (size_t i = 0; i < list->count; i++) {
			const tw_cluster_task_view *t = &list->tasks[i];
			if (strcmp(t->kind, "doomed") != 0 || t->last_code != 7)
				wrong += bad("dead letter %s: kind %s, last code %d", t->key,
					     t->kind, t->last_code);
			if (strlen(t->key) >= KEY_CAP ||
			    !chaos_grow((void **)&l->dead, &l->deadcap, l->ndead + 1, KEY_CAP))
				continue;
			memcpy(l->dead[l->ndead++], t->key, strlen(t->key) + 1);
		}
		bool more = list->more && list->count > 0;
		if (more)
			snprintf(after, sizeof after, "%s", list->tasks[list->count - 1].key);
		tw_cluster_task_list_free(list);
		if (!more)
			break;
	}
	qsort(l->dead, l->ndead, KEY_CAP, cmp_key);
	return wrong;
}

unsigned chaos_log_read(struct chaos_log *l, const char *dir, int replicas)
{
	unsigned wrong = 0;
	for (int r = 0; r < replicas; r++)
		wrong += read_log(l, dir, r);
	qsort(l->ev, l->nev, sizeof *l->ev, cmp_ev);
	for (size_t i = 0; i < l->nev; i++)
		l->ev[i].order = (uint32_t)i;
	return wrong;
}

int64_t chaos_log_find(const struct chaos_log *l, const char *key)
{
	if (!l->table_size)
		return -1;
	for (uint32_t at = hash(key) & (l->table_size - 1); l->table[at];
	     at = (at + 1) & (l->table_size - 1))
		if (strcmp(l->names[l->table[at] - 1], key) == 0)
			return l->table[at] - 1;
	return -1;
}

void chaos_log_free(struct chaos_log *l)
{
	free(l->names);
	free(l->table);
	free(l->ev);
	free(l->notes);
	free(l->dead);
	*l = (struct chaos_log){ 0 };
}
