#!/usr/bin/env bash
# `make run`, the main job: `gantry serve` on the bundled models at http://127.0.0.1:8080 (GANTRY_PORT
# overrides), a few real requests sent to it over HTTP (OpenAI chat, KServe v2 infer on Silero VAD,
# metrics), printed with the URLs and curl examples; then it keeps serving until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
G=build/bin/gantry
M=.cache/models
PORT=${GANTRY_PORT:-8080}
URL=http://127.0.0.1:$PORT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

models=("$M/bench-100m-q4_0.gguf" "$M/tiny-llama.gguf" "$M/silero_vad_v5.onnx" "$M/mlp_64_128_10.onnx"
        "$M/paddleocr/ch_PP-OCRv4_det_infer.onnx")
step "gantry serve ${models[*]} --port $PORT"
log=$(mktemp)
# Its own session: Ctrl-C reaches only this script, which then sends the server ONE SIGTERM (a drain);
# a second signal would make it exit at once.
setsid $G serve "${models[@]}" --host 127.0.0.1 --port "$PORT" --ctx 2048 --parallel 4 2> >(tee "$log" >&2) &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null; rm -f "$log"' EXIT
trap 'exit 0' INT TERM
ready=0
for _ in $(seq 1 600); do  # bounded: 60 s
  if curl -fs "$URL/v2/health/ready" >/dev/null 2>&1; then ready=1; break; fi
  kill -0 $server 2>/dev/null || { echo "gantry serve exited (see above)" >&2; exit 1; }
  sleep 0.1
done
[[ $ready == 1 ]] || { echo "gantry serve did not become ready in 60 s" >&2; exit 1; }

step "GET $URL/v1/models"
curl -fsS "$URL/v1/models"; echo

step "POST $URL/v1/chat/completions (bench-100m-q4_0: random weights, so the words are noise)"
curl -fsS "$URL/v1/chat/completions" -H 'Content-Type: application/json' -d '{
  "model": "bench-100m-q4_0", "max_tokens": 24, "temperature": 0,
  "messages": [{"role": "user", "content": "Say hello."}]}'
echo

step "POST $URL/v1/chat/completions with \"stream\": true (server-sent events)"
curl -fsSN "$URL/v1/chat/completions" -H 'Content-Type: application/json' -d '{
  "model": "tiny-llama", "max_tokens": 4, "temperature": 0, "stream": true,
  "messages": [{"role": "user", "content": "Hi"}]}'
echo

step "POST $URL/v2/models/silero_vad_v5/infer (KServe v2: 32 ms of a 440 Hz tone)"
body=$(/usr/bin/python3 -c '
import json, math
tone = [round(0.5 * math.sin(2 * math.pi * 440 * i / 16000), 6) for i in range(512)]
print(json.dumps({"id": "tone", "inputs": [
  {"name": "input", "datatype": "FP32", "shape": [1, 512], "data": tone},
  {"name": "state", "datatype": "FP32", "shape": [2, 1, 128], "data": [0.0] * 256},
  {"name": "sr", "datatype": "INT64", "shape": [], "data": [16000]}],
  "outputs": [{"name": "output"}]}))')
curl -fsS "$URL/v2/models/silero_vad_v5/infer" -H 'Content-Type: application/json' -d "$body"; echo

step "GET $URL/metrics (first lines)"
curl -fsS "$URL/metrics" | grep -E '^gantry_(requests_total|models_loaded|memory_used_bytes)' | head -8

cat <<MSG

Gantry is serving on $URL  (Ctrl-C to stop: it drains, then exits)
  KServe v2   $URL/v2/models/{model}/infer     health: $URL/v2/health/ready
  OpenAI      $URL/v1/chat/completions          models: $URL/v1/models
  Prometheus  $URL/metrics
Try:
  curl $URL/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "tiny-llama", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16}'
MSG
wait $server
