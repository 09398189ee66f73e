#!/usr/bin/env bash
# usage: check_install.sh BUILD_DIR SOURCE_DIR PREFIX LIBDIR CC
#
# The library as a user gets it: meson install into a temporary root, then every program in
# examples/ built against the installed library through pkg-config alone, linked to the shared
# library and statically (`pkg-config --static`, cc -static), and run. A Criterion example is
# linked to the static archive inside a dynamic program, since Debian ships no static Criterion.
# An example that includes <microhttpd.h> is built with `pkg-config libmicrohttpd` the same way
# (a fully static program would need GnuTLS's static dependencies, and Debian has no static
# p11-kit) and run on a free port for a second; it is skipped, and said so, only when
# pkg-config does not find libmicrohttpd.
set -euo pipefail
build=$1 src=$2 prefix=$3 libdir=$4 cc=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

meson install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet </dev/null
root="$tmp/root$prefix"
for f in include/tickwheel.h "$libdir/libtickwheel.a" "$libdir/libtickwheel.so" \
	"$libdir/pkgconfig/tickwheel.pc"; do
	[ -e "$root/$f" ] || fail "meson install did not install $f"
done
soname=$(readelf -d "$root/$libdir/libtickwheel.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ -e "$root/$libdir/$soname" ] || fail "no $soname installed beside libtickwheel.so"

export PKG_CONFIG_PATH="$root/$libdir/pkgconfig"
pc() { pkg-config --define-variable=prefix="$root" "$@" tickwheel; }
[ "$(pc --modversion)" = "$(sed -n 's/^#define TW_VERSION_STRING "\(.*\)"/\1/p' \
	"$root/include/tickwheel.h")" ] || fail "tickwheel.pc's version is not the header's"

flags=(-std=c11 -Wall -Wextra -Wpedantic -Werror -O2)
examples=("$src"/examples/*.c)
[ -e "${examples[0]}" ] || fail "no examples in $src/examples"
built=0
for ex in "${examples[@]}"; do
	name=$(basename "$ex" .c)
	if grep -q '<criterion/criterion.h>\|<microhttpd.h>' "$ex"; then
		if grep -q '<microhttpd.h>' "$ex"; then
			if ! pkg-config --exists libmicrohttpd; then
				echo "skipped: $name (pkg-config finds no libmicrohttpd)"
				continue
			fi
			read -ra extra <<<"$(pkg-config --cflags --libs libmicrohttpd)"
			run=(--port 0 --seconds 1)
		else
			read -ra extra <<<"$(pkg-config --cflags --libs criterion)"
			run=(--jobs=1)
		fi
		"$cc" "${flags[@]}" "$ex" $(pc --cflags --libs) "${extra[@]}" -o "$tmp/$name-shared"
		"$cc" "${flags[@]}" "$ex" $(pc --cflags) "$root/$libdir/libtickwheel.a" \
			$(pc --static --libs-only-other --libs-only-l | sed 's/-ltickwheel//') \
			"${extra[@]}" -o "$tmp/$name-static"
	else
		"$cc" "${flags[@]}" "$ex" $(pc --cflags --libs) -o "$tmp/$name-shared"
		# glibc's static archives warn of dlopen/getaddrinfo in a static program: not ours.
		"$cc" "${flags[@]}" -static "$ex" $(pc --cflags --static --libs) \
			-o "$tmp/$name-static" 2> >(grep -v "statically linked applications requires" >&2)
		run=()
	fi
	readelf -d "$tmp/$name-shared" | grep -q "NEEDED.*\[$soname\]" ||
		fail "$name-shared does not load $soname"
	if readelf -d "$tmp/$name-static" | grep -q "NEEDED.*libtickwheel"; then
		fail "$name-static loads libtickwheel dynamically"
	fi
	for kind in shared static; do
		LD_LIBRARY_PATH="$root/$libdir" "$tmp/$name-$kind" "${run[@]}" >"$tmp/out" 2>&1 ||
			{ rc=$?; cat "$tmp/out"; fail "$name ($kind) exited with status $rc"; }
		echo "ok: $name, $kind"
		built=$((built + 1))
	done
done
echo "$built programs built against the installed library through pkg-config and run"
