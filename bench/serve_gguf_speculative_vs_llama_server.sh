#!/usr/bin/env bash
# `gantry serve --draft-model` vs llama.cpp's llama-server --model-draft (same bundle and libllama): the same
# target (spec-target-f32.gguf: F32, memory-bound on a CPU as large models are) and draft
# (spec-draft-q8_0.gguf: the target's first 2 of 12 layers with its embeddings and output head, Q8_0;
# scripts/models/gguf_speculative.py), the same threads, slots, context and draft settings (draft_max
# DRAFT_MAX, draft_min 0, p_min 0). llama-server at the pinned commit drafts only when told the type as well
# (--spec-type draft-simple); Gantry drafts whenever it has a draft model.
# CLIENTS concurrent streaming clients each send REQUESTS greedy completions of distinct prompts, every one
# asking for exactly MAX_TOKENS tokens (the end-of-sequence token is biased out with logit_bias, which both
# servers apply); tokens are counted from the streamed deltas (and checked against usage where the server
# sends it). ROUNDS rounds, each starting both servers fresh with a warm-up request, ABAB order alternating
# per round. Prints per run tok/s and the draft acceptance (Gantry's from /metrics, llama-server's from its
# log), then
#   BENCH serve-gguf-speculative-vs-llama-server ratio=<median gantry tok/s / median llama-server tok/s>
# (goal >= 1.0). A failed request, a short stream or a server that does not start is an error (exit 1).
# Env: GANTRY_BUILD_DIR (build), GANTRY_DEPS_DIR (.cache), THREADS (1), PARALLEL (4), CTX (4096), CLIENTS (4),
#      REQUESTS (2), MAX_TOKENS (96), DRAFT_MAX (8), ROUNDS (2), READY_TIMEOUT_S (120).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GANTRY_BUILD_DIR:-build}
DEPS=${GANTRY_DEPS_DIR:-.cache}
THREADS=${THREADS:-1}; PARALLEL=${PARALLEL:-4}; CTX=${CTX:-4096}; CLIENTS=${CLIENTS:-4}; REQUESTS=${REQUESTS:-2}
MAX_TOKENS=${MAX_TOKENS:-96}; DRAFT_MAX=${DRAFT_MAX:-8}; ROUNDS=${ROUNDS:-2}; READY_TIMEOUT_S=${READY_TIMEOUT_S:-120}
TARGET=$DEPS/models/spec-target-f32.gguf
DRAFT=$DEPS/models/spec-draft-q8_0.gguf
NAME=$(basename "$TARGET" .gguf)
LS=$DEPS/llama/tools-build/bin/llama-server
GANTRY=$BUILD/bin/gantry
PY=/usr/bin/python3
for f in "$LS" "$GANTRY" "$TARGET" "$DRAFT"; do
  [[ -e "$f" ]] || { echo "speculative serve bench: missing $f (run make setup / make build)" >&2; exit 1; }
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

wait_ready() {
  local url=$1 deadline=$((SECONDS + READY_TIMEOUT_S))
  while ((SECONDS < deadline)); do
    kill -0 "$server_pid" 2>/dev/null || { echo "speculative serve bench: server exited: $(tail -5 "$tmp/server.log")" >&2; return 1; }
    [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url")" == 200 ]] && return 0
    sleep 0.25
  done
  echo "speculative serve bench: $url not ready within ${READY_TIMEOUT_S} s: $(tail -5 "$tmp/server.log")" >&2
  return 1
}

# The load: CLIENTS threads x REQUESTS streamed /v1/completions, distinct prompts, greedy, EOS biased out.
cat >"$tmp/load.py" <<'PY'
import http.client, json, sys, threading, time
url, model, clients, requests, max_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
host, port = url.split("//")[1].split(":")
topics = ["a lighthouse keeper", "a lost violin", "the last train home", "a garden on Mars", "an old map",
          "a talking cat", "the winter market", "a broken clock", "the river pilot", "a forgotten letter"]
results, lock = [], threading.Lock()
def one(c, r):
    prompt = f"Client {c}, request {r}: write a long story about {topics[(c * 7 + r) % len(topics)]}."
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}, "logit_bias": {"2": -100}})
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    deltas, usage, status = 0, None, None
    try:
        conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        status = resp.status
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            ev = json.loads(line[5:])
            ch = ev.get("choices") or []
            if ch and (ch[0].get("text") or ""):
                deltas += 1
            if ev.get("usage"):
                usage = ev["usage"].get("completion_tokens")
    except Exception as e:  # reported as a failed request
        status = repr(e)
    finally:
        conn.close()
    with lock:
        results.append((status, deltas, usage))
def client(c):
    for r in range(requests):
        one(c, r)
