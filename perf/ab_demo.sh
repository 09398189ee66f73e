#!/usr/bin/env bash
# perf/ab_demo.sh - does ab.sh's verdict work on this machine? Issue 28's test: a build with
# 200 us of extra work per run must be called a regression, and two builds of one revision
# "no difference", each in at least 9 sessions of 10.
#
#   perf/ab_demo.sh --build REV DIR
#       makes the three builds in DIR (release, tw-perf alone, as ab.sh makes them): A and A2
#       from REV in two build directories, B from REV with a throwaway patch that spins 200 us
#       after every callback (core/run_firing.h); prints the three tw-perf paths.
#   perf/ab_demo.sh [-s 10] [-n 5] [-o DIR] TW_PERF_A TW_PERF_B TW_PERF_A2 [SCENARIO]
#       runs -s sessions of A against B and -s of A against A2, interleaved (B, A2, B, ...),
#       each one `ab.sh --tw-perf-a .. --tw-perf-b .. -n N SCENARIO` with compare.py's
#       defaults, into DIR/regression-I and DIR/same-I; then DIR/summary.txt: per session the
#       exit status, the verdict and every gated figure's ratio and interval, and the counts.
#       SCENARIO defaults to 'heartbeats --quick'; the demonstration replays a recording:
#       TW_RECORD=/tmp/gw.twrec build/examples/gateway, then SCENARIO 'replay /tmp/gw.twrec'.
# Exit status 0 when both counts reach 9 of 10 (or the same share of -s), 1 when not, 2 on
# bad input. See perf/COMPARE.md, "Does it work here?".
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() {
	sed -n '2,20s/^# \{0,1\}//p' "$0" >&2
	exit 2
}
die() {
	echo "ab_demo.sh: $*" >&2
	exit 2
}

# The throwaway patch: 200 us of busy work right after the callback returns, in the library.
spin_patch() {
	python3 - "$1/core/run_firing.h" <<-'EOF'
		import sys
		path = sys.argv[1]
		text = open(path).read()
		call = 'rc = cold->callback(&fire, cold->arg);\n'
		if text.count(call) != 1:
		    sys.exit('ab_demo.sh: %s: the callback call to patch is not there' % path)
		spin = ('{ uint64_t spin_from = monotonic_ns();'
		        ' while (monotonic_ns() - spin_from < 200000) ; }\n')
		open(path, 'w').write(text.replace(call, call + spin))
	EOF
}

build_three() {
	local rev=$1 dir=$2 repo commit
	repo=$(git -C "$here" rev-parse --show-toplevel)
	commit=$(git -C "$repo" rev-parse --verify --quiet "$rev^{commit}") ||
		die "$rev: not a revision of $repo"
	[[ ! -e $dir ]] || die "$dir exists already"
	mkdir -p "$dir"
	dir=$(realpath "$dir")
	local opts=(-Dbuildtype=release -Dpeers=disabled -Dcluster=disabled -Dtests=disabled
		-Dexamples=false -Dmicrohttpd=disabled)
	git -C "$repo" worktree add --detach "$dir/src-a" "$commit" >&2
	git -C "$repo" worktree add --detach "$dir/src-b" "$commit" >&2
	spin_patch "$dir/src-b"
	local side src
	for side in a a2 b; do
		src=$dir/src-${side:0:1}
		{ meson setup "$dir/build-$side" "$src" "${opts[@]}" &&
			ninja -C "$dir/build-$side" -j 2 perf/suite/tw-perf; } >"$dir/build-$side.log" 2>&1 ||
			die "building $side failed: $dir/build-$side.log"
	done
	echo "$dir/build-a/perf/suite/tw-perf $dir/build-b/perf/suite/tw-perf" \
		"$dir/build-a2/perf/suite/tw-perf"
	echo "ab_demo.sh: remove with git worktree remove --force $dir/src-a (and src-b)" >&2
}

if [[ ${1:-} == --build ]]; then
	(($# == 3)) || usage
	build_three "$2" "$3"
	exit 0
fi

sessions=10 runs=5 out='' args=()
while (($#)); do
	case $1 in
	-s) sessions=${2:?-s needs a number}; shift 2 ;;
	-n) runs=${2:?-n needs a number}; shift 2 ;;
	-o) out=${2:?-o needs a directory}; shift 2 ;;
	-h | --help) usage ;;
	-*) die "unknown option $1 (perf/ab_demo.sh --help)" ;;
	*) args+=("$1"); shift ;;
	esac
done
((${#args[@]} == 3 || ${#args[@]} == 4)) || usage
[[ $sessions =~ ^[1-9][0-9]*$ ]] || die "-s $sessions: expected a whole number above 0"
tw_a=${args[0]} tw_b=${args[1]} tw_a2=${args[2]} scenario=${args[3]:-heartbeats --quick}
[[ -n $out ]] || out=$(mktemp -d "${TMPDIR:-/tmp}/tw-ab-demo.XXXXXX")
mkdir -p "$out"

for ((i = 1; i <= sessions; i++)); do
	for kind in regression same; do
		other=$tw_b
		[[ $kind == same ]] && other=$tw_a2
		dir=$out/$kind-$i
		echo "ab_demo.sh: session $i/$sessions, $kind ($(date -u +%T))" >&2
		rc=0
		"$here/ab.sh" --tw-perf-a "$tw_a" --tw-perf-b "$other" -n "$runs" -o "$dir" \
			"$scenario" >"$dir.txt" 2>&1 || rc=$?
		echo "$rc" >"$dir.rc"
		((rc <= 1)) || { tail -n 20 "$dir.txt" >&2; die "session $dir: exit status $rc"; }
	done
done

python3 - "$out" "$sessions" <<-'EOF' | tee "$out/summary.txt"
	import json, os, sys
	out, sessions = sys.argv[1], int(sys.argv[2])
	counts = {'regression': 0, 'same': 0}
	print('%-12s %3s  %-4s  %s' % ('session', 'rc', 'says',
	                               'gated figures: B/A (Hodges-Lehmann) [interval] verdict'))
	for i in range(1, sessions + 1):
	    for kind in ('regression', 'same'):
	        d = os.path.join(out, '%s-%d' % (kind, i))
	        rc = int(open(d + '.rc').read())
	        counts[kind] += rc == (1 if kind == 'regression' else 0)
	        with open(os.path.join(d, 'verdict.json')) as f:
	            v = json.load(f)
	        def g(x):
	            return '-' if x is None else '%.3g' % x
	        gated = ['%s %s [%s, %s] %s' % (r['label'], g(r['estimate']), g(r['ci_low']),
	                                        g(r['ci_high']), r['verdict'])
	                 for r in v['rows'] if r['gated']]
	        with open(os.path.join(d, 'session.txt')) as f:
	            load = [l.split('load: ')[1].strip() for l in f if 'load: ' in l]
	        print('%-12s %3d  %-4s  %s; load %s' % ('%s-%d' % (kind, i), rc,
	              'reg' if rc else 'same', '; '.join(gated), ' -> '.join(load)))
	need = -(-9 * sessions // 10)
	print('A vs B (200 us a run): regressed in %d of %d; A vs A2: no difference in %d of %d'
	      % (counts['regression'], sessions, counts['same'], sessions))
	sys.exit(0 if min(counts.values()) >= need else 1)
EOF
