#!/usr/bin/env bash
# Runs llama.cpp's own server test suite (tools/server/tests of the pinned llama.cpp source, pytest)
# against llama-server and against `gantry serve`, as a user switching would: the same tests, the same
# local random-weight models, one adapter (scripts/llama-server-suite/adapter.sh) that only respells
# --hf-repo/--hf-file as --model LOCAL for both. Prints `llama-server-suite: N of M`: M = the tests
# llama-server passes, less those of its own internals (scripts/llama-server-suite/internals.txt, named
# in docs/llama-server.md); N = how many of those gantry serve passes. Not part of `make test` (it runs
# for many minutes); docs/llama-server.md lists every other miss with its reason.
# Usage: scripts/llama-server-suite.sh [BUILD_DIR] [PYTEST_ARGS...]
#   SUITE_ONLY=gantry|llama runs one side (the other's last results in $OUTDIR are reused).
#   OUTDIR (default build/llama-server-suite) keeps each side's junit XML and log.
#   SUITE_WORKERS=N runs N pytest workers (python3-pytest-xdist; each on its own ports, 8080 + 10 x N).
# Needs Debian's python3-pytest, python3-requests, python3-aiohttp, python3-wget, python3-filelock and
# python3-pytest-timeout (/usr/bin/python3). Debian 12 has no python3-openai: the test files that import
# `openai` cannot be collected and count for neither server.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
[[ $# -gt 0 ]] && shift
BUILD=$(cd "$BUILD" && pwd)
DEPS=${GANTRY_DEPS_DIR:-$ROOT/.cache}
PY=/usr/bin/python3
LLAMA_SERVER=$DEPS/llama/tools-build/bin/llama-server
TESTS=$DEPS/llama/src/tools/server/tests
OUTDIR=${OUTDIR:-$BUILD/llama-server-suite}
HERE=$ROOT/scripts/llama-server-suite

[[ -x "$BUILD/bin/gantry" ]] || { echo "llama-server-suite: $BUILD/bin/gantry not built"; exit 1; }
bash "$ROOT/scripts/setup.sh" bench || { echo "llama-server-suite: could not build llama-server (scripts/setup.sh bench)"; exit 1; }
[[ -x "$LLAMA_SERVER" ]] || { echo "llama-server-suite: $LLAMA_SERVER missing (scripts/setup.sh bench)"; exit 1; }
[[ -d "$TESTS/unit" ]] || { echo "llama-server-suite: $TESTS missing (scripts/setup.sh fetches llama.cpp)"; exit 1; }
for m in pytest requests aiohttp wget filelock pytest_timeout; do
  "$PY" -c "import $m" 2>/dev/null || { echo "llama-server-suite: python module $m missing (apt-get install python3-${m//_/-})"; exit 1; }
done
"$PY" -c "import openai" 2>/dev/null || echo "llama-server-suite: note: no python 'openai' module (Debian 12 has none): the files importing it are not collected"
mkdir -p "$OUTDIR"
# The files of llama-server's internals (internals.txt) count for neither server: not run at all.
ignore=()
while read -r prefix _; do
  [[ $prefix == *.py ]] && ignore+=(--ignore "unit/$prefix")
done < <(grep -v '^#' "$HERE/internals.txt")

# run SIDE: the suite against one server; junit XML in $OUTDIR/SIDE.xml.
run() {
  local side=$1 work; shift
  work=$(mktemp -d)
  # The tests name files beside the source (../../../models/templates): the copy keeps that layout.
  mkdir -p "$work/tools/server/tests"
  ln -s "$TESTS/../../../models" "$work/models"
  cp -r "$TESTS/." "$work/tools/server/tests/"
  mkdir -p "$work/tools/server/tests/tmp"
  local workers=()
  [[ -n "${SUITE_WORKERS:-}" ]] && workers=(-n "$SUITE_WORKERS")
  echo "llama-server-suite: running against $side (log: $OUTDIR/$side.log)"
  (cd "$work/tools/server/tests" && SUITE_TARGET=$side SUITE_MODELS="$DEPS/models" SUITE_LLAMA_SERVER="$LLAMA_SERVER" \
     SUITE_GANTRY="$BUILD/bin/gantry" LLAMA_SERVER_BIN_PATH="$HERE/adapter.sh" PORT=${SUITE_PORT:-18080} \
     timeout 7200 "$PY" -m pytest -p no:cacheprovider --continue-on-collection-errors -q -m "not slow" --timeout 120 -rN \
       --junitxml="$OUTDIR/$side.xml" "${ignore[@]}" "${workers[@]}" "$@" unit >"$OUTDIR/$side.log" 2>&1)
  tail -1 "$OUTDIR/$side.log"
  rm -rf "$work"
}
case ${SUITE_ONLY:-} in
  llama) run llama "$@" ;;
  gantry) run gantry "$@" ;;
  *) run llama "$@"; run gantry "$@" ;;
esac
"$PY" "$HERE/compare.py" "$OUTDIR/llama.xml" "$OUTDIR/gantry.xml" "$HERE/internals.txt" "$OUTDIR/misses.txt"