t0 = time.monotonic()
threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
wall = time.monotonic() - t0
bad = [r for r in results if r[0] != 200]
tokens = sum(r[1] for r in results)
usage = [r[2] for r in results if r[2] is not None]
print(json.dumps({"wall_s": wall, "tokens": tokens, "tok_per_s": tokens / wall, "failed": len(bad),
                  "first_failure": str(bad[0][0]) if bad else None, "usage_tokens": sum(usage) if usage else None,
                  "short": sum(1 for r in results if r[1] < max_tokens * 0.9), "requests": len(results)}))
sys.exit(1 if bad else 0)
PY

# measure SIDE ROUND
measure() {
  local side=$1 r=$2 port url
  port=$(free_port)
  url="http://127.0.0.1:$port"
  if [[ $side == llama-server ]]; then
    "$LS" -m "$TARGET" --alias "$NAME" --host 127.0.0.1 --port "$port" --parallel "$PARALLEL" -c "$CTX" -t "$THREADS" \
      -ngl 0 -md "$DRAFT" --spec-type draft-simple --spec-draft-ngl 0 --spec-draft-n-max "$DRAFT_MAX" \
      --spec-draft-n-min 0 --spec-draft-p-min 0 >"$tmp/server.log" 2>&1 &
    server_pid=$!
    wait_ready "$url/health" || return 1
  else
    "$GANTRY" serve "$TARGET" --host 127.0.0.1 --port "$port" --grpc-port -1 --parallel "$PARALLEL" --ctx "$CTX" \
      --threads "$THREADS" -md "$DRAFT" --draft-max "$DRAFT_MAX" --draft-min 0 --draft-p-min 0 >"$tmp/server.log" 2>&1 &
    server_pid=$!
    wait_ready "$url/v2/health/ready" || return 1
  fi
  "$PY" "$tmp/load.py" "$url" "$NAME" 1 1 8 >"$tmp/warmup.json" \
    || { echo "speculative serve bench: $side warm-up failed: $(cat "$tmp/warmup.json")" >&2; return 1; }
  "$PY" "$tmp/load.py" "$url" "$NAME" "$CLIENTS" "$REQUESTS" "$MAX_TOKENS" >"$tmp/$side.$r.json" \
    || { echo "speculative serve bench: $side requests failed: $(cat "$tmp/$side.$r.json")" >&2; return 1; }
  local acc=""
  if [[ $side == gantry ]]; then
    acc=$(curl -s -m 10 "$url/metrics" | awk -v m="$NAME" '
      $1 == "gantry_draft_tokens_total{model=\"" m "\"}" {d = $2}
      $1 == "gantry_draft_tokens_accepted_total{model=\"" m "\"}" {a = $2}
      END {if (d > 0) printf "%d of %d drafted tokens accepted (%.1f%%)", a, d, 100 * a / d; else print "no drafts"}')
  fi
  stop_server
  if [[ $side == llama-server ]]; then
    # llama-server logs "draft acceptance = R (A accepted / G generated)" per finished request.
    acc=$(grep -o 'draft acceptance = [^)]*)' "$tmp/server.log" | awk '
      {gsub(/[()]/, ""); a += $5; g += $8}
      END {if (g > 0) printf "%d of %d drafted tokens accepted (%.1f%%)", a, g, 100 * a / g; else print "no drafts"}')
  fi
  "$PY" - "$tmp/$side.$r.json" "$side round $r" "$acc" "$MAX_TOKENS" <<'PY' || return 1
import json, sys
d = json.load(open(sys.argv[1]))
print(f"speculative serve {sys.argv[2]}: {d['tok_per_s']:.2f} tok/s ({d['tokens']} streamed tokens in {d['wall_s']:.2f} s, "
      f"usage says {d['usage_tokens']}), {d['requests']} requests; {sys.argv[3]}")
if d["short"]:
    print(f"speculative serve bench: {d['short']} streams ended well short of {sys.argv[4]} tokens", file=sys.stderr)
    sys.exit(1)
PY
}

for ((r = 1; r <= ROUNDS; r++)); do
  order=(llama-server gantry)
  ((r % 2 == 0)) && order=(gantry llama-server)
  for side in "${order[@]}"; do measure "$side" "$r" || exit 1; done
done

"$PY" - "$tmp" "$ROUNDS" <<'PY'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
med = {}
for side in ("gantry", "llama-server"):
    runs = [json.load(open(f"{tmp}/{side}.{r}.json")) for r in range(1, rounds + 1)]
    tps = [d["tok_per_s"] for d in runs]
    med[side] = statistics.median(tps)
    print(f"speculative serve {side}: median {med[side]:.2f} tok/s (runs {', '.join(f'{t:.2f}' for t in tps)})")
print("speculative serve: target spec-target-f32 (12 layers), draft spec-draft-q8_0 (its first 2 layers)")
print(f"BENCH serve-gguf-speculative-vs-llama-server ratio={med['gantry'] / med['llama-server']:.3f}")
PY
