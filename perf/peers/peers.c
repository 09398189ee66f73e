/* peers.c - the tables of the libraries built in (peer.h). */
#include "peer.h"

#include <stddef.h>
#include <string.h>

const struct timer_impl *const bench_impls[] = {
	&wheel_impl,
#ifdef HAVE_LIBUV
	&libuv_impl,
#endif
#ifdef HAVE_LIBEVENT
	&libevent_impl,
#endif
#ifdef HAVE_LIBEV
	&libev_impl,
#endif
	NULL,
};

const struct timer_impl *bench_find_impl(const char *name)
{
	for (size_t i = 0; bench_impls[i] != NULL; i++)
		if (strcmp(bench_impls[i]->name, name) == 0)
			return bench_impls[i];
	return NULL;
}

const struct loop_impl *const suite_loops[] = {
	&tickwheel_loop,
	&tickwheel_wheel_thread_loop,
#ifdef HAVE_LIBUV
	&libuv_loop,
#endif
#ifdef HAVE_LIBEVENT
	&libevent_loop,
#endif
#ifdef HAVE_LIBEV
	&libev_loop,
#endif
	NULL,
};
