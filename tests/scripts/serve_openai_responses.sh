#!/usr/bin/env bash
# `gantry serve` passes the official `openai` npm client's Responses API checks
# (tests/clients/openai_responses_test.mjs): responses.create plain and streamed (event order, deltas
# that make the text), the stream helper, GET/DELETE /v1/responses/{id}, store false, function-call round
# trips (previous_response_id, and the whole history sent back) on tiny-llama (generic JSON tool format),
# tiny-qwen25-tools (Hermes) and tiny-llama31-tools (Llama 3.1), text.format json_schema, and 4xx errors.
# Usage: serve_openai_responses.sh BUILD_DIR   (run from the source dir; never skips: a missing dependency fails)
set -uo pipefail
BUILD=${1:?usage: serve_openai_responses.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
MODELS=("$DEPS/models/tiny-llama.gguf" "$DEPS/models/tiny-qwen25-tools.gguf" "$DEPS/models/tiny-llama31-tools.gguf")
CLIENTS=tests/clients
READY_TIMEOUT_S=60

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
for m in "${MODELS[@]}"; do [[ -f "$m" ]] || { echo "FAIL: $m missing (run scripts/setup.sh)"; exit 1; }; done
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup.sh installs it)"; exit 1; }
[[ -d "$CLIENTS/node_modules/openai" ]] || { echo "FAIL: $CLIENTS/node_modules missing (scripts/setup.sh runs npm ci there)"; exit 1; }

tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; rm -rf "$tmp"' EXIT

port=$(free_port)
base="http://127.0.0.1:$port"
# A small store: the flag is taken (the checks need fewer than 16 kept at once; eviction is unit-tested).
"$GANTRY" serve "${MODELS[@]}" --host 127.0.0.1 --port "$port" --grpc-port -1 --responses-store 16 \
  >"$tmp/server.log" 2>&1 &
pid=$!

wait_ready "$base" "$tmp/server.log" "$READY_TIMEOUT_S" || exit 1

status=0
BASE_URL="$base/v1" MODEL=tiny-llama TOOL_MODELS=tiny-llama,tiny-qwen25-tools,tiny-llama31-tools API_KEY=gantry-test \
  TEST_TIMEOUT_S=240 timeout 300 node "$CLIENTS/openai_responses_test.mjs" || status=1
stop_server || status=1
if ((status)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "FAIL: the openai Responses API checks failed against gantry serve"
fi
exit $status
