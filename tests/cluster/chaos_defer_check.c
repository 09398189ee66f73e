/*
 * tests/cluster/chaos_defer_check.c - the chaos test's checker of deferred tasks: reads what
 * every replica logged (chaos_defer.h) and the dead letters etcd holds, and proves, per key:
 *
 * - a task deferred (TW_OK, or -TW_EEXIST / a refused batch after a call whose answer was
 *   lost) and not cancelled ended: a handler of it returned 0, or it is in the dead letters;
 * - no handler started before its due: the due it was handed, on the replica's wall clock,
 *   with no tolerance, and that due no earlier than the producer's (the deferred one, a
 *   move's, or a failed attempt's end plus its backoff);
 * - no second handler returned 0 unless the replica of the first was killed, paused past its
 *   TTL or lost its lease between the two starts (each one is reported);
 * - no handler started after a cancel of its key returned TW_OK;
 * - a dead letter is a task of the kind that always fails.
 *
 * Then it prints the counts and the lateness (start minus due) of runs no fault disturbed,
 * and of runs due during a takeover of their group.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chaos_defer.h"
#include "chaos_jobs.h"

#define KEY_CAP 64

struct ev {
	int64_t ns;
	uint32_t key, order;
	int replica;
	char type;
	int64_t due;   /* D, M: the due; S: the due handed to the handler */
	int64_t code;  /* d, c, m, E: the answer; S: the attempt */
	int64_t extra; /* D: the try; S: the group; E: the attempt */
	uint64_t token;
};

struct lease_note {
	int64_t ns;
	int replica;
	int group; /* -1: the whole lease */
};

struct run {
	int replica;
	int64_t start, end; /* end 0: no return logged */
	unsigned attempt, group;
	int64_t due_ms;
	int rc;
};

static struct {
	char (*names)[KEY_CAP];
	uint32_t nkeys, cap;
	uint32_t *table; /* open addressing: key index + 1 */
	uint32_t table_size;
	struct ev *ev;
	size_t nev, evcap;
	struct lease_note *notes;
	size_t nnotes, notecap;
	char (*dead)[KEY_CAP];
	size_t ndead;
	const struct chaos_fault *faults;
	int nfaults;
	int64_t t0_ms; /* the driver's time 0 */
	unsigned errors;
} ck;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (ck.errors < 40) {
		fputs("chaos: FAIL: defer: ", stdout);
		vprintf(fmt, ap);
		putchar('\n');
	}
	va_end(ap);
	ck.errors++;
}

static uint32_t hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static bool grow(void **p, size_t *cap, size_t need, size_t size)
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

static int64_t key_index(const char *name)
{
	if (strlen(name) >= KEY_CAP)
		return -1;
	if (ck.nkeys * 2 >= ck.table_size) {
		uint32_t size = ck.table_size ? ck.table_size * 2 : 65536;
		uint32_t *t = calloc(size, sizeof *t);
		if (!t)
			return -1;
		for (uint32_t i = 0; i < ck.nkeys; i++) {
			uint32_t at = hash(ck.names[i]) & (size - 1);
			while (t[at])
				at = (at + 1) & (size - 1);
			t[at] = i + 1;
		}
		free(ck.table);
		ck.table = t;
		ck.table_size = size;
	}
	uint32_t at = hash(name) & (ck.table_size - 1);
	for (; ck.table[at]; at = (at + 1) & (ck.table_size - 1))
		if (strcmp(ck.names[ck.table[at] - 1], name) == 0)
			return ck.table[at] - 1;
	size_t cap = ck.cap;
	if (!grow((void **)&ck.names, &cap, ck.nkeys + 1, KEY_CAP))
		return -1;
	ck.cap = (uint32_t)cap;
	memcpy(ck.names[ck.nkeys], name, strlen(name) + 1);
	ck.table[at] = ck.nkeys + 1;
	return ck.nkeys++;
}

static void note_lease(const char *line, int64_t ns, int r)
{
	const char *m = strstr(line, "lease expired");
	int group = -1;
	const char *g = strstr(line, "lost group ");
	if (!m && !(g && sscanf(g, "lost group %d", &group) == 1))
		return;
	if (grow((void **)&ck.notes, &ck.notecap, ck.nnotes + 1, sizeof *ck.notes))
		ck.notes[ck.nnotes++] = (struct lease_note){ ns, r, m ? -1 : group };
}

