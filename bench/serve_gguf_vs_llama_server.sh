#!/usr/bin/env bash
# `gantry serve` vs llama.cpp's llama-server (same bundle, same installed libllama): same model
# (bench-100m-q4_0.gguf), same threads, slots (--parallel) and context, streaming chat clients
# (bench/serve_load.mjs). Both servers are started once and warmed (one request per slot), then the timed
# runs alternate A B A B ... (ROUNDS rounds, every side once a round, in the same order), so drift on a
# shared machine hits all sides alike. Every request asks for exactly max_tokens (ignore_eos, which both
# servers take); the load generator counts tokens from the streamed deltas and fails the run when a
# stream's count differs from its usage or from max_tokens. Each run's figures are printed, then per side
# the median and the spread (min..max) over the rounds, then the BENCH line(s). A failed request, server
# start or measurement is an error: exit 1 and no BENCH line.
#
# SECTION picks the workload (the other bench/serve_*_vs_llama_server.sh set it):
#   throughput (default): 8 clients x 4 requests x 64 tokens, every prompt distinct (~220 tokens).
#     BENCH serve-gguf-vs-llama-server ratio=<median gantry tok/s / median llama-server tok/s>
#     With GANTRY_OLD_BUILD_DIR (a build of an earlier revision, scripts/build-revision.sh), that build's
#     gantry is a third side (gantry-old) in the same rounds:
#     BENCH serve-gguf-old-vs-llama-server ratio=<median gantry-old tok/s / median llama-server tok/s>
#     BENCH serve-gguf-new-vs-old ratio=<median gantry tok/s / median gantry-old tok/s>
#   prefix: a shared ~1,200-token system prompt (700 words) and distinct short user turns, 8 clients x 3
#     requests x 32 tokens; gantry is also run with cache_prompt: false (side gantry-nocache).
#     BENCH serve-gguf-prefix-ttft-vs-llama-server ratio=<median gantry TTFT p50 / median llama-server's>
#     BENCH serve-gguf-prefix-cache-gain ratio=<median gantry-nocache TTFT p50 / median gantry's>
#   stall: 4 running streams while 3 prompts of ~3,000 tokens arrive one after another.
#     BENCH serve-gguf-long-prompt-stall ratio=<median gantry p99 token gap / median llama-server's>
# Env: GANTRY_BUILD_DIR (build), GANTRY_DEPS_DIR (.cache), THREADS (1, see below), PARALLEL (8),
#      CTX (the whole context; llama-server gives each slot CTX/PARALLEL: 4096 a slot by default, 32768
#      for stall), ROUNDS (2), CLIENTS, REQUESTS, MAX_TOKENS (the section's defaults above),
#      READY_TIMEOUT_S (120), REQUEST_TIMEOUT_S (600, one request), RUN_TIMEOUT_S (1800, one run; generous
#      because a busy shared machine can be 10x slower than an idle one, but bounded).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GANTRY_BUILD_DIR:-build}
DEPS=${GANTRY_DEPS_DIR:-.cache}
SECTION=${SECTION:-throughput}
# One thread by default: on a shared 2-core machine, 2 OpenMP threads that spin-wait at every barrier
# while another process holds a core made llama-server 3-4x slower and far noisier than 1 thread
# (measured back to back at load ~4: 13-22 vs 47-85 tok/s).
THREADS=${THREADS:-1}
PARALLEL=${PARALLEL:-8}
ROUNDS=${ROUNDS:-2}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-120}
REQUEST_TIMEOUT_S=${REQUEST_TIMEOUT_S:-600}
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-1800}
OLD_BUILD=${GANTRY_OLD_BUILD_DIR:-}
[[ -n $OLD_BUILD && $SECTION != throughput ]] && { echo "serve bench: GANTRY_OLD_BUILD_DIR is for SECTION=throughput" >&2; exit 2; }
case $SECTION in
  throughput) d_ctx=$((PARALLEL * 4096)) sides=(llama-server gantry ${OLD_BUILD:+gantry-old})
    load=(load --clients "${CLIENTS:-8}" --requests "${REQUESTS:-4}" --max-tokens "${MAX_TOKENS:-64}" --prompt-words 130) ;;
  prefix) d_ctx=$((PARALLEL * 4096)) sides=(llama-server gantry gantry-nocache)
    load=(load --clients "${CLIENTS:-8}" --requests "${REQUESTS:-3}" --max-tokens "${MAX_TOKENS:-32}" --prompt-words 12
      --system-words 700) ;;
  stall) d_ctx=$((PARALLEL * 4096)) sides=(llama-server gantry)
    load=(stall --streams 4 --stream-tokens 3000 --long-prompts 3 --long-words 2150) ;;
  *) echo "serve bench: unknown SECTION '$SECTION' (throughput, prefix or stall)" >&2; exit 2 ;;
