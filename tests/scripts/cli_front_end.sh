#!/usr/bin/env bash
# The CLI front end (bin/gantry) must not load the inference runtimes: `gantry detect` works without
# the engine module, and a missing engine is one clear error, not a crash.
set -uo pipefail
BUILD=${1:?usage: cli_front_end.sh BUILD_DIR}
G=$BUILD/bin/gantry
fail=0
check() { if eval "$2"; then echo "PASS: $1"; else echo "FAIL: $1"; fail=1; fi; }

libs=$(ldd "$G")
check "front end links no ONNX Runtime, llama.cpp or protobuf" \
  '! grep -qE "onnxruntime|libllama|libggml|protobuf" <<<"$libs"'
check "engine module exists" '[[ -f $BUILD/lib/libgantry_engine.so ]]'

out=$(GANTRY_ENGINE_LIB=/nonexistent/libgantry_engine.so "$G" detect --json 2>/dev/null); rc=$?
check "detect runs without the engine" '[[ $rc -eq 0 ]] && /usr/bin/python3 -c "import json,sys; json.loads(sys.argv[1])" "$out"'

err=$(GANTRY_ENGINE_LIB=/nonexistent/libgantry_engine.so "$G" version 2>&1 >/dev/null); rc=$?
check "a missing engine is exit 1 with a clear message" '[[ $rc -eq 1 ]] && grep -q "cannot load the engine module" <<<"$err"'

out=$("$G" version); rc=$?
check "version goes through the engine" '[[ $rc -eq 0 ]] && grep -q "^onnxruntime 1.29" <<<"$out" && grep -q "^llama.cpp" <<<"$out"'

"$G" --help >/dev/null 2>&1; rc=$?
check "--help exits 0" '[[ $rc -eq 0 ]]'
"$G" detect --no-such-flag >/dev/null 2>&1; rc=$?
check "bad usage exits 2" '[[ $rc -eq 2 ]]'
exit $fail
