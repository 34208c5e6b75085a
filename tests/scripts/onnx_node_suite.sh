#!/usr/bin/env bash
# The ONNX node suite through `gantry test-onnx`: one verdict line per test, the closing count line, an
# exit code of 1 exactly when a test failed, and every test accounted for. Fails when any case fails that
# onnx_node_suite.known_failures does not list (each entry there says why ONNX Runtime or the suite's data
# cannot pass it); a listed case that passes is reported, to be taken out of the list. (Verdict-by-verdict
# equality with raw ONNX Runtime is checked by cli_test TestOnnxCli.NodeSuiteVerdictsEqualRawOnnxRuntime.)
set -uo pipefail
BUILD=${1:?usage: onnx_node_suite.sh BUILD_DIR}
NODE=/usr/share/libonnx-testdata/data/node
GANTRY="$BUILD/bin/gantry"
KNOWN="$(dirname "${BASH_SOURCE[0]}")/onnx_node_suite.known_failures"
[[ -d "$NODE" ]] || { echo "FAIL: $NODE missing (install libonnx-testdata)"; exit 1; }
[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY not built"; exit 1; }
[[ -f "$KNOWN" ]] || { echo "FAIL: $KNOWN missing"; exit 1; }
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
# Every failure must be a known one; a known one that passes now is reported.
failed=$(sed -n 's/^FAIL \(test_[A-Za-z0-9_]*\):.*/\1/p' "$out" | sort)
known=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$KNOWN" | grep . | sort -u)
unexpected=$(comm -23 <(echo "$failed") <(echo "$known") | grep . || true)
fixed=$(comm -13 <(echo "$failed") <(echo "$known") | grep . || true)
if [[ -n "$fixed" ]]; then
  echo "listed in $(basename "$KNOWN") but not failing now (take them out of the list):"
  sed 's/^/  /' <<<"$fixed"
fi
if [[ -n "$unexpected" ]]; then
  echo "FAIL: $(wc -l <<<"$unexpected") case(s) failed that $(basename "$KNOWN") does not list:"
  while read -r t; do grep "^FAIL $t:" "$out" | cut -c1-300; done <<<"$unexpected"
  exit 1
fi
echo "node suite: every failure is a known one ($f of $(wc -l <<<"$known") listed)"
exit 0
