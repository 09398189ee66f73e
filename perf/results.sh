#!/usr/bin/env bash
# perf/results.sh [--reference] [PATH/TO/tw-perf] - runs every tw-perf scenario at its default
# size, writing each table (SCENARIO.txt), its JSON (SCENARIO.json, with the machine and the git
# revision) and its pictures (*.png), then RUN.md: which revision, which machine, which targets.
#
#   (default)     into perf/out/, which git ignores: a run to read, compare or throw away.
#                 OUT=DIR writes elsewhere; SCENARIOS="burst idle" runs only those.
#   --reference   into perf/results/, the committed reference run that the top README shows:
#                 every scenario (SCENARIOS and OUT are refused), from a work tree with no
#                 uncommitted change to a tracked file, perf/results/ included (tw-perf records
#                 `git describe --dirty` at build time: it must name the code measured). The old
#                 files are removed first, so the folder holds this run and nothing else.
#                 Review `git diff --stat perf/results` and commit it on purpose.
#   --describe DIR   only (re)writes DIR/RUN.md from the JSON files in DIR.
#
# Default binary: build-perf/perf/suite/tw-perf (configure it with --buildtype=release; tools/run.sh
# perf does all of it). Takes about 10 minutes. A scenario that misses a target exits 1: the run
# goes on, and the summary at the end names it.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
all="heartbeats burst oneshots-busy blocker queued-behind idle sessions sessions-coarse sessions-many churn stall ops dispatch list lumps cron snapshot"

# describe DIR TITLE [NAME...]: DIR/RUN.md from DIR/NAME.json, or every DIR/*.json (tw-perf's
# machine facts and target verdicts).
describe() {
	python3 - "$@" <<'EOF'
import glob, json, os, sys

out, title, names = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = []
paths = [os.path.join(out, n + '.json') for n in names] or sorted(glob.glob(os.path.join(out, '*.json')))
for path in paths:
    if names and not os.path.exists(path):
        continue
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit('results.sh: %s: %s' % (path, e))
    if d.get('tool') == 'tw-perf':
        runs.append((os.path.splitext(os.path.basename(path))[0], d))
if not runs:
    sys.exit('results.sh: no tw-perf JSON in %s' % out)

def facts(key):
    return sorted({str(d['machine'].get(key, 'unknown')) for _, d in runs})

m = runs[0][1]['machine']
dates = sorted(d['machine'].get('date', '') for _, d in runs)
lines = ['# %s' % title, '',
         'Written by `perf/results.sh` from the "machine" and "targets" objects of the JSON files here.']
if os.environ.get('REFERENCE_OF'):
    lines += ['The reference run: `tools/run.sh perf reference` rewrites this folder, and a commit',
              'updates it on purpose; a normal `tools/run.sh perf` writes perf/out/ instead.']
lines += ['',
         '| | |', '|---|---|',
         '| git revision | %s |' % ', '.join(facts('git')),
         '| date (UTC) | %s .. %s |' % (dates[0], dates[-1]),
         '| host | %s |' % ', '.join(facts('host')),
         '| CPU | %s, %s online |' % (', '.join(facts('cpu')), ', '.join(facts('cpus'))),
         '| kernel | %s (%s) |' % (', '.join(facts('kernel')), ', '.join(facts('arch'))),
         '| compiler, build | %s; %s |' % (', '.join(facts('compiler')), ', '.join(facts('build'))),
         '', '| scenario | command | targets |', '|---|---|---|']
for name, d in runs:
    argv = d.get('command', '').split()
    if argv:
        argv[0] = 'tw-perf'
    # the paths of --json and --plot are the run's, not part of the scenario
    cmd, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ('--json', '--plot'):
            skip = True
        else:
            cmd.append(a)
    targets = d.get('targets', [])
    missed = ['%s %s %g' % (t['name'], t['op'], t['limit']) for t in targets if not t.get('met')]
    verdict = ('none' if not targets else 'all %d met' % len(targets) if not missed
               else '%d of %d met; missed: %s' % (len(targets) - len(missed), len(targets),
                                                  ', '.join(missed)))
    lines.append('| %s | `%s` | %s |' % (name, ' '.join(cmd), verdict))
missing = [n for n in os.environ.get('REFERENCE_OF', '').split() if n not in dict(runs)]
if missing:
    lines += ['', 'Not in this run (scenarios added since): %s.' % ', '.join(missing)]
dirty = [g for g in facts('git') if g.endswith('-dirty') or g == 'unknown']
if dirty:
    lines += ['', '**The revision is %s: the code measured is not a commit.**' % ', '.join(dirty)]
head = os.environ.get('EXPECT_GIT')
if head and facts('git') != [head]:
    warn = 'tw-perf was built from %s, the work tree is at %s' % (', '.join(facts('git')), head)
    lines += ['', '**%s.**' % warn]
    print('results.sh: warning: ' + warn, file=sys.stderr)
with open(os.path.join(out, 'RUN.md'), 'w') as f:
    f.write('\n'.join(lines) + '\n')
EOF
}