static void read_log(const char *dir, int r)
{
	char path[400], line[600], key[KEY_CAP + 8];
	snprintf(path, sizeof path, "%s/r%d.log.defer", dir, r);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
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
				note_lease(line, e.ns, r);
			continue;
		default:
			break;
		}
		if (!got) {
			fail("r%d's log has a line it should not: %s", r, line);
			continue;
		}
		int64_t k = key_index(key);
		if (k < 0 || !grow((void **)&ck.ev, &ck.evcap, ck.nev + 1, sizeof *ck.ev)) {
			fail("out of memory, or a key too long: %s", key);
			break;
		}
		e.key = (uint32_t)k;
		e.order = (uint32_t)ck.nev;
		ck.ev[ck.nev++] = e;
	}
	fclose(f);
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

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static bool is_ambiguous(int64_t rc)
{
	return rc == -TW_CLUSTER_EUNAVAILABLE || rc == -TW_CLUSTER_EETCD;
}

/* Why replica r's run that started at from_ns may have run again by to_ns: it was killed or
 * paused past its TTL, or it lost its lease or the group, in between; NULL: no reason. */
static const char *lost_owner(int r, unsigned group, int64_t from_ns, int64_t to_ns)
{
	for (int f = 0; f < ck.nfaults; f++)
		if (ck.faults[f].owner_lost && ck.faults[f].replica == r &&
		    ck.faults[f].at_ms * 1000000 >= from_ns - 1000000 &&
		    ck.faults[f].at_ms * 1000000 <= to_ns)
			return ck.faults[f].what;
	for (size_t i = 0; i < ck.nnotes; i++)
		if (ck.notes[i].replica == r && ck.notes[i].ns >= from_ns &&
		    ck.notes[i].ns <= to_ns &&
		    (ck.notes[i].group < 0 || ck.notes[i].group == (int)group))
			return ck.notes[i].group < 0 ? "its lease expired" : "it lost the group";
	return NULL;
}

static bool in_fault(int64_t ms)
{
	for (int f = 0; f < ck.nfaults; f++)
		if (ms >= ck.faults[f].at_ms - CHAOS_CLAIM_AHEAD_MS &&
		    ms <= ck.faults[f].window_end_ms)
			return true;
	return false;
}

/* The groups each owner lost in a fault ran in the 3 s before it (bit g: group g). */
static uint64_t lost_groups[64];

static void find_lost_groups(void)
{
	for (int f = 0; f < ck.nfaults && f < 64; f++) {
		const struct chaos_fault *x = &ck.faults[f];
		lost_groups[f] = 0;
		for (size_t i = 0; x->owner_lost && i < ck.nev; i++) {
			const struct ev *e = &ck.ev[i];
			if (e->type == 'S' && e->replica == x->replica && e->extra < 64 &&
			    e->ns <= x->at_ms * 1000000 && e->ns >= (x->at_ms - 3000) * 1000000)
				lost_groups[f] |= UINT64_C(1) << e->extra;
		}
	}
}

/* Whether a run of group g due at due_ms came during a takeover of g: due in the window of a
 * fault that lost the owner that had run the group, and run by another replica. */
static bool during_takeover(int replica, unsigned g, int64_t due_ms)
{
	for (int f = 0; f < ck.nfaults && f < 64; f++) {
		const struct chaos_fault *x = &ck.faults[f];
		if (x->owner_lost && x->replica != replica && due_ms >= x->at_ms &&
		    due_ms <= x->window_end_ms && g < 64 && (lost_groups[f] >> g & 1))
			return true;
	}
	return false;
}

static bool is_dead(const char *key)
{
	size_t lo = 0, hi = ck.ndead;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(ck.dead[mid], key);
		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static struct {
	uint64_t tasks, maybe, cancelled, cancel_codes[3], move_codes[3], runs, successes;
	uint64_t retries, reclaims, dups, dead, lost, early, second, eexist_retries;
	uint64_t ambiguous_defers;
} n;

struct vec {
	int64_t *v;
	size_t n, cap;
};

static struct vec lat_quiet, lat_now, lat_takeover;

static void push(struct vec *a, int64_t x)
{
	if (grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v))
		a->v[a->n++] = x;
}

