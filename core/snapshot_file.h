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
/* The directory of path, fsync'ed: the rename in it is then on disk. -1 with errno. */
int tw__snapshot_sync_directory(const char *path);
/* Into target (PATH_MAX bytes): the file a snapshot to path replaces, through its symbolic
 * links. -1 with errno. */
int tw__snapshot_resolve_target(const char *path, char *target);
/* Removes the temporary files that killed snapshots to target left; best effort. */
void tw__snapshot_remove_stale(const char *target);
/* A new temporary file for target into tmp (target + ".tmp-XXXXXX"), locked: its fd, or -1
 * with errno. */
int tw__snapshot_make_temporary(const char *target, char *tmp, size_t tmp_len);

#endif
