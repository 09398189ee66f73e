/*
 * zone_load.c - a zone by name, from the system's zoneinfo files, and the
 * process's own zone as glibc's localtime() would find it, read without
 * tzset(): the process's time zone state is neither read nor changed.
 */
#include "zone.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest TZif file of the tz database is under 10 KiB; past this it is something else. */
#define MAX_FILE ((off_t)256 * 1024)

static const char *const unknown_zone = "unknown time zone (no such file in the zoneinfo)";

/* An IANA name: relative, letters, digits and "._+-" in components, no "..". */
static bool good_name(const char *name, size_t len)
{
	if (!len || len > 255 || name[0] == '/')
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = name[i];
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			  (ch >= '0' && ch <= '9') || strchr("._+-/", ch);
		if (!ok || (ch == '/' && (i + 1 == len || name[i + 1] == '/')))
			return false;
		if (ch == '.' && (i == 0 || name[i - 1] == '/') && i + 1 < len &&
		    name[i + 1] == '.')
			return false;
	}
	return true;
}

/* The whole file into *data (malloc'd). 0; -1 with errno (EFBIG: too large, or not a file). */
static int read_file(const char *path, unsigned char **data, size_t *size)
{
	/* O_NONBLOCK: a FIFO (or a device) where a zone file should be would block the open
	 * until a writer comes; it is refused by the check below instead. On a regular file
	 * the flag changes nothing. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -1;
	struct stat st;
	/* EFBIG also for a directory or a device: no zone either way */
	int err = fstat(fd, &st)                                ? errno :
		  !S_ISREG(st.st_mode) || st.st_size > MAX_FILE ? EFBIG :
								  0;
	if (err) {
		(void)close(fd); /* read-only: nothing to lose */
		errno = err;
		return -1;
	}
	size_t want = (size_t)st.st_size, got = 0;
	unsigned char *buf = malloc(want ? want : 1);
	if (!buf) {
		(void)close(fd);
		errno = ENOMEM;
		return -1;
	}
	while (got < want) {
		ssize_t n = read(fd, buf + got, want - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int why = n < 0 ? errno : EIO; /* the file shrank under us */
			free(buf);
			(void)close(fd);
			errno = why;
			return -1;
		}
		got += (size_t)n;
	}
	(void)close(fd);
	*data = buf;
	*size = got;
	return 0;
}

static int load_path(const char *path, struct tw__zone **out, const char **reason, bool *nomem)
{
	unsigned char *data;
	size_t size;
	if (read_file(path, &data, &size)) {
		*nomem = errno == ENOMEM;
		*reason = errno == ENOENT || errno == ENOTDIR ? unknown_zone :
			  *nomem                              ? "out of memory" :
								"cannot read the time zone file";
		return -1;
	}
	int rc = tw__zone_from_tzif(data, size, out, reason, nomem);
	free(data);
	return rc;
}

static int load_named(const char *name, size_t len, struct tw__zone **out, const char **reason,
		      bool *nomem)
{
	const char *dir = secure_getenv("TZDIR");
	if (!dir || dir[0] != '/')
		dir = "/usr/share/zoneinfo";
	char path[PATH_MAX];
	int n = snprintf(path, sizeof path, "%s/%.*s", dir, (int)len, name);
	if (n < 0 || (size_t)n >= sizeof path) {
		*reason = unknown_zone;
		return -1;
	}
	return load_path(path, out, reason, nomem);
}

/* A zone of one POSIX rule and no table. */
static int from_rule(const struct tw__posix_tz *rule, struct tw__zone **out, const char **reason,
		     bool *nomem)
{
	struct tw__zone *z = calloc(1, sizeof *z);
	if (!z) {
		*nomem = true;
		*reason = "out of memory";
		return -1;
	}
	z->initial = rule->std_offset;
	z->has_rule = true;
	z->rule = *rule;
	*out = z;
	return 0;
}

/* glibc's order: TZ unset, /etc/localtime; "" UTC; a file (":" optional); a
 * POSIX string; anything else UTC. A missing /etc/localtime is UTC too. */
static int load_local(struct tw__zone **out, const char **reason, bool *nomem)
{
	const char *tz = secure_getenv("TZ");
	if (!tz) {
		if (!load_path("/etc/localtime", out, reason, nomem) || *nomem)
			return *nomem ? -1 : 0;
		if (*reason != unknown_zone)
			return -1;
		*out = NULL;
		return 0;
	}
	if (*tz == ':')
		tz++;
	if (!*tz || !strcmp(tz, "UTC")) {
		*out = NULL;
		return 0;
	}
	int rc = -1;
	if (tz[0] == '/')
		rc = load_path(tz, out, reason, nomem);
	else if (good_name(tz, strlen(tz)))
		rc = load_named(tz, strlen(tz), out, reason, nomem);
	if (!rc || *nomem)
		return rc;
	struct tw__posix_tz rule;
	if (!tw__posix_tz_parse(tz, strlen(tz), &rule))
		return from_rule(&rule, out, reason, nomem);
	*out = NULL;
	return 0;
}

int tw__zone_load(const char *name, size_t len, struct tw__zone **out, const char **reason,
		  bool *nomem)
{
	*nomem = false;
	*out = NULL;
	if (len == 3 && !memcmp(name, "UTC", 3))
		return 0;
	if (len == 5 && (!memcmp(name, "Local", 5) || !memcmp(name, "local", 5)))
		return load_local(out, reason, nomem);
	if (!good_name(name, len)) {
		*reason = "not a time zone name (letters, digits, ._+- and / between them)";
		return -1;
	}
	return load_named(name, len, out, reason, nomem);
}
