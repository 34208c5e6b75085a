#!/usr/bin/env python3
"""Peak memory of `gantry serve` refusing JSON bodies whose DOM would dwarf their text (issue 34, item 5).

Usage: serve_json_amplification_test.py GANTRY_BINARY MODELS_DIR [--mib N] [--report]
                                        (run by tests/scripts/serve_json_amplification.sh)

Each of /v1/messages, /v1/responses, /v1/chat/completions and /api/chat gets a valid request with N MiB
(default 60) of "[{},{},...]" in a field it ignores: about 27 bytes of DOM per byte of text, so before the
DOM budget (core/json.h, client_json_limits) one such body raised the server's peak RSS by 0.9-2.2 GiB.
Each must now be refused 400 with the budget's message, and the server's peak RSS growth while it answers
(VmHWM after, reset through /proc/PID/clear_refs before, minus VmRSS before) must stay within the body
itself plus what the budget lets the DOM take (4x the body + 8 MiB), plus a slack of 32 MiB for the
threads and buffers of one request. Then the four at once, within four times that. Then legitimate
requests still pass: a small chat is answered 200 and a 4 MiB prompt reaches the model (whose context
refuses it), not the JSON budget. --report prints the numbers without asserting.

Bounded: every socket has a timeout (serve_process.SOCKET_TIMEOUT) and the server is killed on exit.
"""
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import Server  # noqa: E402

MODEL = "tiny-llama"
MIB = 2**20
BUDGET_PHRASE = "the JSON would take more than"


def padding(nbytes):
    n = nbytes // 3
    return b"[" + b"{}," * (n - 1) + b"{}]"


def bodies(mib):
    """The four routes' valid requests with about `mib` MiB of [{},...] in an ignored field."""
    pad = padding(int(mib * MIB))
    msgs = [{"role": "user", "content": "hi"}]
    reqs = {
        "/v1/messages": {"model": MODEL, "max_tokens": 1, "messages": msgs},
        "/v1/responses": {"model": MODEL, "max_output_tokens": 1, "input": "hi"},
        "/v1/chat/completions": {"model": MODEL, "max_tokens": 1, "messages": msgs},
        "/api/chat": {"model": MODEL, "stream": False, "options": {"num_predict": 1}, "messages": msgs},
    }
    out = {}
    for path, req in reqs.items():
        head = json.dumps(req).encode()
        out[path] = head[:-1] + b', "x_ignored": ' + pad + b"}"
    return out


def main():
    args = sys.argv[1:]
    gantry, models = args[0], args[1]
    mib = float(args[args.index("--mib") + 1]) if "--mib" in args else 60
    report_only = "--report" in args
    factor = float(os.environ.get("GANTRY_RSS_BOUND_FACTOR", "1"))
    server = Server(gantry, [os.path.join(models, MODEL + ".gguf"), "--ctx", "256", "--parallel", "1",
                             "--threads", "1", "--grpc-port", "-1",
                             "--max-body-size", f"{int(mib + 16)}MiB"])
    failures = []

    def fail(msg):
        print("FAIL:", msg, flush=True)
        failures.append(msg)

    def post(path, body, results=None):
        status, _, payload = server.request("POST", path, body, {"Content-Type": "application/json"})
        if results is not None:
            results[path] = (status, payload)
        return status, payload

    def reset_peak():
        with open(f"/proc/{server.proc.pid}/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS

    try:
        # Warm up every route once with a small request (threads, arenas, the model's first generation).
        small = bodies(0.001)
        for path, body in small.items():
            status, payload = post(path, body)
            if status != 200:
                fail(f"{path}: a small valid request answered {status}: {payload[:200]!r}")
        big = bodies(mib)
        size = len(next(iter(big.values())))
        one_bound = (size + 4 * size + 8 * MIB + 32 * MIB) * factor
        print(f"body {size / MIB:.1f} MiB; bound per request {one_bound / MIB:.0f} MiB "
              f"(the body + 4x it + 8 MiB + 32 MiB slack{f', x{factor:g}' if factor != 1 else ''})", flush=True)

        def check_refused(path, status, payload):
            if status != 400 or BUDGET_PHRASE.encode() not in payload:
                fail(f"{path}: answered {status}, not 400 with the budget's message: {payload[:300]!r}")

        for path, body in big.items():
            rss_before = server.status_field("VmRSS")
            reset_peak()
            status, payload = post(path, body)
            growth = server.status_field("VmHWM") - rss_before
            print(f"{path}: {status}, RSS before {rss_before / MIB:.0f} MiB, peak growth {growth / MIB:.0f} MiB "
                  f"= {growth / size:.2f}x the body, RSS after {server.status_field('VmRSS') / MIB:.0f} MiB",
                  flush=True)
            check_refused(path, status, payload)
            if not report_only and growth > one_bound:
                fail(f"{path}: peak RSS grew {growth / MIB:.0f} MiB, over {one_bound / MIB:.0f} MiB")

        # The four at once.
        rss_before = server.status_field("VmRSS")
        reset_peak()
        results = {}
        threads = [threading.Thread(target=post, args=(p, b, results)) for p, b in big.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        growth = server.status_field("VmHWM") - rss_before
        print(f"four at once: RSS before {rss_before / MIB:.0f} MiB, peak growth {growth / MIB:.0f} MiB, "
              f"RSS after {server.status_field('VmRSS') / MIB:.0f} MiB", flush=True)
        for path in big:
            if path not in results:
                fail(f"{path}: no answer when sent with the others")
            else:
                check_refused(path, *results[path])
        if not report_only and growth > 4 * one_bound:
            fail(f"four at once: peak RSS grew {growth / MIB:.0f} MiB, over {4 * one_bound / MIB:.0f} MiB")

        # Legitimate bodies still pass the JSON layer.
        for path, body in small.items():
            status, payload = post(path, body)
            if status != 200:
                fail(f"{path}: a small valid request answered {status} after the big ones: {payload[:200]!r}")
        long_prompt = json.dumps({"model": MODEL, "max_tokens": 1,
                                  "messages": [{"role": "user", "content": "word " * (4 * MIB // 5)}]}).encode()
        status, payload = post("/v1/chat/completions", long_prompt)
        if BUDGET_PHRASE.encode() in payload or status == 200:
            fail(f"a 4 MiB prompt: answered {status} {payload[:300]!r}; expected the context's 400")
        elif b"context" not in payload:
            fail(f"a 4 MiB prompt: answered {status} {payload[:300]!r}, not about the context")
        if not server.alive():
            fail(f"gantry serve exited {server.proc.returncode}")
    finally:
        server.kill()
    if failures:
        print(server.stderr()[-2000:])
        return 1
    print("serve_json_amplification: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
