/*
 * cluster/etcd_watch.c - a watch: POST /v3/watch {"create_request":...} and read the answer's
 * stream of {"result":...} objects for as long as the watch lasts. It runs on the client's
 * handle through curl's multi interface, so that the loop wakes at least every 100 ms to look
 * at the stop flag: curl_easy_perform would block until the next byte from etcd.
 */
#include "etcd_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	etcd_client *c;
	etcd_stream stream;
	etcd_watch_fn fn;
	void *ctx;
	etcd_status *st;
	bool created, ended;
} watch_state;

static void end_watch(watch_state *w)
{
	w->ended = true;
}

/* Each whole message goes to fn as soon as it is in; the transfer is aborted (return 0) once
 * the watch has ended, whatever still comes. */
static size_t on_stream(char *data, size_t size, size_t nmemb, void *arg)
{
	watch_state *w = arg;
	size_t len = size * nmemb;
	if (w->ended)
		return 0;
	if (!w->st->http_status &&
	    curl_easy_getinfo(w->c->easy, CURLINFO_RESPONSE_CODE, &w->st->http_status) != CURLE_OK)
		w->st->http_status = 0;
	if (tw__etcd_stream_feed(&w->stream, data, len, w->st)) {
		end_watch(w);
		return 0;
	}
	for (;;) {
		json_t *obj;
		int rc = tw__etcd_stream_next(&w->stream, &obj, w->st);
		if (rc == 0)
			return len;
		if (rc < 0) {
			if (w->st->http_status != 200)
				tw__etcd_fail(w->st, ETCD_EHTTP, "watch: HTTP %ld",
					      w->st->http_status);
			end_watch(w);
			return 0;
		}
		etcd_watch_msg msg;
		rc = tw__etcd_decode_watch(obj, &msg, w->st);
		json_decref(obj);
		if (rc) {
			end_watch(w);
			return 0;
		}
		w->created |= msg.created;
		if (w->fn(&msg, w->ctx))
			tw__etcd_fail(w->st, ETCD_ECANCELED, "stopped by its callback");
		else if (msg.canceled && msg.compact_revision)
			tw__etcd_fail(w->st, ETCD_ECOMPACTED,
				      "compacted up to revision %" PRId64
				      ": read the range afresh and watch from its revision + 1",
				      msg.compact_revision);
		else if (msg.canceled)
			tw__etcd_fail(w->st, ETCD_ECANCELED, "canceled by etcd: %s",
				      msg.cancel_reason);
		else {
			tw__etcd_watch_msg_free(&msg);
			continue;
		}
		tw__etcd_watch_msg_free(&msg);
		end_watch(w);
		return 0;
	}
}

static char *watch_body(const etcd_watch_req *req, etcd_status *st)
{
	json_t *root = json_object(), *create = json_object();
	char *text = NULL;
	if (!root || !create) {
		json_decref(create);
		goto out;
	}
	if (tw__etcd_set(root, "create_request", create, st) ||
	    tw__etcd_set_bytes(create, "key", req->key, req->key_len, st) ||
	    (req->range_end &&
	     tw__etcd_set_bytes(create, "range_end", req->range_end, req->range_end_len, st)) ||
	    (req->start_revision &&
	     tw__etcd_set_int64(create, "start_revision", req->start_revision, st)) ||
	    (req->prev_kv && tw__etcd_set(create, "prev_kv", json_true(), st)) ||
	    (req->progress_notify && tw__etcd_set(create, "progress_notify", json_true(), st)))
		goto out;
	text = json_dumps(root, JSON_COMPACT);
out:
	json_decref(root);
	if (!text)
		tw__etcd_fail(st, ETCD_ENOMEM, "building a watch request");
	return text;
}

