#!/usr/bin/env bash
# Tenants under load, with the field's method (bench/serve_goodput.mjs: Poisson arrivals at a fixed seed,
# TTFT/TPOT/ITL/E2EL percentiles, goodput at an SLO, vLLM's result keys), `gantry serve` against llama.cpp's
# llama-server in the same run: same model (bench-100m-q4_0.gguf), threads, slots and context, the same
# arrivals and prompts. Three interactive tenants (chat-1..3, Poisson at RATE requests/s each, short prompts)
# and one flooding tenant (bulk: FLOOD_CLIENTS loops of long prompts back to back). Gantry gets a tenants file
# (docs/tenants.md): the interactive tenants are `interactive`, bulk is `batch` with max_concurrent BULK_MAX
# (its quota: at most that many of the slots); llama-server has no tenants and serves everyone alike.
# Phases, per round (ROUNDS, 2), each side in turn so drift hits both alike:
#   alone  the interactive tenants only;   flood  the same arrivals with bulk flooding.
# then once, on Gantry only (llama-server has no deadlines), phase deadline: the flood again, every
# interactive request carrying x-request-deadline-ms (DEADLINE_MIN_MS..DEADLINE_MAX_MS).
#   BENCH tenant-isolation ratio=<gantry's interactive p99 TTFT in flood / alone, median over rounds> (goal <= 1.5)
#   BENCH goodput-vs-llama-server ratio=<gantry's request_goodput in flood / llama-server's, medians> (goal >= 1.5)
#   BENCH deadline-refusal ratio=<refused requests whose shadow met the deadline / all refused> (goal <= 0.1)
# llama-server's isolation is printed beside Gantry's, and the deadline phase's latest admitted request (in
# decode steps: "no admitted request exceeds its deadline by more than one decode step"). Each run's JSON is
# kept in OUT_DIR (bench-out/goodput). A failed request (other than a 429), a server that does not start or
# a phase that refuses no request for its deadline is an error: exit 1 and no BENCH line.
# Env: GANTRY_BUILD_DIR (build), GANTRY_DEPS_DIR (.cache), THREADS (1), PARALLEL (8), ROUNDS (2),
#      DURATION (30 s of arrivals a phase), RATE (0.3), FLOOD_CLIENTS (4), BULK_MAX (2), SEED (7),
#      SLO_TTFT_MS (2000), SLO_TPOT_MS (250), DEADLINE_MIN_MS (300), DEADLINE_MAX_MS (4000), OUT_DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GANTRY_BUILD_DIR:-build}
DEPS=${GANTRY_DEPS_DIR:-.cache}
THREADS=${THREADS:-1}
PARALLEL=${PARALLEL:-8}
ROUNDS=${ROUNDS:-2}
CTX=$((PARALLEL * 4096))
OUT_DIR=${OUT_DIR:-bench-out/goodput}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-120}
MODEL=$DEPS/models/bench-100m-q4_0.gguf
NAME=$(basename "$MODEL" .gguf)
LS=$DEPS/llama/tools-build/bin/llama-server
GANTRY=$BUILD/bin/gantry
load=(node bench/serve_goodput.mjs --model "$NAME" --seed "${SEED:-7}" --duration "${DURATION:-30}"
  --rate "${RATE:-0.3}" --flood-clients "${FLOOD_CLIENTS:-4}" --slo-ttft-ms "${SLO_TTFT_MS:-2000}"
  --slo-tpot-ms "${SLO_TPOT_MS:-250}" --deadline-min-ms "${DEADLINE_MIN_MS:-300}"
  --deadline-max-ms "${DEADLINE_MAX_MS:-4000}")
for f in "$LS" "$MODEL" "$GANTRY"; do
  [[ -e "$f" ]] || { echo "goodput bench: missing $f (run make build / scripts/setup.sh)" >&2; exit 1; }
done
mkdir -p "$OUT_DIR"
tmp=$(mktemp -d)
source bench/lib/servers.sh
trap 'stop_servers; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# The tenants: Gantry reads them from its keys file, the load generator sends each tenant's key.
node -e '
  const [file, keys, bulkMax] = process.argv.slice(1);
  const k = { "chat-1": "sk-bench-chat-1", "chat-2": "sk-bench-chat-2", "chat-3": "sk-bench-chat-3", bulk: "sk-bench-bulk" };
  const tenants = Object.entries(k).map(([name, key]) => name === "bulk"
    ? { name, key, priority: "batch", max_concurrent: Number(bulkMax) } : { name, key, priority: "interactive" });
  require("fs").writeFileSync(file, JSON.stringify({ tenants }));
  require("fs").writeFileSync(keys, JSON.stringify(k));' "$tmp/tenants.json" "$tmp/keys.json" "${BULK_MAX:-2}"

