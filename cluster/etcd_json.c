/*
 * cluster/etcd_json.c - the gateway's encodings: base64 bytes, int64s as strings, proto3's
 * missing defaults; and the status setters every file of the transport uses.
 */
#include "etcd_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tw__etcd_fail(etcd_status *st, etcd_error kind, const char *fmt, ...)
{
	if (!st)
		return -1;
	st->kind = kind;
	st->grpc_code = 0;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(st->message, sizeof(st->message), fmt, ap);
	va_end(ap);
	if (n < 0)
		st->message[0] = '\0';
	return -1;
}

void tw__etcd_status_ok(etcd_status *st)
{
	if (!st)
		return;
	st->kind = ETCD_OK;
	st->grpc_code = 0;
	st->http_status = 0;
	st->message[0] = '\0';
}

const char *tw__etcd_error_name(etcd_error kind)
{
	static const char *const names[] = {
		[ETCD_OK] = "ok",
		[ETCD_ECONNECT] = "connect",
		[ETCD_ETIMEOUT] = "timeout",
		[ETCD_EHTTP] = "http",
		[ETCD_EGRPC] = "grpc",
		[ETCD_EPARSE] = "parse",
		[ETCD_ECOMPACTED] = "compacted",
		[ETCD_ENOLEASE] = "nolease",
		[ETCD_ENOMEM] = "nomem",
		[ETCD_ECANCELED] = "canceled",
		[ETCD_EINVAL] = "invalid",
	};
	if ((unsigned)kind >= sizeof(names) / sizeof(names[0]) || !names[kind])
		return "unknown";
	return names[kind];
}

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *tw__etcd_b64_encode(const void *data, size_t len)
{
	const uint8_t *p = data;
	if (len > (SIZE_MAX - 1) / 4 * 3 - 3)
		return NULL;
	char *out = malloc((len + 2) / 3 * 4 + 1);
	if (!out)
		return NULL;
	char *o = out;
	size_t i = 0;
	for (; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = b64_chars[v >> 18];
		*o++ = b64_chars[(v >> 12) & 63];
		*o++ = b64_chars[(v >> 6) & 63];
		*o++ = b64_chars[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
		*o++ = b64_chars[v >> 18];
		*o++ = b64_chars[(v >> 12) & 63];
		*o++ = (char)(i + 1 < len ? b64_chars[(v >> 6) & 63] : '=');
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int tw__etcd_b64_decode(const char *text, size_t len, uint8_t **out, size_t *out_len)
{
	if (len % 4)
		return -1;
	size_t pad = 0;
	if (len && text[len - 1] == '=')
		pad = len >= 2 && text[len - 2] == '=' ? 2 : 1;
	uint8_t *buf = malloc(len / 4 * 3 + 1);
	if (!buf)
		return -2;
	size_t n = 0;
	for (size_t i = 0; i < len; i += 4) {
		bool last = i + 4 == len;
		uint32_t v = 0;
		for (size_t j = 0; j < 4; j++) {
			int d = b64_value((unsigned char)text[i + j]);
			if (d < 0 && !(last && j >= 4 - pad)) {
				free(buf);
				return -1;
			}
			v = v << 6 | (uint32_t)(d < 0 ? 0 : d);
		}
		buf[n++] = (uint8_t)(v >> 16);
		if (!last || pad < 2)
			buf[n++] = (uint8_t)(v >> 8);
		if (!last || pad < 1)
			buf[n++] = (uint8_t)v;
	}
	buf[n] = 0;
	*out = buf;
	*out_len = n;
	return 0;
}

static const json_t *field(const json_t *obj, const char *name)
{
	const json_t *v = json_object_get(obj, name);
	return json_is_null(v) ? NULL : v;
}

/* Digits only: strtoll would take spaces, a sign of "+" and trailing junk. */
static int parse_digits(const char *s, bool negative_ok, uint64_t *mag, bool *negative)
{
	*negative = false;
	if (*s == '-' && negative_ok) {
		*negative = true;
		s++;
	}
	if (!*s)
		return -1;
	uint64_t v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*mag = v;
	return 0;
}

int tw__etcd_get_int64(const json_t *obj, const char *name, int64_t *out, etcd_status *st)
{
	const json_t *v = field(obj, name);
	*out = 0;
	if (!v)
		return 0;
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	uint64_t mag;
	bool neg;
	if (!json_is_string(v) || parse_digits(json_string_value(v), true, &mag, &neg) ||
	    mag > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
		return tw__etcd_fail(st, ETCD_EPARSE, "field %s is not an int64", name);
	*out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
	return 0;
}

int tw__etcd_get_uint64(const json_t *obj, const char *name, uint64_t *out, etcd_status *st)
{
	const json_t *v = field(obj, name);
	*out = 0;
	if (!v)
		return 0;
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	uint64_t mag;
	bool neg;
	if (!json_is_string(v) || parse_digits(json_string_value(v), false, &mag, &neg))
		return tw__etcd_fail(st, ETCD_EPARSE, "field %s is not a uint64", name);
	*out = mag;
	return 0;
}

int tw__etcd_get_bool(const json_t *obj, const char *name, bool *out, etcd_status *st)
{
	const json_t *v = field(obj, name);
	*out = false;
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return tw__etcd_fail(st, ETCD_EPARSE, "field %s is not a boolean", name);
	*out = json_is_true(v);
	return 0;
}

int tw__etcd_get_bytes(const json_t *obj, const char *name, uint8_t **out, size_t *len,
		       etcd_status *st)
{
	const json_t *v = field(obj, name);
	*out = NULL;
	*len = 0;
	if (!v)
		return 0;
	if (!json_is_string(v))
		return tw__etcd_fail(st, ETCD_EPARSE, "field %s is not a string", name);
	int rc = tw__etcd_b64_decode(json_string_value(v), json_string_length(v), out, len);
	if (rc == -2)
		return tw__etcd_fail(st, ETCD_ENOMEM, "decoding field %s", name);
	if (rc)
		return tw__etcd_fail(st, ETCD_EPARSE, "field %s is not base64", name);
	return 0;
}

int tw__etcd_get_object(const json_t *obj, const char *name, const json_t **out, etcd_status *st)
{
	const json_t *v = field(obj, name);
	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return tw__etcd_fail(st, ETCD_EPARSE, "field %s is not an object", name);
	*out = v;
	return 0;
}

int tw__etcd_get_header_revision(const json_t *root, int64_t *out, etcd_status *st)
{
	const json_t *header;
	*out = 0;
	if (tw__etcd_get_object(root, "header", &header, st))
		return -1;
	return header ? tw__etcd_get_int64(header, "revision", out, st) : 0;
}

int tw__etcd_set(json_t *obj, const char *name, json_t *value, etcd_status *st)
{
	if (!value || json_object_set_new(obj, name, value))
		return tw__etcd_fail(st, ETCD_ENOMEM, "building a request");
	return 0;
}

int tw__etcd_set_bytes(json_t *obj, const char *name, const void *data, size_t len, etcd_status *st)
{
	char *text = tw__etcd_b64_encode(data, len);
	if (!text)
		return tw__etcd_fail(st, ETCD_ENOMEM, "building a request");
	json_t *s = json_string(text);
	free(text);
	return tw__etcd_set(obj, name, s, st);
}

int tw__etcd_set_int64(json_t *obj, const char *name, int64_t v, etcd_status *st)
{
	char text[24];
	(void)snprintf(text, sizeof(text), "%" PRId64, v);
	return tw__etcd_set(obj, name, json_string(text), st);
}
