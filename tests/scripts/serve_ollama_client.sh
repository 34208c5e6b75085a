#!/usr/bin/env bash
# `gantry serve` passes the official `ollama` npm client's checks (tests/clients/ollama_client_test.mjs):
# version, list, show, generate (plain, json and a schema), chat streamed, embed, ps, keep_alive (load,
# unload, forever), unknown-model 404s, chat with tools (plain and streamed, on tiny-llama's generic JSON
# format and tiny-qwen25-tools' Hermes format), a tool-call history, show's capabilities, copy, delete,
# and pull from a directory laid out like an Ollama registry (a good blob and a corrupted one), against
# tiny-llama.gguf served as "tiny-llama" and loaded on demand; then, with --api-key-file and no
# --pull-source, that a client sending the key works, one without gets 401, and pull answers 501.
# Usage: serve_ollama_client.sh BUILD_DIR   (run from the source dir; never skips: a missing dependency fails)
set -uo pipefail
BUILD=${1:?usage: serve_ollama_client.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
MODEL=$DEPS/models/tiny-llama.gguf
TOOLS_MODEL=$DEPS/models/tiny-qwen25-tools.gguf
CLIENTS=tests/clients
READY_TIMEOUT_S=60

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
[[ -f "$MODEL" ]] || { echo "FAIL: $MODEL missing (run scripts/setup.sh)"; exit 1; }
[[ -f "$TOOLS_MODEL" ]] || { echo "FAIL: $TOOLS_MODEL missing (run scripts/setup.sh)"; exit 1; }
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/setup.sh installs it)"; exit 1; }
[[ -d "$CLIENTS/node_modules/ollama" ]] || { echo "FAIL: $CLIENTS/node_modules/ollama missing (scripts/setup.sh runs npm ci there)"; exit 1; }

tmp=$(mktemp -d)
pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; rm -rf "$tmp"' EXIT

# start_server LOG ARGS...: starts gantry serve on a free port and waits until it is ready; sets $base.
start_server() {
  local log=$1; shift
  base="http://127.0.0.1:$(free_port)"
  "$GANTRY" serve "$MODEL" --host 127.0.0.1 --port "${base##*:}" "$@" >"$log" 2>&1 &
  pid=$!
  wait_ready "$base" "$log" "$READY_TIMEOUT_S"
}

