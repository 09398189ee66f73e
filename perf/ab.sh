#!/usr/bin/env bash
# perf/ab.sh - build two revisions, run them in alternation, and say whether B differs from A.
#
#   perf/ab.sh REV_A REV_B [-n 5] [-j 1] [-o DIR] [SCENARIO ...] [-- COMPARE_OPTIONS]
#   perf/ab.sh --tw-perf-a PATH --tw-perf-b PATH [-n 5] [-o DIR] [SCENARIO ...] [-- ...]
#
# Each revision is checked out into a temporary git worktree and built there (meson, release,
# tw-perf and what it links only, no peers). Then, n times over, every SCENARIO runs once from
# A and once from B (A B A B ...), so that a machine that gets busier during the session
# weighs on both alike; each run's JSON goes to DIR/a or DIR/b, and perf/compare.py (the one
# beside this script, whatever the revisions hold) gives the verdict and the exit status:
# 0 no gated figure regressed, 1 one did, 2 bad input or a failed build or run.
#
# A SCENARIO is tw-perf's scenario with its options, quoted as one word:
#   perf/ab.sh main HEAD -n 6 'heartbeats --quick' 'blocker --quick' -- --threshold 10%
# Default: 'heartbeats --quick' (3 s, and the floor measured beside it: about 8 s a run).
# DIR (default: a new directory under ${TMPDIR:-/tmp}) is kept; the worktrees and builds are
# removed on exit, also on failure or ^C. With --tw-perf-a and --tw-perf-b (two tw-perf
# programs already built, both needed) nothing is built and no revision is named: every
# word is a scenario, so that a session can be repeated on the same two builds.
# DIR/session.txt says what ran, when, and the machine's load before and after.
# See perf/COMPARE.md.
set -euo pipefail

usage() {
	sed -n '2,23s/^# \{0,1\}//p' "$0" >&2
	exit 2
}
die() {
	echo "ab.sh: $*" >&2
	exit 2
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel 2>/dev/null) || die "$here: not in a git checkout"
runs=5 jobs=1 out='' revs=() scenarios=() compare_opts=() tw_a='' tw_b='' words=()
while (($#)); do
	case $1 in
	--tw-perf-a) tw_a=${2:?--tw-perf-a needs a path}; shift 2 ;;
	--tw-perf-b) tw_b=${2:?--tw-perf-b needs a path}; shift 2 ;;
	-n) runs=${2:?-n needs a number}; shift 2 ;;
	-j) jobs=${2:?-j needs a number}; shift 2 ;;
	-o) out=${2:?-o needs a directory}; shift 2 ;;
	-h | --help) usage ;;
	--) shift; compare_opts=("$@"); break ;;
	-*) die "unknown option $1 (perf/ab.sh --help)" ;;
	*) words+=("$1"); shift ;;
	esac
done
prebuilt=false
if [[ -n $tw_a || -n $tw_b ]]; then
	[[ -n $tw_a && -n $tw_b ]] || die "--tw-perf-a and --tw-perf-b go together"
	for tw in "$tw_a" "$tw_b"; do
		[[ -f $tw && -x $tw ]] || die "$tw: not an executable file"
	done
	# an absolute path: the runs' own directory is not the caller's
	tw_a=$(realpath "$tw_a") tw_b=$(realpath "$tw_b")
	prebuilt=true
	scenarios=(${words[@]+"${words[@]}"})
