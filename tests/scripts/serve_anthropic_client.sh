#!/usr/bin/env bash
# Claude-API clients can use `gantry serve`: the official @anthropic-ai/sdk (tests/clients/anthropic_client_test.mjs)
# against POST /v1/messages and /v1/messages/count_tokens, with an API key (the SDK sends it as x-api-key), on
# tiny-llama (ChatML, no tool format: Gantry's generic JSON format), tiny-qwen25-tools (Qwen2.5's template:
# Hermes <tool_call>) and tiny-llama31-tools (Llama 3.1's template), each through llama.cpp's own chat layer.
# Usage: serve_anthropic_client.sh BUILD_DIR   (run from the source dir; never skips: a missing dependency fails)
set -uo pipefail
BUILD=${1:?usage: serve_anthropic_client.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
MODELS=("$DEPS/models/tiny-llama.gguf" "$DEPS/models/tiny-qwen25-tools.gguf" "$DEPS/models/tiny-llama31-tools.gguf")
CLIENTS=tests/clients
READY_TIMEOUT_S=60

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
for m in "${MODELS[@]}"; do [[ -f "$m" ]] || { echo "FAIL: $m missing (run scripts/setup.sh)"; exit 1; }; done
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup.sh installs it)"; exit 1; }
[[ -d "$CLIENTS/node_modules/@anthropic-ai/sdk" ]] || { echo "FAIL: $CLIENTS/node_modules missing (scripts/setup.sh runs npm ci there)"; exit 1; }

tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; rm -rf "$tmp"' EXIT

key=anthropic-test-key-$RANDOM$RANDOM
echo "$key" >"$tmp/key.txt"
port=$(free_port)
base="http://127.0.0.1:$port"
"$GANTRY" serve "${MODELS[@]}" --host 127.0.0.1 --port "$port" --grpc-port -1 --api-key-file "$tmp/key.txt" \
  >"$tmp/server.log" 2>&1 &
pid=$!

wait_ready "$base" "$tmp/server.log" "$READY_TIMEOUT_S" || exit 1

status=0
BASE_URL="$base" MODELS=tiny-llama,tiny-qwen25-tools,tiny-llama31-tools API_KEY="$key" TEST_TIMEOUT_S=240 \
  timeout 300 node "$CLIENTS/anthropic_client_test.mjs" || status=1
stop_server || status=1
if ((status)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "FAIL: the Anthropic client checks failed against gantry serve"
fi
exit $status
