#!/usr/bin/env bash
# `gantry serve` vs llama.cpp's llama-server (same bundle, same installed libllama), same model
# (bench-100m-q4_0.gguf), same context, same threads, 8 parallel slots, 8 concurrent streaming chat
# clients (bench/serve_load.py). ROUNDS rounds; each round starts each server fresh, sends one warm-up
# request, runs the timed load, stops it; the order alternates per round so drift on a shared machine
# hits both alike. Prints
#   serve llama-server round R: <tok/s, TTFT p50/p99, ok/failed>      (and the same for gantry)
#   serve llama-server: median <tok/s> tok/s, median TTFT p99 <ms> ms over R rounds
#   BENCH serve-gguf-vs-llama-server ratio=<median gantry tok/s / median llama-server tok/s>
#   serve p99 TTFT: gantry <ms> ms, llama-server <ms> ms   (medians of the per-round p99s)
# A build without `gantry serve`, a failed request or server start is an error (exit 1, no BENCH line).
# MODE=shared-system-prompt (bench/serve_prompt_cache_vs_llama_server.sh) is the chat-app case a
# prompt cache serves: every request carries the same ~1,200-token system prompt (SYSTEM_WORDS words)
# and a distinct short user turn; 8 clients x 3 requests x 32 tokens (ignore_eos), tokens counted from
# the streamed deltas, CTX 16384 (2048 a slot). It prints
#   BENCH prompt-cache-shared-system-prompt ratio=<median gantry tok/s / median llama-server tok/s>
# and the TTFT p50 medians and cached prompt tokens of both.
# Env: GANTRY_BUILD_DIR (build), GANTRY_DEPS_DIR (.cache), THREADS (1, see below), CTX (4096, the whole context,
#      llama-server gives each of the PARALLEL slots CTX/PARALLEL), PARALLEL (8), CLIENTS (8),
#      REQUESTS (4 per client), MAX_TOKENS (64), ROUNDS (2), READY_TIMEOUT_S (120), MODE (same-prompt),
#      SYSTEM_WORDS (700).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GANTRY_BUILD_DIR:-build}
DEPS=${GANTRY_DEPS_DIR:-.cache}
# One thread by default: on a shared 2-core machine, 2 OpenMP threads that spin-wait at every barrier
# while another process holds a core made llama-server 3-4x slower and far noisier than 1 thread
# (measured back to back at load ~4: 13-22 vs 47-85 tok/s).
MODE=${MODE:-same-prompt}
LOAD_ARGS=()
case $MODE in
  same-prompt) d_ctx=4096 d_requests=4 d_max=64 BENCH_NAME=serve-gguf-vs-llama-server ;;
  shared-system-prompt) d_ctx=16384 d_requests=3 d_max=32 BENCH_NAME=prompt-cache-shared-system-prompt ;;
  *) echo "serve bench: unknown MODE '$MODE' (same-prompt or shared-system-prompt)" >&2; exit 2 ;;
esac
THREADS=${THREADS:-1}; CTX=${CTX:-$d_ctx}; PARALLEL=${PARALLEL:-8}
CLIENTS=${CLIENTS:-8}; REQUESTS=${REQUESTS:-$d_requests}; MAX_TOKENS=${MAX_TOKENS:-$d_max}; ROUNDS=${ROUNDS:-2}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-120}
MODEL=$DEPS/models/bench-100m-q4_0.gguf
NAME=$(basename "$MODEL" .gguf) # gantry serves a model under its file stem; llama-server gets it as --alias
LS=$DEPS/llama/tools-build/bin/llama-server
GANTRY=$BUILD/bin/gantry
PROMPT="Write a short story about a lighthouse keeper who finds a message in a bottle."
PY=/usr/bin/python3
if [[ $MODE == shared-system-prompt ]]; then
  # A deterministic ~700-word system prompt (about 1,200 tokens with the bench model's vocabulary).
  SYSTEM=$("$PY" - "${SYSTEM_WORDS:-700}" <<'PY'
import sys
words = int(sys.argv[1])
topics = ["parcels", "refunds", "invoices", "delivery windows", "damaged items", "gift cards", "returns", "accounts"]
verbs = ["explain", "confirm", "check", "summarise", "describe", "verify", "clarify", "list"]
out, i = [], 0
while len(out) < words:
    out += (f"Rule {i + 1}: when the customer asks about {topics[i % 8]}, {verbs[(i * 3) % 8]} the policy politely, "
            f"quote reference code {1000 + 37 * i}, and never promise a date you cannot keep.").split()
    i += 1
print("You are the support assistant of a mail-order shop. " + " ".join(out[:words]))
PY
)
  PROMPT="Hello, I have a question about my order."
  LOAD_ARGS=(--system-prompt "$SYSTEM" --distinct-turns --count-deltas --ignore-eos)
fi

GANTRY_THREADS_FLAG="--threads"

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

