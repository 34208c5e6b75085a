#!/usr/bin/env bash
# One model over hosts in network namespaces with a shaped link (1 ms each way, 1 Gbit/s: tests/rpc/netns.py,
# tests/rpc/rpc_netns_test.py): greedy output equal to the local one, the link measured, the network in
# plan --speed. Skips (77) with the reason where namespaces are forbidden or this is not root.
# Usage: rpc_netns.sh BUILD_DIR   (run from the source dir)
set -euo pipefail
BUILD=${1:?usage: rpc_netns.sh BUILD_DIR}
GANTRY=$BUILD/bin/gantry
MODELS=${GANTRY_DEPS_DIR:-.cache}/models
[[ -x $GANTRY ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
[[ -f $MODELS/tiny-llama.gguf ]] || { echo "FAIL: $MODELS/tiny-llama.gguf missing: run make setup"; exit 1; }
timeout -k 5 600 /usr/bin/python3 -u tests/rpc/rpc_netns_test.py "$GANTRY" "$MODELS"
