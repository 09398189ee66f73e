#!/usr/bin/env bash
# usage: check_promtool.sh PROMTOOL METRICS_DUMP
#
# `promtool check metrics` (Debian's prometheus package) over the exposition of a running
# engine (metrics_dump). promtool parses the text format and lints it against Prometheus's
# naming rules (counters end in _total, base units, HELP on every family...); it prints
# nothing and exits 0 for a clean exposition. Any output, on stdout or stderr, or a non-zero
# exit fails: no lint warning is excused. First it is shown a broken exposition, to be sure it
# still rejects one (a promtool that accepts anything would pass the real check silently).
set -euo pipefail
promtool=$1 dump=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf '# TYPE x_total counter\nx_total{a="1} 1\nbad metric\n' >"$tmp/broken"
if "$promtool" check metrics <"$tmp/broken" >"$tmp/out" 2>&1 && [ ! -s "$tmp/out" ]; then
	echo "FAIL: promtool accepted a broken exposition: is it checking anything?"
	exit 1
fi

"$dump" >"$tmp/metrics"
lines=$(wc -l <"$tmp/metrics")
[ "$lines" -gt 40 ] || { cat "$tmp/metrics"; echo "FAIL: only $lines lines of metrics"; exit 1; }
rc=0
"$promtool" check metrics <"$tmp/metrics" >"$tmp/out" 2>&1 || rc=$?
if [ "$rc" -ne 0 ] || [ -s "$tmp/out" ]; then
	cat "$tmp/metrics"
	echo "--- promtool check metrics (exit $rc):"
	cat "$tmp/out"
	echo "FAIL: promtool reported problems"
	exit 1
fi
echo "ok: promtool check metrics: $lines lines, no problem reported ($("$promtool" --version 2>&1 | head -n 1))"
