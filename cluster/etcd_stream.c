/*
 * cluster/etcd_stream.c - whole JSON objects out of a byte stream cut anywhere. The gateway
 * writes each stream message as one object (followed by a newline, which nothing promises),
 * and TCP and HTTP chunking split and join them at will: the scanner only tracks strings and
 * nesting to find where an object ends, and jansson checks the object itself.
 */
#include "etcd_internal.h"

#include <stdlib.h>
#include <string.h>

void tw__etcd_stream_init(etcd_stream *s, size_t max_object)
{
	memset(s, 0, sizeof(*s));
	s->max_object = max_object;
}

void tw__etcd_stream_free(etcd_stream *s)
{
	free(s->buf);
	s->buf = NULL;
	s->len = s->cap = s->scan = 0;
}

static int stream_fail(etcd_stream *s, etcd_status *st, etcd_error kind, const char *why)
{
	s->failed = true;
	return tw__etcd_fail(st, kind, "stream: %s", why);
}

int tw__etcd_stream_feed(etcd_stream *s, const void *data, size_t len, etcd_status *st)
{
	if (s->failed)
		return tw__etcd_fail(st, ETCD_EPARSE, "stream: fed after an error");
	if (!len)
		return 0;
	if (len > SIZE_MAX / 2 - s->len)
		return stream_fail(s, st, ETCD_ENOMEM, "too much input");
	if (s->len + len > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		while (cap < s->len + len)
			cap *= 2;
		char *buf = realloc(s->buf, cap);
		if (!buf)
			return stream_fail(s, st, ETCD_ENOMEM, "out of memory");
		s->buf = buf;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, len);
	s->len += len;
	return 0;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* Where the object that starts at buf[0] ends (one past its '}'), or 0 if not yet in buf. */
static size_t scan_object(etcd_stream *s)
{
	for (size_t i = s->scan; i < s->len; i++) {
		char c = s->buf[i];
		if (s->in_string) {
			if (s->escaped)
				s->escaped = false;
			else if (c == '\\')
				s->escaped = true;
			else if (c == '"')
				s->in_string = false;
		} else if (c == '"') {
			s->in_string = true;
		} else if (c == '{' || c == '[') {
			s->depth++;
		} else if ((c == '}' || c == ']') && --s->depth == 0) {
			s->scan = i + 1;
			return i + 1;
		}
	}
	s->scan = s->len;
	return 0;
}

int tw__etcd_stream_next(etcd_stream *s, json_t **obj, etcd_status *st)
{
	*obj = NULL;
	if (s->failed)
		return tw__etcd_fail(st, ETCD_EPARSE, "stream: used after an error");
	if (s->scan == 0) {
		size_t skip = 0;
		while (skip < s->len && is_space(s->buf[skip]))
			skip++;
		if (skip) {
			memmove(s->buf, s->buf + skip, s->len - skip);
			s->len -= skip;
		}
		if (s->len == 0)
			return 0;
		if (s->buf[0] != '{')
			return stream_fail(s, st, ETCD_EPARSE, "a byte outside an object");
	}
	size_t end = scan_object(s);
	if (!end) {
		if (s->len > s->max_object)
			return stream_fail(s, st, ETCD_EPARSE, "an object over the size limit");
		return 0;
	}
	if (end > s->max_object)
		return stream_fail(s, st, ETCD_EPARSE, "an object over the size limit");
	json_error_t err;
	json_t *root = json_loadb(s->buf, end, JSON_REJECT_DUPLICATES, &err);
	if (!root) {
		s->failed = true;
		return tw__etcd_fail(st, ETCD_EPARSE, "stream: %s", err.text);
	}
	if (!json_is_object(root)) {
		json_decref(root);
		return stream_fail(s, st, ETCD_EPARSE, "not an object");
	}
	memmove(s->buf, s->buf + end, s->len - end);
	s->len -= end;
	s->scan = 0;
	s->depth = 0;
	*obj = root;
	return 1;
}
