/* loops.c - the table of loops built in (loops.h). */
#include "loops.h"

#include <stddef.h>

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
