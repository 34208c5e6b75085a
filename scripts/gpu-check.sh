#!/usr/bin/env bash
# Every GPU path of Gantry in one run, from an unpacked bundle on an NVIDIA machine (docs/dist.md):
#
#   ./gpu-check.sh [--out DIR] [--quick]
#   ./gpu-check.sh --compare-detect DETECT.json NVIDIA_SMI.csv [CUDA_VERSION]   (the comparison alone)
#
# Writes DIR/report.txt and DIR/report.json (default DIR: ./gpu-check-report) and logs under DIR/logs/:
#   detect        `gantry detect --json` vs `nvidia-smi`, field by field
#   onnx-node     the ONNX node suite (`gantry test-onnx`) on the CUDA EP vs the CPU EP
#   ocr-measured  the `measured` provider policy on PaddleOCR det/rec/cls: cuda vs cpu medians, the choice
#   llama-greedy  llama.cpp CUDA (all layers offloaded) greedy text == CPU greedy text, on a generated model
#   llama-vram    `plan --measure` (llama.cpp's allocations) vs NVML's used-memory change of the process
#   memory-pool   the memory tests' CUDA cases (memory_test --gtest_filter=*Cuda*), and other suites' *Cuda*
#                 (runtime_test's CudaPool.*: the Runtime's per-device pool on the real driver)
#   onnx-cuda-pool  ONNX Runtime's CUDA EP allocating from Gantry's pool vs its own arena: same outputs,
#                 BENCH onnx-cuda-pool-overhead (goal <= 1.02), memory charged vs used (goal within 1 %)
#   kernels       the kernel executor's tests (Kernel* suites) when this build has them (`gantry kernel`)
#   bench         the GPU lines of `make bench`: kernel benchmarks when built, gguf generation cuda vs cpu
# The test binaries, models and node suite come from the -check overlay (check/ beside bin/); a missing piece
# is reported as "not built" or "not carried", never as a pass. Without an NVIDIA GPU the report says so and
# the script exits 0. Exit status otherwise: 0 when no section failed, 1 when one did.
# Environment: GANTRY (the gantry binary), GANTRY_CHECK_DIR (the overlay), NVIDIA_SMI (nvidia-smi to use).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$PWD/gpu-check-report
QUICK=0

