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
#include "chaos_defer_log.h"
#include "chaos_jobs.h"

struct run {
	int replica;
	int64_t start, end; /* end 0: no return logged */
	unsigned attempt, group;
	int64_t due_ms;
	int rc;
};

static struct chaos_log lg;

static struct {
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
		    /* The driver reads its clock before the signal lands: a run may start
		     * in between. */
		    ck.faults[f].at_ms * 1000000 >= from_ns - 100000000 &&
		    ck.faults[f].at_ms * 1000000 <= to_ns)
			return ck.faults[f].what;
	for (size_t i = 0; i < lg.nnotes; i++)
		if (lg.notes[i].replica == r && lg.notes[i].ns >= from_ns &&
		    lg.notes[i].ns <= to_ns &&
		    (lg.notes[i].group < 0 || lg.notes[i].group == (int)group))
			return lg.notes[i].group < 0 ? "its lease expired" : "it lost the group";
	return NULL;
}

/* Whether a fault's window overlaps [from_ms, to_ms]: a run that waited through a fault
 * was disturbed by it, though its due and its start both lie outside. */
static bool fault_between(int64_t from_ms, int64_t to_ms)
{
	for (int f = 0; f < ck.nfaults; f++)
		if (to_ms >= ck.faults[f].at_ms - CHAOS_CLAIM_AHEAD_MS &&
		    from_ms <= ck.faults[f].window_end_ms)
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
		for (size_t i = 0; x->owner_lost && i < lg.nev; i++) {
			const struct ev *e = &lg.ev[i];
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

static struct {
	uint64_t tasks, maybe, cancelled, cancel_codes[3], move_codes[3], runs, successes;
	uint64_t retries, reclaims, dups, lost, early, second, eexist_retries;
	uint64_t ambiguous_defers;
} n;

struct vec {
	int64_t *v;
	size_t n, cap;
};

static struct vec lat_quiet, lat_now, lat_takeover;

static void push(struct vec *a, int64_t x)
{
	if (chaos_grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v))
		a->v[a->n++] = x;
}

/* Why duplicates were allowed, and how many times each. */
static struct {
	const char *why;
	unsigned count;
} reasons[8];

static void count_reason(const char *why)
{
	for (size_t i = 0; i < 8; i++)
		if (!reasons[i].why || strcmp(reasons[i].why, why) == 0) {
			reasons[i].why = why;
			reasons[i].count++;
			return;
		}
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
	for (size_t j = 0; j < i; j++) {
		if (!runs[j].end || runs[j].rc == 0 || runs[j].end >= start)
			continue;
		if (lost_owner(runs[j].replica, runs[j].group, runs[j].start, start))
			continue;
		/* The header's rule: due backoff_ms * 2^(n - 1) after the n-th failed attempt,
		 * n its attempt number (runs counted would differ once an attempt ran twice). */
		unsigned n = runs[j].attempt ? runs[j].attempt : 1;
		int64_t b = runs[j].end / 1000000 + (backoff << (n < 20 ? n - 1 : 19));
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

/* What the logs say of one key. */
struct task {
	const char *key;
	char kind; /* 'o', 'f', 'd' */
	int64_t backoff, due0, first_ns, cancel_ns;
	struct run runs[RUNS_MAX]; /* by start */
	struct move mv[MOVES_MAX];
	size_t nr, nm;
	bool stored;        /* a defer of it was stored */
	bool amb;           /* a defer's answer was lost: stored or not */
	bool cancelled;     /* a cancel answered TW_OK, at cancel_ns */
	bool cancel_unsure; /* a cancel's answer was lost */
	unsigned extra;     /* tasks deferred again under the key after its task ended */
	int open_defer[16], open_cancel[16], open_move[16];
};

static void on_defer_answer(struct task *t, const struct ev *x)
{
	if (x->code == 0) {
		bool ended = false;
		for (size_t k = 0; k < t->nr; k++)
			ended |= t->runs[k].end && t->runs[k].end < x->ns &&
				 (t->runs[k].rc == 0 || t->kind == 'd');
		if ((t->stored || t->amb) && ended) {
			t->extra++;
			n.second++;
		} else if (t->stored) {
			fail("%s: a defer of a live task answered TW_OK (a second task)", t->key);
		}
		t->stored = true;
	} else if (x->code == -TW_EEXIST) {
		if (!t->stored && !t->amb)
			fail("%s: the first defer of a new key answered -TW_EEXIST", t->key);
		if (t->stored)
			n.eexist_retries++;
		t->stored = true;
	} else if (x->code == CHAOS_NOT_STORED) {
		/* All or none: a retried batch refused for a taken key means the call whose
		 * answer was lost stored the whole batch. */
		t->stored |= t->amb;
	} else if (is_ambiguous(x->code)) {
		t->amb = true;
		n.ambiguous_defers++;
	} else {
		fail("%s: a defer answered %" PRId64 " (%s)", t->key, x->code,
		     tw_cluster_strerror((int)x->code));
	}
}

static void on_cancel_answer(struct task *t, const struct ev *x)
{
	if (x->code == 0 && !t->cancelled) {
		t->cancelled = true;
		t->cancel_ns = x->ns;
	}
	if (x->code == 0 || x->code == -TW_ESTATE || x->code == -TW_ENOTFOUND)
		n.cancel_codes[x->code == 0 ? 0 : x->code == -TW_ESTATE ? 1 : 2]++;
	else if (is_ambiguous(x->code))
		t->cancel_unsure = true;
	else
		fail("%s: a cancel answered %" PRId64, t->key, x->code);
}

static void on_move_answer(struct task *t, const struct ev *x, int r)
{
	if (t->open_move[r] >= 0) {
		t->mv[t->open_move[r]].answered = x->ns;
		t->mv[t->open_move[r]].rc = x->code;
		t->open_move[r] = -1;
	}
	if (x->code == 0 || x->code == -TW_ESTATE || x->code == -TW_ENOTFOUND)
		n.move_codes[x->code == 0 ? 0 : x->code == -TW_ESTATE ? 1 : 2]++;
	else if (!is_ambiguous(x->code))
		fail("%s: a move answered %" PRId64, t->key, x->code);
}

static void on_return(struct task *t, const struct ev *x)
{
	size_t k = t->nr;
	while (k > 0 && !(t->runs[k - 1].replica == x->replica && !t->runs[k - 1].end &&
			  t->runs[k - 1].attempt == (unsigned)x->extra))
		k--;
	if (k == 0) {
		fail("%s: r%d logged a return of attempt %" PRId64 " it did not start", t->key,
		     x->replica, x->extra);
		return;
	}
	t->runs[k - 1].end = x->ns;
	t->runs[k - 1].rc = (int)x->code;
}

static void collect(struct task *t, const struct ev *e, size_t cnt)
{
	for (int r = 0; r < 16; r++)
		t->open_move[r] = -1;
	for (size_t i = 0; i < cnt; i++) {
		const struct ev *x = &e[i];
		int r = x->replica & 15;
		switch (x->type) {
		case 'D':
			if (!t->first_ns) {
				t->due0 = x->due;
				t->first_ns = x->ns;
			}
			t->open_defer[r]++;
			break;
		case 'd':
			t->open_defer[r]--;
			on_defer_answer(t, x);
			break;
		case 'C':
			t->open_cancel[r]++;
			break;
		case 'c':
			t->open_cancel[r]--;
			on_cancel_answer(t, x);
			break;
		case 'M':
			if (t->nm < MOVES_MAX) {
				t->mv[t->nm] = (struct move){ x->ns, 0, x->due, 1 };
				t->open_move[r] = (int)t->nm++;
			}
			break;
		case 'm':
			on_move_answer(t, x, r);
			break;
		case 'S':
			if (t->nr < RUNS_MAX)
				t->runs[t->nr++] = (struct run){ .replica = x->replica,
								 .start = x->ns,
								 .attempt = (unsigned)x->code,
								 .group = (unsigned)x->extra,
								 .due_ms = x->due };
			break;
		case 'E':
			on_return(t, x);
			break;
		default:
			break;
		}
	}
	/* A call a SIGKILL cut: its answer was lost. */
	for (int r = 0; r < 16; r++) {
		t->amb |= t->open_defer[r] > 0;
		t->cancel_unsure |= t->open_cancel[r] > 0;
	}
}

/* Deferred and not cancelled: it returned 0 once, or it is a dead letter. */
static void judge_end(const struct task *t, const char *const *endpoints, const char *prefix)
{
	bool dead = chaos_log_is_dead(&lg, t->key);
	unsigned successes = 0;
	for (size_t i = 0; i < t->nr; i++)
		successes += t->runs[i].end && t->runs[i].rc == 0;
	n.runs += t->nr;
	n.successes += successes;
	n.cancelled += t->cancelled;
	if (t->stored)
		n.tasks += 1 + t->extra;
	else if (t->amb)
		n.maybe++;
	if (t->nr && !t->stored && !t->amb)
		fail("%s ran, but no defer of it was stored", t->key);
	if (dead && t->kind != 'd')
		fail("%s (kind %s) is in the dead letters", t->key,
		     t->kind == 'f' ? "flaky" : "ok");
	if (!t->stored || t->cancelled || t->cancel_unsure ||
	    (t->kind == 'd' ? dead : successes > 0))
		return;
	n.lost++;
	fail("%s was deferred (at %+.3f s, due %+.3f s) and never %s; %zu runs", t->key,
	     rel_s(t->first_ns), rel_s(t->due0 * 1000000),
	     t->kind == 'd' ? "dead-lettered" : "done", t->nr);
	for (size_t i = 0; i < t->nr; i++)
		printf("chaos:   run: r%d attempt %u group %u start %+.3f s end %+.3f s rc %d\n",
		       t->runs[i].replica, t->runs[i].attempt, t->runs[i].group,
		       rel_s(t->runs[i].start), t->runs[i].end ? rel_s(t->runs[i].end) : 0.0,
		       t->runs[i].rc);
	if (n.lost <= 10)
		show_state(t->key, endpoints, prefix);
}

/* Each run: not early, not after a cancel, its attempt above the one before; its lateness. */
static void judge_runs(const struct task *t)
{
	for (size_t i = 0; i < t->nr; i++) {
		const struct run *x = &t->runs[i], *p = i ? &t->runs[i - 1] : NULL;
		if (t->cancelled && x->start > t->cancel_ns)
			fail("%s: r%d started attempt %u at %+.3f s, after its cancel returned TW_OK "
			     "at %+.3f s",
			     t->key, x->replica, x->attempt, rel_s(x->start), rel_s(t->cancel_ns));
		/* A key deferred again after its task ended (a dead letter's key is free) holds
		 * the runs of two tasks, and producer_due would count the first one's failures
		 * in the second's backoff: its runs are judged by the due handed to them alone. */
		int64_t due = t->extra ?
				      x->due_ms :
				      producer_due(t->runs, i, t->mv, t->nm, t->due0, t->backoff);
		if (x->start < x->due_ms * 1000000 || x->start < due * 1000000) {
			n.early++;
			fail("%s: attempt %u on r%d started at %" PRId64
			     " ns, before its due (%" PRId64 " ms handed to it, %" PRId64
			     " ms by the producer's calls; deferred again %u times)",
			     t->key, x->attempt, x->replica, x->start, x->due_ms, due, t->extra);
		}
		if (p && t->extra == 0 && x->attempt <= p->attempt && !(x->attempt == 1 && t->amb))
			fail("%s: attempt %u on r%d at %+.3f s after attempt %u on r%d at %+.3f s",
			     t->key, x->attempt, x->replica, rel_s(x->start), p->attempt,
			     p->replica, rel_s(p->start));
		if (p && p->end && p->end <= x->start && p->rc != 0)
			n.retries++;
		else if (p && (!p->end || p->rc != 0))
			n.reclaims++;
		int64_t late = x->start - x->due_ms * 1000000;
		bool quiet = i == 0 && t->nm == 0 && x->attempt == 1 &&
			     !fault_between(x->due_ms, x->start / 1000000);
		if (during_takeover(x->replica, x->group, x->due_ms))
			push(&lat_takeover, late);
		else if (quiet && t->due0 - t->first_ns / 1000000 >= 2000)
			push(&lat_quiet, late);
		else if (quiet && t->due0 <= t->first_ns / 1000000)
			push(&lat_now, late);
	}
}

/* A second run that returned 0 needs a reason: the first one's replica was lost. */
static void judge_twice(const struct task *t)
{
	const struct run *prev = NULL;
	unsigned seen = 0;
	for (size_t i = 0; i < t->nr; i++) {
		const struct run *x = &t->runs[i];
		if (!x->end || x->rc != 0)
			continue;
		if (++seen > 1 + t->extra && prev) {
			const char *why =
				lost_owner(prev->replica, prev->group, prev->start, x->start);
			n.dups++;
			if (!why && x->attempt == 1 && t->amb) {
				/* A fresh task after the first one ended: the call whose answer
				 * was lost reached etcd after the retry's task had run. */
				fail("%s ran twice: attempt 1 on r%d at %+.3f s, attempt 1 on r%d at "
				     "%+.3f s: a second task, made by a defer whose answer was lost "
				     "(etcd applied it after its retry's task ended)",
				     t->key, prev->replica, rel_s(prev->start), x->replica,
				     rel_s(x->start));
			} else if (!why) {
				fail("%s ran twice: attempt %u on r%d at %+.3f s, attempt %u on r%d at "
				     "%+.3f s, and r%d lost nothing in between",
				     t->key, prev->attempt, prev->replica, rel_s(prev->start),
				     x->attempt, x->replica, rel_s(x->start), prev->replica);
			} else {
				count_reason(why);
				printf("chaos: defer: %s ran twice: attempt %u on r%d at %+.3f s, "
				       "attempt %u on r%d at %+.3f s: r%d %s\n",
				       t->key, prev->attempt, prev->replica, rel_s(prev->start),
				       x->attempt, x->replica, rel_s(x->start), prev->replica, why);
			}
		}
		prev = x;
	}
}

static void check_key(const struct ev *e, size_t cnt, const char *const *endpoints,
		      const char *prefix)
{
	static struct task t;
	t = (struct task){ .key = lg.names[e[0].key], .kind = lg.names[e[0].key][0] };
	t.backoff = t.kind == 'f' ? CHAOS_FLAKY_BACKOFF_MS :
		    t.kind == 'd' ? CHAOS_DOOMED_BACKOFF_MS :
				    1000;
	collect(&t, e, cnt);
	judge_end(&t, endpoints, prefix);
	judge_runs(&t);
	judge_twice(&t);
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
	ck.errors += chaos_log_read_dead(&lg, endpoints, prefix);
	ck.errors += chaos_log_read(&lg, dir, replicas);
	find_lost_groups();
	for (size_t i = 0, j; i < lg.nev; i = j) {
		for (j = i + 1; j < lg.nev && lg.ev[j].key == lg.ev[i].key; j++)
			;
		check_key(&lg.ev[i], j - i, endpoints, prefix);
	}
	for (size_t i = 0; i < lg.ndead; i++)
		if (chaos_log_find(&lg, lg.dead[i]) < 0)
			fail("dead letter %s was never deferred", lg.dead[i]);
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
	       n.runs, n.successes, n.retries, n.reclaims, n.dups, lg.ndead, n.lost, n.early);
	for (size_t i = 0; i < 8 && reasons[i].why; i++)
		printf("chaos: defer: duplicates after the first run's replica: %s: %u\n",
		       reasons[i].why, reasons[i].count);
	print_lateness("lateness of runs no fault disturbed, deferred >= 2 s ahead", &lat_quiet,
		       true);
	print_lateness("start minus due of tasks deferred due at once, no fault", &lat_now, true);
	print_lateness("lateness of runs due during a takeover of their group", &lat_takeover,
		       false);
	chaos_log_free(&lg);
	free(lat_quiet.v);
	free(lat_now.v);
	free(lat_takeover.v);
	return ck.errors;
}
