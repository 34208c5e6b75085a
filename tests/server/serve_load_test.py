#!/usr/bin/env python3
"""Bounded load and SIGTERM drain tests of `gantry serve`, through Python's http.client.

Usage: serve_load_test.py GANTRY_BINARY MODELS_DIR   (run by tests/scripts/serve_load.sh)

load:  32 client threads, each with its own keep-alive connection, send a fixed number of requests
       mixing KServe infer (MLP with random batch sizes, Silero) and OpenAI completions (plain and
       streamed) to a server with a small --max-queue. Every request must get exactly one complete
       answer, 200 (valid body) or 429 (with Retry-After); nothing is lost; the server is ready and
       serves afterwards; /metrics agrees with what the clients counted.
drain: 16 client threads keep sending (long streamed completions among them); SIGTERM arrives
       mid-load (once 16 answers are in and a long stream is being answered: events, not a delay). Every request whose answer started must end complete (200, or a complete 503 once the
       drain began); requests the server never accepted (connection refused or closed before any
       answer) are counted, not failed; the server exits 0 within --drain-timeout + a few seconds.
flush: an answer still being written when SIGTERM arrives (a client reading a megabytes-large MLP
       answer slowly) is written out in full before the server exits.

GANTRY_LOAD_TESTS=load,drain,flush picks the phases (default all).

Everything is bounded: every socket has a timeout and each phase has a wall-clock cap.
"""
import http.client
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import serve_process

MLP, SILERO, LLAMA = "mlp_64_128_10", "silero_vad_v5", "tiny-llama"
SOCKET_TIMEOUT = 30  # seconds, every socket
LOAD_CLIENTS, LOAD_REQUESTS, LOAD_CAP_S = 32, 3000, 120
DRAIN_CLIENTS, DRAIN_AFTER_ANSWERS, DRAIN_TIMEOUT_S, DRAIN_CAP_S = 16, 16, 20, 90

failures = []
failures_mu = threading.Lock()


def fail(msg):
    with failures_mu:
        failures.append(msg)
        if len(failures) <= 20:
            print("FAIL:", msg, flush=True)


class Server(serve_process.Server):
    """The three bundled models at --ctx 512, 2 sequences, 1 thread, plus `extra` flags."""

    def __init__(self, gantry, models, extra):
        super().__init__(gantry, [*[os.path.join(models, m) for m in
                                    ("mlp_64_128_10.onnx", "silero_vad_v5.onnx", "tiny-llama.gguf")],
                                  "--ctx", "512", "--parallel", "2", "--threads", "1", *extra])


# ------------------------------------------------------------------------------------ requests
def mlp_request(input_name, rng):
    n = rng.randint(1, 4)
    data = [[rng.uniform(-1, 1) for _ in range(64)] for _ in range(n)]
    body = {"inputs": [{"name": input_name, "datatype": "FP32", "shape": [n, 64], "data": data}]}
    return {"model": MLP, "kind": "mlp", "path": f"/v2/models/{MLP}/infer", "body": body, "rows": n}


def silero_request(rng):
    body = {"inputs": [
        {"name": "input", "datatype": "FP32", "shape": [1, 512], "data": [rng.uniform(-0.1, 0.1) for _ in range(512)]},
        {"name": "state", "datatype": "FP32", "shape": [2, 1, 128], "data": [0.0] * 256},
        {"name": "sr", "datatype": "INT64", "shape": [], "data": [16000]}]}
    return {"model": SILERO, "kind": "silero", "path": f"/v2/models/{SILERO}/infer", "body": body}


def completion_request(rng, stream, max_tokens):
    body = {"model": LLAMA, "prompt": rng.choice(["Once upon a time", "The cat", "Hello"]),
            "max_tokens": max_tokens, "temperature": 0.8, "seed": rng.randint(0, 1000)}
    if stream:
        body["stream"] = True
    return {"model": LLAMA, "kind": "stream" if stream else "completion", "path": "/v1/completions",
            "body": body, "max_tokens": max_tokens}


