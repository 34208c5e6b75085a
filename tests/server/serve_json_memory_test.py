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

Bounded: every socket has a timeout (serve_process.SOCKET_TIMEOUT) and the server is killed on exit.
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import Server  # noqa: E402

MODEL = "mlp_64_128_10"


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
    return header + bytes(rows * 64 * 4), {"Content-Type": "application/octet-stream",
                                           "Inference-Header-Content-Length": str(len(header))}


def main():
    args = sys.argv[1:]
    gantry, models = args[0], args[1]
    mib = float(args[args.index("--mib") + 1]) if "--mib" in args else 24
    limit = float(args[args.index("--limit") + 1]) if "--limit" in args else 1.5
    numbers = args[args.index("--numbers") + 1] if "--numbers" in args else "ints"
    report_only = "--report" in args
    # A sanitizer build's server keeps freed blocks in quarantine and adds redzones: tests/CMakeLists.txt sets
    # the factor its RSS bounds get (as tests/cli/cli_run.h's kRssBoundFactor for the C++ tests).
    factor = float(os.environ.get("GANTRY_RSS_BOUND_FACTOR", "1"))
    # A row of 64 numbers as json.dumps writes them: about 1.3 KB of floats, 230 bytes of one-digit ints.
    rows = max(1, int(mib * 2**20 / (64 * (20.5 if numbers == "floats" else 3.5))))

    # RSS then tracks live memory: glibc's threshold would otherwise rise to the largest block freed, and
    # blocks below it stay mapped for reuse after they are freed.
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "131072"
    server = Server(gantry, [os.path.join(models, MODEL + ".onnx"), "--threads", "1",
                             "--max-body-size", str(int(mib * 2 + 8)) + "MiB"])
    failures = []
    try:
        status, _, meta = server.request("GET", f"/v2/models/{MODEL}")
        if status != 200:
            raise RuntimeError(f"model metadata answered {status}")
        name = json.loads(meta)["inputs"][0]["name"]
        infer_path = f"/v2/models/{MODEL}/infer"
        # Warm up with the same inference sent as binary tensors: what the model itself needs for it
        # (activations, ONNX Runtime's arena) is then resident, so the growth measured below is what the
        # JSON costs: the body and the input tensor.
        status, _, _ = server.request("POST", infer_path, *binary_body(name, rows))
        if status != 200:
            raise RuntimeError(f"warm-up infer answered {status}")
        tensor_bytes = rows * 64 * 4

        for layout in ("nested, datatype first", "flat, keys sorted"):
            body = body_of(name, rows, layout, numbers)
            rss_before = server.status_field("VmRSS")
            with open(f"/proc/{server.proc.pid}/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
            status, _, payload = server.request("POST", infer_path, body,
                                                {"Content-Type": "application/json"})
            peak = server.status_field("VmHWM")
            growth = peak - rss_before
            ratio = growth / len(body)
            bound = (limit * len(body) + tensor_bytes) * factor
            print(f"{layout}: body {len(body) / 2**20:.1f} MiB ({rows} x 64, tensor "
                  f"{tensor_bytes / 2**20:.1f} MiB), RSS before {rss_before / 2**20:.0f} MiB, peak "
                  f"{peak / 2**20:.0f} MiB: growth {growth / 2**20:.0f} MiB = {ratio:.2f}x the body (limit: "
                  f"{limit}x the body + the tensor{f', x{factor:g} under a sanitizer' if factor != 1 else ''} = "
                  f"{bound / 2**20:.0f} MiB)", flush=True)
            if status != 200:
                failures.append(f"{layout}: infer answered {status}: {payload[:300]!r}")
                continue
            out = json.loads(payload)["outputs"][0]
            if out["shape"] != [rows, 10] or len(out["data"]) != rows * 10:
                failures.append(f"{layout}: output shape {out['shape']}, {len(out['data'])} values")
            if not report_only and growth >= bound:
                failures.append(f"{layout}: peak RSS grew {growth / 2**20:.0f} MiB, more than its bound "
                                f"({bound / 2**20:.0f} MiB)")
        if not server.alive():
            failures.append(f"gantry serve exited {server.proc.returncode}")
    finally:
        server.kill()
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(server.stderr()[-2000:])
        return 1
    print("serve_json_memory: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
