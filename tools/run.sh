#!/usr/bin/env bash
# tools/run.sh - the single entry point: set-up, the demo, and the test suites.
#
#   tools/run.sh setup       install missing Debian packages, configure build/, build it
#   tools/run.sh demo        setup, then the main job: build/tools/tw-showcase (options pass on)
#   tools/run.sh test        setup, then the test suites in build/
#   tools/run.sh test-asan   the test suites in build-asan/ (ASan + UBSan, no recovery)
#   tools/run.sh test-tsan   the plain-program suites in build-tsan/ (ThreadSanitizer)
#   tools/run.sh test-clang  the test suites in build-clang/, built by clang with -Werror, the
#                            snapshot reader fuzzed for 15 s and the etcd stream decoders for
#                            10 s (libFuzzer: tests/fuzz/)
#   tools/run.sh lint        the static analyser: clang-tidy (.clang-tidy) over the .c files of
#                            wheel/, core/ and calendar/, and through them their headers and api/
#   tools/run.sh perf        the perf suite: every tw-perf scenario from build-perf/ (release),
#                            tables, JSON and pictures into perf/out/, which git ignores
#                            (about 10 minutes; SCENARIOS="burst idle" runs only those)
#   tools/run.sh perf reference   the same into perf/results/, the committed reference run,
#                            from a clean work tree: review it and commit it on purpose
#   tools/run.sh perf-gate   the latency regression gate: callgrind instruction counts per
#                            operation against perf/baseline.json, from build-gate/ (release)
#   tools/run.sh perf-gate update   the same build, then rewrites perf/baseline.json
#   tools/run.sh all-tests   test, lint, test-asan, test-tsan, test-clang, then perf-gate
#   tools/run.sh abi-update  rewrites api/libtickwheel.abi and api/libtickwheel-cluster.abi
#                            from build/ (after a deliberate ABI
#                            change: a new minor for additions, a new major for breaks)
#
# Meant for a fresh Debian 12 machine as root. Every test run ends with a line
# "tests: N passed, N failed" and exits non-zero on any failure. Criterion exits 0 without
# running anything when given an unknown option, and a filter matching nothing runs 0 tests,
# so each Criterion suite must have printed "Synthesis: Tested: N" with N > 0 and Failing: 0.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PACKAGES=(meson ninja-build pkg-config gcc clang liburcu-dev libjemalloc-dev libcriterion-dev
	libuv1-dev libevent-dev libev-dev valgrind gnuplot-nox abigail-tools clang-tidy clang-format
	libmicrohttpd-dev prometheus tzdata zlib1g-dev etcd-server libcurl4-openssl-dev libjansson-dev)

log() { printf 'run.sh: %s\n' "$*" >&2; }
die() { printf 'run.sh: error: %s\n' "$*" >&2; exit 1; }

install_packages() {
	local missing=() p
	for p in "${PACKAGES[@]}"; do
		if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
			missing+=("$p")
		fi
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing ${missing[*]}"
	local sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || die "not root and no sudo: install ${missing[*]}"
		sudo=(sudo)
	fi
	"${sudo[@]}" apt-get update </dev/null || return 1
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y \
		"${missing[@]}" </dev/null || return 1
}

# configure DIR [meson options...]: meson setup DIR unless it is already configured (a setup
# that failed half-way is wiped and redone). libmicrohttpd and the cluster transport (libcurl,
# jansson, etcd) are required, not auto: the /metrics example, the Prometheus scrape test and
# the etcd suites must not be skipped here for want of a package.
configure() {
	local dir="$1"
	shift
	if [ -f "$dir/build.ninja" ]; then
		return 0
	elif [ -f "$dir/meson-private/coredata.dat" ]; then
		meson setup --wipe "$dir" -Dtests=enabled -Dmicrohttpd=enabled -Dcluster=enabled "$@" </dev/null || return 1
	else
		meson setup "$dir" -Dtests=enabled -Dmicrohttpd=enabled -Dcluster=enabled "$@" </dev/null || return 1
	fi
}

