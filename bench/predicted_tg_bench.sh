#!/usr/bin/env bash
# How far `gantry plan --speed` is from `gantry bench`: predicted vs measured generation tokens/s for the
# bundled GGUF models at THREADS (2) threads, each measured right after its prediction. Prints per model
#   predicted-tg <model>: predicted <p> t/s, measured <m> t/s (median of samples), error <e>
# and the worst case as
#   BENCH predicted-tg-error ratio=<max |predicted - measured| / measured>   (goal <= 0.25)
# The prediction is at --ctx 256 (llama.cpp's smallest padded context; bench's -n 64 stays inside it).
# ROUNDS rounds alternate prediction (which times the model's own matrices on this CPU) and measurement per
# model; the error compares the median prediction with the median of all measured samples, so one disturbed
# run on a shared machine moves neither much.
# Env: GANTRY_BUILD_DIR (default build), GANTRY_DEPS_DIR (default .cache), THREADS (2), REPS (3), NGEN (64),
# ROUNDS (3).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GANTRY_BUILD_DIR:-build}
DEPS=${GANTRY_DEPS_DIR:-.cache}
THREADS=${THREADS:-2}; REPS=${REPS:-3}; NGEN=${NGEN:-64}; ROUNDS=${ROUNDS:-3}
MODELS=(tiny-llama bench-100m-q8_0 bench-100m-q4_0)
[[ -x "$BUILD/bin/gantry" ]] || { echo "predicted-tg bench: missing $BUILD/bin/gantry (build it)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Other processes on the machine make llama.cpp's spinning threads wait for each other: say how busy it was.
load_before=$(cut -d' ' -f1 /proc/loadavg)
for ((r = 1; r <= ROUNDS; r++)); do
  for m in "${MODELS[@]}"; do
    f=$DEPS/models/$m.gguf
    [[ -e "$f" ]] || { echo "predicted-tg bench: missing $f (run scripts/setup.sh)" >&2; exit 1; }
    "$BUILD/bin/gantry" plan "$f" --ctx 256 --speed --threads "$THREADS" --json >"$tmp/$m.plan.$r.json" 2>"$tmp/err" \
      || { echo "gantry plan --speed failed for $m: $(tail -3 "$tmp/err")" >&2; exit 1; }
    "$BUILD/bin/gantry" bench "$f" -p 0 -n "$NGEN" -r "$REPS" -t "$THREADS" --json >"$tmp/$m.bench.$r.json" \
      2>"$tmp/err" || { echo "gantry bench failed for $m: $(tail -3 "$tmp/err")" >&2; exit 1; }
  done
done
echo "predicted-tg: load average ${load_before} before, $(cut -d' ' -f1 /proc/loadavg) after, on $(nproc) CPUs"
/usr/bin/python3 - "$tmp" "$THREADS" "$ROUNDS" "${MODELS[@]}" <<'PY'
import json, re, statistics, sys
tmp, threads, rounds, models = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
worst = 0.0
for m in models:
    preds, bws, samples = [], [], []
    for r in range(1, rounds + 1):
        speed = json.load(open(f"{tmp}/{m}.plan.{r}.json"))["speed"]
        if speed["generation_tokens_per_s"] is None:
            sys.exit(f"predicted-tg bench: no prediction for {m} (a device lacks a bandwidth or FLOP/s figure)")
        preds.append(speed["generation_tokens_per_s"])
        bws += [m_.group(1) for a in speed["assumptions"] if (m_ := re.match(r"cpu: ([0-9.]+) GB/s", a))]
        rows = json.load(open(f"{tmp}/{m}.bench.{r}.json"))["results"]
        samples += [s for row in rows if row["test"].startswith("tg") for s in row["samples_ts"]]
    pred, meas = statistics.median(preds), statistics.median(samples)
    err = abs(pred - meas) / meas
    worst = max(worst, err)
    print(f"predicted-tg {m} threads={threads}: predicted {pred:.1f} t/s (median of {len(preds)}; CPU GB/s "
          f"{', '.join(bws)}), measured {meas:.1f} t/s (median of {len(samples)} samples, range "
          f"{min(samples):.1f}-{max(samples):.1f}), error {err:.3f}")
print(f"BENCH predicted-tg-error ratio={worst:.3f}")
PY
