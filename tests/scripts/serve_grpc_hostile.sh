#!/usr/bin/env bash
# gRPC under attack (issue 34, item 4): tests/server/grpc_hostile.mjs replays, over raw HTTP/2, 8
# unauthenticated ModelInfer streams that each send 40 MiB of a 59 MiB message and pause, against a real
# `gantry serve` with --api-key-file: each must be answered UNAUTHENTICATED before its message is
# complete, with the server's RSS and peak RSS bounded; an authenticated message over --max-body-size
# answers RESOURCE_EXHAUSTED stating the limit; 8 authenticated 59 MiB messages stay under the gRPC memory
# bound; the server answers afterwards. The refusals are counted in /metrics. Then all of it again on the
# HTTP port with --grpc-port same (h2c connections handed to gRPC).
# Usage: serve_grpc_hostile.sh BUILD_DIR   (run from the source dir; never skips: a missing dependency fails)
set -uo pipefail
BUILD=${1:?usage: serve_grpc_hostile.sh BUILD_DIR}
GANTRY=$BUILD/bin/gantry
MLP=${GANTRY_DEPS_DIR:-$(pwd)/.cache}/models/mlp_64_128_10.onnx
FACTOR=${GANTRY_RSS_BOUND_FACTOR:-1}
MAX_BODY=$((64 * 1024 * 1024))  # the default --max-body-size, passed explicitly so the test knows it

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
[[ -f "$MLP" ]] || { echo "FAIL: $MLP missing (run scripts/setup.sh)"; exit 1; }
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup.sh installs it)"; exit 1; }

tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; rm -rf "$tmp"' EXIT
openssl rand -hex 16 >"$tmp/key"
key=$(cat "$tmp/key")
status=0

# $1: the gRPC port argument. Starts the server (pid in $pid) on $port.
start() {
  port=$(free_port)
  "$GANTRY" serve "$MLP" --host 127.0.0.1 --port "$port" --grpc-port "$1" --api-key-file "$tmp/key" \
    --max-body-size "$MAX_BODY" >"$tmp/server.log" 2>&1 &
  pid=$!
  wait_ready "http://127.0.0.1:$port" "$tmp/server.log" 60
}

# 1. Its own gRPC port.
gport=$(free_port)
start "$gport" || exit 1
timeout -k 5 180 node tests/server/grpc_hostile.mjs "127.0.0.1:$gport" "$key" "$pid" "$MAX_BODY" "$FACTOR" ||
  status=1
kill -0 "$pid" 2>/dev/null || { echo "FAIL: gantry serve died:"; tail -20 "$tmp/server.log"; exit 1; }
# The refusals are counted, under model "-" (the body that names the model was never read).
metrics=$(curl -s -H "authorization: Bearer $key" "http://127.0.0.1:$port/metrics")
refused=$(grep '^gantry_requests_total{' <<<"$metrics" | grep 'protocol="grpc"' | grep 'code="401"' |
  grep 'model="-"' | awk '{n += $2} END {print n + 0}')
((refused == 9)) ||
  { echo "FAIL: /metrics counts $refused refused gRPC calls as 401 under model \"-\", not 9:"; grep 'protocol="grpc"' <<<"$metrics"; status=1; }
stop_server || status=1

# 2. gRPC on the HTTP port (h2c connections adopted by the gRPC server): the same checks.
start same || exit 1
timeout -k 5 180 node tests/server/grpc_hostile.mjs "127.0.0.1:$port" "$key" "$pid" "$MAX_BODY" "$FACTOR" ||
  status=1
kill -0 "$pid" 2>/dev/null || { echo "FAIL: gantry serve (--grpc-port same) died:"; tail -20 "$tmp/server.log"; exit 1; }
stop_server || status=1

if ((status)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "FAIL: serve_grpc_hostile"
fi
exit $status
