/*
 * cluster/etcd_http.c - the client's one curl handle: unary POSTs with endpoint failover.
 *
 * A request moves on to the next endpoint only when it cannot have been applied: no
 * connection, or a connect that timed out before a byte was sent. A timeout or a connection
 * lost after sending is the caller's to judge (a put may have been applied), and the next
 * request starts at the next endpoint, since the one that timed out may be stopped or cut off;
 * so does the one after an "unavailable" answer (gRPC 14).
 */
#include "etcd_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

/* curl_global_init is not thread-safe before libcurl 7.84, and clients may be made on any
 * thread; it is never undone, since another client may be alive in another thread. */
static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_ALL);
}

int64_t tw__etcd_now_ms(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts))
		abort(); /* CLOCK_MONOTONIC cannot fail on Linux; no bound holds without it */
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	etcd_client *c = arg;
	size_t len = size * nmemb;
	if (len > ETCD_MAX_ANSWER - c->body_len) {
		c->body_too_big = true;
		return 0;
	}
	if (c->body_len + len + 1 > c->body_cap) {
		size_t cap = c->body_cap ? c->body_cap : 4096;
		while (cap < c->body_len + len + 1)
			cap *= 2;
		char *body = realloc(c->body, cap);
		if (!body) {
			c->body_nomem = true;
			return 0;
		}
		c->body = body;
		c->body_cap = cap;
	}
	memcpy(c->body + c->body_len, data, len);
	c->body_len += len;
	return len;
}

void tw__etcd_client_destroy(etcd_client *c)
{
	if (!c)
		return;
	if (c->multi)
		curl_multi_cleanup(c->multi);
	if (c->easy)
		curl_easy_cleanup(c->easy);
	curl_slist_free_all(c->headers);
	for (size_t i = 0; i < c->n; i++)
		free(c->endpoints[i]);
	free(c->endpoints);
	free(c->body);
	free(c);
}

static int setopt_fail(etcd_client *c, etcd_status *st, CURLcode rc)
{
	tw__etcd_client_destroy(c);
	return tw__etcd_fail(st, rc == CURLE_OUT_OF_MEMORY ? ETCD_ENOMEM : ETCD_EINVAL, "curl: %s",
			     curl_easy_strerror(rc));
}

int tw__etcd_client_create(const char *const *endpoints, size_t n, unsigned timeout_ms,
			   etcd_client **out, etcd_status *st)
{
	*out = NULL;
	tw__etcd_status_ok(st);
	if (!endpoints || !n || !timeout_ms)
		return tw__etcd_fail(st, ETCD_EINVAL, "no endpoints, or a timeout of 0");
	for (size_t i = 0; i < n; i++)
		if (!endpoints[i] || !*endpoints[i])
			return tw__etcd_fail(st, ETCD_EINVAL, "endpoint %zu is empty", i);
	if (pthread_once(&global_once, global_init) || global_rc != CURLE_OK)
		return tw__etcd_fail(st, ETCD_ENOMEM, "curl_global_init failed");
	etcd_client *c = calloc(1, sizeof(*c));
	if (!c)
		return tw__etcd_fail(st, ETCD_ENOMEM, "allocating a client");
	c->timeout_ms = timeout_ms;
	c->endpoints = calloc(n, sizeof(*c->endpoints));
	if (!c->endpoints) {
		free(c);
		return tw__etcd_fail(st, ETCD_ENOMEM, "allocating a client");
	}
	for (; c->n < n; c->n++) {
		/* "http://host:port/" and "http://host:port" alike: paths start with '/'. */
		size_t len = strlen(endpoints[c->n]);
		while (len && endpoints[c->n][len - 1] == '/')
			len--;
		c->endpoints[c->n] = strndup(endpoints[c->n], len);
		if (!c->endpoints[c->n])
			return setopt_fail(c, st, CURLE_OUT_OF_MEMORY);
	}
	c->easy = curl_easy_init();
	if (!c->easy)
		return setopt_fail(c, st, CURLE_OUT_OF_MEMORY);
	/* Without "Expect:", curl holds a body over 1 KiB back for a 100-continue round trip. */
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	if (h)
		c->headers = h;
	if (!h || !(h = curl_slist_append(c->headers, "Expect:")))
		return setopt_fail(c, st, CURLE_OUT_OF_MEMORY);
	c->headers = h;
	CURLcode rc;
	if ((rc = curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L)) ||
	    (rc = curl_easy_setopt(c->easy, CURLOPT_TCP_NODELAY, 1L)) ||
	    (rc = curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, c->headers)) ||
	    (rc = curl_easy_setopt(c->easy, CURLOPT_ERRORBUFFER, c->errbuf)) ||
	    (rc = curl_easy_setopt(c->easy, CURLOPT_PROTOCOLS_STR, "http,https")) ||
	    (rc = curl_easy_setopt(c->easy, CURLOPT_POST, 1L)))
		return setopt_fail(c, st, rc);
	*out = c;
	return 0;
}

const char *tw__etcd_client_endpoint(const etcd_client *c)
{
	return c->endpoints[c->cur];
}

