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
# A cluster example (libtickwheel-cluster) runs against an etcd of its own on 127.0.0.1.
etcd_pid=
stop_etcd() { [ -z "$etcd_pid" ] || { kill "$etcd_pid" 2>/dev/null; wait "$etcd_pid" 2>/dev/null || true; }; }
trap 'stop_etcd; rm -rf "$tmp"' EXIT
start_etcd() {
	local ports
	read -r -a ports <<<"$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')"
	etcd_url="http://127.0.0.1:${ports[0]}"
	"${TW_ETCD:-etcd}" --name install-check --data-dir "$tmp/etcd" --listen-client-urls "$etcd_url" \
		--advertise-client-urls "$etcd_url" --listen-peer-urls "http://127.0.0.1:${ports[1]}" \
		--initial-advertise-peer-urls "http://127.0.0.1:${ports[1]}" \
		--initial-cluster "install-check=http://127.0.0.1:${ports[1]}" >"$tmp/etcd.log" 2>&1 &
	etcd_pid=$!
	python3 - "$etcd_url/health" <<'PY' && return 0
import sys, time, urllib.request
for _ in range(100):
    try:
        urllib.request.urlopen(sys.argv[1], timeout=1).read()
        sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit(1)
PY
	cat "$tmp/etcd.log"
	fail "etcd did not start for the cluster example"
}

for ex in "${examples[@]}"; do
	name=$(basename "$ex" .c)
	if grep -q '<tickwheel_cluster.h>\|"tickwheel_cluster.h"' "$ex"; then
		if ! pkg-config --exists --define-variable=prefix="$root" tickwheel-cluster; then
			echo "skipped: $name (libtickwheel-cluster was not built: no libcurl or jansson)"
			continue
		fi
		for f in include/tickwheel_cluster.h "$libdir/libtickwheel-cluster.so" \
			"$libdir/pkgconfig/tickwheel-cluster.pc"; do
			[ -e "$root/$f" ] || fail "meson install did not install $f"
		done
		# Shared only: a static libcurl would need TLS and more in static form.
		"$cc" "${flags[@]}" "$ex" $(pkg-config --define-variable=prefix="$root" --cflags --libs \
			tickwheel-cluster) -o "$tmp/$name-shared"
		[ -n "$etcd_pid" ] || start_etcd
		# order_timeouts: 3 s of orders unpaid after 1 s, its store in $tmp; it exits 1
		# when an order is left open or was cancelled early.
		args=("$etcd_url" install-check 3)
		[ "$name" != order_timeouts ] || args+=(1 "$tmp/orders")
		LD_LIBRARY_PATH="$root/$libdir" "$tmp/$name-shared" "${args[@]}" \
			>"$tmp/out" 2>&1 || { rc=$?; cat "$tmp/out"; fail "$name exited with status $rc"; }
		grep -q '^ran ' "$tmp/out" || { cat "$tmp/out"; fail "$name ran nothing in 3 s"; }
		if [ "$name" = order_timeouts ]; then
			grep -q 'cancelled, .* ms after its due$' "$tmp/out" &&
				grep -q '^paid .*its timeout: cancelled' "$tmp/out" &&
				grep -q ' 0 open;' "$tmp/out" ||
				{ cat "$tmp/out"; fail "$name: no order cancelled and paid, or one left open"; }
		fi
		echo "ok: $name, shared, against etcd"
		built=$((built + 1))
		continue
	fi
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
