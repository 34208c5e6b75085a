"""One model over several hosts (llama.cpp RPC), two figures:

  BENCH rpc-vs-llama-server ratio=<median tg tok/s of gantry serve --rpc / llama-server --rpc>   (goal >= 1.0)
    The same two `gantry rpc-server` processes (loopback, 1 thread each, 1 GiB and 2 GiB reported), the same
    model (bench-100m-q4_0), the same split (the planner's: this CPU's share, then the servers'; llama-server
    gets it as -ngl and -ts), the same context and threads, one streaming client, interleaved rounds (each
    server started fresh, warmed up, stopped before the other starts: an RPC server serves one client).
  BENCH rpc-predicted-tg-error ratio=<|predicted - measured| / measured>                       (goal <= 0.25)
    `gantry plan --speed --rpc` against `gantry bench --rpc` (bench-100m-q8_0, 1 thread) with the servers in
    network namespaces behind a 1 ms / 1 Gbit/s link (tests/rpc/netns.py says how it is shaped); on a machine
    that forbids namespaces, on loopback (said on the line).

Env: GANTRY_BUILD_DIR (build), GANTRY_DEPS_DIR (.cache), LLAMA_TOOLS_BIN (DEPS/llama/tools-build/bin),
ROUNDS (2), REQUESTS (4), MAX_TOKENS (64), CTX (2048).
"""
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "rpc"))
from netns import Hosts, Unavailable  # noqa: E402
from rpc_common import RpcServer, free_port, run  # noqa: E402

BUILD = os.environ.get("GANTRY_BUILD_DIR", os.path.join(ROOT, "build"))
DEPS = os.environ.get("GANTRY_DEPS_DIR", os.path.join(ROOT, ".cache"))
GANTRY = os.path.abspath(os.path.join(BUILD, "bin", "gantry"))
TOOLS = os.environ.get("LLAMA_TOOLS_BIN", os.path.join(DEPS, "llama", "tools-build", "bin"))
LLAMA_SERVER = os.path.join(TOOLS, "llama-server")
ROUNDS = int(os.environ.get("ROUNDS", "2"))
REQUESTS = int(os.environ.get("REQUESTS", "4"))
MAX_TOKENS = int(os.environ.get("MAX_TOKENS", "64"))
CTX = int(os.environ.get("CTX", "2048"))
SERVE_MODEL = os.path.join(DEPS, "models", "bench-100m-q4_0.gguf")
SPEED_MODEL = os.path.join(DEPS, "models", "bench-100m-q8_0.gguf")


def split_of(plan):
    """n_gpu_layers and the per-remote-device counts (the output layer with its device) of a plan."""
    counts = [len(d["layers"]) + (1 if d["output_layer"] else 0) for d in plan["devices"] if d["gpu"]]
    return sum(counts), counts


