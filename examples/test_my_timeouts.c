/*
 * test_my_timeouts.c - testing your own timer-driven code with the manual clock: time moves only
 * when the test says (tw_advance), and tw_quiesce waits until the callbacks that the advance set
 * off have returned, so a test asserts exactly which ms things happen at, without sleeping.
 *
 * The code under test, first, is a request sent again with backoff until it is answered: a
 * one-shot timer per request, re-armed from its own callback. Build it as a Criterion test:
 *   cc test_my_timeouts.c $(pkg-config --cflags --libs tickwheel criterion) && ./a.out
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdbool.h>

#include <tickwheel.h>

/* ---- the code under test: retry with backoff ---- */

/* Sent once, then RETRIES more times, each after waiting twice as long as the previous time for
 * an answer; failed if the last wait passes too. */
enum { FIRST_WAIT_MS = 100, RETRIES = 3 };

struct request {
	pthread_mutex_t lock; /* the answer (any thread) against the timeout (an executor) */
	tw_engine *engine;
	tw_id timer;
	unsigned sends;
	bool answered, failed;
	void (*send)(struct request *r); /* the transport */
};

static int on_timeout(const tw_fire *fire, void *arg)
{
	struct request *r = arg;
	int rc = TW_OK;
	pthread_mutex_lock(&r->lock);
	if (!r->answered && r->sends > RETRIES) {
		r->failed = true;
	} else if (!r->answered) {
		/* Set from its own run, a one-shot's delay re-arms it instead of letting it complete. */
		rc = tw_set_delay(r->engine, fire->id, (uint64_t)FIRST_WAIT_MS << r->sends);
		r->sends++;
		r->send(r);
	}
	pthread_mutex_unlock(&r->lock);
	return rc != TW_OK; /* counted by the engine as a failed run */
}

/* r must outlive its timer: until the engine is destroyed, or answered. */
static int request_start(struct request *r, tw_engine *e, void (*send)(struct request *r))
{
	*r = (struct request){ .engine = e, .sends = 1, .send = send };
	pthread_mutex_init(&r->lock, NULL);
	tw_task_spec spec = { .delay_ms = FIRST_WAIT_MS, .callback = on_timeout, .arg = r };
	pthread_mutex_lock(&r->lock);
	int rc = tw_add(e, &spec, &r->timer);
	if (rc == TW_OK)
		send(r);
	pthread_mutex_unlock(&r->lock);
	return rc;
}

/* Returns TW_OK if the answer came in time, -TW_ESTATE if the request had failed already. */
static int request_answered(struct request *r)
{
	pthread_mutex_lock(&r->lock);
	bool failed = r->failed;
	r->answered = true;
	pthread_mutex_unlock(&r->lock);
	if (failed)
		return -TW_ESTATE;
	int rc = tw_cancel(r->engine, r->timer);
	return rc == -TW_ESTATE ? TW_OK : rc; /* it fired and, seeing the answer, completed */
}

/* ---- the tests ---- */

static unsigned sends; /* by the fake transport; read once the callbacks have returned */

static void fake_send(struct request *r)
{
	(void)r;
	sends++;
}

static tw_engine *manual_engine(void)
{
	tw_config cfg;
	tw_config_init(&cfg);
	cfg.manual_clock = true;
	tw_engine *e;
	cr_assert_eq(tw_engine_create(&cfg, &e), TW_OK);
	return e;
}

/* Moves time on and waits for the callbacks due meanwhile to return. (A delay of 0 is due at the
 * current manual time and may run before any advance: the delays here are at least 1 ms.) */
static void step(tw_engine *e, uint64_t ms)
{
	cr_assert_eq(tw_advance(e, ms), TW_OK);
	cr_assert_eq(tw_quiesce(e), TW_OK);
}

Test(retry, resends_at_100_300_700_ms_and_fails_at_1500)
{
	tw_engine *e = manual_engine();
	struct request r;
	cr_assert_eq(request_start(&r, e, fake_send), TW_OK);
	cr_assert_eq(sends, 1);
	const uint64_t waits[] = { 100, 200, 400 };
	for (unsigned i = 0; i < 3; i++) { /* each resend comes at its ms, not one earlier */
		step(e, waits[i] - 1);
		cr_assert_eq(sends, i + 1, "resend %u came early", i + 1);
		step(e, 1);
		cr_assert_eq(sends, i + 2, "resend %u did not come at its time", i + 1);
	}
	step(e, 799);
	cr_assert(!r.failed);
	step(e, 1);
	cr_assert(r.failed);
	step(e, 60000);
	cr_assert_eq(sends, 4);
	cr_assert_eq(request_answered(&r), -TW_ESTATE);
	tw_engine_destroy(e); /* before r goes: the timer's arg points at it */
}

Test(retry, an_answer_stops_the_resends)
{
	tw_engine *e = manual_engine();
	struct request r;
	cr_assert_eq(request_start(&r, e, fake_send), TW_OK);
	step(e, 150);
	cr_assert_eq(sends, 2);
	cr_assert_eq(request_answered(&r), TW_OK);
	step(e, 60000);
	cr_assert_eq(sends, 2);
	cr_assert(!r.failed);
	tw_engine_destroy(e);
}

/* One tw_advance of 1 s is not 1000 of 1 ms: the callbacks it sets off run with the clock at
 * the end of the step, and a delay set there counts from there. Step no longer than the shortest
 * delay under test. */
Test(retry, a_long_step_moves_the_resends_later)
{
	tw_engine *e = manual_engine();
	struct request r;
	cr_assert_eq(request_start(&r, e, fake_send), TW_OK);
	step(e, 1000); /* the first wait ended at 100 ms, but the resend is re-armed at 1000 */
	cr_assert_eq(sends, 2);
	step(e, 199);
	cr_assert_eq(sends, 2);
	step(e, 1);
	cr_assert_eq(sends, 3);
	tw_engine_destroy(e);
}
