/*
 * log.c - the engine's log: a message formatted for the user's log hook
 * (tw_config.log), if one is set.
 */
#include "engine.h"

#include <stdarg.h>
#include <stdio.h>

void tw__engine_log(const struct tw_engine *e, int level, const char *fmt, ...)
{
	if (!e->cfg.log)
		return;
	char message[256];
	va_list ap;
	va_start(ap, fmt);
	/* A longer message is cut to fit; the formats are the library's own, with nothing in
	 * them that can fail to convert. */
	(void)vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	e->cfg.log(level, message, e->cfg.log_arg);
}