# A pull source laid out like an Ollama registry (~/.ollama/models): "tiny-pulled" (tiny-llama.gguf as
# its model blob) and "tiny-corrupt", whose manifest names a digest its blob does not have.
# add_manifest NAME DIGEST SIZE
add_manifest() {
  mkdir -p "$tmp/source/manifests/registry.ollama.ai/library/$1"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","layers":[%s]}' \
    "{\"mediaType\":\"application/vnd.ollama.image.model\",\"digest\":\"sha256:$2\",\"size\":$3}" \
    >"$tmp/source/manifests/registry.ollama.ai/library/$1/latest"
}
mkdir -p "$tmp/source/blobs" "$tmp/repo"
good=$(sha256sum "$MODEL" | cut -d' ' -f1)
size=$(stat -c %s "$MODEL")
cp "$MODEL" "$tmp/source/blobs/sha256-$good"
add_manifest tiny-pulled "$good" "$size"
bad=$(printf 'not the blob' | sha256sum | cut -d' ' -f1)
cp "$MODEL" "$tmp/source/blobs/sha256-$bad"
printf 'X' | dd of="$tmp/source/blobs/sha256-$bad" bs=1 seek=4096 conv=notrunc status=none
add_manifest tiny-corrupt "$bad" "$size"

status=0
# 1. Every check, on a server that loads on demand (keep_alive applies there).
start_server "$tmp/server.log" "$TOOLS_MODEL" --load-on-demand --model-repository "$tmp/repo" \
  --pull-source "$tmp/source" || exit 1
env -u API_KEY -u KEEP_ALIVE HOST="$base" MODEL=tiny-llama TOOL_MODELS=tiny-llama,tiny-qwen25-tools \
  PULL_MODEL=tiny-pulled PULL_CORRUPT=tiny-corrupt TEST_TIMEOUT_S=240 \
  timeout 270 node "$CLIENTS/ollama_client_test.mjs" || status=1
if [[ -e "$tmp/repo/tiny-corrupt.gguf" ]] || compgen -G "$tmp/repo/.*partial*" >/dev/null; then
  echo "FAIL: the corrupted pull left a file in the model repository: $(ls -A "$tmp/repo")"
  status=1
fi
stop_server || status=1
if ((status)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
fi

# 2. Authentication: the key as a bearer token works; no key or a wrong one is 401.
echo "test-key-$RANDOM$RANDOM" >"$tmp/key.txt"
if start_server "$tmp/server-auth.log" --api-key-file "$tmp/key.txt"; then
  HOST="$base" MODEL=tiny-llama API_KEY="$(cat "$tmp/key.txt")" TEST_TIMEOUT_S=60 \
    timeout 90 node "$CLIENTS/ollama_client_test.mjs" || { status=1; tail -30 "$tmp/server-auth.log"; }
  stop_server || status=1
else
  status=1
fi

# 3. Pulling from an http registry (Ollama's /v2/<namespace>/<model>/manifests|blobs layout, served by
# python's http.server, which ignores Range: the client's whole-file path): the good model and the
# corrupted one, over curl.
mkdir -p "$tmp/www/v2/library/tiny-http/manifests" "$tmp/www/v2/library/tiny-http/blobs" \
  "$tmp/www/v2/library/tiny-http-corrupt/manifests" "$tmp/www/v2/library/tiny-http-corrupt/blobs" "$tmp/repo-http"
cp "$tmp/source/manifests/registry.ollama.ai/library/tiny-pulled/latest" "$tmp/www/v2/library/tiny-http/manifests/latest"
cp "$MODEL" "$tmp/www/v2/library/tiny-http/blobs/sha256:$good"
cp "$tmp/source/manifests/registry.ollama.ai/library/tiny-corrupt/latest" \
  "$tmp/www/v2/library/tiny-http-corrupt/manifests/latest"
cp "$tmp/source/blobs/sha256-$bad" "$tmp/www/v2/library/tiny-http-corrupt/blobs/sha256:$bad"
registry="http://127.0.0.1:$(free_port)"
(cd "$tmp/www" && exec /usr/bin/python3 -m http.server "${registry##*:}" --bind 127.0.0.1) >"$tmp/http.log" 2>&1 &
http_pid=$!
trap 'stop_server; kill "$http_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do
  [[ "$(curl -s -o /dev/null -w '%{http_code}' "$registry/v2/library/tiny-http/manifests/latest")" == 200 ]] && break
  sleep 0.1
done
if start_server "$tmp/server-http.log" --model-repository "$tmp/repo-http" --pull-source "$registry"; then
  out=$(curl -s "$base/api/pull" -d '{"model":"tiny-http"}')
  if [[ "$(tail -1 <<<"$out")" != '{"status":"success"}' ]] || ! grep -q '"completed":'"$size" <<<"$out"; then
    echo "FAIL: pull over http: $out"; status=1
  fi
  answer=$(curl -s "$base/api/generate" -d '{"model":"tiny-http","prompt":"Hi","stream":false,"options":{"num_predict":2}}')
  grep -q '"done":true' <<<"$answer" || { echo "FAIL: generate with the model pulled over http: $answer"; status=1; }
  out=$(curl -s "$base/api/pull" -d '{"model":"tiny-http-corrupt"}')
  if ! tail -1 <<<"$out" | grep -q '"error":"digest mismatch'; then
    echo "FAIL: a corrupted pull over http did not end with a digest mismatch: $out"; status=1
  fi
  [[ -e "$tmp/repo-http/tiny-http-corrupt.gguf" ]] && { echo "FAIL: the corrupted http pull was kept"; status=1; }
  ((status)) && tail -20 "$tmp/server-http.log"
  stop_server || status=1
else
  status=1
fi
((status)) || echo "ok pull over http (success and a corrupted blob)"

((status)) && echo "FAIL: the ollama client checks failed against gantry serve"
exit $status