# start SIDE: starts that server on a free port in the background; prints its base URL.
start() {
  local side=$1 port
  port=$(free_port)
  if [[ $side == llama-server ]]; then
    "$LS" -m "$MODEL" --alias "$NAME" --host 127.0.0.1 --port "$port" --parallel "$PARALLEL" -c "$CTX" -t "$THREADS" -ngl 0 \
      >"$tmp/server.log" 2>&1 &
    server_pid=$!
    wait_ready "http://127.0.0.1:$port" /health || return 1
  else
    # shellcheck disable=SC2206
    local threads_args=(${GANTRY_THREADS_FLAG:+$GANTRY_THREADS_FLAG "$THREADS"})
    "$GANTRY" serve "$MODEL" --host 127.0.0.1 --port "$port" --parallel "$PARALLEL" --ctx "$CTX" "${threads_args[@]}" \
      >"$tmp/server.log" 2>&1 &
    server_pid=$!
    wait_ready "http://127.0.0.1:$port" /v2/health/ready || return 1
  fi
  url="http://127.0.0.1:$port"
}

# measure SIDE ROUND: start, one short warm-up request, the timed load (JSON to $tmp/SIDE.ROUND.json), stop.
measure() {
  local side=$1 r=$2 url
  start "$side" || return 1
  "$PY" bench/serve_load.py --url "$url" --model "$NAME" --clients 1 --requests-per-client 1 --max-tokens 8 \
    --prompt "$PROMPT" --timeout 60 --run-timeout 90 >"$tmp/$side.warmup.json" \
    || { echo "serve bench: $side warm-up failed: $(cat "$tmp/$side.warmup.json")" >&2; return 1; }
  "$PY" bench/serve_load.py --url "$url" --model "$NAME" --clients "$CLIENTS" --requests-per-client "$REQUESTS" \
    --max-tokens "$MAX_TOKENS" --prompt "$PROMPT" "${LOAD_ARGS[@]}" --timeout 180 --run-timeout 600 >"$tmp/$side.$r.json" \
    || { echo "serve bench: $side load run had failures: $(cat "$tmp/$side.$r.json")" >&2; return 1; }
  stop_server
  "$PY" - "$tmp/$side.$r.json" "$side round $r" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"serve {sys.argv[2]}: {d['tok_per_s']:.2f} tok/s aggregate ({d['generated_tokens']} tokens in {d['wall_s']:.2f} s), "
      f"TTFT p50 {d['ttft_p50_ms']:.1f} ms p99 {d['ttft_p99_ms']:.1f} ms, {d['requests_ok']} ok / {d['requests_failed']} failed, "
      f"{d['clients']} clients x {d['requests_per_client']} requests x {d['max_tokens']} max tokens, "
      f"{d['prompt_tokens']} prompt tokens of which {d['cached_prompt_tokens']} cached")
PY
}

sides=(llama-server gantry)
serve_help=$("$GANTRY" serve --help 2>/dev/null || true)
# `gantry X --help` exits 0 with the top-level help for an unknown X (CLI11), so look for serve's own usage line.
grep -q '^Usage: [^ ]*gantry serve' <<<"$serve_help" ||
  { echo "serve bench: $GANTRY has no 'serve' command: nothing to compare" >&2; exit 1; }

for ((r = 1; r <= ROUNDS; r++)); do
  order=("${sides[@]}")
  if ((r % 2 == 0 && ${#sides[@]} == 2)); then order=(gantry llama-server); fi
  for side in "${order[@]}"; do measure "$side" "$r" || exit 1; done
done

"$PY" - "$tmp" "$ROUNDS" "$BENCH_NAME" "${sides[@]}" <<'PY'
import json, statistics, sys
tmp, rounds, bench, sides = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
med = {}
for side in sides:
    runs = [json.load(open(f"{tmp}/{side}.{r}.json")) for r in range(1, rounds + 1)]
    med[side] = (statistics.median(d["tok_per_s"] for d in runs), statistics.median(d["ttft_p99_ms"] for d in runs),
                 statistics.median(d["ttft_p50_ms"] for d in runs))
    print(f"serve {side}: median {med[side][0]:.2f} tok/s, median TTFT p50 {med[side][2]:.1f} ms "
          f"p99 {med[side][1]:.1f} ms over {rounds} rounds")
g, l = med["gantry"], med["llama-server"]
if not (g[0] > 0 and l[0] > 0):
    sys.exit(f"serve bench: no tokens measured (gantry {g[0]} tok/s, llama-server {l[0]} tok/s): no ratio")
print(f"BENCH {bench} ratio={g[0] / l[0]:.3f}")
print(f"serve p50 TTFT: gantry {g[2]:.1f} ms, llama-server {l[2]:.1f} ms")
print(f"serve p99 TTFT: gantry {g[1]:.1f} ms, llama-server {l[1]:.1f} ms")
PY
