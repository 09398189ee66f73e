/*
 * A plug-in host's view: the library loaded with dlopen() at run time, its
 * functions found with dlsym(), an engine run and stopped, the library
 * unloaded. Only a -Dallocator=libc build can be loaded so (README, "Using
 * tickwheel").
 */
#include <tickwheel.h>

#include <dlfcn.h>
#include <stdio.h>

struct api {
	int (*engine_create_sized)(const tw_config *, size_t, tw_engine **);
	void (*config_init_sized)(tw_config *, size_t);
	int (*add_sized)(tw_engine *, const tw_task_spec *, size_t, tw_id *);
	int (*advance)(tw_engine *, uint64_t);
	int (*quiesce)(tw_engine *);
	int (*engine_stop)(tw_engine *, uint64_t);
	void (*engine_destroy)(tw_engine *);
	const char *(*version)(void);
};

static int ran(const tw_fire *fire, void *arg)
{
	(void)fire;
	++*(int *)arg;
	return 0;
}

static void released(void *arg)
{
	*(int *)arg += 100;
}

static int find(void *lib, const char *name, void *fn)
{
	void *sym = dlsym(lib, name);
	if (!sym)
		fprintf(stderr, "dlopen: no %s: %s\n", name, dlerror());
	*(void **)fn = sym;
	return sym != NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: dlopen LIBTICKWHEEL.so\n");
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	struct api tw;
	if (!(find(lib, "tw_engine_create_sized", &tw.engine_create_sized) &
	      find(lib, "tw_config_init_sized", &tw.config_init_sized) &
	      find(lib, "tw_add_sized", &tw.add_sized) & find(lib, "tw_advance", &tw.advance) &
	      find(lib, "tw_quiesce", &tw.quiesce) & find(lib, "tw_engine_stop", &tw.engine_stop) &
	      find(lib, "tw_engine_destroy", &tw.engine_destroy) &
	      find(lib, "tw_version", &tw.version)))
		return 1;
	tw_config cfg;
	tw.config_init_sized(&cfg, sizeof cfg);
	cfg.manual_clock = true;
	cfg.executors = 1;
	tw_engine *e;
	int count = 0;
	tw_task_spec spec = { .delay_ms = 2, .callback = ran, .arg = &count, .release = released };
	tw_id id;
	if (tw.engine_create_sized(&cfg, sizeof cfg, &e) ||
	    tw.add_sized(e, &spec, sizeof spec, &id) || tw.advance(e, 1) || tw.quiesce(e) ||
	    tw.advance(e, 1) || tw.quiesce(e) || tw.engine_stop(e, 1000)) {
		fprintf(stderr, "dlopen: a call failed\n");
		return 1;
	}
	tw.engine_destroy(e);
	printf("dlopen: tickwheel %s loaded, ran %d time(s), released %d time(s)\n", tw.version(),
	       count % 100, count / 100);
	if (dlclose(lib)) {
		fprintf(stderr, "dlclose: %s\n", dlerror());
		return 1;
	}
	return count == 101 ? 0 : 1;
}