reference=0
case "${1:-}" in
--reference) reference=1 && shift ;;
--describe)
	[ $# -eq 2 ] || { echo "usage: perf/results.sh --describe DIR" >&2; exit 2; }
	if [ "$(realpath "$2")" = "$here/results" ]; then
		REFERENCE_OF=$all describe "$2" "Reference run of tw-perf" || exit 2
	else
		describe "$2" "tw-perf run" || exit 2
	fi
	echo "results.sh: wrote $2/RUN.md" >&2
	exit 0
	;;
-*)
	echo "usage: perf/results.sh [--reference] [PATH/TO/tw-perf] | --describe DIR" >&2
	exit 2
	;;
esac
tw=$(realpath "${1:-$here/../build-perf/perf/suite/tw-perf}")
[ -x "$tw" ] || { echo "results.sh: $tw: no tw-perf there (tools/run.sh perf builds it)" >&2; exit 2; }

if [ "$reference" = 1 ]; then
	[ -z "${SCENARIOS:-}" ] || { echo "results.sh: a reference runs every scenario: unset SCENARIOS" >&2; exit 2; }
	[ -z "${OUT:-}" ] || { echo "results.sh: a reference goes to perf/results/: unset OUT" >&2; exit 2; }
	changes=$(git -C "$here/.." status --porcelain --untracked-files=no 2>&1) || {
		echo "results.sh: git status failed: $changes" >&2
		exit 2
	}
	if [ -n "$changes" ]; then
		echo "results.sh: a reference records the git revision, and these changes are not in it:" >&2
		echo "$changes" >&2
		echo "results.sh: commit them (or run without --reference, into perf/out/; after an" \
			"interrupted reference run, git checkout perf/results)" >&2
		exit 2
	fi
	head=$(git -C "$here/.." describe --always --dirty) # what meson's vcs_tag gives tw-perf
	out=$here/results
	scenarios=$all
	mkdir -p "$out"
	rm -f "$out"/*.json "$out"/*.txt "$out"/*.png "$out"/RUN.md
else
	out=${OUT:-$here/out}
	scenarios=${SCENARIOS:-$all}
	mkdir -p "$out"
fi

summary=() names=()
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
	names+=("$name")
	case $rc in
	0) summary+=("$s: every target met") ;;
	1) summary+=("$s: some target missed (see $out/$s.txt)") ;;
	*) summary+=("$s: failed with status $rc") ;;
	esac
done
printf '%s\n' "${summary[@]}"

if [ "$reference" = 1 ]; then
	EXPECT_GIT=$head REFERENCE_OF=$all describe "$out" "Reference run of tw-perf" || exit 2
	echo "results.sh: perf/results/ now holds the reference run (perf/results/RUN.md: revision," \
		"machine, targets). Review it and commit it on purpose:" >&2
	echo "  git add -A perf/results && git commit  # say why the reference moves" >&2
else
	describe "$out" "tw-perf run" "${names[@]}" || exit 2
	echo "results.sh: this run is in $out (git ignores perf/out/); perf/results/ holds the" \
		"reference (tools/run.sh perf reference refreshes it)" >&2
fi