def check_ok_body(req, data):
    """None when a 200 body is what the request asked for, else why not."""
    try:
        if req["kind"] == "stream":
            text = data.decode()
            if not text.rstrip().endswith("data: [DONE]"):
                return "stream does not end with 'data: [DONE]': ..." + text[-200:]
            events = [e.strip() for e in text.split("\n\n") if e.strip()]
            for e in events[:-1]:
                if not e.startswith("data: "):
                    return "not an SSE data event: " + e[:200]
                json.loads(e[len("data: "):])
            return None
        out = json.loads(data)
        if req["kind"] == "mlp":
            o = out["outputs"][0]
            if o["shape"] != [req["rows"], 10] or len(o["data"]) != req["rows"] * 10:
                return f"MLP output shape {o['shape']} ({len(o['data'])} values) for {req['rows']} rows"
        elif req["kind"] == "silero":
            if "output" not in [o["name"] for o in out["outputs"]]:
                return "Silero answer without 'output': " + data[:200].decode()
        else:
            u = out["usage"]
            if not (u["completion_tokens"] <= req["max_tokens"] and u["prompt_tokens"] > 0 and
                    u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]):
                return f"bad usage {u}"
            if not isinstance(out["choices"][0]["text"], str):
                return "completion without text"
        return None
    except (ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError) as e:
        return f"{type(e).__name__} {e}: {data[:200]!r}"


class Client:
    """One keep-alive connection; reopened only after the server announced `Connection: close`."""

    def __init__(self, server):
        self.server = server
        self.conn = None
        self.reused = False  # the open connection already carried a request
        self.reconnects = 0
        self.sent_at = None

    def close(self):
        if self.conn:
            self.conn.close()
        self.conn = None

    def send(self, req, on_header=None):
        """Returns (phase, status, headers, body, error): phase is 'connect' (never connected), 'sent'
        (request written, no answer header), 'header' (answer started, body incomplete) or 'done'.
        `on_header(status)` is called once the answer's header has arrived."""
        if self.conn is None:
            self.conn = self.server.conn()
            self.reused = False
            try:
                self.conn.connect()
            except OSError as e:
                self.close()
                return "connect", None, None, None, e
            self.reconnects += 1
        phase, status, headers = "sent", None, None
        try:
            body = json.dumps(req["body"]).encode()
            self.sent_at = None
            self.conn.request("POST", req["path"], body=body, headers={"Content-Type": "application/json"})
            self.sent_at = time.time()  # the whole request is written
            r = self.conn.getresponse()
            phase, status = "header", r.status
            if on_header:
                on_header(status)
            headers = {k.lower(): v for k, v in r.getheaders()}
            data = r.read()
            if r.length not in (None, 0) or (r.chunked and r.chunk_left not in (None, 0)):
                raise http.client.IncompleteRead(data)
            self.reused = True
            if r.will_close:  # the server said Connection: close (and http.client closed its socket)
                self.close()
            return "done", status, headers, data, None
        except (OSError, http.client.HTTPException) as e:
            self.close()
            return phase, status, headers, None, e


# ------------------------------------------------------------------------------------ metrics
def requests_total(server):
    """{(model, code): count} from gantry_requests_total."""
    status, _, body = server.request("GET", "/metrics")
    assert status == 200, status
    counts = {}
    for line in body.decode().splitlines():
        if not line.startswith("gantry_requests_total{"):
            continue
        labels, value = line[len("gantry_requests_total{"):].rsplit("} ", 1)
        kv = dict(p.split("=", 1) for p in labels.split(","))
        key = (kv["model"].strip('"'), int(kv["code"].strip('"')))
        counts[key] = counts.get(key, 0) + float(value)
    return counts