# The functions below return on the first error even where errexit is off (if !, ||).
setup() {
	install_packages || return 1
	configure build || return 1
	ninja -C build
}

# verify DIR MESON_RC: reads DIR/meson-logs/testlog.txt, prints one line per meson test and
# the final "tests: N passed, N failed" line; returns non-zero on any failure.
verify() {
	local dir="$1" meson_rc="$2" criterion="${3:-criterion}"
	python3 - "$dir/meson-logs/testlog.txt" "$meson_rc" "$criterion" <<'EOF'
import os, re, shlex, sys

path, meson_rc = sys.argv[1], int(sys.argv[2])
expect_criterion = sys.argv[3] == 'criterion'
passed = failed = 0
problems = []

def is_criterion(cmd):
    try:
        argv = shlex.split(cmd)
    except ValueError:
        argv = cmd.split()
    for tok in argv:
        if re.match(r'^[A-Za-z_][A-Za-z0-9_]*=', tok) or not os.path.isfile(tok):
            continue
        with open(tok, 'rb') as f:
            if b'libcriterion.so' in f.read():
                return True
    return False

try:
    text = open(path, encoding='utf-8', errors='replace').read()
except OSError:
    text = None
    problems.append('no test log at %s' % path)

sections = []
if text is not None:
    text = re.sub(r'\x1b\[[0-9;]*m', '', text)
    sections = re.split(r'^=+ \d+/\d+ =+$', text, flags=re.M)[1:]
    if not sections:
        problems.append('meson ran no tests')

suites = 0
for sec in sections:
    get = lambda key: (re.search(r'^%s:\s*(.*)$' % key, sec, re.M) or [None, ''])[1].strip()
    name, result, cmd = get('test'), get('result'), get('command')
    ok_exit = result == 'exit status 0'
    # LSan's report at a Criterion worker's exit does not fail the test: count it here.
    leaks = len(re.findall(r'ERROR: LeakSanitizer', sec))
    if leaks:
        failed += leaks
        problems.append('%s: %d LeakSanitizer report(s)' % (name, leaks))
    if is_criterion(cmd):
        suites += 1
        syn = re.findall(r'Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+)', sec)
        if not syn:
            failed += 1
            problems.append('%s: Criterion suite printed no Synthesis line (%s)' % (name, result))
            continue
        tested, p, f = map(int, syn[-1])
        passed += p
        failed += f
        if tested == 0:
            failed += 1
            problems.append('%s: Criterion suite ran 0 tests (filter or option trap?)' % name)
        elif f:
            problems.append('%s: %d of %d tests failed' % (name, f, tested))
        elif not ok_exit:
            failed += 1
            problems.append('%s: all %d tests passed but the suite ended with %s' % (name, tested, result))
        print('  %-36s Criterion: %d tested, %d passing, %d failing' % (name, tested, p, f))
    else:
        if result in ('exit status 0', 'OK'):
            passed += 1
        elif result in ('exit status 77', 'SKIP', 'skipped'):
            print('  %-36s skipped' % name)
            continue
        else:
            failed += 1
            problems.append('%s: %s' % (name, result))
        print('  %-36s %s' % (name, result))

if text is not None and suites == 0 and expect_criterion:
    failed += 1
    problems.append('no Criterion suite was run (is tests/meson.build registering them?)')
if meson_rc != 0 and failed == 0:
    failed += 1
    problems.append('meson test exited with status %d' % meson_rc)
for p in problems:
    print('FAIL: ' + p)
print('tests: %d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
EOF
}

# run_tests DIR [no-criterion]: meson test in DIR, then verify its log; no-criterion when the
# build is not expected to run any Criterion suite (ThreadSanitizer).
run_tests() {
	local dir="$1" criterion="${2:-criterion}" rc=0
	rm -f "$dir/meson-logs/testlog.txt"
	meson test -C "$dir" --print-errorlogs </dev/null || rc=$?
	log "checking $dir/meson-logs/testlog.txt"
	verify "$dir" "$rc" "$criterion"
}

# Marks a failed build as one failed test, so that every test run ends with the summary line.
build_or_fail() {
	if ! "$@"; then
		echo "FAIL: build ($*)"
		echo "tests: 0 passed, 1 failed"
		exit 1
	fi
}

do_test() {
	build_or_fail setup
	run_tests build
}

do_test_asan() {
	build_or_fail install_packages
	build_or_fail configure build-asan -Db_sanitize=address,undefined \
		-Dc_args=-fno-sanitize-recover=all -Dallocator=libc
	build_or_fail ninja -C build-asan
	export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
	export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
	run_tests build-asan
}

# ThreadSanitizer: Criterion does not run under it here, so this build runs the plain-program
# suites only (the engine's concurrency stress test, the wheel demo).
do_test_tsan() {
	build_or_fail install_packages
	build_or_fail configure build-tsan -Db_sanitize=thread -Dallocator=libc
	build_or_fail ninja -C build-tsan
	run_tests build-tsan no-criterion
}

# clang builds every target with the same -Werror flags as gcc (the ABI record is gcc's alone).
do_test_clang() {
	build_or_fail install_packages
	CC=clang build_or_fail configure build-clang
	build_or_fail ninja -C build-clang
	run_tests build-clang
}

# Instruction counts depend on the compiler and the build options, and the baseline was made
# from these: an existing build-gate/ is set back to them rather than trusted.
GATE_OPTIONS=(-Dbuildtype=release -Db_sanitize=none -Dallocator=jemalloc)

# perf-gate [check|update] [perf/gate.py options]
do_perf_gate() {
	local what="${1:-check}" rc=0
	case "$what" in
	check | update) shift || true ;;
	*) what=check ;;
	esac
	build_or_fail install_packages
	build_or_fail configure build-gate "${GATE_OPTIONS[@]}"
	build_or_fail meson configure build-gate "${GATE_OPTIONS[@]}" </dev/null
	build_or_fail ninja -C build-gate perf/suite/tw-perf
	python3 perf/gate.py "$what" --tw-perf build-gate/perf/suite/tw-perf "$@" </dev/null || rc=$?
	[ "$what" = check ] || return "$rc"
	echo "perf-gate (build-gate/ against perf/baseline.json):"
	if [ "$rc" -eq 0 ]; then
		echo "tests: 1 passed, 0 failed"
	else
		echo "tests: 0 passed, 1 failed"
	fi
	return "$rc"
}

