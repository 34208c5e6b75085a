#!/usr/bin/env bash
# This build's ONNX overhead against an earlier revision's, in one run: onnx_overhead_bench of both builds,
# alternated new old new old ... (ROUNDS rounds, 3 by default), so drift on a shared machine hits both alike.
# Each run measures Gantry against raw ONNX Runtime in its own process (BENCH onnx-overhead-<case>); this
# compares the two builds' medians of those overheads:
#   BENCH onnx-overhead-<case>-new-vs-old ratio=<median new overhead / median old overhead>
# (1.0: no change; above 1: the new build adds more over raw ONNX Runtime than the old one did).
# Env: GANTRY_OLD_BUILD_DIR (required for a comparison: a build of the earlier revision, made by
# scripts/build-revision.sh REV DIR; without it there is nothing to compare and no BENCH line),
# GANTRY_BUILD_DIR (build), ROUNDS (3). A failed run is an error: exit 1 and no BENCH line.
set -uo pipefail
cd "$(dirname "$0")/.."
NEW=${GANTRY_BUILD_DIR:-build}
OLD=${GANTRY_OLD_BUILD_DIR:-}
ROUNDS=${ROUNDS:-3}
if [[ -z $OLD ]]; then
  echo "onnx new-vs-old: GANTRY_OLD_BUILD_DIR is not set, nothing to compare (scripts/build-revision.sh REV DIR builds one)"
  exit 0
fi
for b in "$NEW/bin/onnx_overhead_bench" "$OLD/bin/onnx_overhead_bench"; do
  [[ -x $b ]] || { echo "onnx new-vs-old: missing $b" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((r = 1; r <= ROUNDS; r++)); do
  for side in new old; do
    dir=$NEW
    [[ $side == old ]] && dir=$OLD
    if ! "$dir/bin/onnx_overhead_bench" >"$tmp/$side.$r.log" 2>&1; then
      echo "onnx new-vs-old: round $r, $side ($dir) failed: $(tail -5 "$tmp/$side.$r.log")" >&2
      exit 1
    fi
    echo "onnx new-vs-old round $r $side: $(grep -o '^BENCH onnx-overhead-[^ ]* ratio=[0-9.]*' "$tmp/$side.$r.log" |
      sed 's/^BENCH onnx-overhead-//' | tr '\n' ' ')"
  done
done
node - "$tmp" "$ROUNDS" <<'JS'
const fs = require("fs");
const [dir, rounds] = process.argv.slice(2);
const figures = { new: {}, old: {} };
for (const side of ["new", "old"]) {
  for (let r = 1; r <= Number(rounds); r++) {
    const text = fs.readFileSync(`${dir}/${side}.${r}.log`, "utf8");
    for (const [, name, value] of text.matchAll(/^BENCH onnx-overhead-(\S+) ratio=([0-9.]+)$/gm))
      (figures[side][name] ??= []).push(Number(value));
  }
}
const median = (v) => { const s = [...v].sort((a, b) => a - b), m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const cases = Object.keys(figures.new).filter((c) => figures.old[c]);
if (cases.length === 0) { console.error("onnx new-vs-old: no onnx-overhead case measured by both builds"); process.exit(1); }
for (const c of cases) {
  const n = figures.new[c], o = figures.old[c];
  if (n.length !== Number(rounds) || o.length !== Number(rounds)) {
    console.error(`onnx new-vs-old: ${c} is missing from some round (new ${n.length}, old ${o.length} of ${rounds})`);
    process.exit(1);
  }
  console.log(`onnx new-vs-old ${c}: new median ${median(n).toFixed(3)} (${n.join(", ")}), old median ${median(o).toFixed(3)} (${o.join(", ")})`);
  console.log(`BENCH onnx-overhead-${c}-new-vs-old ratio=${(median(n) / median(o)).toFixed(3)}`);
}
JS