# ---------------------------------------------------------------- detect vs nvidia-smi (python)
# DETECT.json NVIDIA_SMI.csv [CUDA_VERSION] [RESERVED.csv]: prints one line per GPU field and a JSON document
# on the last line; exit 0 when every field agrees. Free/used memory, power and temperature move between
# the two reads, so they match within a tolerance; nvidia-smi's "used" leaves out the driver's reserved
# memory, which NVML's used (total - free) includes.
compare_detect() {
  /usr/bin/env python3 - "$@" <<'PY'
import csv, json, sys

detect = json.load(open(sys.argv[1]))
rows = [r for r in csv.reader(open(sys.argv[2]), skipinitialspace=True) if r]
cuda_version = sys.argv[3] if len(sys.argv) > 3 else ""
reserved = {}
if len(sys.argv) > 4 and sys.argv[4]:
    for r in csv.reader(open(sys.argv[4]), skipinitialspace=True):
        if len(r) >= 2:
            reserved[r[0].strip()] = r[1]
header = [h.strip() for h in rows[0]]
def num(s):
    s = s.strip().split(" ")[0]
    try:
        return float(s)
    except ValueError:
        return None
def bus(s):  # 00000000:00:06.0 -> 0000:00:06.0
    s = (s or "").strip().lower()
    return s[4:] if len(s) == 16 else s
key = lambda h: h.split(" [")[0]
gpus = [d for d in detect.get("devices", []) if d.get("vendor") == "nvidia" and d.get("kind") == "gpu"]
results, ok = [], True
MiB = 1 << 20
for r in rows[1:]:
    smi = {key(h): v.strip() for h, v in zip(header, r)}
    dev = next((d for d in gpus if d.get("uuid") == smi.get("uuid") or bus(d.get("pci_bus_id")) == bus(smi.get("pci.bus_id"))), None)
    if dev is None:
        results.append({"gpu": smi.get("name"), "field": "presence", "nvidia_smi": smi.get("pci.bus_id"), "gantry": None, "match": False})
        ok = False
        continue
    total = num(smi["memory.total"]); free = num(smi["memory.free"])
    tol = max(256.0, 0.01 * total)
    used_smi = num(smi["memory.used"])
    res = num(reserved.get(smi.get("uuid", ""), "")) if reserved else None
    used_ref = used_smi + res if res is not None else total - free  # NVML's used = total - free
    def mib(b): return None if b is None else b / MiB
    checks = [
        ("name", smi.get("name"), dev.get("name"), lambda a, b: a == b),
        ("uuid", smi.get("uuid"), dev.get("uuid"), lambda a, b: a == b),
        ("pci_bus_id", bus(smi.get("pci.bus_id")), bus(dev.get("pci_bus_id")), lambda a, b: a == b),
        ("memory_total_mib", total, mib(dev.get("memory_total_bytes")), lambda a, b: b is not None and abs(a - b) < 1),
        ("memory_free_mib", free, mib(dev.get("memory_free_bytes")), lambda a, b: b is not None and abs(a - b) <= tol),
        ("memory_used_mib", used_ref, mib(dev.get("memory_used_bytes")), lambda a, b: b is not None and abs(a - b) <= tol),
        ("driver_version", smi.get("driver_version"), dev.get("driver_version"), lambda a, b: a == b),
        ("compute_capability", smi.get("compute_cap"), dev.get("compute_capability"), lambda a, b: a == b),
        ("pcie_generation", num(smi.get("pcie.link.gen.current", "")), dev.get("pcie_generation"), lambda a, b: a == b),
        ("pcie_width", num(smi.get("pcie.link.width.current", "")), dev.get("pcie_width"), lambda a, b: a == b),
        ("mig_enabled", smi.get("mig.mode.current"), dev.get("mig_enabled"),
         lambda a, b: (a == "Enabled") == bool(b) if a in ("Enabled", "Disabled") else b is None),
        ("power_watts", num(smi.get("power.draw", "")), dev.get("power_watts"), lambda a, b: a is None or (b is not None and abs(a - b) <= max(20, 0.25 * a))),
        ("temperature_c", num(smi.get("temperature.gpu", "")), dev.get("temperature_c"), lambda a, b: a is None or (b is not None and abs(a - b) <= 5)),
    ]
    if cuda_version:
        checks.append(("cuda_driver_version", cuda_version, dev.get("cuda_driver_version"), lambda a, b: a == b))
    for field, a, b, same in checks:
        m = bool(same(a, b))
        ok &= m
        results.append({"gpu": dev.get("id"), "field": field, "nvidia_smi": a, "gantry": b, "match": m})
if len(rows) - 1 != len(gpus):
    ok = False
    results.append({"gpu": None, "field": "gpu_count", "nvidia_smi": len(rows) - 1, "gantry": len(gpus), "match": False})
for r in results:
    print(f"  {'ok  ' if r['match'] else 'DIFF'} {r['gpu']} {r['field']}: nvidia-smi {r['nvidia_smi']!r}, gantry {r['gantry']!r}")
print(json.dumps({"match": ok, "fields": results}))
sys.exit(0 if ok else 1)
PY
}

if [[ "${1:-}" == --compare-detect ]]; then
  shift
  compare_detect "$@"
  exit $?
fi

while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# The bundle's own gantry (bin/ beside this script); from a source checkout, build/bin/gantry.
GANTRY=${GANTRY:-}
if [[ -z "$GANTRY" ]]; then
  for g in "$HERE/bin/gantry" "$HERE/../build/bin/gantry"; do [[ -x "$g" ]] && { GANTRY=$g; break; }; done
fi
CHECK=${GANTRY_CHECK_DIR:-$HERE/check}
NVIDIA_SMI=${NVIDIA_SMI:-$(command -v nvidia-smi || true)}
[[ -z "$NVIDIA_SMI" && -x /usr/local/nvidia/bin/nvidia-smi ]] && NVIDIA_SMI=/usr/local/nvidia/bin/nvidia-smi