# The static analyser: clang-tidy with the root's .clang-tidy, every finding an error. It reads
# build/compile_commands.json through a copy that holds the .c files of wheel/, core/ and calendar/ once
# each: the wheel's are compiled for the library and again for the wheel tests' own static
# library, and are analysed with the library's flags only.
do_lint() {
	local rc=0 start=$SECONDS db=build/lint
	build_or_fail install_packages
	build_or_fail configure build
	mkdir -p "$db"
	build_or_fail python3 - "$ROOT" build/compile_commands.json "$db/compile_commands.json" <<'PY'
import json, os, sys

root, src, dst = (os.path.realpath(a) for a in sys.argv[1:4])
dirs = {os.path.join(root, d) for d in ('core', 'wheel', 'calendar', 'cluster')}
keep = {}
for e in json.load(open(src)):
    path = os.path.realpath(os.path.join(e['directory'], e['file']))
    if os.path.dirname(path) not in dirs or not path.endswith('.c'):
        continue
    if path not in keep or 'libtickwheel' in e.get('output', '') or 'transport' in e.get('output', ''):
        keep[path] = e
if not keep:
    sys.exit('no .c file of core/, wheel/ or calendar/ in %s' % src)
json.dump(list(keep.values()), open(dst, 'w'), indent=1)
print('run.sh: clang-tidy over %d files' % len(keep), file=sys.stderr)
PY
	# run-clang-tidy colours its output: plain text for logs, without the "N warnings
	# generated" lines that count the system headers' warnings it does not show.
	run-clang-tidy -p "$db" -j 2 -quiet </dev/null 2>&1 |
		sed -r -e 's/\x1b\[[0-9;]*m//g' -e '/^[0-9]+ warnings? generated\.$/d' || rc=$?
	# The style (.clang-format) over every C file the repository holds.
	local unformatted
	unformatted=$(git ls-files '*.c' '*.h' '*.h.in' | xargs clang-format --dry-run --Werror 2>&1 |
		grep -oE '^[^:]+\.(c|h|h\.in):' | sort -u | tr -d ':' || true)
	if [ -n "$unformatted" ]; then
		echo "FAIL: not formatted by clang-format (clang-format -i FILE):" $unformatted
		rc=1
	fi
	log "lint took $((SECONDS - start)) s"
	echo "lint (clang-tidy over wheel/, core/ and calendar/, with their headers and api/;"
	echo "clang-format --dry-run over every C file):"
	if [ "$rc" -eq 0 ]; then
		echo "tests: 1 passed, 0 failed"
	else
		echo "tests: 0 passed, 1 failed"
	fi
	return "$rc"
}