static void show_state(const char *key, const char *const *endpoints, const char *prefix)
{
	tw_cluster_task_list *l = NULL;
	int rc = tw_cluster_task_read(endpoints, prefix, 2000, key, &l);
	if (rc != TW_OK) {
		printf("chaos:   %s: etcd could not be read: %s\n", key, tw_cluster_strerror(rc));
		return;
	}
	if (l->count == 0)
		printf("chaos:   %s: etcd holds nothing under it\n", key);
	for (size_t i = 0; i < l->count; i++)
		printf("chaos:   %s: etcd holds it %s, due %" PRId64
		       ", attempt %u, claimed by %s\n",
		       key,
		       l->tasks[i].state == TW_CLUSTER_TASK_PENDING ? "pending" :
		       l->tasks[i].state == TW_CLUSTER_TASK_CLAIMED ? "claimed" :
								      "dead",
		       l->tasks[i].due_ms, l->tasks[i].attempt,
		       l->tasks[i].claimed_by ? l->tasks[i].claimed_by : "nobody");
	tw_cluster_task_list_free(l);
}

#define RUNS_MAX  64
#define MOVES_MAX 16

struct move {
	int64_t sent, answered, due, rc; /* answered 0: no answer logged */
};

/* The earliest due the producer's calls allow for run i: the deferred due, the last move that
 * was answered TW_OK before the run (a move not yet answered, or whose answer was lost, may
 * have taken effect too), or the end of a failed attempt plus its backoff, whichever came
 * last. A failed attempt whose replica lost its claim after it did not put the task back. */
static int64_t producer_due(const struct run *runs, size_t i, const struct move *mv, size_t nm,
			    int64_t due0, int64_t backoff)
{
	int64_t start = runs[i].start, base = due0, base_ns = 0, other = INT64_MAX;
	for (size_t k = 0; k < nm; k++) {
		if (mv[k].sent >= start)
			continue;
		if (mv[k].rc == 0 && mv[k].answered && mv[k].answered < start) {
			if (mv[k].sent >= base_ns) {
				base = mv[k].due;
				base_ns = mv[k].sent;
			}
		} else if (mv[k].rc == 0 || !mv[k].answered || is_ambiguous(mv[k].rc)) {
			other = mv[k].due < other ? mv[k].due : other;
		}
	}
	unsigned failures = 0;
	for (size_t j = 0; j < i; j++) {
		if (!runs[j].end || runs[j].rc == 0 || runs[j].end >= start)
			continue;
		failures++;
		if (lost_owner(runs[j].replica, runs[j].group, runs[j].start, start))
			continue;
		int64_t b =
			runs[j].end / 1000000 + (backoff << (failures < 20 ? failures - 1 : 19));
		if (runs[j].end >= base_ns) {
			base = b;
			base_ns = runs[j].end;
		}
	}
	/* A move sent before that event may have reached etcd after it. */
	for (size_t k = 0; k < nm; k++)
		if (mv[k].sent < start && mv[k].rc == 0 && mv[k].answered > base_ns)
			other = mv[k].due < other ? mv[k].due : other;
	return base < other ? base : other;
}

static double rel_s(int64_t ns)
{
	return (double)(ns / 1000000 - ck.t0_ms) / 1000;
}

