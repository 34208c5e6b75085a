#!/usr/bin/env bash
# Runs every benchmark: compiled ones (build/bin/*_bench) and scripted ones (bench/*.sh other than
# this file). Each prints one "BENCH <name> ratio=<value>" line per goal; this script collects them.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp); status=0
for b in build/bin/*_bench; do
  [[ -x "$b" ]] || continue
  echo "== $b" >&2
  "$b" 2>&1 | tee -a "$log" >&2 || { echo "benchmark $b failed" >&2; status=1; }
done
for s in bench/*.sh; do
  [[ "$s" == bench/run.sh ]] && continue
  echo "== $s" >&2
  bash "$s" 2>&1 | tee -a "$log" >&2 || { echo "benchmark $s failed" >&2; status=1; }
done
echo; echo "Summary:"; grep '^BENCH ' "$log"; rm -f "$log"
exit $status
