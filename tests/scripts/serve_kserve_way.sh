#!/usr/bin/env bash
# `gantry serve` run KServe's way and on one port, as a Kubernetes pod runs it:
#   1. --grpc-port same: the independent KServe gRPC client (tests/clients/kserve_grpc_client_test.mjs,
#      @grpc/grpc-js) passes all its checks against the HTTP port, which curl (HTTP/1.1) uses at the same
#      time; an opening split before the preface could tell (one byte, then the rest) is still HTTP/1.1;
#      a client that sends part of the preface and stops is closed after the header timeout while others
#      are served.
#   2. KServe's conventions: STORAGE_URI (a local file:// one here) + --model-name serves the one model under
#      that name; gRPC's default port is KServe's 8081; --model-name with two models is refused, naming them.
#   3. Readiness is "every model asked for is loaded": unloading the model turns /v2/health/ready 503
#      (naming it) and gantry_ready 0; loading it again turns it back.
#   4. --drain-delay: after SIGTERM readiness is 503 at once while requests are still served, then the
#      server drains and exits 0.
# Usage: serve_kserve_way.sh BUILD_DIR   (run from the source dir)
set -uo pipefail
BUILD=${1:?usage: serve_kserve_way.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
MLP=$DEPS/models/mlp_64_128_10.onnx
SILERO=$DEPS/models/silero_vad_v5.onnx
CLIENTS=tests/clients
MAX_BODY=1048576

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
for m in "$MLP" "$SILERO"; do [[ -f "$m" ]] || { echo "FAIL: $m missing (run scripts/setup.sh)"; exit 1; }; done
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup.sh installs it)"; exit 1; }
[[ -d "$CLIENTS/node_modules/@grpc/grpc-js" ]] || { echo "FAIL: $CLIENTS/node_modules lacks @grpc/grpc-js (scripts/setup.sh)"; exit 1; }

tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; rm -rf "$tmp"' EXIT
status=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; status=1; fi; }
code() { curl -s -o /dev/null -m 10 -w '%{http_code}' "$@"; }
# grpc_ready PORT: gRPC ServerReady's `ready` over h2c (curl), as "true"/"false".
printf '\x00\x00\x00\x00\x00' >"$tmp/empty.grpc"
grpc_ready() {
  curl -s -m 10 --http2-prior-knowledge -X POST -H 'content-type: application/grpc' -H 'te: trailers' \
    --data-binary @"$tmp/empty.grpc" -o "$tmp/ready.resp" "http://127.0.0.1:$1/inference.GRPCInferenceService/ServerReady" || return 1
  case "$(od -An -tx1 "$tmp/ready.resp" | tr -d ' \n')" in
    00000000020801) echo true ;;
    0000000000) echo false ;;  # proto3: false is the empty message
    *) echo "unexpected: $(od -An -tx1 "$tmp/ready.resp")" ;;
  esac
}

echo "--- 1. gRPC and HTTP/1.1 on one port (--grpc-port same)"
port=$(free_port)
base="http://127.0.0.1:$port"
key=kserve-way-$RANDOM$RANDOM
echo "$key" >"$tmp/key.txt"
"$GANTRY" serve "$MLP" "$SILERO" --host 127.0.0.1 --port "$port" --grpc-port same --api-key-file "$tmp/key.txt" \
  --max-body-size "$MAX_BODY" --header-timeout 2 >"$tmp/same.log" 2>&1 &
pid=$!
wait_ready "$base" "$tmp/same.log" 60 || exit 1
check "the server reports gRPC on its HTTP port" 'grep -q "KServe v2 gRPC on port $port (h2c, the HTTP port)" "$tmp/same.log"'
# A client that opens with part of the preface and stops: held until the header timeout, then closed.
python3 - "$port" >"$tmp/partial.txt" 2>&1 <<'EOF' &
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"PRI * HTTP/2.0\r\n")
s.settimeout(30)
print("closed" if s.recv(100) == b"" else "answered")
EOF
partial=$!
GRPC_ADDR="127.0.0.1:$port" HTTP_URL="$base" API_KEY="$key" MAX_BODY="$MAX_BODY" TEST_TIMEOUT_S=60 \
  timeout 90 node "$CLIENTS/kserve_grpc_client_test.mjs" >"$tmp/grpc-client.txt" 2>&1
grpc_rc=$?
check "the KServe gRPC client's checks pass on the HTTP port ($(grep -c '^ok' "$tmp/grpc-client.txt") ok)" \
  '((grpc_rc == 0)) || { tail -5 "$tmp/grpc-client.txt"; false; }'
check "HTTP/1.1 on the same port: /v2/health/live 200, /v2/models/mlp_64_128_10 200 with a key" \
  '[[ "$(code "$base/v2/health/live")" == 200 && "$(code -H "Authorization: Bearer $key" "$base/v2/models/mlp_64_128_10")" == 200 ]]'
