/*
 * snapshot_write.c - tw_snapshot: every named live task's schedule to a file, atomically
 * (a temporary file beside it, fsync, rename, fsync of the directory).
 *
 * The walk reads the slot table chunk by chunk as tw_list does: each named task is copied
 * whole under its lock inside a read-side section (a calendar task's expression lives in
 * its record, freed at its release, so it is copied there too), and the chunk's copies are
 * encoded and written outside any section, so that a slow disk holds back no grace period.
 *
 * The temporary file is flock()ed by its writer from its creation until it is renamed, so
 * that a later snapshot to the same path can tell a killed writer's leftover (unlocked) from
 * a live one's file (locked) and remove only the former.
 */
#include "alloc.h"
#include "calendar.h"
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

enum { OUT_BYTES = 1 << 20, TEXTS_BYTES = 1 << 16 };

struct copy {
	struct snap_record r;
	char name[TW_NAME_MAX + 1];
	size_t cron_at; /* in the texts */
};

struct out {
	int fd;
	uint8_t *buf;
	size_t len, cap, crc_done; /* buf[0, crc_done) is in crc already */
	uint32_t crc;
	/* the chunk's copies and the texts of their expressions */
	struct copy *copies;
	char *texts;
	size_t texts_len, texts_cap;
};

/* Writes what is buffered; -1 with errno on failure. */
static int flush(struct out *o)
{
	o->crc = tw__snapshot_crc(o->crc, o->buf + o->crc_done, o->len - o->crc_done);
	for (size_t done = 0; done < o->len;) {
		ssize_t n = write(o->fd, o->buf + done, o->len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		done += (size_t)n;
	}
	o->len = o->crc_done = 0;
	return 0;
}

/* Room for need bytes in the buffer: flushed, or grown for a record longer than it. */
static int room(struct out *o, size_t need)
{
	if (o->cap - o->len >= need)
		return 0;
	if (flush(o))
		return -1;
	if (need <= o->cap)
		return 0;
	uint8_t *bigger = tw__alloc(need);
	if (!bigger) {
		errno = ENOMEM;
		return -1;
	}
	tw__free(o->buf, o->cap);
	o->buf = bigger;
	o->cap = need;
	return 0;
}

static bool grow_texts(struct out *o, size_t need)
{
	size_t cap = o->texts_cap;
	while (cap - o->texts_len < need)
		cap *= 2;
	char *bigger = tw__alloc(cap);
	if (!bigger)
		return false;
	memcpy(bigger, o->texts, o->texts_len);
	tw__free(o->texts, o->texts_cap);
	o->texts = bigger;
	o->texts_cap = cap;
	return true;
}

enum { COPIED, LEFT_OUT, NO_ROOM };

/* Inside a read-side section: task id into c, if it is a named live task to keep. NO_ROOM:
 * its expression needs *need bytes more in the texts than they have. */
static int copy_task(struct tw_engine *e, struct tw_task *task, tw_id id, int64_t offset,
		     struct out *o, struct copy *c, size_t *need)
{
	c->name[0] = '\0';
	unsigned misfire = tw__name_show(&e->names, id, c->name);
	if (!c->name[0])
		return LEFT_OUT;
	int rc = LEFT_OUT;
	tw__task_lock(task);
	uint8_t state = atomic_load_explicit(&task->state, memory_order_relaxed);
	if (atomic_load_explicit(&task->id, memory_order_relaxed) != id || state > TW_PAUSED)
		goto out;
	struct task_cold *cold = task_cold(task);
	uint8_t traits = atomic_load_explicit(&task->traits, memory_order_relaxed);
	uint64_t period = task_period_ms(task), due = 0;
	bool calendar = task_is_calendar(task);
	struct snap_record *r = &c->r;
	*r = (struct snap_record){
		.kind = calendar ? SNAP_CALENDAR :
			period   ? SNAP_PERIODIC :
				   SNAP_ONESHOT,
		.flags = traits & TRAIT_TASK_FLAGS,
		.misfire = (uint8_t)misfire,
		.bits = (state == TW_PAUSED ? SNAP_PAUSED : 0) |
			(traits & TRAIT_PAUSED_BY_FAILURES ? SNAP_PAUSED_BY_FAILURES : 0),
		.name_len = (uint8_t)strlen(c->name),
		.period_ms = calendar ? 0 : period,
		.delay_ms = task_delay_ms(task),
	};
	/* A time asked for a paused one-shot (tw_set_due) is on this process's clock: it
	 * resumes at once instead. */
	if (r->delay_ms == DELAY_AT_DUE)
		r->delay_ms = 0;
	if (state != TW_PAUSED) {
		due = atomic_load_explicit(&task->due_ns, memory_order_relaxed);
		if (!due && r->kind == SNAP_ONESHOT)
			goto out; /* its last run goes: it is completing */
		if (calendar)
			r->due_wall_ns = tw__calendar_wall_due(task);
		else if (due && due != DUE_NEVER)
			r->due_wall_ns = (int64_t)due + offset > 0 ? (int64_t)due + offset : 1;
	}
	r->counters[SNAP_RUNS] = atomic_load_explicit(&cold->runs, memory_order_relaxed);
	r->counters[SNAP_FAILURES] = atomic_load_explicit(&cold->failures, memory_order_relaxed);
	r->counters[SNAP_CONSECUTIVE_FAILURES] =
		atomic_load_explicit(&cold->consecutive_failures, memory_order_relaxed);
	r->counters[SNAP_SLOW_RUNS] = atomic_load_explicit(&cold->slow_runs, memory_order_relaxed);
	r->counters[SNAP_SKIPPED_OVERLAP] =
		atomic_load_explicit(&cold->skipped_overlap, memory_order_relaxed);
	r->counters[SNAP_SKIPPED_OVERLOAD] =
		atomic_load_explicit(&cold->skipped_overload, memory_order_relaxed);
	r->counters[SNAP_SKIPPED_MISSED] =
		atomic_load_explicit(&cold->skipped_missed, memory_order_relaxed);
	if (calendar) {
		const struct calendar *cal = task_calendar(task);
		if (!cal->expr || cal->expr_len > UINT32_MAX - SNAP_RECORD_FIXED - TW_NAME_MAX)
			goto out; /* named after its add: cannot be, but nothing to write */
		if (o->texts_cap - o->texts_len < cal->expr_len) {
			*need = cal->expr_len;
			rc = NO_ROOM;
			goto out;
		}
		memcpy(o->texts + o->texts_len, cal->expr, cal->expr_len);
		c->cron_at = o->texts_len;
		r->cron_len = (uint32_t)cal->expr_len;
		o->texts_len += cal->expr_len;
	}
	rc = COPIED;
out:
	tw__task_unlock(task);
	return rc;
}

/* The chunk's n copies into the buffer. */
static int put_copies(struct out *o, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct snap_record *r = &o->copies[i].r;
		r->name = o->copies[i].name;
		r->cron = r->cron_len ? o->texts + o->copies[i].cron_at : NULL;
		if (room(o, snap_record_bytes(r)))
			return -1;
		o->len += tw__snapshot_put_record(o->buf + o->len, r);
	}
	o->texts_len = 0;
	return 0;
}

