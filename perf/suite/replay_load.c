/*
 * replay_load.c - a recording read into a replay's plan (replay.h): each
 * recorded thread's operations in order, the tasks the recording added (ids
 * mapped to the replay's when it adds them), each task's runs by run number
 * (how long each took, what it returned), and what the recording says of its
 * own runs: lateness, intervals, skips, gaps.
 *
 * What a real program records and a replay cannot re-issue is counted and left
 * out: ADDs that failed (id 0, a negative result), operations on ids the
 * recording never added (added before it began, or lost in a DROPPED gap),
 * operations written by the engine's own threads (thread 0).
 */
#include "replay.h"

#include "tickwheel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A recorded run, until the runs are sorted into their tasks. */
struct run_rec {
	uint64_t rec_id, run, start, due, len;
	int32_t result;
	uint32_t task;
};

struct loader {
	struct rp_plan *p;
	uint32_t *thread_of; /* recorded thread number -> index + 1 in p->threads */
	struct run_rec *runs;
	size_t nruns, runs_cap;
	size_t tasks_cap;
	uint64_t end;
};

static bool grow(void **v, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return true;
	size_t cap2 = *cap ? *cap * 2 : 64;
	while (cap2 < need)
		cap2 *= 2;
	void *nv = realloc(*v, cap2 * size);
	if (!nv)
		return false;
	*v = nv;
	*cap = cap2;
	return true;
}

uint64_t rp_scale_ms(uint64_t ms, double speed)
{
	if (ms == 0 || ms == TW_NEVER || speed == 1)
		return ms;
	double v = round((double)ms / speed);
	return v < 1 ? 1 : (uint64_t)v;
}

/* A recorded time as an offset from the recording's start, scaled; before it: 0. */
static uint64_t offset(const struct rp_plan *p, uint64_t t)
{
	return t > p->h.start_mono_ns ? (uint64_t)((double)(t - p->h.start_mono_ns) / p->speed) : 0;
}

/* A due as a signed offset from the start, scaled (a due before the start stays before). */
static uint64_t due_offset(const struct rp_plan *p, uint64_t due)
{
	double d = (double)(int64_t)(due - p->h.start_mono_ns) / p->speed;
	return (uint64_t)(int64_t)d;
}

static uint32_t add_string(struct rp_plan *p, const char *s)
{
	size_t n = strlen(s);
	if (!n)
		return 0;
	if (!grow((void **)&p->strings, &p->strings_cap, p->strings_len + n + 1, 1))
		return 0;
	memcpy(p->strings + p->strings_len, s, n + 1);
	uint32_t at = (uint32_t)p->strings_len;
	p->strings_len += n + 1;
	return at;
}

static struct rp_thread *thread_of(struct loader *l, uint16_t number)
{
	struct rp_plan *p = l->p;
	if (!l->thread_of[number]) {
		size_t cap = p->nthreads;
		struct rp_thread *t = realloc(p->threads, (cap + 1) * sizeof *t);
		if (!t)
			return NULL;
		p->threads = t;
		t[p->nthreads] = (struct rp_thread){ .number = number, .plan = p };
		l->thread_of[number] = (uint32_t)++p->nthreads;
	}
	return &p->threads[l->thread_of[number] - 1];
}

static bool add_task(struct loader *l, const struct rec_event *ev, struct rp_op *op)
{
	struct rp_plan *p = l->p;
	if (!grow((void **)&p->tasks, &l->tasks_cap, p->ntasks + 1, sizeof *p->tasks))
		return false;
	struct rp_task *t = &p->tasks[p->ntasks];
	*t = (struct rp_task){ .rec_id = ev->id,
			       .concurrent = REC_ADD_FLAGS(ev->u) & TW_CONCURRENT,
			       .plan = p };
	t->iv.period_ns = rp_scale_ms(ev->b, p->speed) * NS_PER_MS;
	t->rec_iv.period_ns = ev->b * NS_PER_MS;
	t->iv.histogram = &p->dev;
	t->rec_iv.histogram = &p->rec_dev;
	op->task = (uint32_t)p->ntasks++;
	op->a = REC_ADD_FIRST_DUE(ev->u) ? due_offset(p, ev->c) : rp_scale_ms(ev->a, p->speed);
	op->b = rp_scale_ms(ev->b, p->speed);
	op->name = add_string(p, ev->name);
	op->cron = add_string(p, ev->cron);
	return true;
}

