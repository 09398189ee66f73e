/*
 * tests/cluster/test_etcd_kv.c - the transport's calls against a real 3-member etcd: keys,
 * transactions, leases, the member list, and the errors etcd answers with.
 */
#include "client_test.h"

TestSuite(kv, .init = start, .fini = stop, .timeout = 60);

Test(kv, put_range_paging_delete)
{
	int64_t first = 0, rev = 0;
	char key[16], value[16];
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "p/%d", i);
		snprintf(value, sizeof(value), "v%d", i);
		put_str(C, key, value, 0, &rev);
		if (!first)
			first = rev;
	}
	cr_assert_eq(rev, first + 9);
	put_str(C, "p0", "outside", 0, NULL);

	/* Pages of 3 through the prefix, each starting after the last key seen. */
	uint8_t *end;
	size_t end_len, seen = 0;
	cr_assert_eq(tw__etcd_prefix_end("p/", 2, &end, &end_len), 0);
	/* etcd's paging: the next page starts at the last key with a 0 byte added. */
	char from[32] = "p/";
	size_t from_len = 2;
	for (bool more = true; more;) {
		etcd_range_result r;
		etcd_range_req req = { .key = from,
				       .key_len = from_len,
				       .range_end = end,
				       .range_end_len = end_len,
				       .limit = 3 };
		OK(tw__etcd_range(C, &req, &r, st));
		more = r.more;
		cr_assert_eq(r.total, (int64_t)(10 - seen));
		cr_assert(r.count == 3 || (!more && r.count == 1));
		for (size_t i = 0; i < r.count; i++, seen++) {
			snprintf(key, sizeof(key), "p/%zu", seen);
			cr_assert_str_eq((char *)r.kvs[i].key, key);
			snprintf(value, sizeof(value), "v%zu", seen);
			cr_assert_str_eq((char *)r.kvs[i].value, value);
			cr_assert_eq(r.kvs[i].mod_revision, first + (int64_t)seen);
		}
		const etcd_kv *last = &r.kvs[r.count - 1];
		memcpy(from, last->key, last->key_len);
		from[last->key_len] = '\0';
		from_len = last->key_len + 1;
		tw__etcd_range_result_free(&r);
	}
	cr_assert_eq(seen, 10);

	/* keys_only, count_only, the key alone, and an older revision. */
	etcd_range_result r;
	etcd_range_req req = { .key = "p/",
			       .key_len = 2,
			       .range_end = end,
			       .range_end_len = end_len,
			       .keys_only = true };
	OK(tw__etcd_range(C, &req, &r, st));
	cr_assert(r.count == 10 && r.kvs[0].value == NULL && r.kvs[0].key_len == 3);
	tw__etcd_range_result_free(&r);
	req.keys_only = false;
	req.count_only = true;
	OK(tw__etcd_range(C, &req, &r, st));
	cr_assert(r.count == 0 && r.total == 10);
	tw__etcd_range_result_free(&r);
	put_str(C, "p/3", "changed", 0, NULL);
	range_str("p/3", NULL, 0, &r);
	cr_assert(r.count == 1 && !strcmp((char *)r.kvs[0].value, "changed"));
	cr_assert_eq(r.kvs[0].version, 2);
	tw__etcd_range_result_free(&r);
	etcd_range_req old = { .key = "p/3", .key_len = 3, .revision = first + 3 };
	OK(tw__etcd_range(C, &old, &r, st));
	cr_assert(r.count == 1 && !strcmp((char *)r.kvs[0].value, "v3"));
	tw__etcd_range_result_free(&r);

	int64_t deleted = -1;
	OK(tw__etcd_delete(C, "p/0", 3, NULL, 0, &deleted, st));
	cr_assert_eq(deleted, 1);
	OK(tw__etcd_delete(C, "p/0", 3, NULL, 0, &deleted, st));
	cr_assert_eq(deleted, 0);
	OK(tw__etcd_delete(C, "p/", 2, end, end_len, &deleted, st));
	cr_assert_eq(deleted, 9);
	range_str("p", "q", 0, &r);
	cr_assert(r.count == 1 && !strcmp((char *)r.kvs[0].key, "p0"));
	tw__etcd_range_result_free(&r);
	free(end);

	etcd_status st;
	cr_assert_eq(tw__etcd_put(C, "", 0, "v", 1, 0, NULL, &st), -1);
	cr_assert_eq(st.kind, ETCD_EINVAL);
}

/* Create-if-absent: the claim a replica makes for a fire time. */
static int claim(const char *key, const char *owner, etcd_txn_result *t)
{
	etcd_compare cmp = { .target = ETCD_CMP_CREATE,
			     .result = ETCD_CMP_EQUAL,
			     .key = key,
			     .key_len = strlen(key),
			     .number = 0 };
	etcd_op put = { .kind = ETCD_OP_PUT,
			.key = key,
			.key_len = strlen(key),
			.value = owner,
			.value_len = strlen(owner) };
	etcd_op get = { .kind = ETCD_OP_RANGE, .key = key, .key_len = strlen(key) };
	etcd_status st;
	int rc = tw__etcd_txn(C, &cmp, 1, &put, 1, &get, 1, t, &st);
	cr_assert_eq(rc, 0, "txn: %s", st.message);
	return t->succeeded;
}