mkdir -p "$OUT/logs" "$OUT/sections" || { echo "gpu-check: cannot write $OUT" >&2; exit 2; }
rm -f "$OUT"/sections/*.json
TXT=$OUT/report.txt
: >"$TXT"
FAILED=0
N=0
say() { echo "$*" | tee -a "$TXT"; }

# record NAME STATUS SUMMARY [JSON_FILE]: one section of the report (STATUS: pass, fail, skip, not built,
# not carried, info). JSON_FILE, when given, is the section's details.
record() {
  local name=$1 status=$2 summary=$3 details=${4:-}
  N=$((N + 1))
  [[ "$status" == fail ]] && FAILED=1
  say "[$status] $name: $summary"
  python3 - "$OUT/sections/$(printf %02d "$N")-$name.json" "$name" "$status" "$summary" "$details" <<'PY'
import json, sys
path, name, status, summary, details = sys.argv[1:6]
d = {"name": name, "status": status, "summary": summary}
if details:
    try:
        d["details"] = json.load(open(details))
    except Exception as e:  # a broken details file is reported, not hidden
        d["details_error"] = f"{details}: {e}"
json.dump(d, open(path, "w"), indent=1)
PY
}

# -------------------------------------------------------------- header, and the no-GPU path
when=$(date -u +%Y-%m-%dT%H:%M:%SZ)
say "Gantry GPU check, $when, host $(hostname), $(uname -sr), glibc $(ldd --version 2>/dev/null | head -n 1 | awk '{print $NF}')"
if [[ -z "$GANTRY" ]]; then
  say "gantry not found (looked in $HERE/bin and $HERE/../build/bin; set GANTRY)"
  exit 2
fi
"$GANTRY" version >"$OUT/logs/version.txt" 2>&1
say "$(grep -E '^(gantry|bundle:|onnxruntime|llama.cpp)' "$OUT/logs/version.txt" | paste -sd ';' | sed 's/;/; /g')"
"$GANTRY" detect --json >"$OUT/logs/detect.json" 2>"$OUT/logs/detect.err"
detect_gpus=$(grep -c '"family": "cuda"' "$OUT/logs/detect.json" 2>/dev/null || true)
smi_gpus=""
if [[ -n "$NVIDIA_SMI" ]]; then smi_gpus=$("$NVIDIA_SMI" -L 2>"$OUT/logs/nvidia-smi-L.err" | grep -c '^GPU ' || true); fi

if [[ -z "$NVIDIA_SMI" || "${smi_gpus:-0}" == 0 ]] && [[ "${detect_gpus:-0}" == 0 ]]; then
  why="nvidia-smi: ${NVIDIA_SMI:-not installed}"
  [[ -n "$NVIDIA_SMI" ]] && why+=" lists ${smi_gpus:-0} GPUs ($(head -c 200 "$OUT/logs/nvidia-smi-L.err" | tr '\n' ' '))"
  why+="; gantry detect: no CUDA device"
  say "no NVIDIA GPU on this machine ($why): nothing to check"
  # No python needed on this path: the JSON is written by hand.
  esc() { sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' <<<"$1" | tr -d '\n\t'; }
  printf '{\n "when": "%s",\n "host": "%s",\n "gpu": false,\n "reason": "%s",\n "sections": [],\n "result": "no-gpu"\n}\n' \
    "$when" "$(esc "$(hostname)")" "$(esc "$why")" >"$OUT/report.json"
  echo "report: $TXT, $OUT/report.json"
  exit 0
fi
command -v python3 >/dev/null || { say "python3 is needed to compare and write the report"; exit 2; }

TIMEOUT() { timeout "$@"; }
ngl_all=-1
models=$CHECK/models
bins=$CHECK/bin
# From a source checkout (no check/ overlay): the set-up's models and the build's test binaries.
[[ -d "$CHECK" || ! -d "$HERE/../.cache/models" ]] || models=$HERE/../.cache/models
[[ -d "$CHECK" || ! -d "$HERE/../build/bin" ]] || bins=$HERE/../build/bin
tiny=$models/tiny-llama.gguf
[[ -f "$tiny" ]] || tiny=""

# -------------------------------------------------------------- 1. detect vs nvidia-smi
fields=name,uuid,pci.bus_id,memory.total,memory.free,memory.used,driver_version,compute_cap,pcie.link.gen.current,pcie.link.width.current,mig.mode.current,power.draw,temperature.gpu
"$NVIDIA_SMI" --query-gpu=$fields --format=csv >"$OUT/logs/nvidia-smi.csv" 2>"$OUT/logs/nvidia-smi.err"
"$GANTRY" detect --json >"$OUT/logs/detect.json" 2>"$OUT/logs/detect.err"
"$NVIDIA_SMI" --query-gpu=uuid,memory.reserved --format=csv,noheader >"$OUT/logs/nvidia-smi-reserved.csv" 2>/dev/null \
  || : >"$OUT/logs/nvidia-smi-reserved.csv"
"$NVIDIA_SMI" >"$OUT/logs/nvidia-smi.txt" 2>&1
cuda_version=$(sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' "$OUT/logs/nvidia-smi.txt" | head -n 1)
"$NVIDIA_SMI" -q >"$OUT/logs/nvidia-smi-q.txt" 2>&1
compare_detect "$OUT/logs/detect.json" "$OUT/logs/nvidia-smi.csv" "$cuda_version" "$OUT/logs/nvidia-smi-reserved.csv" \
  >"$OUT/logs/detect-compare.txt" 2>&1
rc=$?
tail -n 1 "$OUT/logs/detect-compare.txt" >"$OUT/logs/detect-compare.json"
sed '$d' "$OUT/logs/detect-compare.txt" | tee -a "$TXT"
diffs=$(grep -c '^  DIFF' "$OUT/logs/detect-compare.txt" || true)
nfields=$(grep -cE '^  (ok|DIFF)' "$OUT/logs/detect-compare.txt" || true)
if (( rc == 0 )); then record detect pass "gantry detect agrees with nvidia-smi on all $nfields fields" "$OUT/logs/detect-compare.json"
else record detect fail "$diffs of $nfields fields differ (above; logs/detect-compare.txt)" "$OUT/logs/detect-compare.json"; fi

# -------------------------------------------------------------- 2. ONNX node suite, CUDA EP vs CPU EP
node=$CHECK/onnx-node
[[ -d "$node" || -d "$CHECK" ]] || node=/usr/share/libonnx-testdata/data/node  # from a source checkout
if [[ ! -d "$node" ]]; then
  record onnx-node "not carried" "no ONNX node suite ($CHECK/onnx-node: unpack the -check overlay)"
else
  cuda_ok=$("$GANTRY" plan "$models/mlp_64_128_10.onnx" --explain --json 2>/dev/null | python3 -c '
import json,sys
d=json.load(sys.stdin); c=[x for x in d["candidates"] if x["provider"]=="cuda"]
print("yes" if c and c[0]["viable"] else ("no: " + (c[0]["reason"] if c else "cuda not a candidate")))' 2>/dev/null || echo "no: plan --explain failed")
  for ep in cpu cuda; do
    start=$(date +%s%N)
    GANTRY_LOG_LEVEL=off TIMEOUT 900 "$GANTRY" test-onnx "$node" --provider $ep >"$OUT/logs/onnx-node-$ep.txt" 2>&1
    awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { printf "%.1f\n", ns / 1e9 }' >"$OUT/logs/onnx-node-$ep.seconds"
  done
  python3 - "$OUT/logs" "$cuda_ok" >"$OUT/logs/onnx-node.json" <<'PY'
import json, re, sys
logs, cuda_ok = sys.argv[1], sys.argv[2]
def verdicts(ep):
    v = {}
    for line in open(f"{logs}/onnx-node-{ep}.txt", errors="replace"):
        m = re.match(r"^(PASS|FAIL|SKIP) (\S+)", line)
        if m:
            v[m.group(2)] = m.group(1)
    return v
cpu, cuda = verdicts("cpu"), verdicts("cuda")
count = lambda v, k: sum(1 for x in v.values() if x == k)
out = {"cuda_ep": cuda_ok,
       "cpu": {k: count(cpu, k) for k in ("PASS", "FAIL", "SKIP")},
       "cuda": {k: count(cuda, k) for k in ("PASS", "FAIL", "SKIP")},
       "seconds": {ep: open(f"{logs}/onnx-node-{ep}.seconds").read().strip() for ep in ("cpu", "cuda")},
       "pass_cpu_fail_cuda": sorted(t for t, v in cpu.items() if v == "PASS" and cuda.get(t) != "PASS"),
       "pass_cuda_fail_cpu": sorted(t for t, v in cuda.items() if v == "PASS" and cpu.get(t) != "PASS")}
print(json.dumps(out, indent=1))
PY
  summary=$(python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
print("CPU EP %(PASS)d pass/%(FAIL)d fail/%(SKIP)d skip" % d["cpu"] + " in %ss; " % d["seconds"]["cpu"] +
      "CUDA EP %(PASS)d pass/%(FAIL)d fail/%(SKIP)d skip" % d["cuda"] + " in %ss; " % d["seconds"]["cuda"] +
      "%d pass on CPU only, %d on CUDA only" % (len(d["pass_cpu_fail_cuda"]), len(d["pass_cuda_fail_cpu"])))' "$OUT/logs/onnx-node.json")
  if [[ "$cuda_ok" != yes ]]; then record onnx-node fail "the CUDA EP is not usable ($cuda_ok); $summary" "$OUT/logs/onnx-node.json"
  else
    # The CUDA EP must run the suite about as well as the CPU EP (ONNX Runtime places the nodes the CUDA EP has
    # no kernel for on the CPU, so >= 90% of the CPU's passes); the per-test differences are listed, not hidden.
    near=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(int(d["cuda"]["PASS"] > 0 and d["cuda"]["PASS"] >= 0.9 * d["cpu"]["PASS"]))' "$OUT/logs/onnx-node.json")
    if [[ "$near" == 1 ]]; then record onnx-node pass "$summary" "$OUT/logs/onnx-node.json"
    else record onnx-node fail "$summary (want CUDA EP passes >= 90% of the CPU EP's)" "$OUT/logs/onnx-node.json"; fi
  fi
fi

# -------------------------------------------------------------- 3. measured provider choice on PaddleOCR
if ! ls "$models"/paddleocr/*.onnx >/dev/null 2>&1; then
  record ocr-measured "not carried" "no PaddleOCR models in $models/paddleocr"
else
  cache=$(mktemp -d)
  for m in "$models"/paddleocr/*.onnx; do
    GANTRY_CACHE_DIR=$cache TIMEOUT 300 "$GANTRY" plan "$m" --explain --provider-policy measured --json \
      >"$OUT/logs/ocr-$(basename "$m" .onnx).json" 2>"$OUT/logs/ocr-$(basename "$m" .onnx).err"
  done
  rm -rf "$cache"
  python3 - "$OUT/logs" >"$OUT/logs/ocr-measured.json" <<'PY'
import glob, json, os, sys
res = []
for f in sorted(glob.glob(f"{sys.argv[1]}/ocr-*.json")):
    if f.endswith("ocr-measured.json"):
        continue
    name = os.path.basename(f)[4:-5]
    try:
        d = json.load(open(f))
    except Exception as e:
        res.append({"model": name, "error": str(e)}); continue
    med = {c["provider"]: c["median_us"] for c in d["candidates"] if c.get("median_us") is not None}
    reasons = {c["provider"]: c["reason"] for c in d["candidates"]}
    res.append({"model": name, "chosen": d.get("chosen"), "median_us": med, "reasons": reasons})
print(json.dumps(res, indent=1))
PY
  summary=$(python3 -c '
import json,sys
parts=[]
for r in json.load(open(sys.argv[1])):
    if "error" in r: parts.append(r["model"]+": error"); continue
    m=r["median_us"]; f=lambda p: ("%.2f ms" % (m[p]/1000)) if p in m else "n/a"
    parts.append("%s: cuda %s, cpu %s -> %s" % (r["model"], f("cuda"), f("cpu"), r["chosen"]))
print("; ".join(parts))' "$OUT/logs/ocr-measured.json")
  # Pass: both providers timed for every model and the choice is the faster one.
  ok=$(python3 -c '
import json,sys
r=json.load(open(sys.argv[1]))
print(all("error" not in x and {"cuda","cpu"} <= set(x["median_us"]) and x["chosen"]==min(("cuda","cpu"), key=lambda p:x["median_us"][p]) for x in r) and len(r)>0)' "$OUT/logs/ocr-measured.json")
  if [[ "$ok" == True ]]; then record ocr-measured pass "$summary" "$OUT/logs/ocr-measured.json"
  else record ocr-measured fail "$summary (want both timed and the faster chosen)" "$OUT/logs/ocr-measured.json"; fi
fi

# -------------------------------------------------------------- 4. llama.cpp: CUDA greedy == CPU greedy; VRAM
if [[ -z "$tiny" ]]; then
  record llama-greedy "not carried" "no generated GGUF model ($models/tiny-llama.gguf)"
  record llama-vram "not carried" "no generated GGUF model ($models/tiny-llama.gguf)"
else
  grep -q 'ggml device CUDA' "$OUT/logs/version.txt" && ggml_cuda=yes || ggml_cuda=no
  gen=(run "$tiny" -p "The GPU check asks the model to continue this sentence" -n 48 --temperature 0 --seed 1 --threads 4)
  TIMEOUT 300 "$GANTRY" "${gen[@]}" --provider cpu --ngl 0 >"$OUT/logs/llama-cpu.txt" 2>"$OUT/logs/llama-cpu.err"
  TIMEOUT 300 "$GANTRY" "${gen[@]}" --provider cuda --ngl $ngl_all >"$OUT/logs/llama-cuda.txt" 2>"$OUT/logs/llama-cuda.err"
  python3 - "$OUT/logs" "$ggml_cuda" >"$OUT/logs/llama-greedy.json" <<'PY'
import json, sys
logs, ggml_cuda = sys.argv[1], sys.argv[2]
cpu = open(f"{logs}/llama-cpu.txt", errors="replace").read()
cuda = open(f"{logs}/llama-cuda.txt", errors="replace").read()
first = next((i for i, (a, b) in enumerate(zip(cpu, cuda)) if a != b), min(len(cpu), len(cuda)))
info = lambda f: [l.strip() for l in open(f"{logs}/{f}", errors="replace") if "tokens generated" in l]
print(json.dumps({"ggml_cuda_device": ggml_cuda, "equal": cpu == cuda and len(cpu) > 0, "cpu_chars": len(cpu),
                  "cuda_chars": len(cuda), "first_difference_at_char": None if cpu == cuda else first,
                  "cpu_stats": info("llama-cpu.err"), "cuda_stats": info("llama-cuda.err")}, indent=1))
PY
  eq=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["equal"])' "$OUT/logs/llama-greedy.json")
  stats="cpu: $(grep -h 'tokens generated' "$OUT/logs/llama-cpu.err" | sed 's/^\[info\] //'); cuda: $(grep -h 'tokens generated' "$OUT/logs/llama-cuda.err" | sed 's/^\[info\] //')"
  if [[ "$ggml_cuda" != yes ]]; then record llama-greedy fail "ggml sees no CUDA device (logs/version.txt); $stats" "$OUT/logs/llama-greedy.json"
  elif [[ "$eq" == True ]]; then record llama-greedy pass "48 greedy tokens identical on CUDA and CPU; $stats" "$OUT/logs/llama-greedy.json"
  else record llama-greedy fail "CUDA and CPU greedy texts differ (logs/llama-*.txt); $stats" "$OUT/logs/llama-greedy.json"; fi

  # plan --measure in the background while NVML's per-process used memory is sampled every 20 ms.
  smi_used() { "$NVIDIA_SMI" --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -n 1; }
  before=$(smi_used)
  "$GANTRY" plan "$tiny" --measure --json --ctx 4096 --gpu-layers -1 >"$OUT/logs/plan-measure.json" 2>"$OUT/logs/plan-measure.err" &
  pid=$!
  peak_proc=0; peak_dev=${before:-0}
  while kill -0 $pid 2>/dev/null; do
    p=$("$NVIDIA_SMI" --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null | awk -F', *' -v p=$pid '$1==p {print $2}')
    d=$(smi_used)
    [[ "$p" =~ ^[0-9]+$ ]] && (( p > peak_proc )) && peak_proc=$p
    [[ "$d" =~ ^[0-9]+$ ]] && (( d > peak_dev )) && peak_dev=$d
    sleep 0.02
  done
  wait $pid
  prc=$?
  python3 - "$OUT/logs/plan-measure.json" "${before:-0}" "$peak_dev" "$peak_proc" "$prc" >"$OUT/logs/llama-vram.json" <<'PY'
import json, sys
path, before, peak_dev, peak_proc, rc = sys.argv[1], *map(int, sys.argv[2:6])
MiB = 1 << 20
out = {"plan_rc": rc, "nvml_device_used_before_mib": before, "nvml_device_used_peak_mib": peak_dev,
       "nvml_device_growth_mib": peak_dev - before, "nvml_process_peak_mib": peak_proc}
try:
    d = json.load(open(path))
    meas = d.get("measurement") or d.get("measure") or d
    def find(o):  # the measurement block: {"devices": [...], "measured_bytes": {...}}
        if isinstance(o, dict):
            if "measured_bytes" in o and "devices" in o:
                return o
            for v in o.values():
                r = find(v)
                if r: return r
        return None
    m = find(d)
    cuda = [x for x in (m or {}).get("devices", []) if x["device"].startswith("cuda") or x["device"].lower().startswith("cuda")]
    out["measured_cuda_mib"] = sum(x["measured_bytes"]["total"] for x in cuda) / MiB if cuda else None
    out["measured_devices"] = (m or {}).get("devices")
    if out["measured_cuda_mib"]:
        out["nvml_minus_measured_mib"] = out["nvml_device_growth_mib"] - out["measured_cuda_mib"]
except Exception as e:
    out["error"] = f"{path}: {e}"
print(json.dumps(out, indent=1))
PY
  summary=$(python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
m=d.get("measured_cuda_mib")
print("plan --measure: llama.cpp allocated %s on CUDA; NVML: device used %d -> %d MiB (+%d), process peak %d MiB; the difference (CUDA context, cuBLAS, pools) %s" % (
  ("%.1f MiB" % m) if m else "nothing", d["nvml_device_used_before_mib"], d["nvml_device_used_peak_mib"], d["nvml_device_growth_mib"],
  d["nvml_process_peak_mib"], ("%.1f MiB" % d["nvml_minus_measured_mib"]) if "nvml_minus_measured_mib" in d else "n/a"))' "$OUT/logs/llama-vram.json")
  if (( prc == 0 )) && grep -q '"measured_cuda_mib": [0-9]' "$OUT/logs/llama-vram.json"; then
    record llama-vram info "$summary" "$OUT/logs/llama-vram.json"
  else record llama-vram fail "plan --measure exited $prc or measured nothing on CUDA (logs/plan-measure.err); $summary" "$OUT/logs/llama-vram.json"; fi
fi

# -------------------------------------------------------------- 5./6. GoogleTest suites: memory pool, kernels
# gtest BIN FILTER NAME: runs one suite filter; passes when it ran tests and none failed (skips are listed).
gtest() {
  local bin=$1 filter=$2 name=$3
  if [[ ! -x "$bins/$bin" ]]; then record "$name" "not built" "$bin is not in $bins (make dist-check)"; return; fi
  TIMEOUT 600 "$bins/$bin" --gtest_filter="$filter" --gtest_output="json:$OUT/logs/$name.json" >"$OUT/logs/$name.txt" 2>&1
  local rc=$?
  local ran passed skipped failed
  ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\? from .* ran.*/\1/p' "$OUT/logs/$name.txt" | tail -n 1)
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?.*/\1/p' "$OUT/logs/$name.txt" | tail -n 1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\?.*/\1/p' "$OUT/logs/$name.txt" | tail -n 1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\?.*/\1/p' "$OUT/logs/$name.txt" | tail -n 1)
  local s="$bin $filter: ${ran:-0} ran, ${passed:-0} passed, ${skipped:-0} skipped, ${failed:-0} failed"
  if (( rc == 0 )) && (( ${ran:-0} > 0 )) && (( ${skipped:-0} == 0 )); then record "$name" pass "$s" "$OUT/logs/$name.json"
  elif (( rc == 0 )) && (( ${ran:-0} > 0 )); then
    record "$name" fail "$s; skipped on a GPU machine: $(grep -A1 ': Skipped$' "$OUT/logs/$name.txt" | grep -v -e ': Skipped$' -e '^--$' | sort -u | head -n 3 | paste -sd ';')" "$OUT/logs/$name.json"
  else record "$name" fail "$s (exit $rc; logs/$name.txt)" "$OUT/logs/$name.json"; fi
}
gtest memory_test '*Cuda*' memory-pool
for t in onnx_test llama_test; do
  [[ -x "$bins/$t" ]] && gtest "$t" '*Cuda*' "${t%_test}-cuda"
