#!/usr/bin/env bash
# A request cancelled by the official openai client (AbortController), and one whose client disconnects,
# in the middle of a chunked prefill (tests/clients/prefill_cancel_test.mjs): gantry serve stops
# evaluating the prompt, frees the request and keeps what it evaluated as a prompt cache. The bench model
# with --prefill-chunk 8 evaluates a ~1,500-token prompt over ~190 decode steps; the client acts when the
# server's gantry_prompt_tokens_pending gauge shows the prefill under way. Then a host-memory prompt cache
# round trip: a slot's prompt parked by another conversation comes back restored (gantry_prompt_cache_bytes).
# Usage: serve_prefill_cancel.sh BUILD_DIR
set -uo pipefail
BUILD=${1:?usage: serve_prefill_cancel.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
MODEL=$DEPS/models/bench-100m-q4_0.gguf
CLIENTS=tests/clients

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
"$GANTRY" serve "$MODEL" --host 127.0.0.1 --port "$port" --grpc-port -1 --parallel 2 --ctx 4096 --threads 1 \
  --prefill-chunk 8 >"$tmp/server.log" 2>&1 &
pid=$!
wait_ready "$base" "$tmp/server.log" 120 || exit 1

status=0
BASE_URL=$base MODEL=bench-100m-q4_0 timeout 300 node "$CLIENTS/prefill_cancel_test.mjs" || status=1
stop_server || status=1
if ((status)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "FAIL: cancelling or disconnecting during a chunked prefill"
fi
exit $status