# ------------------------------------------------------------------------------------ load
def load_test(gantry, models):
    print(f"== load: {LOAD_CLIENTS} clients, {LOAD_REQUESTS} requests, --max-queue 4", flush=True)
    srv = Server(gantry, models, ["--max-queue", "4", "--drain-timeout", "10"])
    try:
        status, _, meta = srv.request("GET", f"/v2/models/{MLP}")
        assert status == 200, meta
        input_name = json.loads(meta)["inputs"][0]["name"]
        before = requests_total(srv)

        lock = threading.Lock()
        next_index = [0]
        counts = {}  # (model, status) -> n
        kinds = {}  # (kind, status) -> n
        outcome = {"sent": 0, "answered": 0, "lost": 0, "reconnects": 0}
        deadline = time.time() + LOAD_CAP_S

        def worker(tid):
            rng = random.Random(tid)
            client = Client(srv)
            while time.time() < deadline:
                with lock:
                    i = next_index[0]
                    if i >= LOAD_REQUESTS:
                        break
                    next_index[0] += 1
                    outcome["sent"] += 1
                pick = i % 20
                if pick < 11:
                    req = mlp_request(input_name, rng)
                elif pick < 15:
                    req = silero_request(rng)
                elif pick < 18:
                    req = completion_request(rng, False, rng.randint(1, 4))
                else:
                    req = completion_request(rng, True, rng.randint(1, 6))
                phase, st, hdrs, data, err = client.send(req)
                if phase != "done":
                    with lock:
                        outcome["lost"] += 1
                    fail(f"load: {req['kind']} request lost at phase '{phase}' (status {st}, connection "
                         f"{'reused' if client.reused else 'fresh'}): {type(err).__name__} {err}")
                    continue
                with lock:
                    outcome["answered"] += 1
                    counts[(req["model"], st)] = counts.get((req["model"], st), 0) + 1
                    kinds[(req["kind"], st)] = kinds.get((req["kind"], st), 0) + 1
                if st == 200:
                    why = check_ok_body(req, data)
                    if why:
                        fail(f"load: bad 200 body for {req['kind']}: {why}")
                elif st == 429:
                    if "retry-after" not in hdrs:
                        fail(f"load: 429 without Retry-After for {req['kind']}")
                    if req["model"] == LLAMA:
                        time.sleep(rng.uniform(0.02, 0.1))  # a polite client: more generations get through
                    try:
                        json.loads(data)["error"]
                    except (ValueError, KeyError, TypeError):
                        fail(f"load: 429 body is not a JSON error: {data[:200]!r}")
                else:
                    fail(f"load: status {st} for {req['kind']}: {data[:300]!r}")
            client.close()
            with lock:
                outcome["reconnects"] += client.reconnects

        t0 = time.time()
        threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(LOAD_CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, deadline + 2 * SOCKET_TIMEOUT - time.time()))
        wall = time.time() - t0
        if any(t.is_alive() for t in threads):
            fail(f"load: client threads still running after {LOAD_CAP_S} s + socket timeouts (a hang)")
        if time.time() > deadline:
            fail(f"load: the run passed its {LOAD_CAP_S} s cap")

        total = {s: sum(n for (_, st), n in counts.items() if st == s) for s in {st for _, st in counts}}
        print(f"load: {outcome['sent']} sent, {outcome['answered']} answered, {outcome['lost']} lost, "
              f"{outcome['reconnects']} connections opened, {wall:.1f} s ({outcome['answered'] / wall:.0f} req/s)")
        print("load: by status:", dict(sorted(total.items())))
        for kind in ("mlp", "silero", "completion", "stream"):
            print(f"load:   {kind:10s}", {st: n for (k, st), n in sorted(kinds.items()) if k == kind})
        if outcome["sent"] != LOAD_REQUESTS:
            fail(f"load: only {outcome['sent']} of {LOAD_REQUESTS} requests were sent within the cap")
        if outcome["sent"] != outcome["answered"]:
            fail(f"load: {outcome['sent']} sent but {outcome['answered']} answered")
        if set(total) - {200, 429}:
            fail(f"load: statuses other than 200 and 429: {total}")
        if total.get(429, 0) == 0:
            fail("load: no 429 at all: --max-queue 4 under 32 clients should reject some")
        if total.get(200, 0) < LOAD_REQUESTS // 4:
            fail(f"load: only {total.get(200, 0)} of {LOAD_REQUESTS} answered 200")
        for model in (MLP, SILERO, LLAMA):
            if counts.get((model, 200), 0) == 0:
                fail(f"load: no 200 at all for {model}")

        # The server is alive and serving afterwards.
        status, _, _ = srv.request("GET", "/v2/health/ready")
        if status != 200:
            fail(f"load: /v2/health/ready is {status} after the load")
        status, _, body = srv.request("POST", f"/v2/models/{MLP}/infer", {"inputs": [
            {"name": input_name, "datatype": "FP32", "shape": [1, 64], "data": [0.5] * 64}]})
        if status != 200 or json.loads(body)["outputs"][0]["shape"] != [1, 10]:
            fail(f"load: infer after the load: {status} {body[:200]!r}")

        # /metrics agrees: every 200 counted there exactly once; its 429s at most ours (a 429 given
        # before the body is read may bypass the per-model counter).
        after = requests_total(srv)
        for model in (MLP, SILERO, LLAMA):
            delta = {code: after.get((model, code), 0) - before.get((model, code), 0) for code in (200, 429)}
            ours = {code: counts.get((model, code), 0) for code in (200, 429)}
            extra_200 = 1 if model == MLP else 0  # the infer after the load
            print(f"load: metrics {model}: 200 {delta[200]:.0f} (clients {ours[200]} + {extra_200}), "
                  f"429 {delta[429]:.0f} (clients {ours[429]})")
            if delta[200] != ours[200] + extra_200:
                fail(f"load: gantry_requests_total{{model={model},code=200}} grew by {delta[200]}, clients got "
                     f"{ours[200]} + {extra_200}")
            if delta[429] > ours[429]:
                fail(f"load: gantry_requests_total{{model={model},code=429}} grew by {delta[429]}, more than the "
                     f"{ours[429]} clients got")
            other = {code: after[(m, code)] - before.get((m, code), 0) for (m, code) in after
                     if m == model and code not in (200, 429) and after[(m, code)] != before.get((m, code), 0)}
            if other:
                fail(f"load: metrics count other codes for {model}: {other}")
        if srv.proc.poll() is not None:
            fail(f"load: the server exited ({srv.proc.returncode}): {srv.stderr()}")
    finally:
        if srv.proc.poll() is None:
            srv.proc.send_signal(signal.SIGTERM)
            try:
                rc = srv.proc.wait(timeout=20)
                if rc != 0:
                    fail(f"load: the server exited {rc} after SIGTERM")
            except subprocess.TimeoutExpired:
                fail("load: the server still runs 20 s after SIGTERM (idle)")
        srv.kill()


