#!/usr/bin/env bash
# usage: scrape_prometheus.sh PROMETHEUS METRICS_HTTP
#
# A real Prometheus server scrapes examples/metrics_http: the example on a free port of
# 127.0.0.1, Prometheus with a generated config (scrape every 1 s, that target alone), its
# storage and web listener in a temporary directory and on a free port of 127.0.0.1; then
# Prometheus's HTTP API is asked for tickwheel_runs_total{engine="metrics_http"}, which must be
# above 0. Bounded: 30 s for the first answer with a value, 40 s in all for both processes to
# start; both are stopped and the directory removed on any exit (trap). Nothing leaves the
# loopback.
set -euo pipefail
prometheus=$1 example=$2
tmp=$(mktemp -d)
example_pid= prom_pid=
cleanup() {
	for pid in $prom_pid $example_pid; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in $prom_pid $example_pid; do
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	echo "--- metrics_http:"; cat "$tmp/example.log" 2>/dev/null || true
	echo "--- prometheus (last lines):"; tail -n 20 "$tmp/prometheus.log" 2>/dev/null || true
	exit 1
}
# GET URL: the body on stdout, through python (no curl in the base image).
get() {
	python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"
}

# The example picks its own free port (--port 0) and prints its URL.
"$example" --port 0 --seconds 90 >"$tmp/example.log" 2>&1 &
example_pid=$!
for _ in $(seq 100); do
	grep -q '^serving http://127.0.0.1:[0-9]*/metrics' "$tmp/example.log" && break
	kill -0 "$example_pid" 2>/dev/null || fail "metrics_http exited"
	sleep 0.1
done
target=$(sed -n 's|^serving http://\(127.0.0.1:[0-9]*\)/metrics|\1|p' "$tmp/example.log")
[ -n "$target" ] || fail "metrics_http did not say where it serves within 10 s"
get "http://$target/metrics" | grep -q '^tickwheel_runs_total{engine="metrics_http"} ' ||
	fail "no tickwheel_runs_total at http://$target/metrics"

# A free port for Prometheus: the kernel's choice, let go just before Prometheus binds it.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: tickwheel
    static_configs:
      - targets: ["$target"]
YML
"$prometheus" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
	--web.listen-address="127.0.0.1:$port" >"$tmp/prometheus.log" 2>&1 &
prom_pid=$!

query="http://127.0.0.1:$port/api/v1/query?query=tickwheel_runs_total%7Bengine%3D%22metrics_http%22%7D"
deadline=$((SECONDS + 30)) value=
while [ "$SECONDS" -lt "$deadline" ]; do
	kill -0 "$prom_pid" 2>/dev/null || fail "prometheus exited"
	kill -0 "$example_pid" 2>/dev/null || fail "metrics_http exited"
	answer=$(get "$query" 2>/dev/null || true)
	value=$(python3 -c 'import json, sys
r = json.loads(sys.argv[1]).get("data", {}).get("result", [])
print(r[0]["value"][1] if r else "")' "$answer" 2>/dev/null || true)
	[ -n "$value" ] && break
	sleep 0.5
done
[ -n "$value" ] || fail "no tickwheel_runs_total in Prometheus within 30 s (last answer: ${answer:-none})"
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$value" ||
	fail "tickwheel_runs_total is $value in Prometheus"
up=$(get "http://127.0.0.1:$port/api/v1/query?query=up%7Bjob%3D%22tickwheel%22%7D")
echo "ok: Prometheus ($("$prometheus" --version 2>&1 | head -n 1)) scraped $target:" \
	"tickwheel_runs_total = $value; up: $up"