static void check_key(const struct ev *e, size_t cnt, const char *const *endpoints,
		      const char *prefix)
{
	const char *key = ck.names[e[0].key];
	char kind = key[0];
	int64_t backoff = kind == 'f' ? CHAOS_FLAKY_BACKOFF_MS :
			  kind == 'd' ? CHAOS_DOOMED_BACKOFF_MS :
					1000;
	struct run runs[RUNS_MAX];
	struct move mv[MOVES_MAX];
	size_t nr = 0, nm = 0;
	bool stored = false, amb = false, cancelled = false, cancel_unsure = false;
	int64_t cancel_ns = 0, due0 = 0, first_ns = 0;
	int open_defer[16] = { 0 }, open_cancel[16] = { 0 }, open_move[16];
	for (int r = 0; r < 16; r++)
		open_move[r] = -1;
	unsigned extra_tasks = 0;
	for (size_t i = 0; i < cnt; i++) {
		const struct ev *x = &e[i];
		int r = x->replica & 15;
		switch (x->type) {
		case 'D':
			if (!first_ns) {
				due0 = x->due;
				first_ns = x->ns;
			}
			open_defer[r]++;
			break;
		case 'd':
			open_defer[r]--;
			if (x->code == 0) {
				bool ended = false;
				for (size_t k = 0; k < nr; k++)
					ended |= runs[k].end && runs[k].end < x->ns &&
						 (runs[k].rc == 0 || kind == 'd');
				if ((stored || amb) && ended) {
					extra_tasks++;
					n.second++;
				} else if (stored) {
					fail("%s: a defer of a live task answered TW_OK (a second task)",
					     key);
				}
				stored = true;
			} else if (x->code == -TW_EEXIST) {
				if (!stored && !amb)
					fail("%s: the first defer of a new key answered -TW_EEXIST",
					     key);
				if (stored)
					n.eexist_retries++;
				stored = true;
			} else if (x->code == CHAOS_NOT_STORED) {
				/* All or none: a retried batch refused for a taken key means the
				 * call whose answer was lost stored the whole batch. */
				stored |= amb;
			} else if (is_ambiguous(x->code)) {
				amb = true;
				n.ambiguous_defers++;
			} else {
				fail("%s: a defer answered %" PRId64 " (%s)", key, x->code,
				     tw_cluster_strerror((int)x->code));
			}
			break;
		case 'C':
			open_cancel[r]++;
			break;
		case 'c':
			open_cancel[r]--;
			if (x->code == 0 && !cancelled) {
				cancelled = true;
				cancel_ns = x->ns;
			}
			if (x->code == 0 || x->code == -TW_ESTATE || x->code == -TW_ENOTFOUND)
				n.cancel_codes[x->code == 0 ? 0 : x->code == -TW_ESTATE ? 1 : 2]++;
			else if (is_ambiguous(x->code))
				cancel_unsure = true;
			else
				fail("%s: a cancel answered %" PRId64, key, x->code);
			break;
		case 'M':
			if (nm < MOVES_MAX) {
				mv[nm] = (struct move){ x->ns, 0, x->due, 1 };
				open_move[r] = (int)nm++;
			}
			break;
		case 'm':
			if (open_move[r] >= 0 && (size_t)open_move[r] < nm) {
				mv[open_move[r]].answered = x->ns;
				mv[open_move[r]].rc = x->code;
				open_move[r] = -1;
			}
			if (x->code == 0 || x->code == -TW_ESTATE || x->code == -TW_ENOTFOUND)
				n.move_codes[x->code == 0 ? 0 : x->code == -TW_ESTATE ? 1 : 2]++;
			else if (!is_ambiguous(x->code))
				fail("%s: a move answered %" PRId64, key, x->code);
			break;
		case 'S':
			if (nr < RUNS_MAX)
				runs[nr++] = (struct run){
					x->replica,         x->ns,  0, (unsigned)x->code,
					(unsigned)x->extra, x->due, 0
				};
			break;
		case 'E': {
			size_t k = nr;
			while (k > 0 && !(runs[k - 1].replica == x->replica && !runs[k - 1].end &&
					  runs[k - 1].attempt == (unsigned)x->extra))
				k--;
			if (k == 0) {
				fail("%s: r%d logged a return of attempt %" PRId64
				     " it did not start",
				     key, x->replica, x->extra);
				break;
			}
			runs[k - 1].end = x->ns;
			runs[k - 1].rc = (int)x->code;
			break;
		}
		default:
			break;
		}
	}
	for (int r = 0; r < 16; r++) {
		amb |= open_defer[r] > 0;
		cancel_unsure |= open_cancel[r] > 0;
	}
	bool dead = is_dead(key);
	unsigned successes = 0;
	for (size_t i = 0; i < nr; i++)
		successes += runs[i].end && runs[i].rc == 0;
	n.runs += nr;
	n.successes += successes;
	n.dead += dead;
	n.cancelled += cancelled;
	if (stored)
		n.tasks += 1 + extra_tasks;
	else if (amb)
		n.maybe++;
	if (nr && !stored && !amb)
		fail("%s ran, but no defer of it was stored", key);
	if (dead && kind != 'd')
		fail("%s (kind %s) is in the dead letters", key, kind == 'f' ? "flaky" : "ok");
	if (stored && !cancelled && !cancel_unsure && (kind == 'd' ? !dead : successes == 0)) {
		n.lost++;
		fail("%s was deferred (at %+.3f s, due %+.3f s) and never %s; %zu runs", key,
		     rel_s(first_ns), rel_s(due0 * 1000000), kind == 'd' ? "dead-lettered" : "done",
		     nr);
		for (size_t i = 0; i < nr; i++)
			printf("chaos:   run: r%d attempt %u group %u start %+.3f s end %+.3f s rc %d\n",
			       runs[i].replica, runs[i].attempt, runs[i].group,
			       rel_s(runs[i].start), runs[i].end ? rel_s(runs[i].end) : 0.0,
			       runs[i].rc);
		if (n.lost <= 10)
			show_state(key, endpoints, prefix);
	}
	for (size_t i = 0; i < nr; i++) {
		const struct run *x = &runs[i];
		if (cancelled && x->start > cancel_ns)
			fail("%s: r%d started attempt %u at %+.3f s, after its cancel returned TW_OK "
			     "at %+.3f s",
			     key, x->replica, x->attempt, rel_s(x->start), rel_s(cancel_ns));
		int64_t due = producer_due(runs, i, mv, nm, due0, backoff);
		if (x->start < x->due_ms * 1000000 || x->start < due * 1000000) {
			n.early++;
			fail("%s: attempt %u on r%d started at %" PRId64
			     " ns, before its due (%" PRId64 " ms handed to it, %" PRId64
			     " ms by the producer's calls)",
			     key, x->attempt, x->replica, x->start, x->due_ms, due);
		}
		if (i > 0 && extra_tasks == 0 && x->attempt <= runs[i - 1].attempt)
			fail("%s: attempt %u on r%d at %+.3f s after attempt %u on r%d at %+.3f s",
			     key, x->attempt, x->replica, rel_s(x->start), runs[i - 1].attempt,
			     runs[i - 1].replica, rel_s(runs[i - 1].start));
		if (i > 0) {
			const struct run *p = &runs[i - 1];
			if (p->end && p->end <= x->start && p->rc != 0)
				n.retries++;
			else if (!p->end || p->rc != 0)
				n.reclaims++;
		}
		int64_t late = x->start - x->due_ms * 1000000;
		bool quiet = i == 0 && nm == 0 && x->attempt == 1 && !in_fault(x->due_ms) &&
			     !in_fault(x->start / 1000000);
		if (during_takeover(x->replica, x->group, x->due_ms))
			push(&lat_takeover, late);
		else if (quiet && due0 - first_ns / 1000000 >= 2000)
			push(&lat_quiet, late);
		else if (quiet && due0 <= first_ns / 1000000)
			push(&lat_now, late);
	}
	const struct run *prev = NULL;
	unsigned seen = 0, expected = 1 + extra_tasks;
	for (size_t i = 0; i < nr; i++) {
		if (!runs[i].end || runs[i].rc != 0)
			continue;
		if (++seen > expected && prev) {
			const char *why =
				lost_owner(prev->replica, prev->group, prev->start, runs[i].start);
			n.dups++;
			if (!why)
				fail("%s ran twice: attempt %u on r%d at %+.3f s, attempt %u on r%d at "
				     "%+.3f s, and r%d lost nothing in between",
				     key, prev->attempt, prev->replica, rel_s(prev->start),
				     runs[i].attempt, runs[i].replica, rel_s(runs[i].start),
				     prev->replica);
			else
				printf("chaos: defer: %s ran twice: attempt %u on r%d at %+.3f s, "
				       "attempt %u on r%d at %+.3f s: r%d %s\n",
				       key, prev->attempt, prev->replica, rel_s(prev->start),
				       runs[i].attempt, runs[i].replica, rel_s(runs[i].start),
				       prev->replica, why);
		}
		prev = &runs[i];
	}
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int read_dead(const char *const *endpoints, const char *prefix)
{
	char after[KEY_CAP] = "";
	size_t cap = 0;
	for (;;) {
		tw_cluster_task_list *l = NULL;
		int rc =
			tw_cluster_dead_read(endpoints, prefix, 5000, *after ? after : NULL, 0, &l);
		if (rc != TW_OK) {
			fail("the dead letters could not be read: %s", tw_cluster_strerror(rc));
			return -1;
		}
		for (size_t i = 0; i < l->count; i++) {
			const tw_cluster_task_view *t = &l->tasks[i];
			if (strcmp(t->kind, "doomed") != 0 || t->last_code != 7)
				fail("dead letter %s: kind %s, last code %d", t->key, t->kind,
				     t->last_code);
			if (strlen(t->key) >= KEY_CAP ||
			    !grow((void **)&ck.dead, &cap, ck.ndead + 1, KEY_CAP))
				continue;
			memcpy(ck.dead[ck.ndead++], t->key, strlen(t->key) + 1);
		}
		bool more = l->more && l->count > 0;
		if (more)
			snprintf(after, sizeof after, "%s", l->tasks[l->count - 1].key);
		tw_cluster_task_list_free(l);
		if (!more)
			break;
	}
	qsort(ck.dead, ck.ndead, KEY_CAP, cmp_key);
	return 0;
}

long chaos_defer_drain(const char *const *endpoints, const char *prefix, unsigned drain_ms)
{
	struct timespec t0, now, step = { 0, 250000000 };
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		tw_cluster_view *v = NULL;
		int rc = tw_cluster_view_read(endpoints, prefix, 5000, &v);
		long left = rc == TW_OK ? (long)v->tasks : -1;
		tw_cluster_view_free(v);
		clock_gettime(CLOCK_MONOTONIC, &now);
		int64_t ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (left == 0 || ms >= drain_ms) {
			printf("chaos: defer: %ld live tasks left after %.1f s of drain\n", left,
			       (double)ms / 1000);
			return left;
		}
		nanosleep(&step, NULL);
	}
}