start_server llama-server /health "$LS" -m "$MODEL" --alias "$NAME" --host 127.0.0.1 --port @PORT@ \
  --parallel "$PARALLEL" -c "$CTX" -t "$THREADS" -ngl 0 || exit 1
start_server gantry /v2/health/ready "$GANTRY" serve "$MODEL" --host 127.0.0.1 --port @PORT@ --parallel "$PARALLEL" \
  --ctx "$CTX" --threads "$THREADS" --grpc-port -1 --api-key-file "$tmp/tenants.json" || exit 1

# run SIDE PHASE OUT: one load run; fails (with the reason) when the run failed.
run() {
  local side=$1 phase=$2 out=$3
  timeout -k 5 1000 "${load[@]}" --url "${url[$side]}" --phase "$phase" --keys "$tmp/keys.json" >"$out" 2>"$out.err"
  local rc=$?
  if ((rc != 0)) || ! jq -e 'has("error") | not' "$out" >/dev/null 2>&1; then
    echo "goodput bench: $phase on $side failed (exit $rc): $(cat "$out" "$out.err" | head -c 1500)" >&2
    echo "--- $side log (tail)" >&2; tail -15 "$tmp/$side.log" >&2
    return 1
  fi
  echo "goodput $side $phase: $(jq -c '{completed, duration, request_goodput, slo_met, refused,
    interactive_ttft_p99_ms: .tenants.interactive.p99_ttft_ms, interactive_goodput: .tenants.interactive.request_goodput,
    p99_tpot_ms, p99_itl_ms}' "$out")"
}

echo "goodput bench: $NAME, $THREADS thread(s), $PARALLEL slots, context $CTX, $ROUNDS rounds"
# Warm-up: one short run on each server (first requests pay for allocations, not for scheduling).
for s in llama-server gantry; do
  timeout -k 5 300 "${load[@]}" --url "${url[$s]}" --phase alone --duration 3 --keys "$tmp/keys.json" >/dev/null ||
    { echo "goodput bench: warm-up on $s failed" >&2; exit 1; }
done
for ((r = 1; r <= ROUNDS; r++)); do
  for phase in alone flood; do
    for side in gantry llama-server; do run "$side" "$phase" "$OUT_DIR/$side.$phase.$r.json" || exit 1; done
  done
done
run gantry deadline "$OUT_DIR/gantry.deadline.json" || exit 1

node - "$OUT_DIR" "$ROUNDS" <<'JS'
const fs = require("fs");
const [dir, rounds] = process.argv.slice(2);
const load = (f) => JSON.parse(fs.readFileSync(`${dir}/${f}`, "utf8"));
const median = (v) => { const s = [...v].sort((a, b) => a - b), m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const fail = (why) => { console.error(`goodput bench: ${why}`); process.exit(1); };
const per = (side, phase, pick) => Array.from({ length: Number(rounds) }, (_, i) => pick(load(`${side}.${phase}.${i + 1}.json`)));
const p99 = (d) => d.tenants.interactive?.p99_ttft_ms;
const isolation = {};
for (const side of ["gantry", "llama-server"]) {
  const flood = per(side, "flood", p99), alone = per(side, "alone", p99);
  if (![...flood, ...alone].every((x) => x > 0)) fail(`${side}: an interactive p99 TTFT is missing`);
  isolation[side] = median(flood.map((f, i) => f / alone[i]));
  console.log(`goodput ${side}: interactive p99 TTFT alone ${alone.join(", ")} ms, with the flood ${flood.join(", ")} ms: ` +
    `isolation ${isolation[side].toFixed(3)}`);
}
const goodput = (side) => median(per(side, "flood", (d) => d.request_goodput));
const g = goodput("gantry"), l = goodput("llama-server");
console.log(`goodput: gantry ${g} requests/s within the SLO, llama-server ${l} (medians over rounds, flood phase)`);
if (!(l > 0)) fail("llama-server met the SLO with no request: no ratio (loosen SLO_TTFT_MS / SLO_TPOT_MS)");
const d = load("gantry.deadline.json").deadline;
console.log(`deadline: ${d.admitted} admitted (${d.met} met, ${d.late} late, the latest by ${d.max_late_ms} ms = ` +
  `${d.max_late_decode_steps} decode steps), ${d.refused} refused at admission, ${d.refused_would_meet} of which ` +
  `would have met it`);
if (d.refused === 0) fail("no request was refused for its deadline: the phase tests no prediction (lower DEADLINE_MIN_MS)");
console.log(`BENCH tenant-isolation ratio=${isolation.gantry.toFixed(3)}`);
console.log(`BENCH goodput-vs-llama-server ratio=${(g / l).toFixed(3)}`);
console.log(`BENCH deadline-refusal ratio=${(d.refused_would_meet / d.refused).toFixed(3)}`);
JS
