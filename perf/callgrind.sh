#!/bin/bash
# callgrind.sh - instructions per operation, counted by callgrind around the
# measured loop only (tw-perf callgrind-op --op OP --tasks N --impl IMPL), for
# the wheel and the peers built into tw-perf.
#
# usage: perf/callgrind.sh [PATH/TO/tw-perf]
#   default binary: build-perf/perf/suite/tw-perf under the repository root
# environment (all optional):
#   SIZES="100000 1000000"   OPS="add cancel reschedule reset expiry"
#   IMPLS="wheel libuv libevent libev" (default: every one built in)
#   OUT=dir                  keeps the callgrind.out files there (default: a
#                            temporary directory, removed at the end)
# Each figure = the `totals:` Ir of the callgrind.out file / the operation
# count tw-perf reports (the figure `operations`); it includes the benchmark
# loop (about 5 instructions per operation: index load, delay load, address
# computation, branch).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bench=$(realpath "${1:-$here/../build-perf/perf/suite/tw-perf}")
sizes=${SIZES:-100000 1000000}
ops=${OPS:-add cancel reschedule reset expiry}
# the wheel, then the peers that `tw-perf --help` lists as built in
impls=${IMPLS:-wheel $("$bench" --help | sed -n 's/^peers built in: *//p' | sed 's/\<none\>//')}
keep=${OUT:-}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
[ -n "$keep" ] || trap 'rm -rf "$out"' EXIT

command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }

# The wheel's targets from the issue, instructions per operation.
target() {
	case $1 in
	add) echo "<= 40" ;; cancel) echo "<= 25" ;; reschedule) echo "<= 50" ;;
	expiry) echo "<= 60" ;; *) echo - ;;
	esac
}

# Prints "TOTAL LIBRARY" instructions per operation for one run, or "failed -":
# TOTAL is every instruction between the client requests; LIBRARY leaves out
# the self cost of the benchmark's own functions (the adapters' *_set_* loops
# and the peers' count_firing callbacks).
instructions_per_op() {
	local impl=$1 op=$2 n=$3
	local file=$out/callgrind.$impl.$op.$n.out
	local report
	if ! report=$(valgrind --tool=callgrind --collect-atstart=no --instr-atstart=no \
		--callgrind-out-file="$file" "$bench" callgrind-op --op "$op" --tasks "$n" \
		--impl "$impl" 2>/dev/null); then
		echo failed -
		return
	fi
	local count total bench_self
	count=$(awk '$1 == "operations" { print $3 }' <<<"$report")
	total=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$file")
	bench_self=$(callgrind_annotate --inclusive=no --threshold=100 "$file" 2>/dev/null |
		awk '/:[a-z]+_set_[a-z_]+ |:count_firing / { gsub(",", "", $1); s += $1 }
		     END { print s + 0 }')
	awk -v t="$total" -v b="$bench_self" -v c="$count" \
		'BEGIN { if (c > 0) printf "%.1f %.1f\n", t / c, (t - b) / c; else print "failed -" }'
}

echo "callgrind instructions per operation, $(date -u '+%Y-%m-%d %H:%M UTC'), $bench"
echo "each cell: all instructions of the measured loop / operations; wheel (lib): the same"
echo "without the benchmark's own loop. Peers' expiry: timers due in 1..1000 ms, one"
echo "non-blocking loop iteration (real clock), callbacks included."
printf '%-11s %8s' op N
for impl in $impls; do printf ' %9s' "$impl"; done
printf ' %11s %13s\n' 'wheel (lib)' 'wheel target'
for n in $sizes; do
	for op in $ops; do
		printf '%-11s %8s' "$op" "$n"
		wheel_lib=-
		for impl in $impls; do
			read -r total lib < <(instructions_per_op "$impl" "$op" "$n")
			printf ' %9s' "$total"
			[ "$impl" != wheel ] || wheel_lib=$lib
		done
		printf ' %11s %13s\n' "$wheel_lib" "$(target "$op")"
	done
done
[ -z "$keep" ] || echo "callgrind.out files kept in $out (callgrind_annotate FILE)"