esac
CTX=${CTX:-$d_ctx}
MODEL=$DEPS/models/bench-100m-q4_0.gguf
NAME=$(basename "$MODEL" .gguf) # gantry serves a model under its file stem; llama-server gets it as --alias
LS=$DEPS/llama/tools-build/bin/llama-server
GANTRY=$BUILD/bin/gantry
LOADGEN=bench/serve_load.mjs

for f in "$LS" "$MODEL" "$GANTRY" ${OLD_BUILD:+"$OLD_BUILD/bin/gantry"}; do
  [[ -e "$f" ]] || { echo "serve bench: missing $f (run make build / scripts/setup.sh)" >&2; exit 1; }
done
command -v node >/dev/null || { echo "serve bench: node is not installed (scripts/setup.sh installs it)" >&2; exit 1; }

tmp=$(mktemp -d)
source bench/lib/servers.sh
trap 'stop_servers; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# start SERVER (llama-server, gantry or gantry-old) in the background on a free port.
start() {
  local s=$1 bin=$GANTRY
  [[ $s == gantry-old ]] && bin=$OLD_BUILD/bin/gantry
  if [[ $s == llama-server ]]; then
    start_server "$s" /health "$LS" -m "$MODEL" --alias "$NAME" --host 127.0.0.1 --port @PORT@ --parallel "$PARALLEL" \
      -c "$CTX" -t "$THREADS" -ngl 0
  else
    start_server "$s" /v2/health/ready "$bin" serve "$MODEL" --host 127.0.0.1 --port @PORT@ --parallel "$PARALLEL" \
      --ctx "$CTX" --threads "$THREADS" --grpc-port -1
  fi
}

# run SIDE TAG OUT ARGS...: one load-generator run against SIDE's server (gantry-nocache is gantry with
# cache_prompt: false); the JSON goes to OUT. Fails (with the reason) when the run failed.
run() {
  local side=$1 tag=$2 out=$3 server=${1%-nocache} extra=()
  shift 3
  [[ $side == *-nocache ]] && extra=(--no-cache-prompt)
  timeout -k 5 $((RUN_TIMEOUT_S + 30)) node "$LOADGEN" "$@" --url "${url[$server]}" --model "$NAME" --tag "$tag" \
    --timeout "$REQUEST_TIMEOUT_S" --run-timeout "$RUN_TIMEOUT_S" "${extra[@]}" >"$out" 2>"$out.err"
  local rc=$?
  if ((rc != 0)) || ! jq -e 'has("error") | not' "$out" >/dev/null 2>&1; then
    echo "serve bench: $SECTION run '$tag' on $side failed (exit $rc): $(cat "$out" "$out.err" | head -c 1500)" >&2
    echo "--- $server log (tail)" >&2; tail -15 "$tmp/$server.log" >&2
    return 1
  fi
}

