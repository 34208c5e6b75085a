#!/usr/bin/env bash
# Gantry vs llama.cpp's llama-bench (same bundle, same installed libllama), same model
# (bench-100m-q8_0.gguf), same threads, alternating runs. Prints
#   BENCH gguf-pp512 ratio=<gantry t/s / llama-bench t/s>
#   BENCH gguf-tg128 ratio=...
# Env: GANTRY_BUILD_DIR (default build), GANTRY_DEPS_DIR (default .cache), THREADS (2), REPS (2), ROUNDS (5).
# The ratio compares medians of all timed samples (robust to a shared machine's outliers); means are printed too.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GANTRY_BUILD_DIR:-build}
DEPS=${GANTRY_DEPS_DIR:-.cache}
THREADS=${THREADS:-2}; REPS=${REPS:-2}; ROUNDS=${ROUNDS:-5}
MODEL=$DEPS/models/bench-100m-q8_0.gguf
LB=$DEPS/llama/tools-build/bin/llama-bench
for f in "$BUILD/bin/gantry" "$LB" "$MODEL"; do
  [[ -e "$f" ]] || { echo "gguf bench: missing $f (build, and run scripts/setup.sh)" >&2; exit 1; }
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for ((r = 1; r <= ROUNDS; r++)); do
  # Alternate which side goes first so drift on a shared machine hits both alike.
  if (( r % 2 )); then order="gantry llama"; else order="llama gantry"; fi
  for side in $order; do
    if [[ $side == gantry ]]; then
      "$BUILD/bin/gantry" bench "$MODEL" -p 512 -n 128 -t "$THREADS" -r "$REPS" --json >"$tmp/gantry.$r.json" 2>"$tmp/err" \
        || { echo "gantry bench failed: $(tail -3 "$tmp/err")" >&2; exit 1; }
    else
      "$LB" -m "$MODEL" -p 512 -n 128 -t "$THREADS" -r "$REPS" -ngl 0 -o json >"$tmp/llama.$r.json" 2>"$tmp/err" \
        || { echo "llama-bench failed: $(tail -3 "$tmp/err")" >&2; exit 1; }
    fi
  done
done
/usr/bin/python3 - "$tmp" "$ROUNDS" "$THREADS" <<'PY'
import json, sys, statistics
tmp, rounds, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def rates(side, test):
    out = []
    for r in range(1, rounds + 1):
        data = json.load(open(f"{tmp}/{side}.{r}.json"))
        rows = data["results"] if side == "gantry" else data
        for row in rows:
            name = row.get("test") or (f"pp{row['n_prompt']}" if row["n_gen"] == 0 else f"tg{row['n_gen']}")
            if name == test:
                out.extend(row["samples_ts"])
    return out
for test in ("pp512", "tg128"):
    g, l = rates("gantry", test), rates("llama", test)
    gm, lm = statistics.mean(g), statistics.mean(l)
    gs = statistics.stdev(g) if len(g) > 1 else 0.0
    ls = statistics.stdev(l) if len(l) > 1 else 0.0
    gmed, lmed = statistics.median(g), statistics.median(l)
    print(f"gguf {test} threads={threads}: gantry {gm:.2f} ± {gs:.2f} t/s (median {gmed:.2f}), "
          f"llama-bench {lm:.2f} ± {ls:.2f} t/s (median {lmed:.2f}), {len(g)} and {len(l)} samples")
    print(f"BENCH gguf-{test} ratio={gmed / lmed:.3f}")
PY