# ------------------------------------------------------------------------------------ drain
def drain_test(gantry, models):
    print(f"== drain: {DRAIN_CLIENTS} clients, SIGTERM after {DRAIN_AFTER_ANSWERS} answers with a stream being "
          f"answered, --drain-timeout {DRAIN_TIMEOUT_S}", flush=True)
    srv = Server(gantry, models, ["--max-queue", "64", "--drain-timeout", str(DRAIN_TIMEOUT_S)])
    try:
        status, _, meta = srv.request("GET", f"/v2/models/{MLP}")
        assert status == 200, meta
        input_name = json.loads(meta)["inputs"][0]["name"]
        lock = threading.Lock()
        tally = {}  # outcome -> n
        term_at = [None]
        stop = threading.Event()
        deadline = time.time() + DRAIN_CAP_S
        # What SIGTERM waits for: answers completed, and streams whose answer has started and not ended.
        progress = threading.Condition()
        answered, streaming = [0], [0]

        def stream_started(st):
            if st == 200:
                with progress:
                    streaming[0] += 1
                    progress.notify_all()

        def count(what):
            with lock:
                tally[what] = tally.get(what, 0) + 1

        def worker(tid):
            rng = random.Random(1000 + tid)
            client = Client(srv)
            while not stop.is_set() and time.time() < deadline:
                pick = rng.randrange(10)
                if pick < 4:
                    req = completion_request(rng, True, 200)
                elif pick < 5:
                    req = completion_request(rng, False, 32)
                else:
                    req = mlp_request(input_name, rng)
                is_stream = req["kind"] == "stream"
                phase, st, hdrs, data, err = client.send(req, stream_started if is_stream else None)
                with progress:
                    streaming[0] -= is_stream and phase in ("header", "done") and st == 200
                    answered[0] += phase == "done"
                    progress.notify_all()
                after_term = term_at[0] is not None
                if phase == "connect":
                    if term_at[0] is None:
                        fail(f"drain: connect failed before SIGTERM: {err}")
                    count("refused (listener closed)")
                    return  # the server is going away
                if phase == "sent":
                    # Written, but the connection closed with no answer: not accepted. Only allowed once
                    # the drain began (idle keep-alive connections are closed then).
                    if not after_term:
                        fail(f"drain: {req['kind']} got no answer before SIGTERM: {type(err).__name__} {err}")
                    elif client.sent_at is not None and client.sent_at < term_at[0] - 0.5:
                        fail(f"drain: {req['kind']} written {term_at[0] - client.sent_at:.2f} s before SIGTERM got "
                             f"no answer: {type(err).__name__} {err}")
                    count("closed before an answer (not accepted)")
                    continue
                if phase == "header":
                    fail(f"drain: {req['kind']} answer {st} started but ended incomplete "
                         f"({'after' if after_term else 'before'} SIGTERM): {type(err).__name__} {err}")
                    count(f"{st} truncated")
                    continue
                if st == 200:
                    why = check_ok_body(req, data)
                    if why:
                        fail(f"drain: bad 200 body for {req['kind']}: {why}")
                    count(f"200 {req['kind']}")
                elif st == 503:
                    try:
                        json.loads(data)["error"]
                    except (ValueError, KeyError, TypeError):
                        fail(f"drain: 503 body is not complete JSON: {data[:200]!r}")
                    if not after_term:
                        fail("drain: 503 before SIGTERM")
                    count("503")
                elif st == 429:  # --max-queue 64 should avoid these; still a complete answer
                    count("429")
                else:
                    fail(f"drain: status {st} for {req['kind']}: {data[:300]!r}")
                    count(str(st))
            client.close()

        threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(DRAIN_CLIENTS)]
        t0 = time.time()
        for t in threads:
            t.start()
        with progress:
            if not progress.wait_for(lambda: answered[0] >= DRAIN_AFTER_ANSWERS and streaming[0] > 0,
                                     timeout=DRAIN_CAP_S):
                fail(f"drain: the load never got under way ({answered[0]} answers, {streaming[0]} streams)")
        term_at[0] = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        try:
            rc = srv.proc.wait(timeout=DRAIN_TIMEOUT_S + 5)
            exit_s = time.time() - term_at[0]
            print(f"drain: the server exited {rc} {exit_s:.2f} s after SIGTERM")
            if rc != 0:
                fail(f"drain: the server exited {rc} after SIGTERM: {srv.stderr()}")
        except subprocess.TimeoutExpired:
            fail(f"drain: the server still runs {DRAIN_TIMEOUT_S + 5} s after SIGTERM (--drain-timeout "
                 f"{DRAIN_TIMEOUT_S})")
        stop.set()
        for t in threads:
            t.join(max(0.0, deadline + SOCKET_TIMEOUT - time.time()))
        if any(t.is_alive() for t in threads):
            fail("drain: client threads still blocked after the server exited")
        print(f"drain: {time.time() - t0:.1f} s; outcomes:", dict(sorted(tally.items())))
        err = srv.stderr()
        if "drain timeout reached" in err:
            fail("drain: the server reported 'drain timeout reached': accepted requests were cut")
        if sum(n for k, n in tally.items() if k.startswith("200")) == 0:
            fail("drain: no request completed at all")
        if not any(k.startswith("200 stream") for k in tally):
            fail("drain: no streamed completion finished; the drain did not cover a long request")
    finally:
        srv.kill()


