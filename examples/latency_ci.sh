#!/usr/bin/env bash
# examples/latency_ci.sh - a CI job that fails when a change makes your timers later.
#
#   examples/latency_ci.sh --revisions BASE HEAD RECORDING    [-n 5] [-o DIR] [-- COMPARE_OPTIONS]
#   examples/latency_ci.sh --recordings OLD NEW [--tw-perf P] [-n 5] [-o DIR] [-- COMPARE_OPTIONS]
#
# Your workload, not ours: RECORDING, OLD and NEW are recordings of your own program, made by
# running it with TW_RECORD=FILE (or tw_config.record_path) for a minute of typical traffic.
#
# --revisions: did a change to tickwheel (a new version, a patch, other build flags) make this
#   workload later? Builds tickwheel at BASE and at HEAD and replays RECORDING with each, n
#   times, alternating (perf/ab.sh).
# --recordings: did a change to your program make its timers later? OLD and NEW were recorded
#   before and after the change (same traffic); each is replayed n times, alternating, on one
#   tw-perf (default: build/perf/suite/tw-perf), so the engine is the same and only the
#   workload differs (callbacks that now take longer, more resets, ...).
#
# Then perf/compare.py says, per figure, "regressed", "improved" or "no difference" at 95 %
# confidence (perf/COMPARE.md), draws both sides' lateness by percentile into DIR/plots/, and
# gives the exit status a CI job needs: 0 no gated figure regressed, 1 one did, 2 the job
# itself failed. DIR (default ./latency-ci) keeps the runs, the verdict (verdict.json) and the
# charts for the CI's artifacts. Run from a tickwheel checkout (or set TICKWHEEL to one).
set -euo pipefail

die() {
	echo "latency_ci.sh: $*" >&2
	exit 2
}
usage() {
	sed -n '2,24s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

root=${TICKWHEEL:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
mode='' runs=5 out=latency-ci tw_perf='' args=() compare_opts=()
while (($#)); do
	case $1 in
	--revisions | --recordings) mode=$1; shift ;;
	--tw-perf) tw_perf=${2:?--tw-perf needs a path}; shift 2 ;;
	-n) runs=${2:?-n needs a number}; shift 2 ;;
	-o) out=${2:?-o needs a directory}; shift 2 ;;
	-h | --help) usage ;;
	--) shift; compare_opts=("$@"); break ;;
	-*) die "unknown option $1 (--help)" ;;
	*) args+=("$1"); shift ;;
	esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "-n $runs: expected a whole number above 0"
mkdir -p "$out"
out=$(cd "$out" && pwd)
[[ -z $(find "$out" -mindepth 1 -print -quit) ]] || die "$out is not empty: runs would mix"

case $mode in
--revisions)
	((${#args[@]} == 3)) || usage
	base=${args[0]} head=${args[1]} recording=$(realpath "${args[2]}")
	[[ -r $recording ]] || die "${args[2]}: no such recording"
	# ab.sh builds both revisions in worktrees of this checkout, alternates the runs and
	# ends with compare.py's table and exit status.
	exec "$root/perf/ab.sh" "$base" "$head" -n "$runs" -o "$out/runs" "replay $recording" \
		-- --json "$out/verdict.json" --plot "$out/plots" "${compare_opts[@]}"
	;;
--recordings)
	((${#args[@]} == 2)) || usage
	tw_perf=${tw_perf:-$root/build/perf/suite/tw-perf}
	[[ -x $tw_perf ]] || die "$tw_perf: no tw-perf (build tickwheel first: tools/run.sh setup)"
	for f in "${args[@]}"; do
		[[ -r $f ]] || die "$f: no such recording"
	done
	mkdir -p "$out/a" "$out/b"
	# Both sides replay the same path, so that compare.py sees one scenario (it groups runs
	# by their command line); the recording behind it changes from run to run.
	workload=$out/workload.twrec
	for ((i = 1; i <= runs; i++)); do
		for side in a b; do
			if [[ $side == a ]]; then src=${args[0]}; else src=${args[1]}; fi
			cp "$src" "$workload"
			echo "latency_ci.sh: round $i/$runs: $side = $src" >&2
			rc=0
			# exit status 1: a figure missed its target, which is a figure, not a failure
			"$tw_perf" replay "$workload" --json "$out/$side/replay-$i.json" \
				>"$out/$side/replay-$i.txt" 2>&1 </dev/null || rc=$?
			if ((rc > 1)); then
				tail -n 20 "$out/$side/replay-$i.txt" >&2
				die "tw-perf replay $src: exit status $rc"
			fi
		done
	done
	rm -f "$workload"
	exec python3 "$root/perf/compare.py" "$out/a" "$out/b" --json "$out/verdict.json" \
		--plot "$out/plots" "${compare_opts[@]}"
	;;
*) usage ;;
esac