int tw__etcd_http_prepare(etcd_client *c, size_t endpoint, const char *path, const char *body,
			  long timeout_ms, long connect_ms, etcd_status *st)
{
	size_t base = strlen(c->endpoints[endpoint]), plen = strlen(path);
	char *url = malloc(base + plen + 1);
	if (!url)
		return tw__etcd_fail(st, ETCD_ENOMEM, "building a URL");
	memcpy(url, c->endpoints[endpoint], base);
	memcpy(url + base, path, plen + 1);
	c->body_len = 0;
	c->body_too_big = c->body_nomem = false;
	c->errbuf[0] = '\0';
	/* curl copies the URL; the body is read from our buffer, alive for the transfer. */
	CURLcode rc;
	if ((rc = curl_easy_setopt(c->easy, CURLOPT_URL, url)) ||
	    (rc = curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, body)) ||
	    (rc = curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE_LARGE,
				   (curl_off_t)strlen(body))) ||
	    (rc = curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, timeout_ms)) ||
	    (rc = curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS, connect_ms)) ||
	    (rc = curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_body)) ||
	    (rc = curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c))) {
		free(url);
		return tw__etcd_fail(st, rc == CURLE_OUT_OF_MEMORY ? ETCD_ENOMEM : ETCD_EINVAL,
				     "curl: %s", curl_easy_strerror(rc));
	}
	free(url);
	return 0;
}

bool tw__etcd_http_unsent(etcd_client *c, CURLcode rc)
{
	if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)
		return true;
	long sent = 0;
	return rc == CURLE_OPERATION_TIMEDOUT &&
	       curl_easy_getinfo(c->easy, CURLINFO_REQUEST_SIZE, &sent) == CURLE_OK && sent == 0;
}

void tw__etcd_http_error(etcd_client *c, CURLcode rc, etcd_status *st)
{
	const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc);
	if (c->body_too_big)
		tw__etcd_fail(st, ETCD_EPARSE, "an answer over %zu bytes", ETCD_MAX_ANSWER);
	else if (c->body_nomem || rc == CURLE_OUT_OF_MEMORY)
		tw__etcd_fail(st, ETCD_ENOMEM, "receiving an answer");
	else if (rc == CURLE_OPERATION_TIMEDOUT)
		tw__etcd_fail(st, ETCD_ETIMEOUT, "%s: %s", c->endpoints[c->cur], why);
	else
		tw__etcd_fail(st, ETCD_ECONNECT, "%s: %s", c->endpoints[c->cur], why);
}

/* The answer of a completed transfer: an error object (whatever the status) into *st, a
 * status other than 200 as EHTTP, else the JSON. */
static int answer_of(etcd_client *c, json_t **answer, etcd_status *st)
{
	long status = 0;
	if (curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
		return tw__etcd_fail(st, ETCD_EHTTP, "no HTTP status");
	if (st)
		st->http_status = status;
	json_error_t err;
	json_t *root = json_loadb(c->body ? c->body : "", c->body_len, 0, &err);
	if (!root) {
		if (status != 200)
			return tw__etcd_fail(st, ETCD_EHTTP, "HTTP %ld from %s", status,
					     c->endpoints[c->cur]);
		return tw__etcd_fail(st, ETCD_EPARSE, "answer: %s", err.text);
	}
	if (tw__etcd_decode_error(root, st)) {
		json_decref(root);
		return -1;
	}
	if (status != 200) {
		json_decref(root);
		return tw__etcd_fail(st, ETCD_EHTTP, "HTTP %ld from %s", status,
				     c->endpoints[c->cur]);
	}
	*answer = root;
	return 0;
}

int tw__etcd_call(etcd_client *c, const char *path, const json_t *body, json_t **answer,
		  etcd_status *st)
{
	*answer = NULL;
	tw__etcd_status_ok(st);
	char *text = json_dumps(body, JSON_COMPACT);
	if (!text)
		return tw__etcd_fail(st, ETCD_ENOMEM, "encoding a request");
	int64_t deadline = tw__etcd_now_ms() + c->timeout_ms;
	size_t first = c->cur;
	int ret = -1;
	for (size_t tries = 0;; tries++) {
		int64_t left = deadline - tw__etcd_now_ms();
		if (tries == c->n || left <= 0) {
			if (left <= 0)
				tw__etcd_fail(st, ETCD_ETIMEOUT, "no endpoint answered in %u ms",
					      c->timeout_ms);
			/* else *st holds the last endpoint's refusal */
			break;
		}
		/* The connect of each endpoint left gets its share, so that one that drops
		 * SYNs does not use up the time of the others. */
		long connect_ms = (long)(left / (int64_t)(c->n - tries));
		size_t idx = (first + tries) % c->n;
		if (tw__etcd_http_prepare(c, idx, path, text, (long)left,
					  connect_ms > 0 ? connect_ms : 1, st))
			break;
		CURLcode rc = curl_easy_perform(c->easy);
		if (rc == CURLE_OK) {
			c->cur = idx;
			ret = answer_of(c, answer, st);
			/* Unavailable ("no leader", "leader changed", "request timed out"): a
			 * member cut off from the others keeps saying so; ask another next. */
			if (ret && st && st->kind == ETCD_EGRPC && st->grpc_code == 14)
				c->cur = (idx + 1) % c->n;
			break;
		}
		bool unsent = tw__etcd_http_unsent(c, rc);
		c->cur = idx;
		tw__etcd_http_error(c, rc, st);
		if (!unsent || c->body_too_big || c->body_nomem) {
			c->cur = (idx + 1) % c->n;
			break;
		}
		if (st && tries + 1 == c->n)
			st->kind =
				ETCD_ECONNECT; /* every endpoint refused or could not be reached */
	}
	free(text);
	return ret;
}
