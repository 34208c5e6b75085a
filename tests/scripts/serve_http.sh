#!/usr/bin/env bash
# gantry serve end to end: every endpoint and error through Python's http.client
# (tests/server/serve_http_test.py), against a real server on loopback; then a SIGTERM drains and
# exits 0. Usage: serve_http.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?usage: serve_http.sh BUILD_DIR}
GANTRY=$BUILD/bin/gantry
MODELS=${GANTRY_DEPS_DIR:-.cache}/models
for m in mlp_64_128_10.onnx silero_vad_v5.onnx tiny-llama.gguf; do
  [[ -f $MODELS/$m ]] || { echo "FAIL: $MODELS/$m missing: run make setup"; exit 1; }
done
command -v promtool >/dev/null || { echo "FAIL: promtool missing (Debian package prometheus): run make setup"; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# start NAME ARGS...: runs gantry serve on a free port; sets URL_<NAME> from its first stdout line.
start() {
  local name=$1; shift
  "$GANTRY" serve --port 0 "$@" >"$work/$name.out" 2>"$work/$name.err" &
  pids+=($!)
  eval "PID_$name=$!"
  for _ in $(seq 1 300); do  # bounded: 30 s
    if grep -q "listening on" "$work/$name.out" 2>/dev/null; then
      eval "URL_$name=$(grep -o 'http://[0-9.:]*' "$work/$name.out" | head -1)"
      return 0
    fi
    kill -0 "${pids[-1]}" 2>/dev/null || { echo "FAIL: gantry serve $name exited:"; cat "$work/$name.err"; exit 1; }
    sleep 0.1
  done
  echo "FAIL: gantry serve $name did not start in 30 s"; cat "$work/$name.err"; exit 1
}

start main "$MODELS/mlp_64_128_10.onnx" "$MODELS/silero_vad_v5.onnx" "$MODELS/tiny-llama.gguf" \
  --max-body-size 1MiB --ctx 512 --parallel 2 --threads 1
openssl rand -hex 16 >"$work/key"
start keyed "$MODELS/silero_vad_v5.onnx" --api-key-file "$work/key"

GANTRY_URL=$URL_main GANTRY_KEY_URL=$URL_keyed GANTRY_KEY=$(cat "$work/key") \
  timeout 300 python3 tests/server/serve_http_test.py

# Binding a non-loopback address without a key is refused with a way out.
if "$GANTRY" serve "$MODELS/silero_vad_v5.onnx" --host 0.0.0.0 --port 0 >"$work/open.out" 2>"$work/open.err"; then
  echo "FAIL: serving on 0.0.0.0 without a key was allowed"; exit 1
fi
grep -q -- "--api-key-file" "$work/open.err" || { echo "FAIL: no advice in: $(cat "$work/open.err")"; exit 1; }

# SIGTERM: drain and exit 0.
for name in main keyed; do
  pid_var=PID_$name
  kill -TERM "${!pid_var}"
  for _ in $(seq 1 100); do kill -0 "${!pid_var}" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "${!pid_var}" 2>/dev/null; then echo "FAIL: $name still running 10 s after SIGTERM"; exit 1; fi
  wait "${!pid_var}" && rc=0 || rc=$?
  [[ $rc == 0 ]] || { echo "FAIL: $name exited $rc after SIGTERM"; cat "$work/$name.err"; exit 1; }
done
echo "serve_http: all passed"
