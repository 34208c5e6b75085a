#!/usr/bin/env bash
# How far `gantry plan --speed` is from `gantry bench`: predicted vs measured generation tokens/s for the
# bundled GGUF models at THREADS (2) threads, each measured right after its prediction. Prints per model
#   predicted-tg <model>: predicted <p> t/s, measured <m> t/s (median of samples), error <e>
# and the worst case as
#   BENCH predicted-tg-error ratio=<max |predicted - measured| / measured>   (goal <= 0.25)
# The prediction is at --ctx 256 (llama.cpp's smallest padded context; bench's -n 64 stays inside it).
# Env: GANTRY_BUILD_DIR (default build), GANTRY_DEPS_DIR (default .cache), THREADS (2), REPS (3), NGEN (64).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GANTRY_BUILD_DIR:-build}
DEPS=${GANTRY_DEPS_DIR:-.cache}
THREADS=${THREADS:-2}; REPS=${REPS:-3}; NGEN=${NGEN:-64}
MODELS=(tiny-llama bench-100m-q8_0 bench-100m-q4_0)
[[ -x "$BUILD/bin/gantry" ]] || { echo "predicted-tg bench: missing $BUILD/bin/gantry (build it)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for m in "${MODELS[@]}"; do
  f=$DEPS/models/$m.gguf
  [[ -e "$f" ]] || { echo "predicted-tg bench: missing $f (run scripts/setup.sh)" >&2; exit 1; }
  "$BUILD/bin/gantry" plan "$f" --ctx 256 --speed --threads "$THREADS" --json >"$tmp/$m.plan.json" 2>"$tmp/err" \
    || { echo "gantry plan --speed failed for $m: $(tail -3 "$tmp/err")" >&2; exit 1; }
  "$BUILD/bin/gantry" bench "$f" -p 0 -n "$NGEN" -r "$REPS" -t "$THREADS" --json >"$tmp/$m.bench.json" 2>"$tmp/err" \
    || { echo "gantry bench failed for $m: $(tail -3 "$tmp/err")" >&2; exit 1; }
done
/usr/bin/python3 - "$tmp" "$THREADS" "${MODELS[@]}" <<'PY'
import json, statistics, sys
tmp, threads, models = sys.argv[1], sys.argv[2], sys.argv[3:]
worst = 0.0
for m in models:
    plan = json.load(open(f"{tmp}/{m}.plan.json"))
    pred = plan["speed"]["generation_tokens_per_s"]
    if pred is None:
        sys.exit(f"predicted-tg bench: no prediction for {m} (a device lacks a bandwidth or FLOP/s figure)")
    rows = [r for r in json.load(open(f"{tmp}/{m}.bench.json"))["results"] if r["test"].startswith("tg")]
    meas = statistics.median(s for r in rows for s in r["samples_ts"])
    err = abs(pred - meas) / meas
    worst = max(worst, err)
    bw = [a for a in plan["speed"]["assumptions"] if a.startswith("cpu:")]
    print(f"predicted-tg {m} threads={threads}: predicted {pred:.1f} t/s, measured {meas:.1f} t/s "
          f"(median), error {err:.3f}; {bw[0] if bw else ''}")
print(f"BENCH predicted-tg-error ratio={worst:.3f}")
PY
