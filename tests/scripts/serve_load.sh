#!/usr/bin/env bash
# gantry serve under load and through a SIGTERM drain (tests/server/serve_load_test.py): 32 keep-alive
# clients and a few thousand mixed ONNX / GGUF requests answer only 200 or 429, none lost, the server
# live afterwards; SIGTERM during load finishes every accepted request (answers being written
# included) and exits 0.
# Usage: serve_load.sh BUILD_DIR   (run from the source dir)
set -euo pipefail
BUILD=${1:?usage: serve_load.sh BUILD_DIR}
GANTRY=$BUILD/bin/gantry
MODELS=${GANTRY_DEPS_DIR:-.cache}/models
[[ -x $GANTRY ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: python3 not found: run make setup"; exit 1; }
for m in mlp_64_128_10.onnx silero_vad_v5.onnx tiny-llama.gguf; do
  [[ -f $MODELS/$m ]] || { echo "FAIL: $MODELS/$m missing: run make setup"; exit 1; }
done
# Bounded: the test caps each phase itself; this is the outer wall.
timeout -k 5 300 python3 -u tests/server/serve_load_test.py "$GANTRY" "$MODELS"
