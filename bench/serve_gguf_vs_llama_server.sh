#!/usr/bin/env bash
# `gantry serve` vs llama.cpp's llama-server (same bundle, same installed libllama), same model
# (bench-100m-q4_0.gguf), same context, same threads, 8 parallel slots, 8 concurrent streaming chat
# clients (bench/serve_load.py). Prints
#   serve llama-server: <tok/s, TTFT p50/p99, ok/failed>
#   serve gantry:       <same>
#   BENCH serve-gguf-vs-llama-server ratio=<gantry tok/s / llama-server tok/s>
#   serve p99 TTFT: gantry <ms> ms, llama-server <ms> ms
# When `gantry serve --help` fails (not built yet), prints llama-server's figures and
#   BENCH serve-gguf-vs-llama-server ratio=nan (gantry serve not available)
# and exits 0.
# Env: GANTRY_BUILD_DIR (build), GANTRY_DEPS_DIR (.cache), THREADS (2), CTX (4096), PARALLEL (8),
#      CLIENTS (8), REQUESTS (4 per client), MAX_TOKENS (64), READY_TIMEOUT_S (120).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GANTRY_BUILD_DIR:-build}
DEPS=${GANTRY_DEPS_DIR:-.cache}
THREADS=${THREADS:-2}; CTX=${CTX:-4096}; PARALLEL=${PARALLEL:-8}
CLIENTS=${CLIENTS:-8}; REQUESTS=${REQUESTS:-4}; MAX_TOKENS=${MAX_TOKENS:-64}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-120}
MODEL=$DEPS/models/bench-100m-q4_0.gguf
NAME=$(basename "$MODEL" .gguf) # gantry serves a model under its file stem; llama-server gets it as --alias
LS=$DEPS/llama/tools-build/bin/llama-server
GANTRY=$BUILD/bin/gantry
PROMPT="Write a short story about a lighthouse keeper who finds a message in a bottle."
PY=/usr/bin/python3

# >>> LEAD: fill in gantry serve's thread-count flag (e.g. "-t" or "--threads"); empty = gantry's default.
GANTRY_THREADS_FLAG=""
# <<<

for f in "$LS" "$MODEL"; do
  [[ -e "$f" ]] || { echo "serve bench: missing $f (run scripts/setup.sh)" >&2; exit 1; }
done

tmp=$(mktemp -d)
server_pid=""
stop_server() {
  [[ -n "$server_pid" ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=""
}
trap 'stop_server; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_ready URL PATH: polls until HTTP 200, the server exits, or READY_TIMEOUT_S passes.
wait_ready() {
  local url=$1 path=$2 deadline=$((SECONDS + READY_TIMEOUT_S))
  while ((SECONDS < deadline)); do
    kill -0 "$server_pid" 2>/dev/null || { echo "serve bench: server exited before it was ready: $(tail -5 "$tmp/server.log")" >&2; return 1; }
    [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url$path")" == 200 ]] && return 0
    sleep 0.25
  done
  echo "serve bench: $url$path not ready within ${READY_TIMEOUT_S} s: $(tail -5 "$tmp/server.log")" >&2
  return 1
}

# measure SIDE URL: one short warm-up request, then the timed load; JSON to $tmp/SIDE.json.
measure() {
  local side=$1 url=$2
  "$PY" bench/serve_load.py --url "$url" --model "$NAME" --clients 1 --requests-per-client 1 --max-tokens 8 \
    --prompt "$PROMPT" --timeout 60 --run-timeout 90 >"$tmp/$side.warmup.json" \
    || { echo "serve bench: $side warm-up failed: $(cat "$tmp/$side.warmup.json")" >&2; return 1; }
  "$PY" bench/serve_load.py --url "$url" --model "$NAME" --clients "$CLIENTS" --requests-per-client "$REQUESTS" \
    --max-tokens "$MAX_TOKENS" --prompt "$PROMPT" --timeout 180 --run-timeout 600 >"$tmp/$side.json" \
    || { echo "serve bench: $side load run had failures: $(cat "$tmp/$side.json")" >&2; return 1; }
}

summary() { # SIDE -> one human line
  "$PY" - "$tmp/$1.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"serve {sys.argv[2]}: {d['tok_per_s']:.2f} tok/s aggregate ({d['generated_tokens']} tokens in {d['wall_s']:.2f} s), "
      f"TTFT p50 {d['ttft_p50_ms']:.1f} ms p99 {d['ttft_p99_ms']:.1f} ms, {d['requests_ok']} ok / {d['requests_failed']} failed, "
      f"{d['clients']} clients x {d['requests_per_client']} requests x {d['max_tokens']} max tokens")
PY
}

# ---- llama-server
port=$(free_port)
"$LS" -m "$MODEL" --alias "$NAME" --host 127.0.0.1 --port "$port" --parallel "$PARALLEL" -c "$CTX" -t "$THREADS" -ngl 0 \
  >"$tmp/server.log" 2>&1 &
server_pid=$!
wait_ready "http://127.0.0.1:$port" /health || exit 1
measure llama-server "http://127.0.0.1:$port" || exit 1
stop_server
summary llama-server

# ---- gantry serve
# `gantry X --help` exits 0 with the top-level help for an unknown X (CLI11), so look for serve's own usage line.
serve_help=$("$GANTRY" serve --help 2>/dev/null || true)
if ! grep -q '^Usage: [^ ]*gantry serve' <<<"$serve_help"; then
  echo "BENCH serve-gguf-vs-llama-server ratio=nan (gantry serve not available)"
  exit 0
fi
port=$(free_port)
# shellcheck disable=SC2206
threads_args=(${GANTRY_THREADS_FLAG:+$GANTRY_THREADS_FLAG "$THREADS"})
"$GANTRY" serve "$MODEL" --host 127.0.0.1 --port "$port" --parallel "$PARALLEL" --ctx "$CTX" "${threads_args[@]}" \
  >"$tmp/server.log" 2>&1 &
server_pid=$!
wait_ready "http://127.0.0.1:$port" /v2/health/ready || exit 1
measure gantry "http://127.0.0.1:$port" || exit 1
stop_server
summary gantry

"$PY" - "$tmp/gantry.json" "$tmp/llama-server.json" <<'PY'
import json, sys
g, l = (json.load(open(p)) for p in sys.argv[1:3])
print(f"BENCH serve-gguf-vs-llama-server ratio={g['tok_per_s'] / l['tok_per_s']:.3f}")
print(f"serve p99 TTFT: gantry {g['ttft_p99_ms']:.1f} ms, llama-server {l['ttft_p99_ms']:.1f} ms")
PY