# perf [reference]: a normal run writes perf/out/; only "reference" rewrites perf/results/.
do_perf() {
	local mode=()
	case "${1:-}" in
	'') ;;
	reference) mode=(--reference) ;;
	*) die "usage: tools/run.sh perf [reference]" ;;
	esac
	build_or_fail install_packages
	build_or_fail configure build-perf -Dbuildtype=release
	build_or_fail ninja -C build-perf perf/suite/tw-perf
	bash perf/results.sh "${mode[@]}" build-perf/perf/suite/tw-perf
}

cmd="${1:-}"
case "$cmd" in
setup)
	setup
	;;
demo)
	setup
	exec build/tools/tw-showcase "${@:2}"
	;;
test)
	do_test
	;;
test-asan)
	do_test_asan
	;;
test-tsan)
	do_test_tsan
	;;
test-clang)
	do_test_clang
	;;
lint)
	do_lint
	;;
perf)
	do_perf "${@:2}"
	;;
abi-update)
	setup
	# The options are check_abi.py's: the record and the check describe the library alike.
	abidw --headers-dir api --drop-private-types --no-show-locs --no-corpus-path \
		--no-comp-dir-path --out-file api/libtickwheel.abi build/core/libtickwheel.so
	log "api/libtickwheel.abi rewritten from build/core/libtickwheel.so"
	abidw --headers-dir api --drop-private-types --no-show-locs --no-corpus-path \
		--no-comp-dir-path --out-file api/libtickwheel-cluster.abi \
		build/cluster/libtickwheel-cluster.so
	log "api/libtickwheel-cluster.abi rewritten from build/cluster/libtickwheel-cluster.so"
	;;
perf-gate)
	do_perf_gate "${@:2}"
	;;
all-tests)
	rc=0
	self="$ROOT/tools/run.sh"
	out="$(mktemp)"
	trap 'rm -f "$out"' EXIT
	log "== test (build/)"
	bash "$self" test 2>&1 | tee "$out" || rc=1
	sums=$(grep -E '^tests: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1 || true)
	for kind in lint test-asan test-tsan test-clang perf-gate; do
		log "== $kind"
		bash "$self" "$kind" 2>&1 | tee "$out" || rc=1
		sums="$sums"$'\n'$(grep -E '^tests: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1 || true)
	done
	p=$(awk '/^tests:/ { s += $2 } END { print s + 0 }' <<<"$sums")
	f=$(awk '/^tests:/ { s += $4 } END { print s + 0 }' <<<"$sums")
	[ "$(grep -c '^tests:' <<<"$sums")" -eq 6 ] || { rc=1; f=$((f + 1)); }
	[ "$rc" -eq 0 ] || [ "$f" -gt 0 ] || f=1
	echo "all-tests (build/ + lint + build-asan/ + build-tsan/ + build-clang/ + the perf gate):"
	echo "tests: $p passed, $f failed"
	exit "$rc"
	;;
*)
	echo "usage: tools/run.sh setup|demo [showcase options]|test|test-asan|test-tsan|test-clang|lint|perf [reference]|perf-gate [update]|all-tests|abi-update" >&2
	exit 2
	;;
esac
