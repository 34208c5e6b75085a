#!/usr/bin/env bash
# gantry serve's peak memory for a large KServe v2 JSON infer (tests/server/serve_json_memory_test.py):
# a ~16 MiB body of one-digit numbers, nested with "datatype" first and flat with keys sorted, must each
# raise the server's peak RSS by less than 1.5x the body plus the input tensor (it was ~9x the body
# before the numbers streamed into the tensor).
# Usage: serve_json_memory.sh BUILD_DIR   (run from the source dir)
set -euo pipefail
BUILD=${1:?usage: serve_json_memory.sh BUILD_DIR}
GANTRY=$BUILD/bin/gantry
MODELS=${GANTRY_DEPS_DIR:-.cache}/models
[[ -x $GANTRY ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: python3 not found: run make setup"; exit 1; }
[[ -f $MODELS/mlp_64_128_10.onnx ]] || { echo "FAIL: $MODELS/mlp_64_128_10.onnx missing: run make setup"; exit 1; }
# Bounded: every socket in the test has a timeout; this is the outer wall.
timeout -k 5 300 python3 -u tests/server/serve_json_memory_test.py "$GANTRY" "$MODELS" --mib 16