/* One attempt on one endpoint. 1: the attempt failed before anything was sent. */
static int watch_on(etcd_client *c, size_t idx, const char *body, watch_state *w,
		    const atomic_bool *stop, int64_t deadline)
{
	int64_t left = deadline - tw__etcd_now_ms();
	if (left <= 0)
		return tw__etcd_fail(w->st, ETCD_ETIMEOUT, "watch: no endpoint answered in %u ms",
				     c->timeout_ms);
	/* The stream lasts as long as the watch: no total timeout, only the connect's; the
	 * "created" answer must come within the client's timeout (checked below). */
	if (tw__etcd_http_prepare(c, idx, "/v3/watch", body, 0, (long)left, w->st))
		return -1;
	CURLcode rc;
	if ((rc = curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_stream)) ||
	    (rc = curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, w)))
		return tw__etcd_fail(w->st, ETCD_EINVAL, "curl: %s", curl_easy_strerror(rc));
	CURLMcode mc = curl_multi_add_handle(c->multi, c->easy);
	if (mc)
		return tw__etcd_fail(w->st, ETCD_ENOMEM, "curl: %s", curl_multi_strerror(mc));
	c->cur = idx;
	int ret = -1;
	for (;;) {
		int running = 0, queued;
		mc = curl_multi_perform(c->multi, &running);
		if (mc) {
			tw__etcd_fail(w->st, ETCD_ENOMEM, "curl: %s", curl_multi_strerror(mc));
			break;
		}
		CURLMsg *m;
		bool done = false;
		while ((m = curl_multi_info_read(c->multi, &queued)))
			if (m->msg == CURLMSG_DONE && m->easy_handle == c->easy) {
				done = true;
				rc = m->data.result;
			}
		if (w->ended)
			break;
		if (done) {
			if (rc == CURLE_OK) {
				tw__etcd_fail(w->st, ETCD_ECONNECT, "watch: %s ended the stream",
					      c->endpoints[idx]);
			} else if (!w->created && tw__etcd_http_unsent(c, rc)) {
				tw__etcd_http_error(c, rc, w->st);
				ret = 1;
			} else {
				tw__etcd_http_error(c, rc, w->st);
			}
			break;
		}
		if (stop && atomic_load(stop)) {
			tw__etcd_fail(w->st, ETCD_ECANCELED, "stopped by its stop flag");
			break;
		}
		if (!w->created && tw__etcd_now_ms() >= deadline) {
			tw__etcd_fail(w->st, ETCD_ETIMEOUT, "watch: not created within %u ms",
				      c->timeout_ms);
			break;
		}
		mc = curl_multi_poll(c->multi, NULL, 0, 100, NULL);
		if (mc) {
			tw__etcd_fail(w->st, ETCD_ENOMEM, "curl: %s", curl_multi_strerror(mc));
			break;
		}
	}
	mc = curl_multi_remove_handle(c->multi, c->easy);
	if (mc && ret != 1)
		tw__etcd_fail(w->st, ETCD_ENOMEM, "curl: %s", curl_multi_strerror(mc));
	return ret;
}

int tw__etcd_watch(etcd_client *c, const etcd_watch_req *req, etcd_watch_fn fn, void *ctx,
		   etcd_status *st)
{
	etcd_status local;
	if (!st)
		st = &local; /* the kind decides where the next call goes */
	tw__etcd_status_ok(st);
	if (!req || !fn || !req->key_len)
		return tw__etcd_fail(st, ETCD_EINVAL, "a watch needs a key and a callback");
	if (!c->multi && !(c->multi = curl_multi_init()))
		return tw__etcd_fail(st, ETCD_ENOMEM, "curl_multi_init failed");
	char *body = watch_body(req, st);
	if (!body)
		return -1;
	watch_state w = { .c = c, .fn = fn, .ctx = ctx, .st = st };
	int64_t deadline = tw__etcd_now_ms() + c->timeout_ms;
	size_t first = c->cur;
	int rc = 1;
	for (size_t tries = 0; rc == 1 && tries < c->n; tries++) {
		tw__etcd_stream_init(&w.stream, ETCD_MAX_ANSWER);
		rc = watch_on(c, (first + tries) % c->n, body, &w, req->stop, deadline);
		tw__etcd_stream_free(&w.stream);
	}
	if (rc == 1)
		st->kind = ETCD_ECONNECT;
	if (st->kind != ETCD_ECOMPACTED && st->kind != ETCD_ECANCELED)
		c->cur = (c->cur + 1) % c->n; /* the next call tries another member */
	free(body);
	return -1;
}
