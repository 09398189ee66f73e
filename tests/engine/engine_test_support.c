/* engine_test_support.c - engine_test_support.h's helpers, built once for the suites. */
#include "engine_test_support.h"

/* core/'s hook for the manual clock's wall time; the test programs link the static library. */
void tw__engine_set_manual_wall(tw_engine *e, int64_t wall_ns);

void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
	}
}

unsigned threads_named(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	cr_assert_not_null(d);
	unsigned n = 0;
	struct dirent *entry;
	while ((entry = readdir(d))) {
		if (entry->d_name[0] == '.')
			continue;
		char path[300], comm[32] = "";
		(void)snprintf(path, sizeof path, "/proc/self/task/%s/comm", entry->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue; /* the thread ended meanwhile */
		if (fgets(comm, sizeof comm, f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
		n += strcmp(comm, name) == 0;
	}
	closedir(d);
	return n;
}

/* ---- engines ---- */

tw_config manual_config(unsigned executors)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.manual_clock = true;
	cfg.executors = executors;
	return cfg;
}

tw_engine *engine_new_at(const tw_config *cfg, int line)
{
	tw_engine *e = NULL;
	int rc = tw_engine_create(cfg, &e);
	cr_assert_eq(rc, TW_OK, "line %d: tw_engine_create: %s", line, tw_strerror(rc));
	cr_assert_not_null(e, "line %d", line);
	return e;
}

tw_engine *manual_engine_at(unsigned executors, int line)
{
	tw_config cfg = manual_config(executors);
	return engine_new_at(&cfg, line);
}

tw_engine *queue_limited_engine_at(unsigned executors, unsigned queue_capacity, int line)
{
	tw_config cfg = manual_config(executors);
	cfg.queue_capacity = queue_capacity;
	return engine_new_at(&cfg, line);
}

void advance_at(tw_engine *e, uint64_t ms, int line)
{
	int rc = tw_advance(e, ms);
	cr_assert_eq(rc, TW_OK, "line %d: tw_advance(%" PRIu64 "): %s", line, ms, tw_strerror(rc));
}

void quiesce_at(tw_engine *e, int line)
{
	int rc = tw_quiesce(e);
	cr_assert_eq(rc, TW_OK, "line %d: tw_quiesce: %s", line, tw_strerror(rc));
}

void step_at(tw_engine *e, uint64_t ms, int line)
{
	advance_at(e, ms, line);
	quiesce_at(e, line);
}

void set_manual_wall(tw_engine *e, int64_t wall_ns)
{
	tw__engine_set_manual_wall(e, wall_ns);
}

/* ---- tasks ---- */

tw_task_spec spec_of(uint64_t delay_ms, uint64_t period_ms, tw_callback cb, void *arg)
{
	tw_task_spec spec;
	memset(&spec, 0, sizeof spec);
	spec.delay_ms = delay_ms;
	spec.period_ms = period_ms;
	spec.callback = cb;
	spec.arg = arg;
	return spec;
}

tw_id add_spec_at(tw_engine *e, const tw_task_spec *spec, int line)
{
	tw_id id = 0;
	int rc = tw_add(e, spec, &id);
	cr_assert_eq(rc, TW_OK, "line %d: tw_add: %s", line, tw_strerror(rc));
	cr_assert_neq(id, 0, "line %d: tw_add returned id 0", line);
	return id;
}

tw_id add_task_at(tw_engine *e, uint64_t delay_ms, uint64_t period_ms, tw_callback cb, void *arg,
		  int line)
{
	tw_task_spec spec = spec_of(delay_ms, period_ms, cb, arg);
	return add_spec_at(e, &spec, line);
}

tw_task_info info_of_at(tw_engine *e, tw_id id, int line)
{
	tw_task_info info;
	memset(&info, 0xa5, sizeof info);
	int rc = tw_get(e, id, &info);
	cr_assert_eq(rc, TW_OK, "line %d: tw_get(%" PRIu64 "): %s", line, id, tw_strerror(rc));
	return info;
}

void assert_same_info(const tw_task_info *a, const tw_task_info *b)
{
	cr_assert_eq(a->state, b->state);
	cr_assert_eq(a->period_ms, b->period_ms);
	cr_assert_eq(a->next_due_ns, b->next_due_ns);
	cr_assert_eq(a->runs, b->runs);
	cr_assert_eq(a->failures, b->failures);
	cr_assert_eq(a->consecutive_failures, b->consecutive_failures);
	cr_assert_eq(a->slow_runs, b->slow_runs);
	cr_assert_eq(a->skipped_overlap, b->skipped_overlap);
	cr_assert_eq(a->skipped_overload, b->skipped_overload);
	cr_assert_eq(a->skipped_missed, b->skipped_missed);
	cr_assert_eq(a->last_run_ns, b->last_run_ns);
	cr_assert_eq(a->longest_run_ns, b->longest_run_ns);
	cr_assert_eq(a->paused_by_failures, b->paused_by_failures);
	cr_assert_eq(a->concurrent, b->concurrent);
	cr_assert_eq(a->running, b->running);
	cr_assert_eq(a->stuck, b->stuck);
	cr_assert_eq(a->last_lateness_ns, b->last_lateness_ns);
	cr_assert_eq(a->max_lateness_ns, b->max_lateness_ns);
	cr_assert_eq(a->on_wheel_thread, b->on_wheel_thread);
	cr_assert_eq(a->calendar, b->calendar);
	cr_assert_eq(a->next_due_wall_ns, b->next_due_wall_ns);
	cr_assert_eq(memcmp(a->name, b->name, sizeof a->name), 0, "name bytes differ");
	cr_assert_eq(a->misfire, b->misfire);
}

tw_engine_stats stats_of_at(tw_engine *e, int line)
{
	tw_engine_stats stats;
	memset(&stats, 0xa5, sizeof stats);
	int rc = tw_stats(e, &stats);
	cr_assert_eq(rc, TW_OK, "line %d: tw_stats: %s", line, tw_strerror(rc));
	return stats;
}

uint64_t info_skips(const tw_task_info *info)
{
	return info->skipped_overlap + info->skipped_overload + info->skipped_missed;
}

int probe_callback(const tw_fire *fire, void *arg)
{
	(void)fire, (void)arg;
	return 0;
}

uint64_t manual_now_at(tw_engine *e, int line)
{
	enum { PROBE_DELAY_MS = 1000000 };
	tw_id id = add_task_at(e, PROBE_DELAY_MS, 0, probe_callback, NULL, line);
	uint64_t now = info_of_at(e, id, line).next_due_ns - PROBE_DELAY_MS * NS_PER_MS;
	cr_assert_eq(tw_cancel(e, id), TW_OK, "line %d", line);
	return now;
}

/* ---- waiting ---- */

bool wait_eq(_Atomic uint64_t *v, uint64_t want)
{
	uint64_t deadline = test_now_ns() + WAIT_LIMIT_MS * NS_PER_MS;
	while (atomic_load(v) != want) {
		if (test_now_ns() > deadline)
			return false;
		sleep_ms(1);
	}
	return true;
}

bool wait_ge(_Atomic uint64_t *v, uint64_t want)
{
	uint64_t deadline = test_now_ns() + WAIT_LIMIT_MS * NS_PER_MS;
	while (atomic_load(v) < want) {
		if (test_now_ns() > deadline)
			return false;
		sleep_ms(1);
	}
	return true;
}

void gate_init(struct gate *g)
{
	sem_init(&g->sem, 0, 0);
}

void gate_destroy(struct gate *g)
{
	sem_destroy(&g->sem);
}

void gate_open(struct gate *g, unsigned n)
{
	while (n--)
		sem_post(&g->sem);
}

bool gate_pass(struct gate *g, unsigned limit_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += limit_ms / 1000;
	ts.tv_nsec += (long)(limit_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	int rc;
	while ((rc = sem_timedwait(&g->sem, &ts)) == -1 && errno == EINTR) {
	}
	return rc == 0;
}

/* ---- a callback that records and can block ---- */

struct recorder *recorder_new(tw_engine *e)
{
	struct recorder *r = calloc(1, sizeof *r);
	cr_assert_not_null(r);
	r->engine = e;
	r->test_thread = pthread_self();
	gate_init(&r->gate);
	gate_init(&r->started);
	return r;
}

void recorder_free(struct recorder *r)
{
	gate_destroy(&r->gate);
	gate_destroy(&r->started);
	free(r);
}

void note_max(_Atomic uint64_t *max, uint64_t v)
{
	uint64_t old = atomic_load(max);
	while (v > old && !atomic_compare_exchange_weak(max, &old, v)) {
	}
}

int record_callback(const tw_fire *fire, void *arg)
{
	struct recorder *r = arg;
	note_max(&r->max_in_flight, atomic_fetch_add(&r->in_flight, 1) + 1);
	/* Stored before runs counts the run: a test that waits for runs reads them next. */
	if (fire->run >= 1 && fire->run <= MAX_RECORDED) {
		r->due[fire->run - 1] = fire->due_ns;
		r->skipped[fire->run - 1] = fire->skipped;
	}
	uint64_t n = atomic_fetch_add(&r->runs, 1) + 1;
	if (pthread_equal(pthread_self(), r->test_thread))
		atomic_fetch_add(&r->on_test_thread, 1);
	tw_id id = atomic_load(&r->id);
	if ((id && fire->id != id) || fire->run == 0 || (!r->concurrent && fire->run != n))
		atomic_fetch_add(&r->bad_fire, 1);
	atomic_fetch_add(&r->skipped_seen, fire->skipped);
	sem_post(&r->started.sem);
	if (atomic_load(&r->block) && !gate_pass(&r->gate, 30000))
		atomic_fetch_add(&r->gate_timeouts, 1);
	int rc = atomic_load(&r->fail);
	atomic_fetch_sub(&r->in_flight, 1);
	atomic_fetch_add(&r->returned, 1);
	return rc;
}

void record_release(void *arg)
{
	struct recorder *r = arg;
	if (atomic_load(&r->in_flight) || atomic_load(&r->returned) != atomic_load(&r->runs))
		atomic_fetch_add(&r->release_early, 1);
	atomic_fetch_add(&r->releases, 1);
}

tw_id add_recorded_at(tw_engine *e, struct recorder *r, uint64_t delay_ms, uint64_t period_ms,
		      unsigned flags, int line)
{
	tw_task_spec spec = spec_of(delay_ms, period_ms, record_callback, r);
	spec.release = record_release;
	spec.flags = flags;
	r->concurrent = flags & TW_CONCURRENT;
	tw_id id = add_spec_at(e, &spec, line);
	atomic_store(&r->id, id);
	return id;
}

void wait_started_at(struct recorder *r, int line)
{
	cr_assert(gate_pass(&r->started, WAIT_LIMIT_MS), "line %d: no run started within %d ms",
		  line, (int)WAIT_LIMIT_MS);
}

void start_blocked_run_at(tw_engine *e, struct recorder *r, int line)
{
	atomic_store(&r->block, true);
	advance_at(e, 1, line);
	wait_started_at(r, line);
}

tw_id run_blocked_one_shot_at(tw_engine *e, struct recorder *r, int line)
{
	tw_id id = add_recorded_at(e, r, 1, 0, 0, line);
	start_blocked_run_at(e, r, line);
	return id;
}

void assert_recorder_sane(struct recorder *r)
{
	cr_assert_eq(atomic_load(&r->bad_fire), 0, "tw_fire had wrong fields");
	cr_assert_eq(atomic_load(&r->on_test_thread), 0, "a callback ran on the test thread");
	cr_assert_eq(atomic_load(&r->gate_timeouts), 0, "a blocked callback was never let go");
	cr_assert_eq(atomic_load(&r->release_early), 0, "release called while a run was going");
	cr_assert_eq(atomic_load(&r->in_flight), 0, "a run is still going");
}

void destroy_expecting_one_release(tw_engine *e, struct recorder *r)
{
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&r->releases), 1);
	assert_recorder_sane(r);
	recorder_free(r);
	assert_no_leaks();
}

void destroy_checking_recorder(tw_engine *e, struct recorder *r)
{
	tw_engine_destroy(e);
	assert_recorder_sane(r);
	recorder_free(r);
	assert_no_leaks();
}

struct one_task one_task_begin_at(unsigned executors, int line)
{
	struct one_task t;
	t.e = manual_engine_at(executors, line);
	t.r = recorder_new(t.e);
	t.t0 = manual_now_at(t.e, line);
	return t;
}

/* ---- plain counting ---- */

int count_callback(const tw_fire *fire, void *arg)
{
	(void)fire;
	atomic_fetch_add(&((struct counts *)arg)->runs, 1);
	return 0;
}

void count_release(void *arg)
{
	atomic_fetch_add(&((struct counts *)arg)->releases, 1);
}

tw_id add_counted_at(tw_engine *e, struct counts *c, uint64_t delay_ms, uint64_t period_ms,
		     int line)
{
	tw_task_spec spec = spec_of(delay_ms, period_ms, count_callback, c);
	spec.release = count_release;
	return add_spec_at(e, &spec, line);
}

void destroy_expecting_releases_at(tw_engine *e, struct counts *c, uint64_t releases, int line)
{
	tw_engine_destroy(e);
	cr_assert_eq(atomic_load(&c->releases), releases,
		     "line %d: %" PRIu64 " releases, not %" PRIu64, line, atomic_load(&c->releases),
		     releases);
	assert_no_leaks();
}
