#!/usr/bin/env bash
# scripts/gpu-check.sh where there is no NVIDIA GPU (this machine, CI): it says so, writes report.txt and a
# valid report.json saying so, and exits 0. Also its detect-vs-nvidia-smi comparison, on the captured H100
# machine (tests/fixtures/gpu-check/nvidia-h100-vm): agreement on every field, and a changed field
# (driver version, memory) reported as a difference with exit 1.
set -uo pipefail
BUILD=${1:?usage: gpu_check_no_gpu.sh BUILD_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CHECK=$ROOT/scripts/gpu-check.sh
GANTRY=$BUILD/bin/gantry
[[ -x "$GANTRY" ]] || { echo "FAIL: $GANTRY is not built"; exit 1; }
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# No GPU: no nvidia-smi on PATH (a directory without one) and gantry detect sees no CUDA device.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIP: this machine has an NVIDIA GPU (run scripts/gpu-check.sh itself)"; exit 77
fi
mkdir -p "$tmp/empty-path"
env PATH="$tmp/empty-path:/usr/bin:/bin" NVIDIA_SMI= GANTRY="$GANTRY" GANTRY_CHECK_DIR="$tmp/none" \
  bash "$CHECK" --out "$tmp/report" >"$tmp/stdout.txt" 2>&1
rc=$?
check "exits 0 without a GPU (got $rc)" '(( rc == 0 ))'
check "says there is no NVIDIA GPU" 'grep -q "no NVIDIA GPU on this machine" "$tmp/stdout.txt"'
check "report.txt says so too" 'grep -q "no NVIDIA GPU on this machine" "$tmp/report/report.txt"'
check "report.json is valid JSON with gpu=false, result=no-gpu and a reason" \
  '/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"gpu\"] is False and d[\"result\"] == \"no-gpu\" and \"nvidia-smi\" in d[\"reason\"] and d[\"sections\"] == []" "$tmp/report/report.json"'
check "the report names the gantry it ran" 'grep -q "^gantry " "$tmp/report/report.txt"'

# An nvidia-smi that finds no GPU (what it prints on a machine with the driver but no device) is no GPU too.
printf '#!/bin/sh\necho "No devices were found" >&2\nexit 6\n' >"$tmp/nvidia-smi"
chmod +x "$tmp/nvidia-smi"
NVIDIA_SMI="$tmp/nvidia-smi" GANTRY="$GANTRY" GANTRY_CHECK_DIR="$tmp/none" bash "$CHECK" --out "$tmp/report2" >"$tmp/stdout2.txt" 2>&1
rc=$?
check "an nvidia-smi without devices: exit 0 and the reason in the report" \
  '(( rc == 0 )) && grep -q "No devices were found" "$tmp/report2/report.json"'

# The comparison on the captured H100 (nvidia-smi's CSV and gantry detect --json from that machine).
fx=""
for d in "$ROOT/tests/fixtures/gpu-check/nvidia-h100-vm" "$ROOT/tests/fixtures/hw/nvidia-h100-vm"; do
  [[ -f "$d/gantry-detect.json" && -f "$d/nvidia-smi.csv" ]] && { fx=$d; break; }
done
if [[ -z "$fx" ]]; then
  echo "FAIL: no nvidia-h100-vm capture (gantry-detect.json + nvidia-smi.csv) under tests/fixtures"; fail=1
else
  check "detect vs nvidia-smi on the captured H100: all 14 fields agree" \
    'bash "$CHECK" --compare-detect "$fx/gantry-detect.json" "$fx/nvidia-smi.csv" 13.0 >"$tmp/cmp.txt" && (( $(grep -c "^  ok " "$tmp/cmp.txt") == 14 ))'
  sed 's/580\.159\.04/575.51.03/' "$fx/nvidia-smi.csv" >"$tmp/smi-driver.csv"
  check "a different driver version is a DIFF and exit 1" \
    '! bash "$CHECK" --compare-detect "$fx/gantry-detect.json" "$tmp/smi-driver.csv" 13.0 >"$tmp/cmp2.txt" && grep -q "^  DIFF cuda:0 driver_version" "$tmp/cmp2.txt" && (( $(grep -c "^  DIFF" "$tmp/cmp2.txt") == 1 ))'
  sed 's/ 81079 MiB/ 70000 MiB/' "$fx/nvidia-smi.csv" >"$tmp/smi-free.csv"
  check "free memory 11 GiB apart is a DIFF (beyond the tolerance for memory that moves)" \
    '! bash "$CHECK" --compare-detect "$fx/gantry-detect.json" "$tmp/smi-free.csv" 13.0 >"$tmp/cmp3.txt" && grep -q "^  DIFF cuda:0 memory_free_mib" "$tmp/cmp3.txt"'
  check "a different CUDA version is a DIFF" \
    '! bash "$CHECK" --compare-detect "$fx/gantry-detect.json" "$fx/nvidia-smi.csv" 12.8 >"$tmp/cmp4.txt" && grep -q "^  DIFF cuda:0 cuda_driver_version" "$tmp/cmp4.txt"'
fi
# The GPU path's plumbing, without a GPU: the captured H100's /proc and /sys as gantry's sysroot and a stand-in
# nvidia-smi replaying its CSV. Discovery from sysfs alone lacks NVML's fields (memory, power, ...), so `detect`
# fails on exactly those; with an empty overlay every other section is "not carried"/"not built", never a pass.
sysroot=""
for d in /work/shared/fixtures/nvidia-h100-vm "$ROOT/tests/fixtures/hw/nvidia-h100-vm"; do
  [[ -d "$d/proc" && -d "$d/sys" ]] && { sysroot=$d; break; }
done
if [[ -n "$fx" && -n "$sysroot" ]]; then
  {
    echo '#!/bin/sh'
    echo 'case "$*" in'
    echo '  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-416921e0-7fcf-3c33-f12b-71b44c7a841e)" ;;'
    echo "  *--query-gpu=name*) cat '$fx/nvidia-smi.csv' ;;"
    echo '  *--query-gpu=*) exit 2 ;;'
    echo '  *--query-compute-apps*) ;;'
    echo '  *) echo "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |" ;;'
    echo 'esac'
  } >"$tmp/fake-smi"
  chmod +x "$tmp/fake-smi"
  mkdir -p "$tmp/empty-overlay"
  GANTRY_SYSROOT=$sysroot NVIDIA_SMI="$tmp/fake-smi" GANTRY="$GANTRY" GANTRY_CHECK_DIR="$tmp/empty-overlay" \
    bash "$CHECK" --out "$tmp/report3" --quick >"$tmp/stdout3.txt" 2>&1
  rc=$?
  check "GPU path with the stand-in: exit 1 (detect differs on the NVML-only fields)" '(( rc == 1 ))'
  cat >"$tmp/assert3.py" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
names = [s["name"] for s in d["sections"]]
assert names == ["detect", "onnx-node", "ocr-measured", "llama-greedy", "llama-vram", "memory-pool", "onnx-cuda-pool", "kernels", "bench"], names
st = {s["name"]: s["status"] for s in d["sections"]}
assert st["detect"] == "fail" and d["result"] == "fail" and d["gpu"] is True, st
assert all(st[n] in ("not carried", "not built") for n in names[1:]), st
f = {x["field"]: x["match"] for x in d["sections"][0]["details"]["fields"]}
assert len(f) == 14 and f["name"] and f["uuid"] and f["pci_bus_id"] and f["driver_version"] and f["compute_capability"], f
assert not f["memory_total_mib"] and not f["power_watts"], f
PY
  check "report.json: 9 sections in order, detect's 14 fields, nothing absent reported as a pass" \
    '/usr/bin/python3 "$tmp/assert3.py" "$tmp/report3/report.json"'
else
  echo "note: no nvidia-h100-vm sysroot capture here: the GPU path's plumbing is not exercised"
fi
if command -v shellcheck >/dev/null 2>&1; then
  check "shellcheck scripts/gpu-check.sh scripts/dist.sh scripts/dist-cuda.sh" \
    'shellcheck -S warning "$CHECK" "$ROOT/scripts/dist.sh" $( [[ -f "$ROOT/scripts/dist-cuda.sh" ]] && echo "$ROOT/scripts/dist-cuda.sh")'
fi
exit $fail
