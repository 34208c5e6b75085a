#!/usr/bin/env bash
# gantry serve keeping a package's promises: runtime.bucket_max_dims bounds the request (413 with the numbers,
# JSON or binary, before the request is queued) while smaller requests answer; runtime.peak_concurrency and
# --instances load that many copies (their memory reserved, shown on the dashboard's model list) and every
# copy answers the same; `gantry run` refuses an oversized input with a clear error. Usage:
# serve_manifest_promises.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?usage: serve_manifest_promises.sh BUILD_DIR}
GANTRY=$BUILD/bin/gantry
MODELS=${GANTRY_DEPS_DIR:-.cache}/models
[[ -f $MODELS/mlp_64_128_10.onnx ]] || { echo "FAIL: $MODELS/mlp_64_128_10.onnx missing: run make setup"; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# A package of the MLP ([batch,64] -> [batch,10]): batch at most 4, two instances.
mkdir -p "$work/pkg"
cp "$MODELS/mlp_64_128_10.onnx" "$work/pkg/mlp.onnx"
sum=$(sha256sum "$work/pkg/mlp.onnx" | cut -d' ' -f1)
cat >"$work/pkg/gantry.json" <<EOF
{"name": "mlp", "version": "1.0.0", "format": "onnx", "model_file": "mlp.onnx",
 "sha256": {"mlp.onnx": "$sum"},
 "runtime": {"intra_op_threads": 1, "bucket_max_dims": {"batch": 4}, "peak_concurrency": 2},
 "dynamic_batching": {"max_batch_size": 2, "max_queue_delay_microseconds": 60000000}}
EOF

"$GANTRY" serve --port 0 "$work/pkg" "$MODELS/mlp_64_128_10.onnx" --instances 3 --threads 1 \
  >"$work/serve.out" 2>"$work/serve.err" &
pids+=($!)
url=
for _ in $(seq 1 300); do  # bounded: 30 s
  if grep -q "listening on" "$work/serve.out" 2>/dev/null; then
    url=$(grep -o 'http://[0-9.:]*' "$work/serve.out" | head -1); break
  fi
  kill -0 "${pids[-1]}" 2>/dev/null || { echo "FAIL: gantry serve exited:"; cat "$work/serve.err"; exit 1; }
  sleep 0.1
done
[[ -n $url ]] || { echo "FAIL: gantry serve did not start in 30 s"; cat "$work/serve.err"; exit 1; }

GANTRY_URL=$url timeout 120 python3 - <<'PY'
import http.client, json, os, struct, sys, urllib.parse
from concurrent.futures import ThreadPoolExecutor
u = urllib.parse.urlparse(os.environ["GANTRY_URL"])

def post(path, body, headers=None):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        c.request("POST", path, body=body, headers=headers or {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()

def get(path):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()

def rows(n, v=0.25):
    return [[v * ((i % 7) - 3) for i in range(64)] for _ in range(n)]

def infer(model, n):
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [n, 64],
                                   "data": rows(n)}]}).encode()
    return post(f"/v2/models/{model}/infer", body)

fails = []
def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)

s, b = infer("mlp", 4)
check(s == 200, f"4 rows (the bound) answer 200, got {s} {b[:200]}")
s, b = infer("mlp", 5)
check(s == 413, f"5 rows are 413, got {s} {b[:200]}")
err = json.loads(b).get("error", "") if b else ""
check("1280 bytes" in err and "1024 bytes" in err and "max_input_bytes" in err, f"413 names the numbers: {err}")
# Binary data: refused from its size before it is parsed.
header = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [8, 64],
                                 "parameters": {"binary_data_size": 8 * 64 * 4}}]}).encode()
s, b = post("/v2/models/mlp/infer", header + struct.pack("<512f", *([0.5] * 512)),
            {"Inference-Header-Content-Length": str(len(header))})
check(s == 413, f"binary 8 rows are 413, got {s} {b[:200]}")
# The bare model (no bound) takes 5 rows.
s, b = infer("mlp_64_128_10", 5)
check(s == 200, f"the unbounded model answers 5 rows, got {s} {b[:200]}")

# Copies answer alike: many concurrent requests, one answer.
with ThreadPoolExecutor(8) as pool:
    outs = list(pool.map(lambda _: infer("mlp", 2), range(16)))
check(all(s == 200 for s, _ in outs), f"concurrent requests all 200: {[s for s, _ in outs]}")
datas = {json.dumps(json.loads(b)["outputs"][0]["data"]) for _, b in outs if b}
check(len(datas) == 1, f"every instance gives the same outputs ({len(datas)} distinct)")

# The manifest's dynamic_batching: at most 2 rows per batch, and a batch waits (up to a minute) until it has
# them. Four one-row requests at once: exactly two batches of two requests.
def batch_histogram():
    s, b = get("/metrics")
    count = total = 0.0
    for line in b.decode().splitlines():
        if line.startswith('gantry_batch_size_count{model="mlp"'):
            count = float(line.split()[-1])
        if line.startswith('gantry_batch_size_sum{model="mlp"'):
            total = float(line.split()[-1])
    return count, total
c0, s0 = batch_histogram()
with ThreadPoolExecutor(4) as pool:
    outs = list(pool.map(lambda _: infer("mlp", 1), range(4)))
check(all(s == 200 for s, _ in outs), f"4 one-row requests: {[s for s, _ in outs]}")
c1, s1 = batch_histogram()
# gantry_batch_size observes, per request, the size of the batch it ran in: two batches of two are 4
# observations summing to 8 (four batches of one would sum to 4, one batch of four to 16).
check((c1 - c0, s1 - s0) == (4, 8), f"batches of the manifest's 2 rows: {c1 - c0} observations, sum {s1 - s0}")

# The dashboard's model list: instances and their reservation.
s, b = get("/gantry/status")
check(s == 200, f"/gantry/status answers, got {s}")
models = {m["name"]: m for m in json.loads(b).get("models", [])} if s == 200 else {}
mlp = models.get("mlp", {})
check(mlp.get("instances") == 3, f"--instances 3 over the package's peak_concurrency 2: {mlp}")
check("3 instance(s)" in mlp.get("memory_basis", ""), f"each instance reserved: {mlp.get('memory_basis')}")
sys.exit(1 if fails else 0)
PY

# gantry run: an input beyond the bound is a clear error before the model runs.
python3 - "$work/in5.npy" <<'PY'
import struct, sys
rows, cols = 5, 64
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
header += " " * (63 - (len(header) + 10) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<%df" % (rows * cols), *([0.5] * rows * cols)))
PY
if "$GANTRY" run "$work/pkg" --input "input=$work/in5.npy" >"$work/run.out" 2>"$work/run.err"; then
  echo "FAIL: gantry run accepted 5 rows for a batch bound of 4"; exit 1
fi
grep -q "max_input_bytes" "$work/run.err" || { echo "FAIL: no clear error: $(cat "$work/run.err")"; exit 1; }

kill -TERM "${pids[0]}"
for _ in $(seq 1 100); do kill -0 "${pids[0]}" 2>/dev/null || break; sleep 0.1; done
echo "serve_manifest_promises: all passed"