static void print_lateness(const char *what, struct vec *a, bool p99)
{
	if (a->n == 0) {
		printf("chaos: defer: %s: none\n", what);
		return;
	}
	qsort(a->v, a->n, sizeof *a->v, cmp_i64);
	printf("chaos: defer: %s, %zu runs: p50 %.3f ms", what, a->n, (double)a->v[a->n / 2] / 1e6);
	if (p99)
		printf(", p99 %.3f ms", (double)a->v[(a->n * 99) / 100] / 1e6);
	printf(", max %.3f ms\n", (double)a->v[a->n - 1] / 1e6);
}

unsigned chaos_defer_check(const char *dir, int replicas, const struct chaos_fault *faults,
			   int nfaults, int64_t t0_ms, const char *const *endpoints,
			   const char *prefix)
{
	ck.t0_ms = t0_ms;
	ck.faults = faults;
	ck.nfaults = nfaults;
	read_dead(endpoints, prefix);
	for (int r = 0; r < replicas; r++)
		read_log(dir, r);
	qsort(ck.ev, ck.nev, sizeof *ck.ev, cmp_ev);
	for (size_t i = 0; i < ck.nev; i++)
		ck.ev[i].order = (uint32_t)i;
	find_lost_groups();
	for (size_t i = 0, j; i < ck.nev; i = j) {
		for (j = i + 1; j < ck.nev && ck.ev[j].key == ck.ev[i].key; j++)
			;
		check_key(&ck.ev[i], j - i, endpoints, prefix);
	}
	for (size_t i = 0; i < ck.ndead; i++) {
		int64_t k = -1;
		uint32_t at = ck.table_size ? hash(ck.dead[i]) & (ck.table_size - 1) : 0;
		for (; ck.table_size && ck.table[at]; at = (at + 1) & (ck.table_size - 1))
			if (strcmp(ck.names[ck.table[at] - 1], ck.dead[i]) == 0)
				k = ck.table[at] - 1;
		if (k < 0)
			fail("dead letter %s was never deferred", ck.dead[i]);
	}
	printf("chaos: defer: %" PRIu64 " tasks deferred (%" PRIu64 " more whose answer was lost "
	       "for good; %" PRIu64 " answers lost and retried; %" PRIu64 " retries answered "
	       "-TW_EEXIST; %" PRIu64 " keys deferred again after their task ended)\n",
	       n.tasks, n.maybe, n.ambiguous_defers, n.eexist_retries, n.second);
	printf("chaos: defer: cancels: %" PRIu64 " TW_OK, %" PRIu64 " -TW_ESTATE, %" PRIu64
	       " -TW_ENOTFOUND; moves: %" PRIu64 " TW_OK, %" PRIu64 " -TW_ESTATE, %" PRIu64
	       " -TW_ENOTFOUND\n",
	       n.cancel_codes[0], n.cancel_codes[1], n.cancel_codes[2], n.move_codes[0],
	       n.move_codes[1], n.move_codes[2]);
	printf("chaos: defer: %" PRIu64 " runs, %" PRIu64 " returned 0; %" PRIu64
	       " retries after a failure, %" PRIu64
	       " runs again after an unfinished or lost one; %" PRIu64
	       " duplicates; %zu dead letters; %" PRIu64 " lost, %" PRIu64 " early\n",
	       n.runs, n.successes, n.retries, n.reclaims, n.dups, ck.ndead, n.lost, n.early);
	print_lateness("lateness of runs no fault disturbed, deferred >= 2 s ahead", &lat_quiet,
		       true);
	print_lateness("start minus due of tasks deferred due at once, no fault", &lat_now, true);
	print_lateness("lateness of runs due during a takeover of their group", &lat_takeover,
		       false);
	free(ck.names);
	free(ck.table);
	free(ck.ev);
	free(ck.notes);
	free(ck.dead);
	free(lat_quiet.v);
	free(lat_now.v);
	free(lat_takeover.v);
	return ck.errors;
}
