/*
 * query.c - tw_get: a task's state and counts, read without a lock
 * (task_read_info, query.h).
 */
#include "query.h"

static inline __attribute__((always_inline)) int get_task(tw_engine *e, tw_id id, tw_task_info *out)
{
	/* After a stop the tasks stay, with their final state, until destroy. */
	if (engine_forked(e))
		return -TW_EFORKED;
	read_section_begin();
	struct tw_task *task = tw__table_find(&e->table, id);
	bool found = task && task_read_info(e, task, id, out);
	read_section_end();
	return found ? TW_OK : -TW_ENOTFOUND;
}

int tw_find(tw_engine *e, const char *name, tw_id *out)
{
	size_t len;
	if (!e || !name || !out || !tw__name_valid(name, &len))
		return -TW_EINVAL;
	if (engine_forked(e))
		return -TW_EFORKED;
	return tw__name_find(&e->names, &e->table, name, len, out);
}

int tw_get_sized(tw_engine *e, tw_id id, tw_task_info *out, size_t size)
{
	if (!e || !out)
		return -TW_EINVAL;
	if (size == sizeof *out)
		return get_task(e, id, out);
	tw_task_info info = { 0 }; /* get_task sets the fields, not the padding */
	int rc = get_task(e, id, &info);
	if (rc == TW_OK)
		tw__struct_out(out, size, &info, sizeof info);
	return rc;
}
