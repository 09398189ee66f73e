#!/usr/bin/env bash
# perf/results.sh [PATH/TO/tw-perf] - runs every tw-perf scenario at its default size, writing
# each table (SCENARIO.txt), its JSON (SCENARIO.json) and its pictures (*.png) into
# perf/results/, which is committed: the README shows the pictures and headline figures.
#
# Default binary: build-perf/perf/suite/tw-perf (configure it with --buildtype=release; tools/run.sh
# perf does all of it). Takes about 8 minutes. A scenario that misses a target exits 1: the run
# goes on, and the summary at the end names it. SCENARIOS="burst idle" runs only those.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tw=$(realpath "${1:-$here/../build-perf/perf/suite/tw-perf}")
out=$here/results
scenarios=${SCENARIOS:-heartbeats burst oneshots-busy blocker queued-behind idle sessions sessions-coarse sessions-many churn stall ops}
mkdir -p "$out"

summary=()
for s in $scenarios; do
	args=() name=$s
	# the peers at 10M take minutes and 1.5 GB each: the default sizes stop at 1M here
	[ "$s" != ops ] || args=(--sizes 1000,10000,100000,1000000)
	# the gateway's engine with cfg.coarse_clock, as well as without
	[ "$s" != sessions-coarse ] || { s=sessions name=sessions-coarse args=(--coarse-clock); }
	# and resetting a batch of sessions in one call (tw_set_delay_many)
	[ "$s" != sessions-many ] || { s=sessions name=sessions-many args=(--reset-many); }
	echo "== tw-perf $s ${args[*]}" >&2
	"$tw" "$s" "${args[@]}" --json "$out/$name.json" --plot "$out" | tee "$out/$name.txt"
	rc=${PIPESTATUS[0]}
	s=$name
	case $rc in
	0) summary+=("$s: every target met") ;;
	1) summary+=("$s: some target missed (see $out/$s.txt)") ;;
	*) summary+=("$s: failed with status $rc") ;;
	esac
done
printf '%s\n' "${summary[@]}"
