/*
 * abi.c - what keeps programs built against an older header working: the
 * library's version, and the copying of structs whose size the caller passes
 * (api/tickwheel.h, "Growing structs without breaking callers").
 */
#include "base.h"

#include <string.h>

/* meson.build's project version and the header's must be one version. */
#if TW_VERSION_MAJOR != TW_BUILD_VERSION_MAJOR || TW_VERSION_MINOR != TW_BUILD_VERSION_MINOR || \
	TW_VERSION_PATCH != TW_BUILD_VERSION_PATCH
#error "api/tickwheel.h's TW_VERSION_* differ from the project version in meson.build"
#endif

const char *tw_version(void)
{
	return TW_VERSION_STRING;
}

int tw__struct_in(void *dst, size_t dst_size, const void *src, size_t src_size)
{
	if (src_size > dst_size) {
		/* A newer caller: fine while it asks for nothing this library lacks. */
		const unsigned char *tail = (const unsigned char *)src + dst_size;
		for (size_t i = 0; i < src_size - dst_size; i++)
			if (tail[i])
				return -TW_EINVAL;
		src_size = dst_size;
	}
	memcpy(dst, src, src_size);
	return TW_OK;
}

void tw__struct_out(void *dst, size_t dst_size, const void *src, size_t src_size)
{
	size_t n = dst_size < src_size ? dst_size : src_size;
	memcpy(dst, src, n);
	memset((unsigned char *)dst + n, 0, dst_size - n);
}
