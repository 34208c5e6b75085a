#!/usr/bin/env bash
# `gantry serve` passes the official `openai` npm client's checks (tests/clients/openai_client_test.mjs):
# models.list, chat (plain and streamed with usage), completions, embeddings (float and base64) and
# 4xx errors, all against tiny-llama.gguf served under its file stem "tiny-llama".
# Usage: serve_openai_client.sh BUILD_DIR   (run from the source dir; exit 77 = skipped, with the reason)
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
stop_server() {
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: gantry serve did not exit within 10 s of SIGTERM; killing it"
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    pid=""
    return 1
  fi
  wait "$pid" 2>/dev/null
  pid=""
}
trap 'stop_server; rm -rf "$tmp"' EXIT

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
"$GANTRY" serve "$MODEL" --host 127.0.0.1 --port "$port" >"$tmp/server.log" 2>&1 &
pid=$!

ready=0
deadline=$((SECONDS + READY_TIMEOUT_S))
while ((SECONDS < deadline)); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: gantry serve exited before it was ready:"; tail -20 "$tmp/server.log"; pid=""; exit 1
  fi
  if [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$base/v2/health/ready")" == 200 ]]; then ready=1; break; fi
  sleep 0.25
done
((ready)) || { echo "FAIL: $base/v2/health/ready not 200 within ${READY_TIMEOUT_S} s:"; tail -20 "$tmp/server.log"; exit 1; }

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
