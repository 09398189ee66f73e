/*
 * metrics_sink.h - where the metrics text goes (metrics_sink.c): the caller's
 * buffer, or a chunk that goes to the caller's writer when full; and the
 * Prometheus text format's pieces put into it (numbers, exact seconds,
 * escaped label values, a family's HELP and TYPE, labelled samples).
 */
#ifndef TICKWHEEL_CORE_METRICS_SINK_H
#define TICKWHEEL_CORE_METRICS_SINK_H

#include "base.h"

struct sink {
	tw_metrics_writer write; /* NULL: into buf alone */
	void *ctx;
	char *buf;
	size_t cap, used; /* buf's size; what it holds */
	size_t total;     /* the whole text's length so far */
	bool failed;      /* the writer returned nonzero: nothing more is put */
	const char *prefix;
	const char *const *labels;
	bool per_task; /* tw_metrics_options.per_task */
};

/* What the chunk holds, to the writer (none: nothing). */
void tw__sink_flush(struct sink *s);
/* n bytes; past a full buffer with no writer, only counted in total. */
void tw__sink_put(struct sink *s, const char *data, size_t n);
void tw__sink_u64(struct sink *s, uint64_t v);
/* ns as seconds, exact: "0", "0.000001", "4.194304", "12.5". */
void tw__sink_seconds(struct sink *s, uint64_t ns);
/* A family's "# HELP" and "# TYPE" lines, the name after the caller's prefix. */
void tw__sink_family(struct sink *s, const char *name, const char *type, const char *help);
/* name[suffix]{the caller's labels,key="value",task="task"} */
void tw__sink_labelled(struct sink *s, const char *name, const char *suffix, const char *key,
		       const char *value, const char *task);
/* tw__sink_labelled with no task. */
void tw__sink_name(struct sink *s, const char *name, const char *suffix, const char *key,
		   const char *value);
/* A sample's line: its name and labels, its value. */
void tw__sink_sample(struct sink *s, const char *name, const char *key, const char *value,
		     uint64_t v);
/* A family of one sample without labels. */
void tw__sink_one(struct sink *s, const char *name, const char *type, const char *help, uint64_t v);

#endif
