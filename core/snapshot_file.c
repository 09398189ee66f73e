/*
 * snapshot_file.c - the files of snapshots, apart from their bytes
 * (snapshot_format.c) and their tasks (snapshot_write.c, snapshot_restore.c).
 *
 * A temporary file is flock()ed by its writer from its creation until it is renamed, so
 * that a later snapshot to the same path can tell a killed writer's leftover (unlocked) from
 * a live one's file (locked) and remove only the former.
 */
#include "snapshot_file.h"
#include "alloc.h"
#include "snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The whole file into *buf (malloc'ed): -1 with errno on failure. */
int tw__snapshot_read_file(const char *path, uint8_t **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	uint8_t *data = NULL;
	size_t size = 0, done = 0;
	if (fstat(fd, &st))
		goto fail;
	size = (size_t)st.st_size;
	if (!(data = malloc(size ? size : 1))) {
		errno = ENOMEM;
		goto fail;
	}
	while (done < size) {
		ssize_t n = read(fd, data + done, size - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (!n)
			break; /* cut short meanwhile: the parser judges what there is */
		done += (size_t)n;
	}
	if (close(fd)) {
		free(data);
		return -1;
	}
	*buf = data;
	*len = done;
	return 0;
fail:;
	int saved = errno;
	free(data);
	(void)close(fd);
	errno = saved;
	return -1;
}

/* The directory of path, fsync'ed: the rename in it is then on disk. */
int tw__snapshot_sync_directory(const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 1;
	char *dir = tw__alloc(len + 1);
	if (!dir) {
		errno = ENOMEM;
		return -1;
	}
	if (!slash)
		memcpy(dir, ".", 2);
	else if (!len)
		memcpy(dir, "/", 2);
	else {
		memcpy(dir, path, len);
		dir[len] = '\0';
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	tw__free(dir, len + 1);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	int saved = errno;
	if (close(fd) && !rc)
		return -1;
	errno = saved;
	return rc;
}

/* The links the kernel follows in one lookup before ELOOP (Linux's MAXSYMLINKS). */
enum { MAX_LINKS = 40 };

/* Into target (PATH_MAX bytes): the file a snapshot to path replaces, path itself or, for a
 * symbolic link, the file at the end of its links (that need not exist yet), so that the
 * rename puts the new file where the link points and the link stays. -1 with errno. */
int tw__snapshot_resolve_target(const char *path, char *target)
{
	size_t len = strlen(path);
	if (len >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(target, path, len + 1);
	char link[PATH_MAX];
	for (int hops = 0;; hops++) {
		struct stat st;
		/* ENOENT: a new file, or a missing directory that the mkstemp reports */
		if (lstat(target, &st))
			return errno == ENOENT ? 0 : -1;
		if (!S_ISLNK(st.st_mode))
			return 0;
		if (hops == MAX_LINKS) {
			errno = ELOOP;
			return -1;
		}
		ssize_t n = readlink(target, link, sizeof link);
		if (n < 0)
			return -1;
		if ((size_t)n == sizeof link) {
			errno = ENAMETOOLONG;
			return -1;
		}
		/* relative to the link's own directory */
		const char *slash = strrchr(target, '/');
		size_t keep = link[0] == '/' || !slash ? 0 : (size_t)(slash - target) + 1;
		if (keep + (size_t)n >= PATH_MAX) {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(target + keep, link, (size_t)n);
		target[keep + (size_t)n] = '\0';
	}
}

/* name is base + ".tmp-" + mkstemp's six letters and digits. */
static bool temporary_name(const char *name, const char *base, size_t base_len)
{
	if (strncmp(name, base, base_len) != 0 || strncmp(name + base_len, ".tmp-", 5) != 0)
		return false;
	const char *x = name + base_len + 5;
	for (int i = 0; i < 6; i++)
		if (!((x[i] >= 'a' && x[i] <= 'z') || (x[i] >= 'A' && x[i] <= 'Z') ||
		      (x[i] >= '0' && x[i] <= '9')))
			return false;
	return x[6] == '\0';
}

/* Removes the temporary files of snapshots to target that were killed: named as this library
 * names them, regular, empty or starting as a snapshot, and not locked by a writer. The lock
 * is taken before the removal and the name checked to be still that file, so a writer that
 * created its file but has not locked it yet finds it unlinked once it has the lock, and makes
 * another (see tw_snapshot). Best effort: a file that cannot be removed stays. */
void tw__snapshot_remove_stale(const char *target)
{
	const char *slash = strrchr(target, '/');
	const char *base = slash ? slash + 1 : target;
	size_t dir_len = slash ? (size_t)(slash - target) : 0;
	char dir[PATH_MAX];
	if (!slash)
		memcpy(dir, ".", 2);
	else if (!dir_len)
		memcpy(dir, "/", 2);
	else {
		memcpy(dir, target, dir_len);
		dir[dir_len] = '\0';
	}
	DIR *d = opendir(dir);
	if (!d)
		return;
	size_t base_len = strlen(base);
	/* The stream is this call's own, and glibc's readdir is safe for different streams in
	 * different threads: NOLINTNEXTLINE(concurrency-mt-unsafe) */
	for (struct dirent *ent; (ent = readdir(d)) != NULL;) {
		if (!temporary_name(ent->d_name, base, base_len))
			continue;
		int fd = openat(dirfd(d), ent->d_name,
				O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct stat st, now;
		uint8_t head[8];
		ssize_t n;
		if (!fstat(fd, &st) && S_ISREG(st.st_mode) && !flock(fd, LOCK_EX | LOCK_NB) &&
		    (n = pread(fd, head, sizeof head, 0)) >= 0 &&
		    tw__snapshot_starts_like(head, (size_t)n) &&
		    !fstatat(dirfd(d), ent->d_name, &now, AT_SYMLINK_NOFOLLOW) &&
		    now.st_dev == st.st_dev && now.st_ino == st.st_ino)
			(void)unlinkat(dirfd(d), ent->d_name, 0); /* best effort: it stays */
		(void)close(fd); /* read-only: nothing to lose; the lock goes with it */
	}
	(void)closedir(d);
}

/* A new temporary file for target into tmp (target + ".tmp-XXXXXX"), locked: its fd, or -1
 * with errno. A stale-file removal by another snapshot may unlink it between its creation and
 * the lock (it is unlocked and empty then): that shows as no link left, and it is made again. */
int tw__snapshot_make_temporary(const char *target, char *tmp, size_t tmp_len)
{
	for (;;) {
		(void)snprintf(tmp, tmp_len, "%s.tmp-XXXXXX", target);
		int fd = mkostemp(tmp, O_CLOEXEC);
		if (fd < 0)
			return -1;
		struct stat st;
		int rc;
		while ((rc = flock(fd, LOCK_EX)) && errno == EINTR)
			;
		if (!rc && !(rc = fstat(fd, &st)) && st.st_nlink)
			return fd;
		int err = errno;
		(void)close(fd); /* empty, and unlinked or about to be: nothing to lose */
		if (rc) {
			(void)unlink(tmp);
			errno = err;
			return -1;
		}
	}
}