# An opening split after its first byte ("P" could begin the preface or POST): still HTTP/1.1.
check "an opening split after its first byte is still served as HTTP/1.1" \
  '[[ "$(python3 - "$port" <<EOF
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.sendall(b"G")
time.sleep(0.2)  # only so the bytes arrive apart; the answer must be the same either way
s.sendall(b"ET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
print(s.recv(100).split(b"\r\n")[0].decode())
EOF
)" == "HTTP/1.1 200 OK" ]]'
wait "$partial"
check "a client sending only part of the preface is closed after the header timeout" '[[ "$(cat "$tmp/partial.txt")" == closed ]]'
check "gRPC ServerReady true on the HTTP port" '[[ "$(grpc_ready "$port")" == true ]]'
stop_server || status=1

echo "--- 2. KServe's conventions: STORAGE_URI, --model-name, gRPC on 8081"
mkdir -p "$tmp/models"
cp "$MLP" "$tmp/models/model.onnx"
port=$(free_port)
base="http://127.0.0.1:$port"
STORAGE_URI="file://$tmp/models" "$GANTRY" serve --model-name classifier --port "$port" --drain-delay 3 \
  >"$tmp/kserve.log" 2>&1 &
pid=$!
wait_ready "$base" "$tmp/kserve.log" 60 || exit 1
check "the model directory comes from STORAGE_URI" 'grep -q "models from $tmp/models (STORAGE_URI file://" "$tmp/kserve.log"'
check "the model is served as --model-name: /v2/models/classifier/ready 200" '[[ "$(code "$base/v2/models/classifier/ready")" == 200 ]]'
check "and not by its file name: /v2/models/model 404" '[[ "$(code "$base/v2/models/model")" == 404 ]]'
check "gRPC's default port is KServe's 8081 (or, taken on this machine, skipped naming 8081)" \
  'grep -qE "KServe v2 gRPC on port 8081|127.0.0.1:8081 \(in use" "$tmp/kserve.log"'
# A second copy under another name and a model that is not the only one: refused, naming both.
cp "$MLP" "$tmp/models/second.onnx"
"$GANTRY" serve --model-repository "$tmp/models" --model-name classifier --port 0 --grpc-port -1 >"$tmp/two.log" 2>&1
two=$?
check "--model-name with two models: exit 2 naming both" \
  '((two == 2)) && grep -q "there are 2: model, second" "$tmp/two.log"'

for bad in 70000 sam -2; do
  "$GANTRY" serve "$MLP" --port 0 --grpc-port "$bad" >"$tmp/bad.log" 2>&1
  rc=$?
  check "--grpc-port $bad: exit 2 naming the flag and what it takes" \
    '((rc == 2)) && grep -q -- "--grpc-port .$bad.: expected a port" "$tmp/bad.log"'
done

echo "--- 3. readiness: every model asked for is loaded"
check "unload the model: 200" '[[ "$(code -X POST "$base/v2/repository/models/classifier/unload")" == 200 ]]'
check "then /v2/health/ready 503 naming it" \
  '[[ "$(code "$base/v2/health/ready")" == 503 ]] && curl -s "$base/v2/health/ready" | grep -q "not every model is loaded: classifier"'
check "/v2/health/live stays 200; /metrics says gantry_ready 0" \
  '[[ "$(code "$base/v2/health/live")" == 200 ]] && curl -s "$base/metrics" | grep -q "^gantry_ready 0"'
check "load it again: 200, then /v2/health/ready 200" \
  '[[ "$(code -X POST "$base/v2/repository/models/classifier/load")" == 200 && "$(code "$base/v2/health/ready")" == 200 ]]'

echo "--- 4. SIGTERM with --drain-delay: unready first, still serving, then drained"
python3 -c 'print("{\"inputs\":[{\"name\":\"input\",\"shape\":[1,64],\"datatype\":\"FP32\",\"data\":" + str([0.1]*64) + "}]}")' >"$tmp/infer.json"
check "an inference before SIGTERM: 200" \
  '[[ "$(code -X POST -H "Content-Type: application/json" --data-binary @"$tmp/infer.json" "$base/v2/models/classifier/infer")" == 200 ]]'
kill -TERM "$pid"
for _ in $(seq 1 100); do [[ "$(code "$base/v2/health/ready")" == 503 ]] && break; sleep 0.05; done
check "after SIGTERM: /v2/health/ready 503" '[[ "$(code "$base/v2/health/ready")" == 503 ]]'
check "while unready, an inference is still answered 200 (--drain-delay)" \
  '[[ "$(code -X POST -H "Content-Type: application/json" --data-binary @"$tmp/infer.json" "$base/v2/models/classifier/infer")" == 200 ]]'
for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  echo "FAIL: the server did not exit within 20 s of SIGTERM"; status=1
else
  wait "$pid"; rc=$?; pid=""
  check "then drained and exit 0" '((rc == 0)) && grep -q "still serving for 3 s" "$tmp/kserve.log" && grep -q "drained" "$tmp/kserve.log"'
fi

if ((status)); then
  echo "--- logs (tail)"; tail -n 5 "$tmp/same.log" "$tmp/kserve.log"
  echo "FAIL: gantry serve KServe's way"
fi
exit $status
