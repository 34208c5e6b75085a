#!/usr/bin/env bash
# The dashboard at / of `gantry serve`, in a real browser: headless Chromium (/usr/bin/chromium) driven by
# playwright-core (tests/clients/dashboard_browser_test.mjs) against a server with an API key file and the
# MLP, Silero VAD and tiny-llama loaded. Saves BUILD_DIR/dashboard.png.
# Usage: serve_dashboard.sh BUILD_DIR   (run from the source dir; never skips: Chromium failing to start
# is a failure, since set-up installs it)
set -uo pipefail
BUILD=${1:?usage: serve_dashboard.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
MLP=$DEPS/models/mlp_64_128_10.onnx
SILERO=$DEPS/models/silero_vad_v5.onnx
LLAMA=$DEPS/models/tiny-llama.gguf
CLIENTS=tests/clients
READY_TIMEOUT_S=60

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
for m in "$MLP" "$SILERO" "$LLAMA"; do [[ -f "$m" ]] || { echo "FAIL: $m missing (run scripts/setup.sh)"; exit 1; }; done
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup.sh installs it)"; exit 1; }
[[ -d "$CLIENTS/node_modules/playwright-core" ]] || { echo "FAIL: $CLIENTS/node_modules/playwright-core missing (scripts/setup.sh runs npm ci there)"; exit 1; }

tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; rm -rf "$tmp"' EXIT

# Inputs for the ONNX form: a good one for the MLP (2 x 64 float32) and one that is not a .npy.
/usr/bin/python3 - "$tmp" <<'PY' || { echo "FAIL: could not write the .npy inputs (python3 with numpy)"; exit 1; }
import sys, numpy as np
d = sys.argv[1]
np.save(f"{d}/mlp_input.npy", np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32))
open(f"{d}/not_npy.npy", "wb").write(b"this is not a numpy file")
PY
key=$(/usr/bin/python3 -c 'import secrets; print(secrets.token_hex(16))')
printf '# dashboard test key\n%s\n' "$key" >"$tmp/keys.txt"

port=$(free_port)
base="http://127.0.0.1:$port"
"$GANTRY" serve "$MLP" "$SILERO" "$LLAMA" --host 127.0.0.1 --port "$port" --api-key-file "$tmp/keys.txt" \
  >"$tmp/server.log" 2>&1 &
pid=$!

wait_ready "$base" "$tmp/server.log" "$READY_TIMEOUT_S" || exit 1

status=0
BASE_URL="$base" API_KEY="$key" NPY_GOOD="$tmp/mlp_input.npy" NPY_BAD="$tmp/not_npy.npy" \
  SCREENSHOT="$BUILD/dashboard.png" CHROMIUM=${CHROMIUM:-/usr/bin/chromium} TEST_TIMEOUT_S=120 \
  timeout 150 node "$CLIENTS/dashboard_browser_test.mjs"
status=$?
stop_server || status=1
if ((status != 0)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "FAIL: the dashboard checks failed"
fi
exit $status
