#!/usr/bin/env bash
# usage: check_subproject.sh SOURCE_DIR CC
#
# A parent project (tests/consume/parent) that has this checkout as subprojects/tickwheel and
# finds it with dependency('tickwheel'): it must configure, build and run, and inherit the
# library alone: no test, tool, benchmark or example target, and nothing installed but the
# library, its header, its pkg-config file and the parent's own program.
set -euo pipefail
src=$1 cc=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cp -r "$src/tests/consume/parent" "$tmp/parent"
mkdir "$tmp/parent/subprojects"
ln -s "$src" "$tmp/parent/subprojects/tickwheel"
CC="$cc" meson setup "$tmp/build" "$tmp/parent" --wrap-mode=nodownload >"$tmp/setup.log" 2>&1 ||
	{ cat "$tmp/setup.log"; fail "meson setup of the parent project"; }
ninja -C "$tmp/build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "ninja"; }
"$tmp/build/parent" || fail "the parent's program"

targets=$(meson introspect --targets "$tmp/build" |
	python3 -c 'import json, sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
echo "targets: $targets"
for t in $targets; do
	case "$t" in
	parent | tickwheel) ;;
	*) fail "the parent inherits the target $t" ;;
	esac
done

meson install -C "$tmp/build" --destdir "$tmp/root" --no-rebuild --quiet </dev/null
installed=$(cd "$tmp/root" && find . -type f -o -type l | sed 's|^\./||' | sort)
echo "installed:" $installed
while read -r f; do
	case "$f" in
	*/bin/parent | */include/tickwheel.h | */libtickwheel.so* | */libtickwheel.a | \
		*/pkgconfig/tickwheel.pc) ;;
	*) fail "the parent's install also installs $f" ;;
	esac
done <<<"$installed"
echo "ok: tickwheel as a subproject of a parent project"
