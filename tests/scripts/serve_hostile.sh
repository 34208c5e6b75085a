#!/usr/bin/env bash
# gantry serve under attack and overload (issue 21):
#  1. tests/server/serve_hostile_test.py replays every request that once killed or exhausted the server
#     (huge chunked trailers, 100,000-deep JSON, zero-batch ONNX inputs, unauthenticated 60 MB bodies,
#     junk model names as metric labels, too many connections, smuggling framings, slow bodies...) over
#     raw sockets against real servers, which must stay alive and answer;
#  2. tests/server/serve_overload.mjs: 512 keep-alive connections (Node's http.Agent) and 6,000 mixed
#     requests against a server with a small queue: every request answered (200, 401 asked for, or
#     429/503 with Retry-After), 0 unanswered.
# Usage: serve_hostile.sh BUILD_DIR   (run from the source dir)
set -euo pipefail
BUILD=${1:?usage: serve_hostile.sh BUILD_DIR}
GANTRY=$BUILD/bin/gantry
MODELS=${GANTRY_DEPS_DIR:-.cache}/models
for m in mlp_64_128_10.onnx silero_vad_v5.onnx tiny-llama.gguf; do
  [[ -f $MODELS/$m ]] || { echo "FAIL: $MODELS/$m missing: run make setup"; exit 1; }
done
for tool in promtool node python3; do
  command -v $tool >/dev/null || { echo "FAIL: $tool missing: run make setup"; exit 1; }
done

timeout -k 5 600 python3 -u tests/server/serve_hostile_test.py "$GANTRY" "$MODELS"

work=$(mktemp -d)
pid=
cleanup() { [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
openssl rand -hex 16 >"$work/key"
"$GANTRY" serve --port 0 "$MODELS/mlp_64_128_10.onnx" "$MODELS/silero_vad_v5.onnx" "$MODELS/tiny-llama.gguf" \
  --api-key-file "$work/key" --ctx 512 --parallel 2 --threads 1 --max-queue 8 >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 1 600); do  # bounded: 60 s for the models to load
  grep -q "listening on" "$work/out" 2>/dev/null && break
  kill -0 $pid 2>/dev/null || { echo "FAIL: gantry serve exited:"; cat "$work/err"; exit 1; }
  sleep 0.1
done
url=$(grep -o 'http://[0-9.:]*' "$work/out" | head -1)
[[ -n $url ]] || { echo "FAIL: gantry serve did not start in 60 s"; cat "$work/err"; exit 1; }
timeout -k 5 300 node tests/server/serve_overload.mjs "$url" "$(cat "$work/key")" 6000 512
kill -0 $pid || { echo "FAIL: gantry serve died under overload"; cat "$work/err"; exit 1; }
curl -sf "$url/v2/health/live" >/dev/null || { echo "FAIL: not live after the overload"; exit 1; }
echo "serve_hostile: all passed"