/* Writes the whole file to o->fd: -1 with errno on failure. */
static int write_tasks(struct tw_engine *e, struct out *o, uint64_t *count)
{
	int64_t offset = tw__wall_offset_ns(e);
	o->len += tw__snapshot_put_header(o->buf, (int64_t)tw__engine_now_ns(e) + offset);
	struct tw_task *chunk;
	for (size_t i = 0; tw__names_used(&e->names) && (chunk = tw__table_chunk(&e->table, i));
	     i++) {
		size_t n = 0;
		for (size_t j = 0; j < TABLE_CHUNK_SLOTS; j++) {
			struct tw_task *task = &chunk[j];
			tw_id id = atomic_load_explicit(&task->id, memory_order_acquire);
			if (!id)
				continue;
			size_t need = 0;
			read_section_begin();
			int rc = copy_task(e, task, id, offset, o, &o->copies[n], &need);
			read_section_end();
			if (rc == NO_ROOM) {
				if (!grow_texts(o, need)) {
					errno = ENOMEM;
					return -1;
				}
				j--; /* again, with room */
				continue;
			}
			n += rc == COPIED;
		}
		if (put_copies(o, n))
			return -1;
		*count += n;
	}
	if (room(o, SNAP_TRAILER_BYTES))
		return -1;
	o->crc = tw__snapshot_crc(o->crc, o->buf + o->crc_done, o->len - o->crc_done);
	o->len += tw__snapshot_put_trailer(o->buf + o->len, *count, o->crc);
	o->crc_done = o->len; /* the trailer carries its own */
	return flush(o);
}

/* The directory of path, fsync'ed: the rename in it is then on disk. */
static int sync_directory(const char *path)
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
static int resolve_target(const char *path, char *target)
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
static void remove_stale(const char *target)
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
static int make_temporary(const char *target, char *tmp, size_t tmp_len)
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

int tw_snapshot(tw_engine *e, const char *path, uint64_t *tasks)
{
	if (!e || !path || !path[0])
		return -TW_EINVAL;
	if (atomic_load(&e->stopping))
		return halted_code(e);
	size_t tmp_len = PATH_MAX + sizeof ".tmp-XXXXXX";
	char *target = tw__alloc(PATH_MAX);
	char *tmp = tw__alloc(tmp_len);
	struct out o = { .fd = -1, .cap = OUT_BYTES, .texts_cap = TEXTS_BYTES };
	o.buf = tw__alloc(o.cap);
	o.texts = tw__alloc(o.texts_cap);
	o.copies = tw__alloc(TABLE_CHUNK_SLOTS * sizeof *o.copies);
	int rc = -TW_ENOMEM;
	if (!target || !tmp || !o.buf || !o.texts || !o.copies)
		goto out;
	uint64_t count = 0;
	rc = -TW_EIO;
	if (resolve_target(path, target) || (o.fd = make_temporary(target, tmp, tmp_len)) < 0)
		goto out;
	/* Renamed while still locked: a stale-file removal never sees it unlocked under its
	 * temporary name. */
	int err = 0;
	if (write_tasks(e, &o, &count) || fsync(o.fd) || rename(tmp, target))
		err = errno;
	if (err)
		(void)unlink(tmp);
	/* Only now, as it drops the lock. Its error cannot lose data: what was written is on
	 * disk since the fsync succeeded, and is in place since the rename did. */
	(void)close(o.fd);
	o.fd = -1;
	if (err) {
		errno = err;
		rc = err == ENOMEM ? -TW_ENOMEM : -TW_EIO;
		goto out;
	}
	/* Renamed: the file is in place whatever follows; its directory entry is on disk
	 * once the directory is synced. */
	if (sync_directory(target))
		goto out;
	remove_stale(target);
	if (tasks)
		*tasks = count;
	rc = TW_OK;
out:;
	int saved = errno; /* the failed call's, for the caller */
	if (target)
		tw__free(target, PATH_MAX);
	if (tmp)
		tw__free(tmp, tmp_len);
	if (o.buf)
		tw__free(o.buf, o.cap);
	if (o.texts)
		tw__free(o.texts, o.texts_cap);
	if (o.copies)
		tw__free(o.copies, TABLE_CHUNK_SLOTS * sizeof *o.copies);
	errno = saved;
	return rc;
}