def wait_ready(url, path, proc, log, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {open(log, errors='replace').read()[-2000:]}")
        try:
            with urllib.request.urlopen(url + path, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{url}{path} not ready in {timeout} s")


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def load(url, model, clients, requests, max_tokens, tmp, tag):
    """One load run of bench/serve_load.mjs (the serve benches' client: streaming chat requests, each distinct,
    ignore_eos so every request generates max_tokens on both servers)."""
    out = os.path.join(tmp, f"{tag}.json")
    cmd = ["node", os.path.join(ROOT, "bench", "serve_load.mjs"), "load", "--url", url, "--model", model,
           "--clients", str(clients), "--requests", str(requests), "--max-tokens", str(max_tokens),
           "--prompt-words", "16", "--tag", tag, "--timeout", "300", "--run-timeout", "900"]
    with open(out, "w") as f:
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True).returncode
    with open(out) as f:
        text = f.read()
    try:
        d = json.loads(text)
    except ValueError:
        raise RuntimeError(f"{tag}: load run printed no result: {text[-1500:]}")
    if code != 0 or "error" in d:
        raise RuntimeError(f"{tag}: load run failed: {json.dumps(d)[:1500]}")
    return d


def vs_llama_server():
    # llama-server with RPC is part of the set-up (scripts/build-llama-tools.sh): without it the bench fails.
    if not os.path.exists(LLAMA_SERVER):
        sys.exit(f"rpc bench: FAILED: no llama-server in {TOOLS}: run scripts/setup.sh")
    help_text = subprocess.run([LLAMA_SERVER, "--help"], capture_output=True, text=True).stdout
    if "--rpc" not in help_text:
        sys.exit("rpc bench: FAILED: this llama-server was built without RPC: run scripts/setup.sh")
    rpc = [RpcServer(GANTRY, args=["--threads", "1", "--memory", m]) for m in ("1GiB", "2GiB")]
    tmp = tempfile.mkdtemp(prefix="gantry-rpc-bench-")
    try:
        endpoints = ",".join(s.endpoint for s in rpc)
        code, out, err = run([GANTRY, "plan", SERVE_MODEL, "--ctx", str(CTX), "--rpc", endpoints, "--json"],
                             timeout=300)
        if code != 0:
            raise RuntimeError(f"gantry plan --rpc failed: {err[-1500:]}")
        ngl, counts = split_of(json.loads(out))
        split = ",".join(str(c) for c in counts)
        print(f"rpc-vs-llama-server: the planner's split: n_gpu_layers {ngl}, tensor split {split} over {endpoints}",
              flush=True)
        pkg = os.path.join(tmp, "pkg")
        os.makedirs(pkg)
        shutil.copy(SERVE_MODEL, os.path.join(pkg, "model.gguf"))
        with open(SERVE_MODEL, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        name = "bench-rpc"
        with open(os.path.join(pkg, "gantry.json"), "w") as f:
            json.dump({"name": name, "version": "1.0.0", "format": "gguf", "model_file": "model.gguf",
                       "sha256": {"model.gguf": digest},
                       "llama": {"rpc": endpoints.split(","), "n_gpu_layers": ngl, "tensor_split": counts,
                                 "n_ctx": CTX, "parallel": 1}}, f)
        results = {"gantry": [], "llama-server": []}
        for r in range(1, ROUNDS + 1):
            order = ["llama-server", "gantry"] if r % 2 else ["gantry", "llama-server"]
            for side in order:
                port = free_port()
                log = os.path.join(tmp, f"{side}.{r}.log")
                if side == "gantry":
                    cmd = [GANTRY, "serve", pkg, "--host", "127.0.0.1", "--port", str(port), "--threads", "1",
                           "--parallel", "1", "--ctx", str(CTX)]
                    ready = "/v2/health/ready"
                else:
                    cmd = [LLAMA_SERVER, "-m", SERVE_MODEL, "--alias", name, "--host", "127.0.0.1", "--port",
                           str(port), "--rpc", endpoints, "-ngl", str(ngl), "-ts", split, "-c", str(CTX), "-t", "1",
                           "--parallel", "1"]
                    ready = "/health"
                with open(log, "w") as lf:
                    proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT)
                try:
                    url = f"http://127.0.0.1:{port}"
                    wait_ready(url, ready, proc, log)
                    load(url, name, 1, 1, 8, tmp, f"{side}.warmup.{r}")
                    d = load(url, name, 1, REQUESTS, MAX_TOKENS, tmp, f"{side}.{r}")
                finally:
                    stop(proc)
                results[side].append(d["tok_per_s"])
                print(f"rpc-vs-llama-server round {r} {side}: {d['tok_per_s']:.2f} tok/s "
                      f"({d['streamed_tokens']} tokens in {d['wall_s']:.2f} s)", flush=True)
        g, l = statistics.median(results["gantry"]), statistics.median(results["llama-server"])
        print(f"rpc-vs-llama-server: gantry serve --rpc {g:.2f} tok/s, llama-server --rpc {l:.2f} tok/s "
              f"(medians of {ROUNDS} rounds)")
        return f"{g / l:.3f}"
    finally:
        for s in rpc:
            s.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def predicted_error_on(endpoints, where):
    preds, meas = [], []
    for r in range(1, ROUNDS + 1):
        code, out, err = run([GANTRY, "plan", SPEED_MODEL, "--ctx", "256", "--rpc", endpoints, "--speed",
                              "--threads", "1", "--json"], timeout=300)
        if code != 0:
            raise RuntimeError(f"gantry plan --speed --rpc failed: {err[-1500:]}")
        speed = json.loads(out)["speed"]
        if not speed["known"]:
            raise RuntimeError(f"no prediction: {speed['assumptions']}")
        preds.append(speed["generation_tokens_per_s"])
        net = speed["network_seconds_per_step"]
        code, out, err = run([GANTRY, "bench", SPEED_MODEL, "--rpc", endpoints, "-p", "0", "-n", "64", "-r", "3",
                              "-t", "1", "--json"], timeout=600)
        if code != 0:
            raise RuntimeError(f"gantry bench --rpc failed: {err[-1500:]}")
        rows = json.loads(out)["results"]
        meas += [s for row in rows if row["test"].startswith("tg") for s in row["samples_ts"]]
        print(f"rpc-predicted-tg round {r} ({where}): predicted {preds[-1]:.2f} t/s (network {net * 1e3:.2f} ms "
              f"per step), measured {', '.join(f'{s:.2f}' for s in meas[-3:])} t/s", flush=True)
    p, m = statistics.median(preds), statistics.median(meas)
    print(f"rpc-predicted-tg ({where}): predicted {p:.2f} t/s, measured {m:.2f} t/s (medians), "
          f"error {abs(p - m) / m:.3f}")
    return f"{abs(p - m) / m:.3f}"


def predicted_error():
    try:
        if os.geteuid() != 0:
            raise Unavailable("network namespaces need root")
        with Hosts(2) as hosts:
            print(f"rpc-predicted-tg: network: {hosts.shaping}", flush=True)
            eps = [hosts.start_rpc_server(hosts[i], GANTRY, 50052, ["--threads", "1", "--memory", m])
                   for i, m in enumerate(["1GiB", "2GiB"])]
            return predicted_error_on(",".join(eps), "network namespaces, 1 ms / 1 Gbit/s")
    except Unavailable as e:
        print(f"rpc-predicted-tg: {e}: measuring on loopback instead")
        rpc = [RpcServer(GANTRY, args=["--threads", "1", "--memory", m]) for m in ("1GiB", "2GiB")]
        try:
            return predicted_error_on(",".join(s.endpoint for s in rpc), "loopback") + " (loopback: " + str(e) + ")"
        finally:
            for s in rpc:
                s.kill()


def main():
    for f in (GANTRY, SERVE_MODEL, SPEED_MODEL):
        if not os.path.exists(f):
            sys.exit(f"rpc bench: missing {f} (build and run scripts/setup.sh)")
    print(f"rpc bench: load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    ratio = vs_llama_server()
    print(f"BENCH rpc-vs-llama-server ratio={ratio}", flush=True)
    err = predicted_error()
    print(f"BENCH rpc-predicted-tg-error ratio={err}", flush=True)


if __name__ == "__main__":
    main()
