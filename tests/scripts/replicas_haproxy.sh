#!/usr/bin/env bash
# Horizontal scale-out the way a cluster does it: three `gantry serve` replicas on loopback behind Debian's
# HAProxy, which health-checks /v2/health/ready. A bounded load (2,000 completions, 8 at a time; node's
# fetch through the balancer) runs while one replica gets SIGTERM (it turns unready, HAProxy stops sending,
# it drains: no request may fail) and then another SIGKILL (only its in-flight requests may fail; the last
# replica serves the rest). tests/clients/replicas_load.mjs drives the load and the signals and prints the
# counts; every wait is for an event (HAProxy's stats socket, a process exiting), never a fixed sleep.
# HAProxy's log then shows that every failed request was one the killed replica held.
# Usage: replicas_haproxy.sh BUILD_DIR   (run from the source dir)
set -uo pipefail
BUILD=${1:?usage: replicas_haproxy.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
MODEL=$DEPS/models/tiny-llama.gguf
TOTAL=${REPLICAS_TOTAL:-2000}

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
[[ -f "$MODEL" ]] || { echo "FAIL: $MODEL missing (run scripts/setup.sh)"; exit 1; }
command -v haproxy >/dev/null || { echo "FAIL: haproxy is not installed (scripts/apt-packages.txt; make setup)"; exit 1; }
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup.sh installs it)"; exit 1; }

tmp=$(mktemp -d)
pids=()
hapid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, wait_ready
cleanup() {
  for p in "${pids[@]}" $hapid; do kill -KILL "$p" 2>/dev/null; done
  for p in "${pids[@]}" $hapid; do wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# Three replicas, each on one inference thread (two shared cores), each draining the cluster's way:
# readiness 503 at once, still serving for --drain-delay, then accepted requests finish.
ports=()
for i in 1 2 3; do
  port=$(free_port)
  ports+=("$port")
  "$GANTRY" serve "$MODEL" --host 127.0.0.1 --port "$port" --grpc-port -1 --threads 1 --parallel 4 \
    --drain-delay 2 --drain-timeout 30 >"$tmp/r$i.log" 2>&1 &
  pids+=($!)
done
for i in 0 1 2; do
  pid=${pids[$i]}
  wait_ready "http://127.0.0.1:${ports[$i]}" "$tmp/r$((i + 1)).log" 120 || exit 1
done
pid=""  # serve_common's stop_server is not used here

lb_port=$(free_port)
cat >"$tmp/haproxy.cfg" <<EOF
global
  log stdout format raw local0
  stats socket $tmp/haproxy.sock mode 600 level admin
  maxconn 512
defaults
  mode http
  log global
  option httplog
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  # A connection refused (a replica that just went away) is retried on another replica. Every request
  # gets a connection of its own to its replica (no reuse): a request sent over an idle connection to a
  # replica killed meanwhile would fail as if it had been in flight there.
  retries 3
  option redispatch
  http-reuse never
frontend lb
  bind 127.0.0.1:$lb_port
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /v2/health/ready
  http-check expect status 200
  default-server inter 100ms fall 1 rise 2
  server r1 127.0.0.1:${ports[0]} check
  server r2 127.0.0.1:${ports[1]} check
  server r3 127.0.0.1:${ports[2]} check
EOF
haproxy -c -f "$tmp/haproxy.cfg" >"$tmp/haproxy-check.log" 2>&1 || { echo "FAIL: haproxy -c:"; cat "$tmp/haproxy-check.log"; exit 1; }
haproxy -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 &
hapid=$!
for _ in $(seq 1 100); do [[ -S "$tmp/haproxy.sock" ]] && break; kill -0 "$hapid" 2>/dev/null || break; sleep 0.1; done
[[ -S "$tmp/haproxy.sock" ]] || { echo "FAIL: haproxy did not start:"; tail "$tmp/haproxy.log"; exit 1; }
echo "HAProxy $(haproxy -v | head -1 | awk '{print $3}') on 127.0.0.1:$lb_port in front of replicas on ports ${ports[*]}"

status=0
LB_URL="http://127.0.0.1:$lb_port" STATS_SOCKET="$tmp/haproxy.sock" MODEL=tiny-llama \
  PID_R1=${pids[0]} PID_R2=${pids[1]} TOTAL=$TOTAL CONCURRENCY=8 TEST_TIMEOUT_S=300 \
  timeout 330 node tests/clients/replicas_load.mjs | tee "$tmp/load.txt"
((PIPESTATUS[0] == 0)) || status=1

# HAProxy's log (one line per request: client, date, frontend, backend/server, timers, status, bytes, -, -,
# termination state): every failed request was one r2 held when it was killed (routed to r2, ended by
# r2's side closing: termination state S...), and there are as many as the client saw.
client_failed=$(sed -n 's/^FAILED //p' "$tmp/load.txt")
awk '/"POST \/v1\/completions/ && $6 != 200' "$tmp/haproxy.log" >"$tmp/failed.log"
lb_failed=$(wc -l <"$tmp/failed.log")
not_r2=$(awk '$4 != "replicas/r2" || $10 !~ /^S/' "$tmp/failed.log" | wc -l)
if [[ -n "$client_failed" && "$lb_failed" == "$client_failed" && "$not_r2" == 0 ]]; then
  echo "ok HAProxy's log: the $lb_failed failed requests were all held by r2 when it was killed"
else
  echo "FAIL: HAProxy's log has $lb_failed failed requests ($not_r2 not held by r2), the client saw ${client_failed:-?}"
  head -10 "$tmp/failed.log"; status=1
fi

# r1 stopped by itself after its drain (exit 0, every accepted request answered); r2 was killed.
wait "${pids[0]}"; r1_rc=$?
if ((r1_rc != 0)) || ! grep -q "drained, every accepted request answered" "$tmp/r1.log"; then
  echo "FAIL: r1 after SIGTERM: exit $r1_rc"; tail -5 "$tmp/r1.log"; status=1
else
  echo "ok r1 drained and exited 0 after SIGTERM"
fi
kill -0 "${pids[2]}" 2>/dev/null || { echo "FAIL: r3 is not running"; status=1; }
if ((status)); then
  for i in 1 2 3; do echo "--- r$i log (tail)"; tail -8 "$tmp/r$i.log"; done
  echo "--- haproxy log (tail)"; tail -10 "$tmp/haproxy.log"
  echo "FAIL: replicas behind HAProxy"
fi
exit $status