/* An operation of thread ev->thread; false when memory runs out. */
static bool note_op(struct loader *l, const struct rec_event *ev)
{
	struct rp_plan *p = l->p;
	p->rec.ops++;
	if (ev->thread == 0) {
		p->rec.engine_ops++;
		return true;
	}
	if (ev->type == REC_ADD && (ev->id == 0 || ev->result < 0)) {
		p->rec.adds_failed++;
		return true;
	}
	struct rp_thread *t = thread_of(l, ev->thread);
	if (!t || !grow((void **)&t->ops, &t->cap, t->n + 1, sizeof *t->ops))
		return false;
	struct rp_op *op = &t->ops[t->n++];
	*op = (struct rp_op){ .t_ns = offset(p, ev->t_ns),
			      .rec_id = ev->id,
			      .task = RP_NONE,
			      .u = ev->u,
			      .result = ev->result,
			      .type = ev->type };
	switch (ev->type) {
	case REC_ADD:
		return add_task(l, ev, op);
	case REC_SET_DELAY:
	case REC_SET_PERIOD:
		op->a = rp_scale_ms(ev->a, p->speed);
		break;
	case REC_SET_DUE:
		op->a = due_offset(p, ev->a);
		op->b = ev->a == 0; /* a due of 0 is refused: so it stays */
		break;
	}
	return true;
}

static bool note_run(struct loader *l, const struct rec_event *ev)
{
	struct rp_plan *p = l->p;
	p->rec.runs++;
	if (!grow((void **)&l->runs, &l->runs_cap, l->nruns + 1, sizeof *l->runs))
		return false;
	uint64_t len = ev->b > ev->t_ns ? ev->b - ev->t_ns : 0;
	l->runs[l->nruns++] = (struct run_rec){ .rec_id = ev->id,
						.run = ev->c,
						.start = ev->t_ns,
						.due = ev->a,
						.len = len,
						.result = ev->result };
	lateness_note(&p->rec_late, ev->t_ns, ev->a);
	p->rec_run_ns_sum += (double)len;
	l->end = ev->b > l->end ? ev->b : l->end;
	return true;
}

static bool note_event(struct loader *l, const struct rec_event *ev)
{
	struct rp_plan *p = l->p;
	l->end = ev->t_ns > l->end ? ev->t_ns : l->end;
	switch (ev->type) {
	case REC_ADD:
	case REC_SET_DELAY:
	case REC_SET_DUE:
	case REC_SET_PERIOD:
	case REC_PAUSE:
	case REC_RESUME:
	case REC_CANCEL:
		return note_op(l, ev);
	case REC_RUN:
		return note_run(l, ev);
	case REC_SKIP:
		p->rec.skips += ev->c ? ev->c : 1;
		return true;
	case REC_THREAD: {
		struct rp_thread *t = ev->thread ? thread_of(l, ev->thread) : NULL;
		if (t)
			snprintf(t->name, sizeof t->name, "%s", ev->name);
		return !ev->thread || t;
	}
	case REC_DROPPED:
		p->rec.dropped += ev->a;
		p->rec.drop_gaps++;
		return true;
	case REC_END:
		p->rec.has_end = true;
		l->end = ev->c > l->end ? ev->c : l->end;
		if (ev->b > p->rec.dropped) { /* dropped, and no DROPPED event got through to say */
			p->rec.drop_gaps += !p->rec.drop_gaps;
			p->rec.dropped = ev->b;
		}
		return true;
	default:
		p->rec.unknown_types++;
		return true;
	}
}

/* Recorded id -> task index: open addressing over a power of two. */
struct id_map {
	uint64_t *key;
	uint32_t *index;
	size_t mask;
};

static bool map_build(struct id_map *m, const struct rp_plan *p)
{
	size_t size = 64;
	while (size < 2 * p->ntasks)
		size *= 2;
	m->mask = size - 1;
	m->key = calloc(size, sizeof *m->key);
	m->index = calloc(size, sizeof *m->index);
	if (!m->key || !m->index)
		return false;
	for (size_t i = 0; i < p->ntasks; i++) {
		size_t h = (size_t)(p->tasks[i].rec_id * UINT64_C(0x9e3779b97f4a7c15) >> 20);
		while (m->key[h & m->mask] && m->key[h & m->mask] != p->tasks[i].rec_id)
			h++;
		m->key[h & m->mask] = p->tasks[i].rec_id;
		m->index[h & m->mask] = (uint32_t)i;
	}
	return true;
}

static uint32_t map_find(const struct id_map *m, uint64_t id)
{
	size_t h = (size_t)(id * UINT64_C(0x9e3779b97f4a7c15) >> 20);
	for (; id && m->key[h & m->mask]; h++)
		if (m->key[h & m->mask] == id)
			return m->index[h & m->mask];
	return RP_NONE;
}

size_t rp_many_call_length(const struct rp_op *ops, size_t n)
{
	size_t k = 0;
	while (k < n && ops[k].type == REC_SET_DELAY && (ops[k].u & REC_SET_DELAY_MANY) &&
	       ops[k].t_ns == ops[0].t_ns && ops[k].a == ops[0].a)
		k++;
	return k;
}

/* Room for the thread's largest tw_set_delay_many call (its elements left after
 * resolve_ops); false when out of memory. */
