/*
 * snapshot_write.c - tw_snapshot: every named live task's schedule to a file, atomically
 * (a temporary file beside it, fsync, rename, fsync of the directory).
 *
 * The walk reads the slot table chunk by chunk as tw_list does: each named task is copied
 * whole under its lock inside a read-side section (a calendar task's expression lives in
 * its record, freed at its release, so it is copied there too), and the chunk's copies are
 * encoded and written outside any section, so that a slow disk holds back no grace period.
 *
 * The temporary file is locked by its writer until it is renamed (snapshot_file.c), so that
 * a later snapshot removes only killed writers' leftovers.
 */
#include "alloc.h"
#include "calendar_tasks.h"
#include "snapshot.h"
#include "snapshot_file.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Lock held: a task's counts into its record. */
static void copy_counts(struct snap_record *r, const struct task_cold *cold)
{
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
}

/* Lock held: a calendar task's expression into the texts. NO_ROOM: it needs *need bytes more
 * than they have. */
static int copy_expr(const struct calendar *cal, struct out *o, struct copy *c, size_t *need)
{
	if (!cal->expr || cal->expr_len > UINT32_MAX - SNAP_RECORD_FIXED - TW_NAME_MAX)
		return LEFT_OUT; /* named after its add: cannot be, but nothing to write */
	if (o->texts_cap - o->texts_len < cal->expr_len) {
		*need = cal->expr_len;
		return NO_ROOM;
	}
	memcpy(o->texts + o->texts_len, cal->expr, cal->expr_len);
	c->cron_at = o->texts_len;
	c->r.cron_len = (uint32_t)cal->expr_len;
	o->texts_len += cal->expr_len;
	return COPIED;
}

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
	copy_counts(r, task_cold(task));
	rc = calendar ? copy_expr(task_calendar(task), o, c, need) : COPIED;
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
	if (tw__snapshot_resolve_target(path, target) ||
	    (o.fd = tw__snapshot_make_temporary(target, tmp, tmp_len)) < 0)
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
	if (tw__snapshot_sync_directory(target))
		goto out;
	tw__snapshot_remove_stale(target);
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