done
[[ -x "$bins/runtime_test" ]] && GANTRY_TEST_MODELS=$models gtest runtime_test 'CudaPool.*' runtime-cuda-pool

# -------------------------------------------------------------- ONNX Runtime's CUDA memory from the pool
if [[ -x "$bins/onnx_cuda_pool_bench" ]]; then
  bench_model=$models/heavy_mlp_1024.onnx
  [[ -f "$bench_model" ]] || bench_model=$models/mlp_64_128_10.onnx
  GANTRY_BENCH_MODEL=$bench_model TIMEOUT 600 "$bins/onnx_cuda_pool_bench" \
    >"$OUT/logs/onnx-cuda-pool.txt" 2>&1
  prc=$?
  summary=$(grep -E '^(onnx-cuda-pool|BENCH)' "$OUT/logs/onnx-cuda-pool.txt" | paste -sd ';' | sed 's/;/; /g')
  ratio=$(sed -n 's/^BENCH onnx-cuda-pool-overhead ratio=\([0-9.]*\).*/\1/p' "$OUT/logs/onnx-cuda-pool.txt")
  if grep -q 'skipped' "$OUT/logs/onnx-cuda-pool.txt"; then record onnx-cuda-pool fail "on a GPU machine: $summary"
  elif (( prc == 0 )) && [[ -n "$ratio" ]] && grep -q 'outputs equal: yes' "$OUT/logs/onnx-cuda-pool.txt" \
    && python3 -c "import sys; sys.exit(0 if float('$ratio') <= 1.02 else 1)"; then
    record onnx-cuda-pool pass "$summary"
  else record onnx-cuda-pool fail "exit $prc: $summary (logs/onnx-cuda-pool.txt)"; fi
  grep -h '^BENCH ' "$OUT/logs/onnx-cuda-pool.txt" >>"$OUT/logs/bench.txt.pre" 2>/dev/null || true