# ------------------------------------------------------------------------------------ flush
def wait_listener_closed(srv, cap_s):
    """True once a connect to the server is refused (a drain closes the listener first), False after cap_s."""
    deadline = time.time() + cap_s
    while time.time() < deadline:
        try:
            socket.create_connection((srv.host, srv.port), timeout=SOCKET_TIMEOUT).close()
        except ConnectionRefusedError:
            return True
        except OSError:
            pass
        time.sleep(0.01)  # poll interval of a condition check, not a guess at how long something takes
    return False


def flush_test(gantry, models):
    """An answered response still being written when SIGTERM arrives (the client reads slowly) must
    be written out in full before the server exits: draining means every accepted request gets its
    whole answer, not just that the handler finished."""
    rows = 50000  # output [rows, 10] as JSON: megabytes, more than loopback socket buffers hold
    print(f"== flush: a {rows}-row MLP answer read slowly across SIGTERM", flush=True)
    srv = Server(gantry, models, ["--drain-timeout", "10"])
    try:
        status, _, meta = srv.request("GET", f"/v2/models/{MLP}")
        assert status == 200, meta
        input_name = json.loads(meta)["inputs"][0]["name"]
        raw = struct.pack(f"<{rows * 64}f", *([0.25] * (rows * 64)))
        head = json.dumps({"inputs": [{"name": input_name, "datatype": "FP32", "shape": [rows, 64],
                                       "parameters": {"binary_data_size": len(raw)}}]}).encode()
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # keep the answer in the server's hands
        s.settimeout(SOCKET_TIMEOUT)
        s.connect((srv.host, srv.port))
        s.sendall(f"POST /v2/models/{MLP}/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                  f"Inference-Header-Content-Length: {len(head)}\r\nContent-Length: {len(head) + len(raw)}\r\n\r\n"
                  .encode() + head + raw)
        first = s.recv(4096)  # the answer started: it waits on our window, the rest in the server's hands
        srv.proc.send_signal(signal.SIGTERM)
        # Read on only once the drain has begun (its listener refuses connections): a wrong drain would
        # close this connection from then on, a correct one waits for the write.
        if not wait_listener_closed(srv, DRAIN_CAP_S):
            fail(f"flush: the listener still accepts {DRAIN_CAP_S} s after SIGTERM")
        data = first
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        head_bytes, _, body = data.partition(b"\r\n\r\n")
        lines = head_bytes.decode(errors="replace").split("\r\n")
        length = next((int(l.split(":", 1)[1]) for l in lines if l.lower().startswith("content-length:")), -1)
        body = bytearray(body)
        try:
            while len(body) < length:  # until the whole answer, the connection's end, or the timeout
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                body += chunk
        except OSError as e:
            print(f"flush: read ended with {type(e).__name__} {e}")
        s.close()
        print(f"flush: {lines[0]}, Content-Length {length}, received {len(body)} body bytes")
        if not lines[0].startswith("HTTP/1.1 200") or len(body) != length:
            fail(f"flush: the answer was cut by the drain: {lines[0]!r}, {len(body)} of {length} body bytes "
                 f"(the drain ended while the response was still being written)")
        else:
            out = json.loads(body)["outputs"][0]
            if out["shape"] != [rows, 10]:
                fail(f"flush: output shape {out['shape']}")
        try:
            rc = srv.proc.wait(timeout=15)
            if rc != 0:
                fail(f"flush: the server exited {rc}")
        except subprocess.TimeoutExpired:
            fail("flush: the server still runs 15 s after SIGTERM (--drain-timeout 10)")
    finally:
        srv.kill()


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: serve_load_test.py GANTRY_BINARY MODELS_DIR")
    gantry, models = sys.argv[1], sys.argv[2]
    which = os.environ.get("GANTRY_LOAD_TESTS", "load,drain,flush").split(",")
    t0 = time.time()
    if "load" in which:
        load_test(gantry, models)
    if "drain" in which:
        drain_test(gantry, models)
    if "flush" in which:
        flush_test(gantry, models)
    print(f"serve_load: {time.time() - t0:.1f} s, {len(failures)} failures")
    if failures:
        print(f"serve_load: FAILED ({len(failures)}):")
        for f in failures[:20]:
            print("  -", f)
        sys.exit(1)
    print("serve_load: all passed")


if __name__ == "__main__":
    main()