static bool make_many_room(struct rp_thread *t)
{
	size_t largest = 0;
	for (size_t i = 0, len; i < t->n; i += len ? len : 1) {
		len = rp_many_call_length(&t->ops[i], t->n - i);
		largest = len > largest ? len : largest;
	}
	if (!largest)
		return true;
	t->many_ids = malloc(largest * sizeof *t->many_ids);
	t->many_results = malloc(largest * sizeof *t->many_results);
	t->many_recorded = malloc(largest * sizeof *t->many_recorded);
	return t->many_ids && t->many_results && t->many_recorded;
}

/* Each thread's operations on ids: the task's index, or left out (counted). */
static bool resolve_ops(struct rp_plan *p, const struct id_map *m)
{
	for (size_t k = 0; k < p->nthreads; k++) {
		struct rp_thread *t = &p->threads[k];
		size_t kept = 0;
		for (size_t i = 0; i < t->n; i++) {
			struct rp_op op = t->ops[i];
			if (op.type != REC_ADD)
				op.task = map_find(m, op.rec_id);
			if (op.task == RP_NONE)
				p->rec.unknown_ids++;
			else
				t->ops[kept++] = op;
		}
		t->n = kept;
		if (!make_many_room(t))
			return false;
	}
	return true;
}

static int by_task_and_run(const void *x, const void *y)
{
	const struct run_rec *a = x, *b = y;
	if (a->task != b->task)
		return a->task < b->task ? -1 : 1;
	return (a->run > b->run) - (a->run < b->run);
}

/* Each task's runs in run-number order, their intervals as the replay counts its own. */
static bool sort_runs(struct loader *l, const struct id_map *m)
{
	struct rp_plan *p = l->p;
	for (size_t i = 0; i < l->nruns; i++)
		l->runs[i].task = map_find(m, l->runs[i].rec_id);
	qsort(l->runs, l->nruns, sizeof *l->runs, by_task_and_run);
	p->run_ns = malloc((l->nruns + 1) * sizeof *p->run_ns);
	p->run_result = malloc((l->nruns + 1) * sizeof *p->run_result);
	if (!p->run_ns || !p->run_result)
		return false;
	for (size_t i = 0; i < l->nruns; i++) {
		struct run_rec *r = &l->runs[i];
		if (r->task == RP_NONE) {
			p->rec.orphan_runs++;
			continue;
		}
		struct rp_task *t = &p->tasks[r->task];
		if (!t->runs)
			t->first_run = (uint32_t)p->nruns;
		t->runs++;
		p->run_ns[p->nruns] = (uint64_t)((double)r->len / p->speed);
		p->run_result[p->nruns++] = r->result;
		if (!t->concurrent) {
			bool next = t->last_run && r->run == t->last_run + 1 &&
				    r->due - t->last_due_ns == t->rec_iv.period_ns;
			intervals_note(&t->rec_iv, r->start, !next);
			t->last_run = r->run;
			t->last_due_ns = r->due;
		}
	}
	for (size_t i = 0; i < p->ntasks; i++)
		p->tasks[i].last_run = p->tasks[i].last_due_ns = 0;
	return true;
}

static bool finish(struct loader *l)
{
	struct id_map m = { 0 };
	bool ok = map_build(&m, l->p);
	if (ok)
		ok = resolve_ops(l->p, &m) && sort_runs(l, &m);
	free(m.key);
	free(m.index);
	l->p->end_ns = offset(l->p, l->end);
	return ok;
}

struct rp_plan *rp_load(const char *path, double speed)
{
	char err[600];
	struct rec_reader *r = rec_open(path, err, sizeof err);
	if (!r) {
		fprintf(stderr, "tw-perf replay: %s\n", err);
		return NULL;
	}
	struct rp_plan *p = calloc(1, sizeof *p);
	struct loader l = { .p = p, .thread_of = calloc(65536, sizeof *l.thread_of) };
	bool ok = p && l.thread_of;
	if (ok) {
		p->h = *rec_header(r);
		p->speed = speed;
		p->strings = calloc(1, 1);
		p->strings_len = p->strings_cap = 1; /* offset 0: "" */
		ok = p->strings != NULL;
	}
	struct rec_event ev;
	int rc = 0;
	while (ok && (rc = rec_next(r, &ev)) == 1)
		ok = note_event(&l, &ev);
	ok = ok && rc == 0 && finish(&l);
	if (!ok)
		fprintf(stderr, "tw-perf replay: %s\n", rc < 0 ? rec_error(r) : "out of memory");
	rec_close(r);
	free(l.thread_of);
	free(l.runs);
	if (!ok) {
		rp_free(p);
		return NULL;
	}
	return p;
}

void rp_free(struct rp_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nthreads; i++) {
		free(p->threads[i].ops);
		free(p->threads[i].many_ids);
		free(p->threads[i].many_results);
		free(p->threads[i].many_recorded);
	}
	free(p->threads);
	free(p->tasks);
	free(p->run_ns);
	free(p->run_result);
	free(p->strings);
	free(p);
}
