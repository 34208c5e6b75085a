#!/usr/bin/env bash
# Tenants of a JSON keys file against the official `openai` npm client (tests/clients/tenants_client_test.mjs):
# 429 with Retry-After and x-ratelimit-* headers, the client's retry succeeding after a SIGHUP reload, a stream
# kept across the reload, a flooding key leaving another key answered, per-tenant metrics without keys, deadlines
# refused at once when they cannot be kept, a bad reload keeping the keys in use.
# Usage: serve_tenants.sh BUILD_DIR   (run from the source dir; never skips: a missing dependency fails)
set -uo pipefail
BUILD=${1:?usage: serve_tenants.sh BUILD_DIR}
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

cat >"$tmp/keys.json" <<'JSON'
{"tenants": [
  {"name": "limited", "key": "limited-key-0001", "requests_per_minute": 1},
  {"name": "calm", "key": "calm-key-00000001", "priority": "interactive", "weight": 2},
  {"name": "flood", "key": "flood-key-0000001", "max_concurrent": 2, "priority": "batch"}
]}
JSON
port=$(free_port)
base="http://127.0.0.1:$port"
"$GANTRY" serve "$MODEL" --host 127.0.0.1 --port "$port" --grpc-port -1 --api-key-file "$tmp/keys.json" \
  --parallel 2 --max-queue 8 >"$tmp/server.log" 2>&1 &
pid=$!

wait_ready "$base" "$tmp/server.log" "$READY_TIMEOUT_S" || exit 1

status=0
BASE_URL="$base" MODEL=tiny-llama KEYS_FILE="$tmp/keys.json" SERVER_PID="$pid" SERVER_LOG="$tmp/server.log" \
  TEST_TIMEOUT_S=90 timeout 120 node "$CLIENTS/tenants_client_test.mjs" || status=1
# Deadlines: the model has measured generations by now, so one that cannot finish in 1 ms is refused at
# once (429, Retry-After, the reason), and a deadline that is not a number is a 400.
body='{"model": "tiny-llama", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16}'
code=$(curl -s -o "$tmp/deadline.json" -D "$tmp/deadline.h" -w '%{http_code}' -H 'Authorization: Bearer calm-key-00000001' \
  -H 'content-type: application/json' -H 'x-request-deadline-ms: 1' -d "$body" "$base/v1/chat/completions")
[[ "$code" == 429 ]] || { echo "FAIL: a 1 ms deadline answered $code, want 429: $(cat "$tmp/deadline.json")"; status=1; }
grep -q "deadline" "$tmp/deadline.json" || { echo "FAIL: the refusal does not say deadline: $(cat "$tmp/deadline.json")"; status=1; }
grep -qi "^retry-after: [1-9]" "$tmp/deadline.h" || { echo "FAIL: no Retry-After on the deadline refusal"; status=1; }
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer calm-key-00000001' \
  -H 'content-type: application/json' -H 'x-request-deadline-ms: 60000' -d "$body" "$base/v1/chat/completions")
[[ "$code" == 200 ]] || { echo "FAIL: a 60 s deadline answered $code, want 200"; status=1; }
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer calm-key-00000001' \
  -H 'content-type: application/json' -H 'x-request-deadline-ms: soon' -d "$body" "$base/v1/chat/completions")
[[ "$code" == 400 ]] || { echo "FAIL: x-request-deadline-ms: soon answered $code, want 400"; status=1; }
# A keys file that does not parse changes nothing: the server keeps serving with the keys it has.
echo '{"tenants": [{"name": "broken"' >"$tmp/keys.json"
kill -HUP "$pid"
for _ in $(seq 1 100); do grep -q "reloading the API keys" "$tmp/server.log" && break; sleep 0.05; done
grep -q "reloading the API keys.*not a JSON object" "$tmp/server.log" || { echo "FAIL: a bad reload was not reported"; status=1; }
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer calm-key-00000001' "$base/v1/models")
[[ "$code" == 200 ]] || { echo "FAIL: after a bad reload the old keys answer $code, want 200"; status=1; }
stop_server || status=1
if ((status)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "FAIL: the tenants checks failed against gantry serve"
fi
exit $status
