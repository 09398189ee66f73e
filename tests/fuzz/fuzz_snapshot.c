/*
 * fuzz_snapshot.c - libFuzzer target for the snapshot reader (core/snapshot_format.c): any
 * bytes at all, parsed. ASan and UBSan catch a read outside the input or an overflow; the
 * target itself checks that a file the parser accepts is exactly what the encoders would
 * write for what it parsed (so the parser accepts no byte the format does not define), and
 * that a refusal is one of the three codes of a refused file.
 *
 * Its copy of the parser checks no CRC (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION), so that
 * mutations reach the records: the comparison leaves the CRC's 4 bytes out.
 *
 * Built with clang only (-fsanitize=fuzzer); tests/fuzz/meson.build runs it for a bounded
 * time over the committed corpus (tests/fuzz/corpus/snapshot/: valid files and broken ones).
 */
#include "../../core/snapshot.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snap_file f;
	int rc = tw__snapshot_parse(data, size, &f);
	if (rc) {
		if (rc != -TW_ENOTSNAPSHOT && rc != -TW_EVERSION && rc != -TW_ECORRUPT &&
		    rc != -TW_ENOMEM)
			abort();
		return 0;
	}
	uint8_t *again = malloc(size);
	if (!again)
		abort();
	size_t len = tw__snapshot_put_header(again, f.written_wall_ns);
	size_t dups = 0;
	for (size_t i = 0; i < f.count; i++) {
		if (len + snap_record_bytes(&f.records[i]) > size - SNAP_TRAILER_BYTES)
			abort();
		len += tw__snapshot_put_record(again + len, &f.records[i]);
		dups += f.records[i].duplicate;
	}
	if (len != size - SNAP_TRAILER_BYTES || dups != f.duplicates)
		abort();
	len += tw__snapshot_put_trailer(again + len, f.count, tw__snapshot_crc(0, again, len));
	size_t crc_at = size - SNAP_TRAILER_BYTES + 8;
	if (len != size || memcmp(again, data, crc_at) ||
	    memcmp(again + crc_at + 4, data + crc_at + 4, size - crc_at - 4))
		abort();
	free(again);
	tw__snapshot_file_free(&f);
	return 0;
}
