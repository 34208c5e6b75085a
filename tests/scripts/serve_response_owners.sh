#!/usr/bin/env bash
# Stored responses belong to the API key that made them, and ids carry 128+ random bits
# (tests/server/serve_response_owners_test.py): with two keys, key B gets 404 for key A's response on
# GET, DELETE and previous_response_id, key A keeps it; chatcmpl-/cmpl-/resp_/msg_ ids are long and distinct.
# Usage: serve_response_owners.sh BUILD_DIR   (run from the source dir)
set -euo pipefail
BUILD=${1:?usage: serve_response_owners.sh BUILD_DIR}
GANTRY=$BUILD/bin/gantry
MODELS=${GANTRY_DEPS_DIR:-.cache}/models
[[ -x $GANTRY ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: python3 not found: run make setup"; exit 1; }
[[ -f $MODELS/tiny-llama.gguf ]] || { echo "FAIL: $MODELS/tiny-llama.gguf missing: run make setup"; exit 1; }
# Bounded: every socket in the test has a timeout; this is the outer wall.
timeout -k 5 300 python3 -u tests/server/serve_response_owners_test.py "$GANTRY" "$MODELS"
