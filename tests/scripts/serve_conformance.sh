#!/usr/bin/env bash
# The conformance suite (docs/conformance.md): `gantry serve` on the bundled models, every response body and
# stream event of every protocol (OpenAI chat/completions/embeddings/models and stored chat completions,
# Responses, Anthropic Messages, KServe v2 REST, Ollama, rerank) validated by tests/clients/conformance_test.mjs
# against the official definitions pinned in tests/conformance/specs (provenance in its README.md).
# Usage: serve_conformance.sh BUILD_DIR   (run from the source dir; never skips: a missing dependency fails)
set -uo pipefail
BUILD=${1:?usage: serve_conformance.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
M=$DEPS/models
MODELS=("$M/tiny-llama.gguf" "$M/tiny-qwen25-tools.gguf" "$M/tiny-reranker.gguf" "$M/mlp_64_128_10.onnx")
CLIENTS=tests/clients
READY_TIMEOUT_S=60

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
for m in "${MODELS[@]}"; do [[ -f "$m" ]] || { echo "FAIL: $m missing (run scripts/setup.sh)"; exit 1; }; done
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup.sh installs it)"; exit 1; }
[[ -d "$CLIENTS/node_modules/ajv" && -d "$CLIENTS/node_modules/ajv-formats" ]] || { echo "FAIL: $CLIENTS/node_modules lacks ajv (scripts/setup.sh runs npm ci there)"; exit 1; }

tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; rm -rf "$tmp"' EXIT

key=conformance-key-$RANDOM$RANDOM
echo "$key" >"$tmp/key.txt"
port=$(free_port)
base="http://127.0.0.1:$port"
# --ctx 1024: a prompt of 3000 words is over the context (the context-length error case).
"$GANTRY" serve "${MODELS[@]}" --host 127.0.0.1 --port "$port" --grpc-port -1 --api-key-file "$tmp/key.txt" \
  --ctx 1024 --parallel 2 --threads 1 --responses-store 64 >"$tmp/server.log" 2>&1 &
pid=$!

wait_ready "$base" "$tmp/server.log" "$READY_TIMEOUT_S" || exit 1

status=0
# ONLY (the .mjs's debugging filter) is cleared: every case must run.
env -u ONLY BASE_URL="$base" API_KEY="$key" CHAT_MODEL=tiny-llama TOOLS_MODEL=tiny-qwen25-tools \
  RERANK_MODEL=tiny-reranker TENSOR_MODEL=mlp_64_128_10 timeout 600 node "$CLIENTS/conformance_test.mjs" || status=1
stop_server || status=1
if ((status)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "FAIL: responses of gantry serve do not conform to the official definitions"
fi
exit $status
