/*
 * tests/cluster/test_etcd_failover.c - the client when members die, stop or were never there:
 * failover only where nothing was sent, timeouts within the client's bound.
 */
#include "client_test.h"

TestSuite(failover, .init = start, .fini = stop, .timeout = 60);

Test(failover, failover_past_a_killed_member)
{
	int leader = etcd_harness_wait_leader(H, 5000);
	cr_assert_geq(leader, 0, "no leader");
	/* A follower first, so that no election stands between its death and the next write. */
	int f = (leader + 1) % 3, o = (leader + 2) % 3;
	const char *eps[3] = { etcd_harness_endpoints(H)[f], etcd_harness_endpoints(H)[leader],
			       etcd_harness_endpoints(H)[o] };
	etcd_client *c;
	OK(tw__etcd_client_create(eps, 3, 3000, &c, st));
	put_str(c, "f/1", "before", 0, NULL);
	cr_assert_str_eq(tw__etcd_client_endpoint(c), eps[0]);
	cr_assert_eq(etcd_harness_signal(H, f, SIGKILL), 0);
	cr_assert_eq(etcd_harness_pid(H, f), 0);
	for (int i = 0; i < 5; i++)
		put_str(c, "f/1", "after", 0, NULL);
	cr_assert_str_neq(tw__etcd_client_endpoint(c), eps[0]);

	/* A watch too starts at the next member when the first refuses. */
	etcd_client *w;
	OK(tw__etcd_client_create(eps, 3, 3000, &w, st));
	seen s = { .stop_after = 1 };
	etcd_status st;
	etcd_watch_req req = { .key = "f/1", .key_len = 3, .start_revision = 1 };
	cr_assert_eq(tw__etcd_watch(w, &req, collect, &s, &st), -1);
	cr_assert_eq(st.kind, ETCD_ECANCELED, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert(s.created == 1 && s.n >= 1 && !strcmp(s.key[0], "f/1"));
	cr_assert_str_neq(tw__etcd_client_endpoint(w), eps[0]);
	tw__etcd_client_destroy(w);

	/* Back with its data: it catches up on what it missed. */
	cr_assert_eq(etcd_harness_restart(H, f), 0);
	cr_assert_eq(etcd_harness_wait_healthy(H, f, 10000), 0, "member %d did not come back", f);
	etcd_client *back;
	OK(tw__etcd_client_create(&eps[0], 1, 3000, &back, st));
	int64_t deadline = now_ms() + 5000;
	for (;;) {
		etcd_range_result r;
		etcd_range_req req = { .key = "f/1", .key_len = 3 };
		OK(tw__etcd_range(back, &req, &r, st));
		bool caught_up = r.count == 1 && !strcmp((char *)r.kvs[0].value, "after");
		tw__etcd_range_result_free(&r);
		if (caught_up)
			break;
		cr_assert_lt(now_ms(), deadline, "the restarted member did not catch up");
		sleep_ms(20);
	}
	tw__etcd_client_destroy(back);
	tw__etcd_client_destroy(c);
}

Test(failover, a_killed_leader_is_replaced)
{
	int old = etcd_harness_wait_leader(H, 5000);
	cr_assert_geq(old, 0, "no leader");
	cr_assert_eq(etcd_harness_signal(H, old, SIGKILL), 0);
	int now = etcd_harness_wait_leader(H, 5000);
	cr_assert(now >= 0 && now != old, "no new leader (%d)", now);
	/* Writes go through again once the new leader is known; the client may first meet the
	 * dead member (refused: next endpoint) or an election (an error for the caller). */
	int64_t deadline = now_ms() + 5000;
	etcd_status st;
	while (tw__etcd_put(C, "after-election", 14, "x", 1, 0, NULL, &st)) {
		cr_assert_lt(now_ms(), deadline, "no write after the election: %s", st.message);
		sleep_ms(50);
	}
}

Test(failover, every_member_stopped_times_out)
{
	etcd_client *c;
	etcd_status st;
	OK(tw__etcd_client_create(etcd_harness_endpoints(H), 3, 500, &c, st));
	put_str(c, "s/1", "x", 0, NULL);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(etcd_harness_signal(H, i, SIGSTOP), 0);
	int64_t t0 = now_ms();
	int rc = tw__etcd_put(c, "s/1", 3, "y", 1, 0, NULL, &st);
	int64_t took = now_ms() - t0;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(etcd_harness_signal(H, i, SIGCONT), 0);
	cr_assert_eq(rc, -1);
	cr_assert_eq(st.kind, ETCD_ETIMEOUT, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert(took >= 450 && took < 1500, "the timeout took %lld ms", (long long)took);
	/* The stopped endpoint is not the next one tried. */
	cr_assert_str_neq(tw__etcd_client_endpoint(c), etcd_harness_endpoints(H)[0]);
	tw__etcd_client_destroy(c);
}

Test(transport, every_endpoint_refusing)
{
	/* Ports just found free: nothing listens there. */
	char eps[3][64];
	const char *list[3];
	for (int i = 0; i < 3; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t len = sizeof(a);
		cr_assert(fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
			  !getsockname(fd, (struct sockaddr *)&a, &len));
		snprintf(eps[i], sizeof(eps[i]), "http://127.0.0.1:%d", ntohs(a.sin_port));
		list[i] = eps[i];
		cr_assert_eq(close(fd), 0);
	}
	etcd_client *c;
	etcd_status st;
	OK(tw__etcd_client_create(list, 3, 2000, &c, st));
	etcd_range_result r;
	etcd_range_req req = { .key = "k", .key_len = 1 };
	cr_assert_eq(tw__etcd_range(c, &req, &r, &st), -1);
	cr_assert_eq(st.kind, ETCD_ECONNECT, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	seen s = { 0 };
	etcd_watch_req w = { .key = "k", .key_len = 1 };
	cr_assert_eq(tw__etcd_watch(c, &w, collect, &s, &st), -1);
	cr_assert_eq(st.kind, ETCD_ECONNECT, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	tw__etcd_client_destroy(c);

	cr_assert_eq(tw__etcd_client_create(list, 0, 2000, &c, &st), -1);
	cr_assert_eq(st.kind, ETCD_EINVAL);
}
