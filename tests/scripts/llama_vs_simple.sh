#!/usr/bin/env bash
# Greedy continuation from `gantry run` equals llama.cpp's own llama-simple (examples/simple/simple.cpp of the
# same bundle, compiled by tests/CMakeLists.txt into BUILD_DIR/bin, running the same installed libllama) on
# the same model, for several prompts: llama-simple prints the prompt's pieces, then the continuation, then
# "\n"; Gantry prints only the continuation.
# Usage: llama_vs_simple.sh BUILD_DIR
set -uo pipefail
BUILD=${1:?usage: llama_vs_simple.sh BUILD_DIR}
DEPS=${GANTRY_DEPS_DIR:-$(pwd)/.cache}
GANTRY=$BUILD/bin/gantry
SIMPLE=$BUILD/bin/llama-simple
N=24

[[ -x "$SIMPLE" ]] || { echo "FAIL: $SIMPLE not built (the target llama_simple_reference in tests/CMakeLists.txt)"; exit 1; }
[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
TINY=$DEPS/models/tiny-llama.gguf
BIG=$DEPS/models/bench-100m-q8_0.gguf
[[ -f "$TINY" && -f "$BIG" ]] || { echo "FAIL: generated models missing in $DEPS/models (run scripts/setup.sh)"; exit 1; }

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; cases=0
check() {  # model, prompt, extra gantry flags
  local model=$1 prompt=$2 extra=$3
  cases=$((cases + 1))
  "$SIMPLE" -m "$model" -n $N -ngl 0 "$prompt" >"$tmp/simple" 2>"$tmp/simple.err" || { echo "FAIL: llama-simple failed: $(tail -3 "$tmp/simple.err")"; fail=1; return; }
  # shellcheck disable=SC2086
  "$GANTRY" run "$model" --prompt "$prompt" --temperature 0 --max-tokens $N $extra >"$tmp/gantry" 2>"$tmp/gantry.err" || { echo "FAIL: gantry run failed: $(tail -3 "$tmp/gantry.err")"; fail=1; return; }
  /usr/bin/python3 - "$tmp/simple" "$tmp/gantry" "$prompt" "$(basename "$model")" "$extra" <<'PY' || fail=1
import sys
simple = open(sys.argv[1], "rb").read()
gantry = open(sys.argv[2], "rb").read()
prompt, model, extra = sys.argv[3].encode(), sys.argv[4], sys.argv[5]
label = f"{model} {sys.argv[3]!r} [{extra.strip() or 'defaults'}]"
if not gantry:
    print(f"FAIL: {label}: gantry printed nothing"); sys.exit(1)
if not simple.endswith(gantry + b"\n"):
    print(f"FAIL: {label}: continuations differ\n  llama-simple: {simple!r}\n  gantry:       {gantry!r}"); sys.exit(1)
prefix = simple[: len(simple) - len(gantry) - 1]
if not prefix.endswith(prompt):
    print(f"FAIL: {label}: llama-simple's output before the continuation is {prefix!r}, not the prompt"); sys.exit(1)
print(f"ok: {label}: {len(gantry)} bytes identical")
PY
}
for prompt in "Hello my name is" "The capital of France is" "Once upon a time, in a land far away," "def fibonacci(n):"; do
  check "$TINY" "$prompt" "--threads 2"
done
check "$TINY" "Hello my name is" "--threads 1 --ctx 4096"
check "$BIG" "Hello my name is" "--threads 2"
check "$BIG" "The capital of France is" "--threads 2 --ctx 256"
[[ $fail == 0 ]] && echo "PASS: $cases cases identical to llama-simple" || echo "FAIL: some of $cases cases differ"
exit $fail
