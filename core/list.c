/*
 * list.c - tw_list: every task visited, while the engine goes on.
 *
 * The walk reads the slot table in order, chunk by chunk (tw__table_chunk),
 * each task as tw_get reads it (task_read_info), and calls the visitor
 * outside any read-side section and any lock: a visitor may call what waits
 * for grace periods (a cancel whose release destroys another engine, a
 * tw_add that grows the table), and holds up no one but its caller.
 *
 * Each slot is read once, and an id names one slot and is never reused: so
 * no id is visited twice, and a task that held its slot for the whole walk
 * is visited. A slot whose task was reaped and reused meanwhile shows its new
 * task if the walk reaches it after the reuse; a chunk added during the walk
 * is read if the walk reaches it.
 */
#include "alloc.h"
#include "query.h"

#include <string.h>

int tw_list_sized(tw_engine *e, unsigned flags, tw_visit_fn visit, void *ctx, size_t info_size)
{
	if (!e || !visit || (flags & ~(unsigned)TW_LIST_ENDED))
		return -TW_EINVAL;
	if (engine_forked(e))
		return -TW_EFORKED;
	/* A caller's tw_task_info longer than ours gets ours and zeros (tw__struct_out). */
	tw_task_info info;
	unsigned char *wide = NULL;
	if (info_size > sizeof info) {
		wide = tw__alloc(info_size);
		if (!wide)
			return -TW_ENOMEM;
		memset(wide, 0, info_size);
	}
	const tw_task_info *shown = wide ? (const tw_task_info *)(void *)wide : &info;
	bool ended = flags & TW_LIST_ENDED;
	int rc = 0;
	struct tw_task *chunk;
	for (size_t i = 0; !rc && (chunk = tw__table_chunk(&e->table, i)); i++) {
		for (size_t j = 0; j < TABLE_CHUNK_SLOTS; j++) {
			struct tw_task *task = &chunk[j];
			tw_id id = atomic_load_explicit(&task->id, memory_order_acquire);
			if (!id)
				continue; /* free, reaped, or being added */
			read_section_begin();
			bool found = task_read_info(e, task, id, &info);
			read_section_end();
			if (!found || (!ended && info.state >= TW_COMPLETED))
				continue;
			if (wide)
				memcpy(wide, &info, sizeof info);
			if ((rc = visit(id, shown, ctx)))
				break;
		}
	}
	if (wide)
		tw__free(wide, info_size);
	return rc;
}