Test(kv, txn_branches)
{
	etcd_txn_result t;
	cr_assert(claim("job/1@100", "replica-a", &t));
	cr_assert_eq(t.count, 1);
	cr_assert_eq(t.results[0].kind, ETCD_OP_PUT);
	cr_assert_eq(t.results[0].revision, t.revision);
	int64_t won_at = t.revision;
	tw__etcd_txn_result_free(&t);

	cr_assert(!claim("job/1@100", "replica-b", &t));
	cr_assert_eq(t.count, 1);
	cr_assert_eq(t.results[0].kind, ETCD_OP_RANGE);
	cr_assert_str_eq((char *)t.results[0].range.kvs[0].value, "replica-a");
	cr_assert_eq(t.results[0].range.kvs[0].create_revision, won_at);
	tw__etcd_txn_result_free(&t);

	/* VALUE and MOD compares; a delete in the branch taken. */
	etcd_compare cmp[2] = {
		{ .target = ETCD_CMP_VALUE,
		  .result = ETCD_CMP_EQUAL,
		  .key = "job/1@100",
		  .key_len = 9,
		  .value = "replica-a",
		  .value_len = 9 },
		{ .target = ETCD_CMP_MOD,
		  .result = ETCD_CMP_EQUAL,
		  .key = "job/1@100",
		  .key_len = 9,
		  .number = won_at },
	};
	etcd_op del = { .kind = ETCD_OP_DELETE, .key = "job/1@100", .key_len = 9 };
	etcd_status st;
	OK(tw__etcd_txn(C, cmp, 2, &del, 1, NULL, 0, &t, st));
	cr_assert(t.succeeded && t.count == 1 && t.results[0].kind == ETCD_OP_DELETE);
	cr_assert_eq(t.results[0].deleted, 1);
	tw__etcd_txn_result_free(&t);
	OK(tw__etcd_txn(C, cmp, 2, &del, 1, NULL, 0, &t, st));
	cr_assert(!t.succeeded && t.count == 0);
	tw__etcd_txn_result_free(&t);

	cmp[0].target = 42;
	cr_assert_eq(tw__etcd_txn(C, cmp, 1, NULL, 0, NULL, 0, &t, &st), -1);
	cr_assert_eq(st.kind, ETCD_EINVAL);
}

Test(kv, txn_count_only_range)
{
	put_str(C, "n/1", "a", 0, NULL);
	put_str(C, "n/2", "b", 0, NULL);
	put_str(C, "n/3", "c", 0, NULL);
	etcd_op ops[2] = {
		{ .kind = ETCD_OP_RANGE,
		  .key = "n/",
		  .key_len = 2,
		  .range_end = "n0",
		  .range_end_len = 2,
		  .count_only = true },
		{ .kind = ETCD_OP_RANGE,
		  .key = "n/",
		  .key_len = 2,
		  .range_end = "n0",
		  .range_end_len = 2 },
	};
	etcd_txn_result t;
	OK(tw__etcd_txn(C, NULL, 0, ops, 2, NULL, 0, &t, st));
	cr_assert(t.succeeded && t.count == 2);
	cr_assert_eq(t.results[0].range.total, 3);
	cr_assert_eq(t.results[0].range.count, 0, "the count alone, no keys");
	cr_assert(t.results[1].range.total == 3 && t.results[1].range.count == 3);
	tw__etcd_txn_result_free(&t);
}

