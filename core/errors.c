/*
 * errors.c - the words of errors: the library's codes (tw_strerror) and a
 * system call's errno for the log (tw__strerror).
 */
#include "base.h"

#include <string.h>

const char *tw_strerror(int code)
{
	static const char *const names[] = {
		[TW_OK] = "success",
		[TW_EINVAL] = "invalid argument",
		[TW_ENOTFOUND] = "no such task",
		/* Also tw_advance's answer on an engine without the manual clock. */
		[TW_ESTATE] = "not allowed in the current state (of the task, or of the engine)",
		[TW_ERANGE] = "delay or period out of range",
		[TW_ENOMEM] = "out of memory",
		[TW_ESHUTDOWN] = "engine is stopped",
		[TW_ELIMIT] = "too many live tasks",
		[TW_ETIMEDOUT] = "runs still in progress at the drain limit",
		[TW_ECALLBACK] = "not allowed inside a callback",
		[TW_EFORKED] = "engine belongs to the parent process (fork)",
		[TW_ERESOURCE] = "the system refused a thread or a file descriptor",
		[TW_ENOSPACE] = "buffer too small",
		[TW_EWRITE] = "the writer callback failed",
		[TW_ESYNTAX] = "not a valid cron expression",
		[TW_ENOZONE] = "unknown or unreadable time zone",
		[TW_ENOMATCH] = "the schedule has no fire time within the search bound",
		[TW_EEXIST] = "a live task has that name already",
		[TW_EIO] =
			"a system call on the snapshot or recording file failed (errno says which)",
		[TW_ECORRUPT] = "the snapshot is truncated or corrupted",
		[TW_EVERSION] = "the snapshot is of another format version",
		[TW_ENOTSNAPSHOT] = "the file is not a snapshot",
	};
	/* Both signs name a code; 0u - code stays defined for INT_MIN. */
	unsigned index = code < 0 ? 0u - (unsigned)code : (unsigned)code;
	if (index < sizeof names / sizeof names[0])
		return names[index];
	return "unknown error";
}

/* A system call's error for the log, from any of the engine's threads. POSIX lets strerror
 * share one buffer between threads; glibc (2.32 on) and musl do not, and the errors logged
 * are all known ones, whose texts are constant. */
const char *tw__strerror(int err)
{
	return strerror(err); /* NOLINT(concurrency-mt-unsafe): thread-safe on Linux, above */
}
