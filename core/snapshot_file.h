/*
 * snapshot_file.h - the files of snapshots (snapshot_file.c): a whole file read,
 * and what writing one atomically takes: the file a path names through its
 * symbolic links, a locked temporary file beside it, the directory synced
 * after the rename, killed writers' temporary files removed.
 */
#ifndef TICKWHEEL_CORE_SNAPSHOT_FILE_H
#define TICKWHEEL_CORE_SNAPSHOT_FILE_H

#include <stddef.h>
#include <stdint.h>

/* The whole file into *buf (malloc'ed): -1 with errno on failure. */
int tw__snapshot_read_file(const char *path, uint8_t **buf, size_t *len);
/* The directory of path, fsync'ed: the rename in it is then on disk. */
int tw__snapshot_sync_directory(const char *path);
/* Into target (PATH_MAX bytes): the file a snapshot to path replaces, path itself or, for a
 * symbolic link, the file at the end of its links (that need not exist yet), so that the
 * rename puts the new file where the link points and the link stays. -1 with errno. */
int tw__snapshot_resolve_target(const char *path, char *target);
/* Removes the temporary files of snapshots to target that were killed: named as this library
 * names them, regular, empty or starting as a snapshot, and not locked by a writer. The lock
 * is taken before the removal and the name checked to be still that file, so a writer that
 * created its file but has not locked it yet finds it unlinked once it has the lock, and makes
 * another (see tw_snapshot). Best effort: a file that cannot be removed stays. */
void tw__snapshot_remove_stale(const char *target);
/* A new temporary file for target into tmp (target + ".tmp-XXXXXX"), locked: its fd, or -1
 * with errno. A stale-file removal by another snapshot may unlink it between its creation and
 * the lock (it is unlocked and empty then): that shows as no link left, and it is made again. */
int tw__snapshot_make_temporary(const char *target, char *tmp, size_t tmp_len);

#endif
