/*
 * metrics_sink.c - the Prometheus text exposition format, version 0.0.4, put
 * into a sink (metrics_sink.h) piece by piece: nothing allocated, no lock.
 * metrics.c says what the lines are.
 */
#include "metrics_sink.h"

#include <string.h>

void tw__sink_flush(struct sink *s)
{
	if (s->write && s->used && !s->failed) {
		if (s->write(s->ctx, s->buf, s->used))
			s->failed = true;
		s->used = 0;
	}
}

void tw__sink_put(struct sink *s, const char *data, size_t n)
{
	s->total += n;
	if (s->failed)
		return;
	while (n) {
		if (s->used == s->cap) {
			if (!s->write)
				return; /* the buffer is full: only the length is counted */
			tw__sink_flush(s);
			if (s->failed)
				return;
		}
		size_t room = s->cap - s->used, take = n < room ? n : room;
		memcpy(s->buf + s->used, data, take);
		s->used += take;
		data += take;
		n -= take;
	}
}

static void puts_(struct sink *s, const char *text)
{
	tw__sink_put(s, text, strlen(text));
}

void tw__sink_u64(struct sink *s, uint64_t v)
{
	char digits[20];
	size_t n = 0;
	do {
		digits[sizeof digits - ++n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	tw__sink_put(s, digits + sizeof digits - n, n);
}

/* ns as seconds, exact: "0", "0.000001", "4.194304", "12.5". */
void tw__sink_seconds(struct sink *s, uint64_t ns)
{
	tw__sink_u64(s, ns / 1000000000u);
	uint64_t frac = ns % 1000000000u;
	if (!frac)
		return;
	char digits[10] = ".";
	unsigned n = 9;
	while (!(frac % 10)) {
		frac /= 10;
		n--;
	}
	for (unsigned i = n; i > 0; i--) {
		digits[i] = (char)('0' + frac % 10);
		frac /= 10;
	}
	tw__sink_put(s, digits, n + 1);
}

/* A label value with \, " and newline escaped, as the format wants. */
static void put_escaped(struct sink *s, const char *value)
{
	const char *run = value;
	for (const char *p = value; *p; p++) {
		const char *esc = *p == '\\' ? "\\\\" :
				  *p == '"'  ? "\\\"" :
				  *p == '\n' ? "\\n" :
					       NULL;
		if (esc) {
			tw__sink_put(s, run, (size_t)(p - run));
			tw__sink_put(s, esc, 2);
			run = p + 1;
		}
	}
	puts_(s, run);
}

void tw__sink_family(struct sink *s, const char *name, const char *type, const char *help)
{
	puts_(s, "# HELP ");
	puts_(s, s->prefix);
	puts_(s, name);
	tw__sink_put(s, " ", 1);
	puts_(s, help);
	puts_(s, "\n# TYPE ");
	puts_(s, s->prefix);
	puts_(s, name);
	tw__sink_put(s, " ", 1);
	puts_(s, type);
	tw__sink_put(s, "\n", 1);
}

/* name[suffix]{the caller's labels,key="value",task="task"} */
void tw__sink_labelled(struct sink *s, const char *name, const char *suffix, const char *key,
		       const char *value, const char *task)
{
	puts_(s, s->prefix);
	puts_(s, name);
	puts_(s, suffix);
	if (!key && !s->labels && !task)
		return;
	tw__sink_put(s, "{", 1);
	const char *sep = "";
	for (const char *const *l = s->labels; l && *l; l += 2) {
		puts_(s, sep);
		puts_(s, l[0]);
		tw__sink_put(s, "=\"", 2);
		put_escaped(s, l[1]);
		tw__sink_put(s, "\"", 1);
		sep = ",";
	}
	if (key) {
		puts_(s, sep);
		puts_(s, key);
		tw__sink_put(s, "=\"", 2);
		puts_(s, value); /* the library's own: nothing to escape */
		tw__sink_put(s, "\"", 1);
		sep = ",";
	}
	if (task) {
		puts_(s, sep);
		puts_(s, "task=\"");
		put_escaped(s, task);
		tw__sink_put(s, "\"", 1);
	}
	tw__sink_put(s, "}", 1);
}

void tw__sink_name(struct sink *s, const char *name, const char *suffix, const char *key,
		   const char *value)
{
	tw__sink_labelled(s, name, suffix, key, value, NULL);
}

void tw__sink_sample(struct sink *s, const char *name, const char *key, const char *value,
		     uint64_t v)
{
	tw__sink_name(s, name, "", key, value);
	tw__sink_put(s, " ", 1);
	tw__sink_u64(s, v);
	tw__sink_put(s, "\n", 1);
}

void tw__sink_one(struct sink *s, const char *name, const char *type, const char *help, uint64_t v)
{
	tw__sink_family(s, name, type, help);
	tw__sink_sample(s, name, NULL, NULL, v);
}
