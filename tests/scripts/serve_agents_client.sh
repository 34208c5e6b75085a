#!/usr/bin/env bash
# Agents can use `gantry serve`: tool calling through the clients agents are built on (the Vercel AI SDK,
# LangChain.js, `openai`; tests/clients/agents_client_test.mjs) on three tiny models: tiny-llama (ChatML, no
# tool format: Gantry's generic JSON format), tiny-qwen25-tools (Qwen2.5's template: Hermes <tool_call>) and
# tiny-llama31-tools (Llama 3.1's template), each through llama.cpp's own chat layer.
# Usage: serve_agents_client.sh BUILD_DIR   (run from the source dir; never skips: a missing dependency fails)
set -uo pipefail
BUILD=${1:?usage: serve_agents_client.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
MODELS=("$DEPS/models/tiny-llama.gguf" "$DEPS/models/tiny-qwen25-tools.gguf" "$DEPS/models/tiny-llama31-tools.gguf")
CLIENTS=tests/clients
READY_TIMEOUT_S=60

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
for m in "${MODELS[@]}"; do [[ -f "$m" ]] || { echo "FAIL: $m missing (run scripts/setup.sh)"; exit 1; }; done
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup.sh installs it)"; exit 1; }
[[ -d "$CLIENTS/node_modules/ai" && -d "$CLIENTS/node_modules/@langchain/openai" ]] || { echo "FAIL: $CLIENTS/node_modules missing (scripts/setup.sh runs npm ci there)"; exit 1; }

tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; rm -rf "$tmp"' EXIT

port=$(free_port)
base="http://127.0.0.1:$port"
"$GANTRY" serve "${MODELS[@]}" --host 127.0.0.1 --port "$port" >"$tmp/server.log" 2>&1 &
pid=$!

wait_ready "$base" "$tmp/server.log" "$READY_TIMEOUT_S" || exit 1

status=0
BASE_URL="$base/v1" MODELS=tiny-llama,tiny-qwen25-tools,tiny-llama31-tools API_KEY=gantry-test TEST_TIMEOUT_S=240 \
  timeout 300 node "$CLIENTS/agents_client_test.mjs" || status=1
stop_server || status=1
if ((status)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "FAIL: the agent client checks failed against gantry serve"
fi
exit $status
