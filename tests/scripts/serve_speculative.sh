#!/usr/bin/env bash
# Speculative decoding through `gantry serve` and `gantry run` on the tiny model:
# - three servers of tiny-llama.gguf (2 slots): without speculation, with a draft model (its Q8_0 copy,
#   -md as llama-server spells it) and with prompt lookup (--spec-type ngram-simple); the official openai
#   client (tests/clients/speculative_client_test.mjs) sends the same greedy completions and streamed chats
#   to each, one at a time, and gets the same text from all three; then all at once to the speculating
#   ones, which batch them and answer each;
# - /metrics: gantry_draft_tokens_total and gantry_draft_tokens_accepted_total of the speculating servers
#   count drafts (accepted <= drafted, both > 0); the plain server has no such series;
# - a draft model with another vocabulary (tiny-qwen25-tools.gguf) is refused with a message saying so,
#   by `gantry run` (exit 1) and by `gantry serve` (exits at start);
# - a bad flag value is refused with exit 2, naming the flag.
# Usage: serve_speculative.sh BUILD_DIR   (run from the source dir)
set -uo pipefail
BUILD=${1:?usage: serve_speculative.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
MODEL=$DEPS/models/tiny-llama.gguf
DRAFT=$DEPS/models/tiny-llama-q8_0.gguf
OTHER_VOCAB=$DEPS/models/tiny-qwen25-tools.gguf
CLIENTS=tests/clients
READY_TIMEOUT_S=60

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
for f in "$MODEL" "$DRAFT" "$OTHER_VOCAB"; do
  [[ -f "$f" ]] || { echo "FAIL: $f missing (run scripts/setup.sh: scripts/make-models.sh generates it)"; exit 1; }
done
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup.sh installs it)"; exit 1; }
[[ -d "$CLIENTS/node_modules/openai" ]] || { echo "FAIL: $CLIENTS/node_modules missing (scripts/setup.sh runs npm ci there)"; exit 1; }

tmp=$(mktemp -d)
pid=""
pids=()
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
stop_all() {
  local p
  for p in "${pids[@]}"; do pid=$p; stop_server; done
  pids=()
}
trap 'stop_all; rm -rf "$tmp"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }

# start NAME ARGS...: a server of the tiny model with ARGS; its base URL in $tmp/NAME.url.
start() {
  local name=$1 port
  shift
  port=$(free_port)
  "$GANTRY" serve "$MODEL" --host 127.0.0.1 --port "$port" --grpc-port -1 --parallel 2 --threads 1 "$@" \
    >"$tmp/$name.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  echo "http://127.0.0.1:$port" >"$tmp/$name.url"
  wait_ready "http://127.0.0.1:$port" "$tmp/$name.log" "$READY_TIMEOUT_S"
}

start plain || exit 1
start draft -md "$DRAFT" --draft-max 4 || exit 1
start ngram --spec-type ngram-simple --spec-ngram-size-n 2 --spec-ngram-size-m 8 || exit 1
plain=$(cat "$tmp/plain.url") draft=$(cat "$tmp/draft.url") ngram=$(cat "$tmp/ngram.url")

BASES="$plain,$draft,$ngram" MODEL=tiny-llama TEST_TIMEOUT_S=90 timeout 120 \
  node "$CLIENTS/speculative_client_test.mjs" || fail "the servers do not give the same text"

# counter NAME URL: the value of NAME{model="tiny-llama"} at URL/metrics, empty when absent.
counter() {
  curl -s -m 10 "$2/metrics" | awk -v n="$1" '$1 == n "{model=\"tiny-llama\"}" { print $2 }'
}
for side in draft ngram; do
  url=$(cat "$tmp/$side.url")
  drafted=$(counter gantry_draft_tokens_total "$url")
  accepted=$(counter gantry_draft_tokens_accepted_total "$url")
  echo "$side: drafted=$drafted accepted=$accepted"
  /usr/bin/python3 -c 'import sys; d, a = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if d > 0 and 0 < a <= d else 1)' \
    "${drafted:-0}" "${accepted:-0}" || fail "$side: /metrics draft counters wrong (drafted '$drafted', accepted '$accepted')"
done
curl -s -m 10 "$plain/metrics" | grep -q '^gantry_draft_tokens_total{' \
  && fail "the server without speculation reports draft counters"
stop_all

# Another vocabulary: refused, saying why.
out=$("$GANTRY" run "$MODEL" -md "$OTHER_VOCAB" -p "hello" -n 4 --threads 1 2>&1)
rc=$?
[[ $rc == 1 ]] || fail "gantry run with a draft of another vocabulary exited $rc, want 1"
grep -q "cannot draft for" <<<"$out" && grep -q "vocabulary" <<<"$out" \
  || fail "gantry run's error does not explain the vocabulary mismatch: $out"
port=$(free_port)
timeout 60 "$GANTRY" serve "$MODEL" --host 127.0.0.1 --port "$port" --grpc-port -1 --threads 1 \
  --draft-model "$OTHER_VOCAB" >"$tmp/bad.log" 2>&1
rc=$?
[[ $rc != 0 && $rc != 124 ]] || fail "gantry serve with a draft of another vocabulary exited $rc"
grep -q "cannot draft for" "$tmp/bad.log" || fail "gantry serve's error does not explain the mismatch: $(tail -3 "$tmp/bad.log")"

# Bad flag values: usage errors naming the flag.
out=$("$GANTRY" run "$MODEL" -p hi -n 2 --draft-p-min 1.5 2>&1)
rc=$?
[[ $rc == 2 ]] && grep -q -- "--draft-p-min" <<<"$out" || fail "--draft-p-min 1.5: exit $rc, $out"
out=$("$GANTRY" run "$MODEL" -p hi -n 2 --spec-type ngram-bogus 2>&1)
rc=$?
[[ $rc == 2 ]] && grep -q -- "--spec-type" <<<"$out" || fail "--spec-type ngram-bogus: exit $rc, $out"

if ((status)); then
  for f in "$tmp"/*.log; do echo "--- $f (tail)"; tail -15 "$f"; done
fi
exit $status