else
	((${#words[@]} >= 2)) || usage
	revs=("${words[@]:0:2}")
	scenarios=("${words[@]:2}")
fi
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "-n $runs: expected a whole number above 0"
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "-j $jobs: expected a whole number above 0"
((${#scenarios[@]})) || scenarios=('heartbeats --quick')
if ((runs < 4)); then
	echo "ab.sh: warning: -n $runs: compare.py needs 4 runs of each for 95 % confidence" >&2
fi

commits=()
for rev in ${revs[@]+"${revs[@]}"}; do
	commits+=("$(git -C "$repo" rev-parse --verify --quiet "$rev^{commit}")") ||
		die "$rev: not a revision of $repo"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/tw-ab-build.XXXXXX")
# shellcheck disable=SC2317  # run by the trap
cleanup() {
	for side in a b; do
		if [[ -d $work/$side ]]; then
			git -C "$repo" worktree remove --force "$work/$side" >/dev/null 2>&1 || true
		fi
	done
	git -C "$repo" worktree prune >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -z $out ]]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/tw-ab.XXXXXX")
fi
mkdir -p "$out/a" "$out/b"
[[ -z $(find "$out/a" "$out/b" -mindepth 1 -print -quit) ]] || die "$out/a or $out/b is not empty: runs would mix"

# The options this revision's meson_options.txt knows, from those that make the build small.
setup_options() {
	local commit=$1 opts
	opts=$(git -C "$repo" show "$commit:meson_options.txt" 2>/dev/null || true)
	printf '%s\n' -Dbuildtype=release
	for o in peers=disabled cluster=disabled tests=disabled examples=false \
		microhttpd=disabled; do
		if grep -q "option('${o%%=*}'" <<<"$opts"; then
			printf '%s\n' "-D$o"
		fi
	done
}

build() {
	local side=$1 commit=$2 src=$work/$1 bld=$work/$1-build log=$work/$1-build.log
	git -C "$repo" worktree add --detach "$src" "$commit" >/dev/null 2>&1 ||
		die "git worktree add $commit failed"
	echo "ab.sh: building $side = ${commit:0:12} (log: $log while it runs)" >&2
	mapfile -t opts < <(setup_options "$commit")
	if ! { meson setup "$bld" "$src" "${opts[@]}" &&
		meson compile -C "$bld" -j "$jobs" tw-perf; } >"$log" 2>&1; then
		tail -n 30 "$log" >&2
		die "building $side (${commit:0:12}) failed"
	fi
	# where tw-perf is in this revision's tree, from the build's own description
	python3 - "$bld" <<-'EOF'
		import json, subprocess, sys
		targets = json.loads(subprocess.run(['meson', 'introspect', sys.argv[1], '--targets'],
		                                    capture_output=True, text=True, check=True).stdout)
		print([t for t in targets if t['name'] == 'tw-perf'][0]['filename'][0])
	EOF
}

if $prebuilt; then
	label_a=$tw_a label_b=$tw_b
	echo "ab.sh: A = $tw_a, B = $tw_b (built already), $runs rounds of: ${scenarios[*]}" >&2
else
	tw_a=$(build a "${commits[0]}")
	if [[ ${commits[0]} == "${commits[1]}" ]]; then
		# one revision against itself (how the comparison's false alarms are measured): the
		# build would be the same, the machine's time is not spent twice
		echo "ab.sh: A and B are one commit: one build for both" >&2
		tw_b=$tw_a
	else
		tw_b=$(build b "${commits[1]}")
	fi
	echo "ab.sh: A = ${revs[0]} (${commits[0]:0:12}), B = ${revs[1]} (${commits[1]:0:12})," \
		"$runs rounds of: ${scenarios[*]}" >&2
	label_a="${revs[0]} (${commits[0]})" label_b="${revs[1]} (${commits[1]})"
fi
{
	echo "a: $label_a"
	echo "b: $label_b"
	echo "rounds: $runs"
	printf 'scenario: %s\n' "${scenarios[@]}"
	echo "start: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
} >"$out/session.txt"

# tw-perf exits 1 when a target is missed: that is a figure, not a failure.
run_one() {
	local tw=$1 json=$2 scenario=$3 rc=0
	# shellcheck disable=SC2086  # a scenario is its name and its options, split on purpose
	"$tw" $scenario --json "$json" >"${json%.json}.txt" 2>&1 </dev/null || rc=$?
	if ((rc > 1)); then
		tail -n 20 "${json%.json}.txt" >&2
		die "$tw $scenario: exit status $rc"
	fi
}

for ((i = 1; i <= runs; i++)); do
	for s in "${!scenarios[@]}"; do
		name=$(printf '%s' "${scenarios[$s]}" | tr -c 'A-Za-z0-9_.-' '_')
		echo "ab.sh: round $i/$runs: ${scenarios[$s]}" >&2
		run_one "$tw_a" "$out/a/$name-$i.json" "${scenarios[$s]}"
		run_one "$tw_b" "$out/b/$name-$i.json" "${scenarios[$s]}"
	done
done

echo "end: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)" \
	>>"$out/session.txt"
echo "ab.sh: runs kept in $out" >&2
rc=0
python3 "$here/compare.py" "$out/a" "$out/b" --json "$out/verdict.json" \
	${compare_opts[@]+"${compare_opts[@]}"} || rc=$?
exit "$rc"
