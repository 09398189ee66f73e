/*
 * recording.h - a reader of tickwheel's recording files (format v1: a 64-byte
 * header, then events of 56 bytes and a tail each; api/record-format.md), for
 * `tw-perf replay` and anyone who wants to look into a recording. It reads the
 * file through stdio, one event at a time, so a recording larger than memory
 * can be read; it never reads past the end of the file: a tail longer than
 * what is left of the file is an error, not a read.
 *
 * Errors are one line each, naming the file and the byte offset: a file too
 * short for its header, a foreign magic, a version it does not know, an event
 * cut short (a recording whose writer was killed: the events before it are
 * good), a tail that is not a multiple of 8. Event types it does not know are
 * handed out as they are (with no tail bytes read): a caller skips them.
 */
#ifndef TICKWHEEL_MEASURE_RECORDING_H
#define TICKWHEEL_MEASURE_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REC_MAGIC       "\x89TWRECD\n"
#define REC_VERSION     1u
#define REC_HEADER_SIZE 64u
#define REC_EVENT_SIZE  56u

enum rec_type {
	REC_ADD = 1,
	REC_SET_DELAY = 2,
	REC_SET_DUE = 3,
	REC_SET_PERIOD = 4,
	REC_PAUSE = 5,
	REC_RESUME = 6,
	REC_CANCEL = 7,
	REC_RUN = 16,
	REC_SKIP = 17,
	REC_THREAD = 32,
	REC_DROPPED = 33,
	REC_END = 34,
};

/* ADD's u: the spec's flags, its misfire, and whether first_due_ns was given. */
#define REC_ADD_FLAGS(u)     ((u)&0xffu)
#define REC_ADD_MISFIRE(u)   (((u) >> 8) & 0xffu)
#define REC_ADD_FIRST_DUE(u) (((u) >> 16) & 1u)
/* SET_DELAY's u: one element of a tw_set_delay_many call. Consecutive elements of one
 * thread with the same t_ns and delay are one call (two calls that agree in both cannot be
 * told apart: with the manual clock, t_ns does not move between them). */
#define REC_SET_DELAY_MANY 1u
/* RUN's u when the run was on the wheel thread. */
#define REC_ON_WHEEL_THREAD 0xffffffffu

struct rec_header {
	uint32_t version, header_size;
	uint64_t start_mono_ns, start_wall_ns;
	uint32_t executors, config, pid, queue_capacity;
	uint64_t retain_ms;    /* the engine's, so that a replay's answers match */
	uint32_t max_failures; /* the engine's */
};
#define REC_CONFIG_MANUAL_CLOCK  1u
#define REC_CONFIG_COARSE_CLOCK  2u
#define REC_CONFIG_PIN_EXECUTORS 4u

struct rec_event {
	uint8_t type;
	uint16_t thread;
	uint32_t tail; /* bytes after the fixed 56 */
	uint64_t t_ns, id;
	int32_t result;
	uint32_t u;
	uint64_t a, b, c;
	uint64_t offset; /* of the event in the file */
	/* ADD: the name and cron text (NUL-terminated, "" when none); THREAD: the name. Valid
	 * until the next rec_next. Other types: "". */
	const char *name, *cron;
};

struct rec_reader;

/* Opens and checks the header. NULL after writing why (one line, with the path) into err. */
struct rec_reader *rec_open(const char *path, char *err, size_t err_size);
const struct rec_header *rec_header(const struct rec_reader *r);
/* 1: *ev holds the next event; 0: the end of the file, at an event's boundary; -1: an error,
 * said by rec_error (the file is cut short or damaged there; rec_next keeps answering -1). */
int rec_next(struct rec_reader *r, struct rec_event *ev);
const char *rec_error(const struct rec_reader *r);
/* The file's size in bytes. */
uint64_t rec_file_size(const struct rec_reader *r);
void rec_close(struct rec_reader *r);

/* The type's name ("ADD", "RUN", ...), or NULL for a type v1 does not define. */
const char *rec_type_name(unsigned type);

#endif
