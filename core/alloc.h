/*
 * alloc.h - the engine's one allocation pair. Built on jemalloc (a private
 * arena, per-thread explicit tcaches) or, with -Dallocator=libc (sanitizer
 * builds), on malloc.
 */
#ifndef TICKWHEEL_CORE_ALLOC_H
#define TICKWHEEL_CORE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

enum { TW_ALLOC_ALIGN = 64 }; /* a cache line: tasks are aligned to one */

void *tw__alloc(size_t size);
void tw__free(void *p, size_t size);
/* The same with a larger alignment (a power of two); freed with the same. */
void *tw__alloc_aligned(size_t size, size_t alignment);
void tw__free_aligned(void *p, size_t size, size_t alignment);
/* Bytes the engine's allocations hold now (jemalloc: the arena's own count). */
uint64_t tw__alloc_bytes(void);

#endif
