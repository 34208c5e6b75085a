#!/usr/bin/env bash
# A model at an http URL, served by python's http.server on loopback, is fetched into memory and never
# written to disk: `gantry run URL` generates the same greedy text as `gantry run FILE`, and
# `gantry serve URL` answers a completion with it while its TMPDIR stays empty and its weights are mapped
# from an anonymous memory file (memfd), not from any path. A URL that is not there is a clear error.
# Every process is bounded (timeout) and ended on every exit path (trap).
# Usage: serve_url_model.sh BUILD_DIR   (run from the source dir; never skips: a missing dependency fails)
set -uo pipefail
BUILD=${1:?usage: serve_url_model.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
MODEL=$DEPS/models/tiny-llama.gguf

[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
[[ -f "$MODEL" ]] || { echo "FAIL: $MODEL missing (run scripts/setup.sh)"; exit 1; }

tmp=$(mktemp -d)
pid=""
http_pid=""
source "$(dirname "$0")/lib/serve_common.sh"  # free_port, stop_server, wait_ready
trap 'stop_server; [[ -n "$http_pid" ]] && kill "$http_pid" 2>/dev/null; rm -rf "$tmp"' EXIT

mkdir -p "$tmp/www" "$tmp/tmpdir"
cp "$MODEL" "$tmp/www/tiny-llama.gguf"
hport=$(free_port)
(cd "$tmp/www" && exec timeout 300 /usr/bin/python3 -m http.server "$hport" --bind 127.0.0.1) >"$tmp/http.log" 2>&1 &
http_pid=$!
url="http://127.0.0.1:$hport/tiny-llama.gguf"
for _ in $(seq 1 100); do
  [[ "$(curl -s -o /dev/null -r 0-0 -w '%{http_code}' "$url")" == 200 ]] && break
  sleep 0.1
done

status=0
run_args=(--prompt "Once upon a time" --max-tokens 8 --temperature 0 --ctx 256)
from_file=$(timeout 120 "$GANTRY" run "$MODEL" "${run_args[@]}" 2>"$tmp/run-file.err")
from_url=$(TMPDIR="$tmp/tmpdir" timeout 120 "$GANTRY" run "$url" "${run_args[@]}" 2>"$tmp/run-url.err")
if [[ -z "$from_file" || "$from_url" != "$from_file" ]]; then
  echo "FAIL: gantry run URL printed"; echo "$from_url"; echo "--- but gantry run FILE printed"; echo "$from_file"
  cat "$tmp/run-url.err"; status=1
fi

# A URL with nothing behind it: an error naming it, exit 1, no crash.
if out=$(timeout 60 "$GANTRY" run "http://127.0.0.1:$hport/missing.gguf" "${run_args[@]}" 2>&1); then
  echo "FAIL: gantry run of a missing URL succeeded: $out"; status=1
elif ! grep -q "missing.gguf: HTTP 404" <<<"$out"; then
  echo "FAIL: gantry run of a missing URL did not say so: $out"; status=1
fi

port=$(free_port)
base="http://127.0.0.1:$port"
TMPDIR="$tmp/tmpdir" "$GANTRY" serve "$url" --host 127.0.0.1 --port "$port" --ctx 256 >"$tmp/server.log" 2>&1 &
pid=$!
if wait_ready "$base" "$tmp/server.log" 60; then
  models=$(curl -s -m 10 "$base/v1/models")
  grep -q '"id":"tiny-llama"' <<<"$models" || { echo "FAIL: /v1/models does not list tiny-llama: $models"; status=1; }
  answer=$(curl -s -m 60 "$base/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"tiny-llama","prompt":"Once upon a time","max_tokens":4,"temperature":0}')
  grep -q '"text"' <<<"$answer" || { echo "FAIL: completion from the URL model: $answer"; status=1; }
  maps=$(cat "/proc/$pid/maps")
  grep -q 'memfd:gantry:tiny-llama.gguf' <<<"$maps" ||
    { echo "FAIL: the served model is not mapped from a memory file"; status=1; }
  if grep -q "tiny-llama.gguf" <<<"$(grep -v memfd: <<<"$maps")"; then
    echo "FAIL: the served model is mapped from a file on disk:"; grep tiny-llama <<<"$maps"; status=1
  fi
else
  status=1
fi
stop_server || status=1
# ONNX Runtime leaves its own small logs in TMPDIR (.ses, mat-debug-PID.log); no file may hold the model.
if [[ -n "$(find "$tmp/tmpdir" -type f -size +64k)" ]] || grep -rlq '^GGUF' "$tmp/tmpdir"; then
  echo "FAIL: the model was written to TMPDIR:"; ls -la "$tmp/tmpdir"; status=1
fi
if ((status)); then
  echo "--- gantry serve log (tail)"; tail -30 "$tmp/server.log"
  echo "FAIL: a model from a URL"
else
  echo "OK: a model from a URL loads into memory, never onto disk (run and serve)"
fi
exit $status
