#!/usr/bin/env bash
# One model over several hosts on loopback (tests/rpc/rpc_loopback_test.py): `gantry rpc-server` x 2, detect /
# run / plan / serve with --rpc; greedy output equal to the local one, plan --measure within 1 % per device, and
# the faults (a server down at load, another protocol version, a server killed mid-generation).
# Usage: rpc_loopback.sh BUILD_DIR   (run from the source dir)
set -euo pipefail
BUILD=${1:?usage: rpc_loopback.sh BUILD_DIR}
GANTRY=$BUILD/bin/gantry
MODELS=${GANTRY_DEPS_DIR:-.cache}/models
[[ -x $GANTRY ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
for m in tiny-llama.gguf bench-100m-q8_0.gguf; do
  [[ -f $MODELS/$m ]] || { echo "FAIL: $MODELS/$m missing: run make setup"; exit 1; }
done
if ! "$GANTRY" rpc-server --help 2>/dev/null | grep -q "gantry rpc-server"; then echo "FAIL: this gantry has no rpc-server command"; exit 1; fi
timeout -k 5 600 /usr/bin/python3 -u tests/rpc/rpc_loopback_test.py "$GANTRY" "$MODELS"
