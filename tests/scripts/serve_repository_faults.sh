#!/usr/bin/env bash
# gantry serve's model repository under attack (issue 34): tests/server/serve_repository_faults_test.py
#  1. a server SIGKILLed during /api/pull leaves its partial download in --model-repository, and a truncated
#     model lies beside the good one: the restart with the same flags starts, serves the good model and
#     reports the bad one as failed (readiness, repository index), and removes only the dead server's partial;
#  2. /api/copy beyond --max-model-copies is refused; /api/tags over the copies reads each GGUF header once
#     per version of the file (gantry_model_header_reads_total).
# Usage: serve_repository_faults.sh BUILD_DIR   (run from the source dir)
set -euo pipefail
BUILD=${1:?usage: serve_repository_faults.sh BUILD_DIR}
GANTRY=$BUILD/bin/gantry
MODELS=${GANTRY_DEPS_DIR:-.cache}/models
[[ -x $GANTRY ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: python3 not found: run make setup"; exit 1; }
command -v setpriv >/dev/null || { echo "FAIL: setpriv (util-linux) not found"; exit 1; }
[[ -f $MODELS/tiny-llama.gguf ]] || { echo "FAIL: $MODELS/tiny-llama.gguf missing: run make setup"; exit 1; }
# Bounded: every socket and wait in the test has a timeout; this is the outer wall.
timeout -k 5 300 python3 -u tests/server/serve_repository_faults_test.py "$GANTRY" "$MODELS"
