#!/usr/bin/env python3
"""Peak memory of `gantry serve` answering one large KServe v2 JSON infer.

Usage: serve_json_memory_test.py GANTRY_BINARY MODELS_DIR [--mib N] [--numbers ints|floats]
                                 [--limit X] [--report]      (run by tests/scripts/serve_json_memory.sh)

Sends the MLP model (mlp_64_128_10, input [N,64] FP32) a JSON body of about N MiB of numbers (one-digit
integers by default: the most numbers per byte, where a DOM node per number cost the most), once per
layout a client may write: nested rows with "datatype" before "data" (as Triton's Python client writes
it), and a flat list with the keys sorted ("data" before "datatype", as nlohmann or serde write it).

For each, the server's peak RSS growth while it answers (VmHWM after, reset through /proc/PID/clear_refs
before, minus VmRSS before) must stay below --limit (default 1.5) times the body plus the input tensor's
own bytes: the body is read once, its numbers go straight into the tensor, and the body is freed before
inference. The same inference is first sent as binary tensors, so what the model itself needs
(activations, ONNX Runtime's arena) is already resident and the growth is what the JSON costs. The
server runs with glibc's mmap threshold fixed (MALLOC_MMAP_THRESHOLD_), so large blocks go back to the
kernel when freed and RSS tracks what is live rather than what the allocator keeps for later. Before
the numbers were streamed into the tensor, a 57 MiB body peaked at 747 MiB. --report prints the
numbers without asserting.

Bounded: every socket has a timeout and the server is killed on exit.
"""
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import time

SOCKET_TIMEOUT = 120
MODEL = "mlp_64_128_10"


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def body_of(name, rows, layout, numbers):
    rng = random.Random(rows)
    if numbers == "ints":
        data = [[rng.randint(-9, 9) for _ in range(64)] for _ in range(rows)]
    else:
        data = [[rng.uniform(-1, 1) for _ in range(64)] for _ in range(rows)]
    if layout == "nested, datatype first":
        inp = {"name": name, "shape": [rows, 64], "datatype": "FP32", "data": data}
        return json.dumps({"inputs": [inp]}).encode()
    flat = [x for row in data for x in row]
    inp = {"name": name, "shape": [rows, 64], "datatype": "FP32", "data": flat}
    return json.dumps({"inputs": [inp]}, sort_keys=True).encode()


def binary_body(name, rows):
    """The same kind of input as raw FP32 bytes after a JSON header (the binary tensor extension)."""
    header = json.dumps({"inputs": [{"name": name, "shape": [rows, 64], "datatype": "FP32",
                                     "parameters": {"binary_data_size": rows * 64 * 4}}]}).encode()
    return header + bytes(rows * 64 * 4), {"Inference-Header-Content-Length": str(len(header))}


def call(port, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SOCKET_TIMEOUT)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
    res = conn.getresponse()
    payload = res.read()
    conn.close()
    return res.status, payload


def main():
    args = sys.argv[1:]
    gantry, models = args[0], args[1]
    mib = float(args[args.index("--mib") + 1]) if "--mib" in args else 24
    limit = float(args[args.index("--limit") + 1]) if "--limit" in args else 1.5
    numbers = args[args.index("--numbers") + 1] if "--numbers" in args else "ints"
    report_only = "--report" in args
    # A row of 64 numbers as json.dumps writes them: about 1.3 KB of floats, 230 bytes of one-digit ints.
    rows = max(1, int(mib * 2**20 / (64 * (20.5 if numbers == "floats" else 3.5))))

    work = tempfile.mkdtemp(prefix="gantry-jsonmem-")
    out_path, err_path = os.path.join(work, "out"), os.path.join(work, "err")
    cmd = [gantry, "serve", "--port", "0", os.path.join(models, MODEL + ".onnx"), "--threads", "1",
           "--max-body-size", str(int(mib * 2 + 8)) + "MiB"]
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
    failures = []
    try:
        port = None
        deadline = time.time() + 60
        while time.time() < deadline and port is None:
            with open(out_path) as f:
                line = f.readline()
            if "listening on http://" in line:
                port = int(line.split("listening on http://")[1].split()[0].rsplit(":", 1)[1])
            elif proc.poll() is not None:
                raise RuntimeError(f"gantry serve exited {proc.returncode}: " + open(err_path).read()[-2000:])
            else:
                time.sleep(0.1)
        if port is None:
            raise RuntimeError("gantry serve did not start in 60 s")

        status, meta = call(port, "GET", f"/v2/models/{MODEL}")
        if status != 200:
            raise RuntimeError(f"model metadata answered {status}")
        name = json.loads(meta)["inputs"][0]["name"]
        infer_path = f"/v2/models/{MODEL}/infer"
        # Warm up with the same inference sent as binary tensors: what the model itself needs for it
        # (activations, ONNX Runtime's arena) is then resident, so the growth measured below is what the
        # JSON costs: the body and the input tensor.
        status, _ = call(port, "POST", infer_path, *binary_body(name, rows))
        if status != 200:
            raise RuntimeError(f"warm-up infer answered {status}")
        tensor_bytes = rows * 64 * 4

        for layout in ("nested, datatype first", "flat, keys sorted"):
            body = body_of(name, rows, layout, numbers)
            rss_before = status_kib(proc.pid, "VmRSS")
            with open(f"/proc/{proc.pid}/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
            status, payload = call(port, "POST", infer_path, body)
            peak = status_kib(proc.pid, "VmHWM")
            growth = (peak - rss_before) * 1024
            ratio = growth / len(body)
            bound = limit * len(body) + tensor_bytes
            print(f"{layout}: body {len(body) / 2**20:.1f} MiB ({rows} x 64, tensor "
                  f"{tensor_bytes / 2**20:.1f} MiB), RSS before {rss_before / 1024:.0f} MiB, peak "
                  f"{peak / 1024:.0f} MiB: growth {growth / 2**20:.0f} MiB = {ratio:.2f}x the body (limit: "
                  f"{limit}x the body + the tensor = {bound / 2**20:.0f} MiB)", flush=True)
            if status != 200:
                failures.append(f"{layout}: infer answered {status}: {payload[:300]!r}")
                continue
            out = json.loads(payload)["outputs"][0]
            if out["shape"] != [rows, 10] or len(out["data"]) != rows * 10:
                failures.append(f"{layout}: output shape {out['shape']}, {len(out['data'])} values")
            if not report_only and growth >= bound:
                failures.append(f"{layout}: peak RSS grew {growth / 2**20:.0f} MiB, more than {limit}x the "
                                f"body + the tensor ({bound / 2**20:.0f} MiB)")
        if proc.poll() is not None:
            failures.append(f"gantry serve exited {proc.returncode}")
    finally:
        proc.kill()
        proc.wait()
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(open(err_path, errors="replace").read()[-2000:])
        return 1
    print("serve_json_memory: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
