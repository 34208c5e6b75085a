#!/usr/bin/env bash
# `gantry detect` exit codes and output shapes from a user's point of view.
set -uo pipefail
build=${1:?usage: detect_cli.sh BUILD_DIR}
gantry="$build/bin/gantry"
[[ -x "$gantry" ]] || { echo "FAIL: $gantry is not built"; exit 1; }
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }

check "table exits 0 and has a cpu row" '"$gantry" detect | grep -qE "^cpu:0 +cpu "'
check "--json is one JSON document" '"$gantry" detect --json | /usr/bin/python3 -c "import json,sys; json.load(sys.stdin)"'
check "--timing lists probes" '"$gantry" detect --timing | grep -qE "^  total +[0-9.]+"'
check "--sysroot reads a fixture" '"$gantry" detect --sysroot tests/fixtures/hw/tpu-v5e-vm | grep -q "Google TPU v5e"'
check "GANTRY_SYSROOT works too" 'GANTRY_SYSROOT=tests/fixtures/hw/gaudi2 "$gantry" detect | grep -q "Habana Gaudi2"'
check "a missing sysroot is bad usage (2)" '"$gantry" detect --sysroot /nonexistent/dir >/dev/null 2>&1; [[ $? -eq 2 ]]'
check "an unknown flag is bad usage (2)" '"$gantry" detect --bogus >/dev/null 2>&1; [[ $? -eq 2 ]]'
check "warnings go to stderr, exit stays 0" '"$gantry" detect --sysroot tests/fixtures/hw/garbage 2>"$build/detect_cli.err" >/dev/null && grep -q "^warning: " "$build/detect_cli.err"'
exit $fail
