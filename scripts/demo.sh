#!/usr/bin/env bash
# `make demo`: the command-line tour on the bundled default models: the linked runtimes and the
# hardware, plan and run a GGUF model through llama.cpp, the provider choice and the memory budget at
# work, and pretrained ONNX models run once — every model through the Runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
G=build/bin/gantry
M=.cache/models
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "gantry version"
$G version
step "gantry detect"
$G detect

step "gantry plan $M/bench-100m-q8_0.gguf --ctx 4096 --measure"
$G plan "$M/bench-100m-q8_0.gguf" --ctx 4096 --measure
step "gantry run $M/bench-100m-q8_0.gguf (generated model: random weights, so the text is noise)"
$G run "$M/bench-100m-q8_0.gguf" --prompt "The quick brown fox" --max-tokens 32 --temperature 0 --ctx 512
echo

step "gantry plan $M/bench-100m-q8_0.gguf --explain (GGUF goes through the same provider choice)"
$G plan "$M/bench-100m-q8_0.gguf" --explain
step "gantry run ... --memory-budget cpu=64MiB (refused before loading, with the numbers)"
if $G run "$M/bench-100m-q8_0.gguf" --prompt "hi" --max-tokens 4 --memory-budget cpu=64MiB; then
  echo "unexpected: the model should not fit in 64 MiB" >&2; exit 1
fi

step "gantry plan $M/paddleocr/ch_PP-OCRv4_det_infer.onnx --explain"
$G plan "$M/paddleocr/ch_PP-OCRv4_det_infer.onnx" --explain
step "gantry run $M/silero_vad_v5.onnx (Silero VAD v5 on 32 ms of a 440 Hz tone)"
in=.cache/run; mkdir -p "$in"
/usr/bin/python3 - "$in" <<'PY'
import sys, numpy as np
d = sys.argv[1]
t = np.arange(512, dtype=np.float32) / 16000
np.save(f"{d}/input.npy", (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32).reshape(1, 512))
np.save(f"{d}/state.npy", np.zeros((2, 1, 128), dtype=np.float32))
np.save(f"{d}/sr.npy", np.array(16000, dtype=np.int64))
PY
$G run "$M/silero_vad_v5.onnx" --input input="$in/input.npy" --input state="$in/state.npy" --input sr="$in/sr.npy" \
  --output-dir "$in/out"
echo "outputs written to $in/out"
