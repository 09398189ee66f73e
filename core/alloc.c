/*
 * alloc.c - see alloc.h. An arena without tcache costs several times more
 * per alloc/free pair than one with a per-thread explicit tcache
 * (perf/results/HISTORY.md, "Figures moved out of the code"), so each thread gets its
 * own tcache on first use; it is flushed and destroyed when the thread exits.
 */
#include "alloc.h"

#include <stdatomic.h>
#include <stdlib.h>

#ifdef TW_USE_JEMALLOC
#include <jemalloc/jemalloc.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

static unsigned arena;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;
static pthread_key_t tcache_key;
static bool tcache_key_made;
/* 0 = none yet; NO_TCACHE = this thread goes without one; else index + 1 */
static _Thread_local unsigned tcache;
#define NO_TCACHE UINT_MAX

static void destroy_tcache(void *index_plus_one)
{
	unsigned index = (unsigned)(uintptr_t)index_plus_one - 1;
	/* Fails only for an index jemalloc did not give: then there is nothing to free. */
	(void)mallctl("tcache.destroy", NULL, NULL, &index, sizeof index);
}

static void make_arena(void)
{
	size_t size = sizeof arena;
	if (mallctl("arenas.create", &arena, &size, NULL, 0) != 0)
		abort(); /* jemalloc is out of arenas or memory at start-up */
	/* Without the key a thread's tcache would outlive it: threads go without one. */
	tcache_key_made = pthread_key_create(&tcache_key, destroy_tcache) == 0;
}

/* This thread's explicit tcache, made on first use: slower without one, still right. */
static unsigned thread_tcache(void)
{
	unsigned index;
	size_t size = sizeof index;
	if (!tcache_key_made || mallctl("tcache.create", &index, &size, NULL, 0) != 0)
		return NO_TCACHE;
	/* The key's value is a number, index + 1: NOLINTBEGIN(performance-no-int-to-ptr) */
	if (pthread_setspecific(tcache_key, (void *)(uintptr_t)(index + 1))) {
		destroy_tcache((void *)(uintptr_t)(index + 1));
		return NO_TCACHE;
	}
	/* NOLINTEND(performance-no-int-to-ptr) */
	return index + 1;
}

static int flags(size_t alignment)
{
	pthread_once(&arena_once, make_arena);
	if (!tcache)
		tcache = thread_tcache();
	if (tcache == NO_TCACHE)
		return MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE | MALLOCX_ALIGN(alignment);
	return MALLOCX_ARENA(arena) | MALLOCX_TCACHE(tcache - 1) | MALLOCX_ALIGN(alignment);
}

/* jemalloc counts an aligned allocation at its size class, not the padding it
 * trims off to align it. */
void *tw__alloc_aligned(size_t size, size_t alignment)
{
	return mallocx(size, flags(alignment));
}

void tw__free_aligned(void *p, size_t size, size_t alignment)
{
	if (p)
		sdallocx(p, size, flags(alignment));
}

uint64_t tw__alloc_bytes(void)
{
	pthread_once(&arena_once, make_arena);
	uint64_t epoch = 1;
	size_t size = sizeof epoch;
	mallctl("epoch", &epoch, &size, &epoch, size);
	char name[64];
	size_t small = 0, large = 0;
	size = sizeof small;
	/* Both names fit: 29 characters and an unsigned's 10 digits at most. */
	(void)snprintf(name, sizeof name, "stats.arenas.%u.small.allocated", arena);
	mallctl(name, &small, &size, NULL, 0);
	(void)snprintf(name, sizeof name, "stats.arenas.%u.large.allocated", arena);
	mallctl(name, &large, &size, NULL, 0);
	return small + large;
}
#else
static _Atomic uint64_t allocated;

/* posix_memalign: aligned_alloc would round a chunk up to its alignment. */
void *tw__alloc_aligned(size_t size, size_t alignment)
{
	void *p;
	if (posix_memalign(&p, alignment, size) != 0)
		return NULL;
	atomic_fetch_add_explicit(&allocated, size, memory_order_relaxed);
	return p;
}

void tw__free_aligned(void *p, size_t size, size_t alignment)
{
	(void)alignment;
	if (p)
		atomic_fetch_sub_explicit(&allocated, size, memory_order_relaxed);
	free(p);
}

uint64_t tw__alloc_bytes(void)
{
	return atomic_load_explicit(&allocated, memory_order_relaxed);
}
#endif

void *tw__alloc(size_t size)
{
	return tw__alloc_aligned(size, TW_ALLOC_ALIGN);
}

void tw__free(void *p, size_t size)
{
	tw__free_aligned(p, size, TW_ALLOC_ALIGN);
}
