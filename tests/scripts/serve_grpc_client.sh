#!/usr/bin/env bash
# `gantry serve`'s KServe v2 gRPC service passes an independent client's checks
# (tests/clients/kserve_grpc_client_test.mjs: @grpc/grpc-js + @grpc/proto-loader loading
# proto/grpc_predict_v2.proto): health, metadata, typed and raw inference on the MLP equal to HTTP JSON,
# Silero VAD with its state, the repository extension, API keys as metadata, and bad requests. Then a
# drain: SIGTERM turns ServerReady false and the server exits.
# Usage: serve_grpc_client.sh BUILD_DIR   (run from the source dir; never skips: a missing dependency fails)
set -uo pipefail
BUILD=${1:?usage: serve_grpc_client.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
MLP=$DEPS/models/mlp_64_128_10.onnx
SILERO=$DEPS/models/silero_vad_v5.onnx
CLIENTS=tests/clients
READY_TIMEOUT_S=60
MAX_BODY=1048576

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
for m in "$MLP" "$SILERO"; do [[ -f "$m" ]] || { echo "FAIL: $m missing (run scripts/setup.sh)"; exit 1; }; done
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup.sh installs it)"; exit 1; }
[[ -d "$CLIENTS/node_modules/@grpc/grpc-js" && -d "$CLIENTS/node_modules/@grpc/proto-loader" ]] ||
  { echo "FAIL: $CLIENTS/node_modules lacks @grpc/grpc-js or @grpc/proto-loader (scripts/setup.sh runs npm ci there)"; exit 1; }

tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; rm -rf "$tmp"' EXIT

port=$(free_port)
gport=$(free_port)
base="http://127.0.0.1:$port"
key=grpc-test-$RANDOM$RANDOM
echo "$key" >"$tmp/key.txt"
"$GANTRY" serve "$MLP" "$SILERO" --host 127.0.0.1 --port "$port" --grpc-port "$gport" \
  --api-key-file "$tmp/key.txt" --max-body-size "$MAX_BODY" >"$tmp/server.log" 2>&1 &
pid=$!

ready=0
deadline=$((SECONDS + READY_TIMEOUT_S))
while ((SECONDS < deadline)); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: gantry serve exited before it was ready:"; tail -20 "$tmp/server.log"; pid=""; exit 1
  fi
  if [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$base/v2/health/ready")" == 200 ]]; then ready=1; break; fi
  sleep 0.25
done
((ready)) || { echo "FAIL: $base/v2/health/ready not 200 within ${READY_TIMEOUT_S} s:"; tail -20 "$tmp/server.log"; exit 1; }
grep -q "KServe v2 gRPC on port $gport" "$tmp/server.log" ||
  { echo "FAIL: the server did not report gRPC on port $gport:"; tail -20 "$tmp/server.log"; exit 1; }

status=0
GRPC_ADDR="127.0.0.1:$gport" HTTP_URL="$base" API_KEY="$key" MAX_BODY="$MAX_BODY" TEST_TIMEOUT_S=60 \
  timeout 90 node "$CLIENTS/kserve_grpc_client_test.mjs" || status=1

# A second server asking for the same gRPC port fails to start, naming the port (no silent sharing).
"$GANTRY" serve "$MLP" --host 127.0.0.1 --port 0 --grpc-port "$gport" >"$tmp/second.log" 2>&1
second=$?
if ((second == 0)) || ! grep -q "cannot listen for gRPC on 127.0.0.1:$gport" "$tmp/second.log"; then
  echo "FAIL: a second server on gRPC port $gport: exit $second"; cat "$tmp/second.log"; status=1
fi

stop_server || status=1
grep -q "draining" "$tmp/server.log" || { echo "FAIL: no drain on SIGTERM"; status=1; }
if ((status)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "FAIL: the KServe gRPC client checks failed against gantry serve"
fi
exit $status
