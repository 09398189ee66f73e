/*
 * gateway.c - an IoT gateway's session timeouts: a one-shot timer per session, pushed back on
 * every message, and a new one for a session that expired and then talks again.
 *
 * 10 000 sessions time out after 250 ms of silence (seconds, in a real gateway). For 2 s the main
 * thread plays the message reader: each session talks every ~80 ms and has its timer reset, one
 * call each (tw_set_delay) or in batches (tw_set_delay_many); a tenth go quiet for a while.
 * At the end, a status line counts the open sessions with one walk over the timers (tw_list).
 * Exits 1 if anything does not add up.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep with -std=c11 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <tickwheel.h>

enum { SESSIONS = 10000, TIMEOUT_MS = 250, RUN_MS = 2000, BATCH = 128 };
#define MS UINT64_C(1000000)

/* The application's own table, by session number. It outlives every timer and never points at a
 * timer's arg, which the engine frees (release) once the timer is gone. A reset may land after
 * the engine handed a firing out: the callback still runs, but the one-shot is re-armed, not
 * completed. The lock lets the callback tell that from a real expiry. */
struct session {
	pthread_mutex_t lock;
	tw_id timer;
	uint64_t reset_ns; /* the clock before the last reset or add that succeeded */
	bool expired;
};
static struct session table[SESSIONS];

struct conn { /* what one timer owns, freed by release: decoder state, credentials... */
	unsigned session;
};

static atomic_ulong adds, releases, resets, expiries, late_resets, readded, forgotten, bad;
static tw_engine *engine;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int expire(const tw_fire *fire, void *arg)
{
	struct session *s = &table[((struct conn *)arg)->session];
	tw_task_info info;
	pthread_mutex_lock(&s->lock);
	uint64_t earliest = s->reset_ns + TIMEOUT_MS * MS;
	if (fire->due_ns >= earliest) {
		s->expired = true; /* undone if a reset still catches this run (after_reset) */
		expiries++;
	} else { /* a late reset: it must have re-armed the timer, or a live session expired */
		late_resets++;
		bad += tw_get(engine, fire->id, &info) || info.next_due_ns < earliest;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void release(void *arg)
{
	free(arg);
	releases++;
}

static int add_timer(unsigned n, tw_id *id)
{
	struct conn *c = malloc(sizeof *c);
	tw_task_spec spec = { .delay_ms = TIMEOUT_MS, .callback = expire, .release = release };
	if (!(spec.arg = c))
		return -TW_ENOMEM;
	c->session = n;
	int rc = tw_add(engine, &spec, id);
	if (rc)
		free(c); /* a tw_add that fails never calls release */
	adds += !rc;
	return rc;
}

/* Session n's reset returned rc; t is the clock read before it. */
static int after_reset(unsigned n, int rc, uint64_t t)
{
	struct session *s = &table[n];
	tw_id id = 0;
	resets++;
	if (rc == -TW_ESTATE || rc == -TW_ENOTFOUND) { /* ENOTFOUND: ended over retain_ms ago */
		readded++;
		forgotten += rc == -TW_ENOTFOUND;
		if ((rc = add_timer(n, &id)))
			return rc;
	} else if (rc) {
		return rc;
	}
	pthread_mutex_lock(&s->lock);
	bad += id && !s->expired; /* the timer ended, yet the session did not expire */
	s->timer = id ? id : s->timer;
	s->expired = false; /* also when the reset caught the expiry's run and re-armed it */
	s->reset_ns = t;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* Every 1 ms, the next BATCH sessions that talk: even rounds reset them one call each, odd
 * rounds in one call (which any code but these two refuses whole, leaving results as it was).
 * A tenth of the sessions are quiet from 0.5 s to 0.9-1.4 s: some talk again while their ended
 * timer is still retained (-TW_ESTATE), the others after it is forgotten (-TW_ENOTFOUND). */
static int read_messages(void)
{
	uint64_t start = now_ns(), t;
	unsigned next = 0, which[BATCH];
	tw_id ids[BATCH];
	int rc, results[BATCH];
	for (unsigned round = 0; (t = now_ns()) - start < RUN_MS * MS; round++) {
		uint64_t ms = (t - start) / MS;
		for (unsigned k = 0; k < BATCH; next = (next + 1) % SESSIONS)
			if (next % 10 || ms < 500 || ms >= 900 + next / 10 % 6 * 100)
				which[k++] = next;
		for (unsigned k = 0; k < BATCH; k++) {
			ids[k] = table[which[k]].timer;
			results[k] = round % 2 ? 0 : tw_set_delay(engine, ids[k], TIMEOUT_MS);
		}
		rc = round % 2 ? tw_set_delay_many(engine, ids, BATCH, TIMEOUT_MS, results) : 0;
		if (rc && rc != -TW_ESTATE && rc != -TW_ENOTFOUND)
			return rc;
		for (unsigned k = 0; k < BATCH; k++)
			if ((rc = after_reset(which[k], results[k], t)))
				return rc;
		nanosleep(&(struct timespec){ 0, MS }, NULL);
	}
	return 0;
}

/* tw_list's visitor: a live timer is an open session. Nothing is locked while it runs. */
static int count_open(tw_id id, const tw_task_info *info, void *ctx)
{
	(void)id;
	*(unsigned long *)ctx += info->state != TW_PAUSED; /* none is paused here: all of them */
	return 0;
}

int main(void)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.retain_ms = 300; /* how long an ended timer answers -TW_ESTATE, then -TW_ENOTFOUND */
	int rc = tw_engine_create(&cfg, &engine), stop;
	if (rc) {
		fprintf(stderr, "tw_engine_create: %s\n", tw_strerror(rc));
		return 1;
	}
	for (unsigned n = 0; rc == TW_OK && n < SESSIONS; n++) {
		pthread_mutex_init(&table[n].lock, NULL);
		table[n].reset_ns = now_ns();
		rc = add_timer(n, &table[n].timer);
	}
	if (rc || (rc = read_messages()))
		fprintf(stderr, "gateway: %s\n", tw_strerror(rc));
	unsigned long open = 0;
	if (!rc && (rc = tw_list(engine, 0, count_open, &open)) == TW_OK)
		printf("%lu of %d sessions open at the end\n", open, SESSIONS);
	bad += open > SESSIONS;
	if ((stop = tw_engine_stop(engine, 1000))) /* ends and releases every timer left */
		fprintf(stderr, "tw_engine_stop: %s\n", tw_strerror(stop));
	tw_engine_destroy(engine);
	printf("%lu adds, %lu releases, %lu resets, %lu expiries, %lu late resets, %lu re-added (%lu "
	       "forgotten), %lu inconsistencies\n",
	       adds, releases, resets, expiries, late_resets, readded, forgotten, bad);
	return rc || stop || bad || adds != releases || !expiries || !readded || !open;
}