echo "serve bench $SECTION: $NAME, $THREADS thread(s), $PARALLEL slots, context $CTX, $ROUNDS rounds, sides: ${sides[*]}"
servers=(llama-server gantry ${OLD_BUILD:+gantry-old})
for s in "${servers[@]}"; do start "$s" || exit 1; done
# Warm-up: one short request a slot on each server (for prefix: with the shared system prompt, so every
# slot of both servers has seen it, as in a running service).
for s in "${servers[@]}"; do
  warm=(load --clients "$PARALLEL" --requests 1 --max-tokens 8 --prompt-words 12)
  [[ $SECTION == prefix ]] && warm+=(--system-words 700)
  run "$s" "warm" "$tmp/warm.$s.json" "${warm[@]}" || exit 1
done

for ((r = 1; r <= ROUNDS; r++)); do
  for side in "${sides[@]}"; do
    out=$tmp/$side.$r.json
    run "$side" "round$r" "$out" "${load[@]}" || exit 1
    echo "serve $SECTION $side round $r: $(jq -c 'del(.mode)' "$out")"
  done
done

# Medians, spread and the BENCH lines; exit 1 (no BENCH line) when a figure is missing or not positive.
node - "$tmp" "$ROUNDS" "$SECTION" "${sides[@]}" <<'JS'
const fs = require("fs");
const [dir, rounds, section, ...sides] = process.argv.slice(2);
const runs = {};
for (const s of sides) {
  runs[s] = Array.from({ length: Number(rounds) }, (_, i) => JSON.parse(fs.readFileSync(`${dir}/${s}.${i + 1}.json`, "utf8")));
}
const median = (v) => { const s = [...v].sort((a, b) => a - b), m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const med = {};
function summary(side, key, unit) {
  const v = runs[side].map((d) => d[key]);
  if (!v.every((x) => typeof x === "number" && Number.isFinite(x) && x > 0)) {
    console.error(`serve bench: ${section} ${side}: ${key} is not a positive number in every round: ${JSON.stringify(v)}`);
    process.exit(1);
  }
  const m = median(v);
  (med[side] ??= {})[key] = m;
  console.log(`serve ${section} ${side}: ${key} median ${m.toFixed(2)} ${unit} (spread ${Math.min(...v).toFixed(2)}..` +
    `${Math.max(...v).toFixed(2)}; rounds ${v.map((x) => x.toFixed(2)).join(", ")})`);
}
const ratio = (name, num, den) => console.log(`BENCH ${name} ratio=${(num / den).toFixed(3)}`);
const keys = {
  throughput: [["tok_per_s", "tok/s"], ["ttft_p50_ms", "ms"], ["ttft_p99_ms", "ms"]],
  prefix: [["ttft_p50_ms", "ms"], ["ttft_p99_ms", "ms"], ["tok_per_s", "tok/s"]],
  stall: [["gap_p99_ms", "ms"], ["gap_p50_ms", "ms"], ["gap_max_ms", "ms"], ["window_s", "s"]],
}[section];
for (const s of sides) for (const [k, u] of keys) summary(s, k, u);
if (section === "throughput") {
  ratio("serve-gguf-vs-llama-server", med.gantry.tok_per_s, med["llama-server"].tok_per_s);
  if (med["gantry-old"]) {
    ratio("serve-gguf-old-vs-llama-server", med["gantry-old"].tok_per_s, med["llama-server"].tok_per_s);
    ratio("serve-gguf-new-vs-old", med.gantry.tok_per_s, med["gantry-old"].tok_per_s);
  }
} else if (section === "prefix") {
  for (const s of sides) {
    const d = runs[s].at(-1);
    console.log(`serve prefix ${s}: last round ${d.cached_prompt_tokens} of ${d.prompt_tokens} prompt tokens cached`);
  }
  ratio("serve-gguf-prefix-ttft-vs-llama-server", med.gantry.ttft_p50_ms, med["llama-server"].ttft_p50_ms);
  ratio("serve-gguf-prefix-cache-gain", med["gantry-nocache"].ttft_p50_ms, med.gantry.ttft_p50_ms);
} else {
  ratio("serve-gguf-long-prompt-stall", med.gantry.gap_p99_ms, med["llama-server"].gap_p99_ms);
}
JS
