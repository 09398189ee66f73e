/*
 * bench_modes.h - the benchmark's modes besides the side-by-side tables.
 */
#ifndef TICKWHEEL_PERF_BENCH_MODES_H
#define TICKWHEEL_PERF_BENCH_MODES_H

#include <stdint.h>

#define CALLGRIND_OPS "add, cancel, reschedule, reset, expiry, expiry-short"

/* `--callgrind OP N [IMPL]`: argv holds OP N [IMPL]. Returns the exit code. */
int run_callgrind_mode(int argc, char **argv, uint64_t seed);

/* The lumps case: 1 000 000 timers due within one second, advanced one tick
 * at a time, from an aligned and from unaligned starting ticks. */
void run_lumps_report(uint64_t seed);

#endif