Test(kv, leases)
{
	int64_t id, ttl;
	etcd_range_result r;
	etcd_status st;
	OK(tw__etcd_lease_grant(C, 5, &id, &ttl, st));
	cr_assert(id > 0 && ttl == 5);
	OK(tw__etcd_lease_keepalive(C, id, &ttl, st));
	cr_assert_eq(ttl, 5);
	put_str(C, "owned", "x", id, NULL);
	range_str("owned", NULL, 0, &r);
	cr_assert(r.count == 1 && r.kvs[0].lease == id);
	tw__etcd_range_result_free(&r);
	OK(tw__etcd_lease_revoke(C, id, st));
	range_str("owned", NULL, 0, &r);
	cr_assert_eq(r.count, 0, "a key of a revoked lease stays");
	tw__etcd_range_result_free(&r);
	/* Revoking again, and renewing or putting with a revoked lease. */
	OK(tw__etcd_lease_revoke(C, id, st));
	cr_assert_eq(tw__etcd_lease_keepalive(C, id, &ttl, &st), -1);
	cr_assert_eq(st.kind, ETCD_ENOLEASE, "%s", tw__etcd_error_name(st.kind));
	cr_assert_eq(tw__etcd_put(C, "k", 1, "v", 1, id, NULL, &st), -1);
	cr_assert_eq(st.kind, ETCD_ENOLEASE, "%s", tw__etcd_error_name(st.kind));

	/* Expiry: a 2 s lease left alone is gone once its TTL has passed. */
	OK(tw__etcd_lease_grant(C, 2, &id, &ttl, st));
	cr_assert_eq(ttl, 2);
	put_str(C, "expiring", "x", id, NULL);
	sleep_ms(2600);
	cr_assert_eq(tw__etcd_lease_keepalive(C, id, &ttl, &st), -1);
	cr_assert_eq(st.kind, ETCD_ENOLEASE, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	range_str("expiring", NULL, 0, &r);
	cr_assert_eq(r.count, 0);
	tw__etcd_range_result_free(&r);
}

Test(kv, lease_and_http_errors)
{
	etcd_status st;
	int64_t ttl;
	cr_assert_eq(tw__etcd_lease_keepalive(C, 12345, &ttl, &st), -1);
	cr_assert_eq(st.kind, ETCD_ENOLEASE, "%s", tw__etcd_error_name(st.kind));
	OK(tw__etcd_lease_revoke(C, 12345, st));
	cr_assert_eq(tw__etcd_lease_grant(C, 0, &ttl, NULL, &st), -1);
	cr_assert_eq(st.kind, ETCD_EINVAL);

	/* Not the gateway: a path etcd does not serve answers 404 in plain text. */
	char ep[96];
	snprintf(ep, sizeof(ep), "%s/elsewhere", etcd_harness_endpoints(H)[0]);
	const char *eps[] = { ep };
	etcd_client *c;
	OK(tw__etcd_client_create(eps, 1, 2000, &c, st));
	etcd_range_result r;
	etcd_range_req req = { .key = "k", .key_len = 1 };
	cr_assert_eq(tw__etcd_range(c, &req, &r, &st), -1);
	cr_assert_eq(st.kind, ETCD_EHTTP, "%s: %s", tw__etcd_error_name(st.kind), st.message);
	cr_assert_eq(st.http_status, 404);
	tw__etcd_client_destroy(c);
}

Test(kv, member_list)
{
	etcd_member *m;
	size_t n;
	OK(tw__etcd_member_list(C, &m, &n, st));
	cr_assert_eq(n, 3);
	bool found[3] = { false };
	for (size_t i = 0; i < n; i++) {
		cr_assert(m[i].id != 0 && !m[i].is_learner);
		cr_assert_eq(m[i].nclient, 1);
		cr_assert(m[i].name[0] == 'm' && m[i].name[1] >= '0' && m[i].name[1] <= '2');
		int at = m[i].name[1] - '0';
		cr_assert_str_eq(m[i].client_urls[0], etcd_harness_endpoints(H)[at]);
		found[at] = true;
	}
	cr_assert(found[0] && found[1] && found[2]);
	tw__etcd_member_list_free(m, n);
}

Test(kv, binary_keys_and_one_connection)
{
	/* Keys and values are bytes: 0x00 and 0xff travel as base64 both ways. */
	const char key[] = "bin/\x00\xff\x01", value[] = "\xff\x00v";
	OK(tw__etcd_put(C, key, sizeof(key) - 1, value, sizeof(value) - 1, 0, NULL, st));
	uint8_t *end;
	size_t end_len;
	cr_assert_eq(tw__etcd_prefix_end("bin/\x00", 5, &end, &end_len), 0);
	etcd_range_result r;
	etcd_range_req req = {
		.key = "bin/\x00", .key_len = 5, .range_end = end, .range_end_len = end_len
	};
	OK(tw__etcd_range(C, &req, &r, st));
	cr_assert_eq(r.count, 1);
	cr_assert(r.kvs[0].key_len == sizeof(key) - 1 &&
		  !memcmp(r.kvs[0].key, key, sizeof(key) - 1));
	cr_assert(r.kvs[0].value_len == sizeof(value) - 1 &&
		  !memcmp(r.kvs[0].value, value, sizeof(value) - 1));
	tw__etcd_range_result_free(&r);
	free(end);

	/* Request after request on the connection the first one made. */
	for (int i = 0; i < 5; i++) {
		OK(tw__etcd_put(C, "again", 5, "x", 1, 0, NULL, st));
		long connects = -1;
		cr_assert_eq(curl_easy_getinfo(C->easy, CURLINFO_NUM_CONNECTS, &connects),
			     CURLE_OK);
		cr_assert_eq(connects, 0, "request %d opened %ld connection(s)", i, connects);
	}
}

Test(kv, a_value_near_etcd_s_request_limit)
{
	/* 1 MiB of bytes is 1.33 MiB of base64: under etcd's 1.5 MiB request limit, and an
	 * answer that arrives in many reads. */
	size_t len = (size_t)1 << 20;
	uint8_t *value = malloc(len);
	cr_assert_not_null(value);
	uint32_t x = 12345;
	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		value[i] = (uint8_t)(x >> 24);
	}
	OK(tw__etcd_put(C, "big", 3, value, len, 0, NULL, st));
	etcd_range_result r;
	range_str("big", NULL, 0, &r);
	cr_assert(r.count == 1 && r.kvs[0].value_len == len);
	cr_assert_eq(memcmp(r.kvs[0].value, value, len), 0);
	tw__etcd_range_result_free(&r);
	free(value);
}
