#!/usr/bin/env bash
# How far `gantry plan MODEL.onnx` predicts an ONNX model's memory at a batch size it never measured:
# for PaddleOCR det (at 640x640) and the heavy MLP, `gantry plan --measure --batch B` measures batch 1, 2
# and B in the runtime's memory pool (a fresh cache, so all three are measured now) and also reports the
# prediction at B from 1 and 2 alone. On the cpu provider: its pool is what is measured. Prints per model
#   onnx-plan <model> batch B: predicted <p> MiB from 1 and 2, measured <m> MiB; errors: activations <a>,
#   reservation <r>, total <t>
# (reservation = the pool's peak + the heap outside it, what the runtime's budget reserves; total adds the
# pool's arena, its block slack) and the worst of every error of both models as
#   BENCH onnx-plan-error ratio=<max |predicted - measured| / measured>   (goal <= 0.10)
# Env: GANTRY_BUILD_DIR (default build), GANTRY_DEPS_DIR (default .cache), BATCH (8).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GANTRY_BUILD_DIR:-build}
DEPS=${GANTRY_DEPS_DIR:-.cache}
BATCH=${BATCH:-8}
[[ -x "$BUILD/bin/gantry" ]] || { echo "onnx-plan bench: missing $BUILD/bin/gantry (build it)" >&2; exit 1; }
det=$(ls "$DEPS"/models/paddleocr/*det*.onnx 2>/dev/null | head -1)
mlp=$DEPS/models/heavy_mlp_1024.onnx
for f in "$det" "$mlp"; do
  [[ -n "$f" && -e "$f" ]] || { echo "onnx-plan bench: missing ${f:-PaddleOCR det} (run scripts/setup.sh)" >&2; exit 1; }
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() {  # name, model, extra args
  GANTRY_CACHE_DIR="$tmp/cache-$1" "$BUILD/bin/gantry" plan "$2" --measure --batch "$BATCH" --provider cpu --json "${@:3}" \
    >"$tmp/$1.json" 2>"$tmp/err" || { echo "gantry plan --measure failed for $2: $(tail -3 "$tmp/err")" >&2; exit 1; }
}
run det "$det" --shape x=1,3,640,640
run mlp "$mlp"
/usr/bin/python3 - "$tmp" "$BATCH" <<'PY'
import json, sys
tmp, batch = sys.argv[1], int(sys.argv[2])
worst = 0.0
for name in ("det", "mlp"):
    j = json.load(open(f"{tmp}/{name}.json"))
    if j["profile"]["measured_now"] != [1, 2, batch] or not j["measured"] or not j["predicted"]:
        sys.exit(f"onnx-plan bench: {name}: expected batches 1, 2 and {batch} measured now and a prediction")
    e = j["prediction_error"]
    mib = lambda b: b / (1 << 20)
    print(f"onnx-plan {j['model']} ({j['shapes']}) batch {batch}: {j['predicted']['basis']}: reserves "
          f"{mib(j['predicted']['reservation']):.1f} MiB, measured {mib(j['measured']['reservation']):.1f} MiB "
          f"(total with arena {mib(j['predicted']['total']):.1f} vs {mib(j['measured']['total']):.1f} MiB); "
          f"errors: activations {e['activations']:+.4f}, reservation {e['reservation']:+.4f}, total {e['total']:+.4f}")
    worst = max(worst, abs(e["activations"]), abs(e["reservation"]), abs(e["total"]))
print(f"BENCH onnx-plan-error ratio={worst:.4f}")
PY
