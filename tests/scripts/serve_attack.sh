#!/usr/bin/env bash
# gantry serve under attack, round two (issue 34): tests/server/serve_attack_test.py replays what killed, hung
# or exhausted the server on the surfaces added since the first round (a grammar made impossible by
# logit_bias, streams whose clients vanish, stop/tool/document/input bounds, abandoned rerank work, drain
# during it, count_tokens and names that cost before they were refused) against real servers on loopback.
# Usage: serve_attack.sh BUILD_DIR   (run from the source dir)
set -euo pipefail
BUILD=${1:?usage: serve_attack.sh BUILD_DIR}
GANTRY=$BUILD/bin/gantry
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
for m in tiny-llama.gguf tiny-reranker.gguf; do
  [[ -f $DEPS/models/$m ]] || { echo "FAIL: $DEPS/models/$m missing: run make setup"; exit 1; }
done
[[ -d $DEPS/llama/src/gguf-py ]] || { echo "FAIL: $DEPS/llama/src/gguf-py missing: run make setup"; exit 1; }
[[ -x $GANTRY ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
# Debian's python3: gguf-py (the bundle's GGUF reader) needs python3-numpy.
timeout -k 5 840 /usr/bin/python3 -u tests/server/serve_attack_test.py "$GANTRY" "$DEPS"
echo "serve_attack: all passed"
