#!/usr/bin/env bash
# gantry serve refuses JSON bodies whose DOM would dwarf their text, within bounded memory
# (tests/server/serve_json_amplification_test.py): 60 MiB of "[{},{},...]" in an ignored field on
# /v1/messages, /v1/responses, /v1/chat/completions and /api/chat, one at a time and all at once, is a
# 400 with peak RSS growth within the body + 4x it + 8 MiB (it was 0.9-2.2 GiB each).
# Usage: serve_json_amplification.sh BUILD_DIR   (run from the source dir)
set -euo pipefail
BUILD=${1:?usage: serve_json_amplification.sh BUILD_DIR}
GANTRY=$BUILD/bin/gantry
MODELS=${GANTRY_DEPS_DIR:-.cache}/models
[[ -x $GANTRY ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: python3 not found: run make setup"; exit 1; }
[[ -f $MODELS/tiny-llama.gguf ]] || { echo "FAIL: $MODELS/tiny-llama.gguf missing: run make setup"; exit 1; }
# Bounded: every socket in the test has a timeout; this is the outer wall.
timeout -k 5 300 python3 -u tests/server/serve_json_amplification_test.py "$GANTRY" "$MODELS" --mib 60
