#!/usr/bin/env bash
# The ONNX node suite through `gantry test-onnx`: one verdict line per test, the closing count line, an
# exit code of 1 exactly when a test failed, and every test accounted for. (Verdict-by-verdict equality
# with raw ONNX Runtime is checked by cli_test TestOnnxCli.NodeSuiteVerdictsEqualRawOnnxRuntime.)
set -uo pipefail
BUILD=${1:?usage: onnx_node_suite.sh BUILD_DIR}
NODE=/usr/share/libonnx-testdata/data/node
GANTRY="$BUILD/bin/gantry"
[[ -d "$NODE" ]] || { echo "FAIL: $NODE missing (install libonnx-testdata)"; exit 1; }
[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
out=$(mktemp); trap 'rm -f "$out"' EXIT
GANTRY_LOG_LEVEL=off "$GANTRY" test-onnx "$NODE" >"$out" 2>&1; rc=$?
last=$(tail -n 1 "$out")
[[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]] || { echo "bad count line: $last"; exit 1; }
p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} s=${BASH_REMATCH[3]}
total=$(ls -d "$NODE"/*/ | wc -l)
echo "node suite: $p passed, $f failed, $s skipped of $total"
(( p + f + s == total )) || { echo "counts do not add up to $total tests"; exit 1; }
(( $(grep -c '^PASS ' "$out") == p )) || { echo "PASS lines differ from the count"; exit 1; }
(( $(grep -c '^FAIL ' "$out") == f )) || { echo "FAIL lines differ from the count"; exit 1; }
(( $(grep -c '^SKIP ' "$out") == s )) || { echo "SKIP lines differ from the count"; exit 1; }
if (( f > 0 )); then (( rc == 1 )) || { echo "exit code $rc with failures (want 1)"; exit 1; }
else (( rc == 0 )) || { echo "exit code $rc without failures (want 0)"; exit 1; }; fi
# Skips are only what Gantry cannot feed (non-tensor I/O), never an ORT error.
if grep '^SKIP ' "$out" | grep -v 'Gantry feeds and returns tensors only' >/dev/null; then
  echo "unexpected skip reasons:"; grep '^SKIP ' "$out" | grep -v 'tensors only'; exit 1
fi
# Failure categories, for the record.
echo "failure categories:"
grep '^FAIL ' "$out" | sed -E 's/^FAIL (test_[a-z]+).*(Could not find an implementation|differ beyond|Failed to construct locale|Fatal error|dtype|expected bf16|is "|Exception during initialization).*/\1 \2/' \
  | awk '{print $NF}' | sort | uniq -c
exit 0
