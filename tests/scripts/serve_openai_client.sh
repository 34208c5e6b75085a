#!/usr/bin/env bash
# `gantry serve` passes the official `openai` npm client's checks (tests/clients/openai_client_test.mjs):
# models.list, chat (plain and streamed with usage), completions, n: 2 choices (plain and streamed), seeded
# sampling, logprobs in streams, embeddings (float and base64) and 4xx errors, all against tiny-llama.gguf
# served under its file stem "tiny-llama" (--parallel's default, 4, allows n: 2).
# Usage: serve_openai_client.sh BUILD_DIR   (run from the source dir; never skips: a missing dependency fails)
set -uo pipefail
BUILD=${1:?usage: serve_openai_client.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
MODEL=$DEPS/models/tiny-llama.gguf
CLIENTS=tests/clients
READY_TIMEOUT_S=60

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
[[ -f "$MODEL" ]] || { echo "FAIL: $MODEL missing (run scripts/setup.sh)"; exit 1; }
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup.sh installs it)"; exit 1; }
[[ -d "$CLIENTS/node_modules/openai" ]] || { echo "FAIL: $CLIENTS/node_modules missing (scripts/setup.sh runs npm ci there)"; exit 1; }

tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; rm -rf "$tmp"' EXIT

port=$(free_port)
base="http://127.0.0.1:$port"
"$GANTRY" serve "$MODEL" --host 127.0.0.1 --port "$port" >"$tmp/server.log" 2>&1 &
pid=$!

wait_ready "$base" "$tmp/server.log" "$READY_TIMEOUT_S" || exit 1

status=0
# The validation-only switches of the .mjs (ONLY, ANY_MODEL_OK) are cleared: every check must run.
env -u ONLY -u ANY_MODEL_OK BASE_URL="$base/v1" MODEL=tiny-llama EMBED_MODEL=tiny-llama API_KEY=gantry-test TEST_TIMEOUT_S=60 \
  timeout 90 node "$CLIENTS/openai_client_test.mjs" || status=1
stop_server || status=1
if ((status)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "FAIL: the openai client checks failed against gantry serve"
fi
exit $status