else record onnx-cuda-pool "not built" "onnx_cuda_pool_bench is not in $bins (make dist-check, or build it)"; fi
# An unknown subcommand's --help prints the top-level help and exits 0: look for the kernel command's own usage.
if "$GANTRY" kernel --help 2>&1 | grep -qE '^Usage: .*kernel'; then gtest kernels_test 'Kernel*' kernels
else record kernels "not built" "this gantry has no 'kernel' command (the kernel executor is not in this build)"; fi

# -------------------------------------------------------------- 7. make bench's GPU lines
: >"$OUT/logs/bench.txt"
[[ -f "$OUT/logs/bench.txt.pre" ]] && cat "$OUT/logs/bench.txt.pre" >>"$OUT/logs/bench.txt" && rm -f "$OUT/logs/bench.txt.pre"
for b in "$bins"/kernel*_bench; do
  [[ -x "$b" ]] || continue
  TIMEOUT 300 "$b" >>"$OUT/logs/bench.txt" 2>&1 || echo "benchmark $(basename "$b") failed" >>"$OUT/logs/bench.txt"
done
if [[ -n "$tiny" && "$QUICK" == 0 ]]; then
  for ngl in 0 $ngl_all; do
    TIMEOUT 300 "$GANTRY" bench "$tiny" -p 512 -n 128 -r 3 --ngl "$ngl" --json >"$OUT/logs/gguf-bench-ngl$ngl.json" 2>"$OUT/logs/gguf-bench-ngl$ngl.err"
  done
  python3 - "$OUT/logs" >>"$OUT/logs/bench.txt" <<'PY'
import json, sys
logs = sys.argv[1]
def rates(ngl):
    try:
        d = json.load(open(f"{logs}/gguf-bench-ngl{ngl}.json"))
    except Exception:
        return {}
    rows = d if isinstance(d, list) else d.get("results", [])
    out = {}
    for r in rows:
        test = "pp" if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0 else "tg"
        ts = r.get("avg_ts") or r.get("tokens_per_second") or r.get("t_s")
        if ts:
            out[test] = ts
    return out
cpu, cuda = rates(0), rates(-1)
for t in ("pp", "tg"):
    if t in cpu and t in cuda:
        print(f"BENCH gguf-{t}-cuda-vs-cpu ratio={cuda[t] / cpu[t]:.3f}")
PY
fi
lines=$(grep -h '^BENCH ' "$OUT/logs/bench.txt" || true)
if [[ -n "$lines" ]]; then
  python3 -c '
import json,sys; print(json.dumps([l for l in sys.stdin.read().splitlines() if l]))' <<<"$lines" >"$OUT/logs/bench.json"
  record bench info "$(paste -sd ';' <<<"$lines" | sed 's/;/; /g')" "$OUT/logs/bench.json"
else record bench "not built" "no GPU benchmark line (no kernel benchmark in $bins; gantry bench failed or was skipped: logs/)"; fi

# -------------------------------------------------------------- the report
python3 - "$OUT" "$when" "$(hostname)" "$FAILED" <<'PY'
import glob, json, sys
out, when, host, failed = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
sections = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/sections/*.json"))]
version = open(f"{out}/logs/version.txt", errors="replace").read().splitlines()
json.dump({"when": when, "host": host, "gpu": True, "gantry_version": version, "sections": sections,
           "result": "fail" if failed else "pass"}, open(f"{out}/report.json", "w"), indent=1)
PY
say "result: $([[ $FAILED == 1 ]] && echo FAIL || echo pass) (sections: $N); report: $TXT, $OUT/report.json"
exit $FAILED
