#!/usr/bin/env python3
"""`gantry serve` under attack: the requests that once killed or exhausted it, replayed over raw sockets.

Usage: serve_hostile_test.py GANTRY_BINARY MODELS_DIR [TEST...]   (run by tests/scripts/serve_hostile.sh)

Each class is one class of attack from issue 21; every test ends by checking that the server process is
alive and answers. Everything is bounded: sockets have timeouts, loops have counts.
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

import serve_process


def without_vllm_names(metrics: bytes) -> bytes:
    """The exposition without vLLM's router series (vllm:num_requests_waiting, ...): the Gateway API inference
    extension scrapes them by those names, whose ':' Prometheus reserves for recording rules, so promtool's lint
    (exit 3) would refuse them. Everything of Gantry's own stays linted."""
    return b"".join(line for line in metrics.splitlines(keepends=True)
                    if not re.match(rb"(# (HELP|TYPE) )?vllm:", line))

GANTRY, MODELS = sys.argv[1], sys.argv[2]
MLP, SILERO, LLAMA = "mlp_64_128_10", "silero_vad_v5", "tiny-llama"
TIMEOUT = 30
KEY = "hostile-test-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}
DEEP = 100_000

servers = {}


def model(name):
    return os.path.join(MODELS, {"mlp": "mlp_64_128_10.onnx", "silero": "silero_vad_v5.onnx",
                                 "llama": "tiny-llama.gguf"}[name])


def setUpModule():
    keydir = tempfile.mkdtemp(prefix="gantry-hostile-")
    keyfile = os.path.join(keydir, "key")
    with open(keyfile, "w") as f:
        f.write(KEY + "\n")
    # keyed: the three bundled models behind an API key.
    servers["keyed"] = serve_process.Server(GANTRY, [model("mlp"), model("silero"), model("llama"),
                                                     "--api-key-file", keyfile, "--ctx", "512", "--parallel", "2",
                                                     "--threads", "1"])
    # small: one worker (head-of-line).
    servers["small"] = serve_process.Server(GANTRY, [model("llama"), "--ctx", "512", "--parallel", "1",
                                                     "--threads", "1", "--workers", "1"])
    # limits: few connections, short timeouts.
    servers["limits"] = serve_process.Server(GANTRY, [model("silero"), "--threads", "1", "--max-connections", "16",
                                                      "--header-timeout", "2", "--body-timeout", "1"])
    # rss: a fresh process for the memory bounds (VmHWM is a high-water mark since start).
    servers["rss"] = serve_process.Server(GANTRY, [model("silero"), "--threads", "1"])


def tearDownModule():
    for s in servers.values():
        s.kill()


# ------------------------------------------------------------------------------------------ raw HTTP
def connect(srv):
    return srv.raw_socket(TIMEOUT)


def read_head(sock, buf=b""):
    """Reads one response head; returns (status, headers dict lower-case, the bytes after the head)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a complete response head (got {buf[:200]!r})")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, v = line.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    return status, headers, rest


def read_response(sock, buf=b""):
    """One whole Content-Length response: (status, headers, body, leftover bytes)."""
    status, headers, rest = read_head(sock, buf)
    n = int(headers.get("content-length", "0"))
    while len(rest) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed inside the body")
        rest += chunk
    return status, headers, rest[:n], rest[n:]


def read_until_closed(sock, buf=b""):
    """Everything until the server closes; fails (socket timeout) if it never does."""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return buf
        buf += chunk


def raw(srv, data, close_expected=True):
    """Sends `data`, reads one response; with close_expected, also that the server then closes."""
    s = connect(srv)
    try:
        s.sendall(data)
        status, headers, body, rest = read_response(s)
        trailing = read_until_closed(s, rest) if close_expected else rest
        return status, headers, body, trailing
    finally:
        s.close()


class Base(unittest.TestCase):
    def assert_alive(self, srv):
        self.assertTrue(srv.alive(), "the server process died: " + srv.stderr())
        self.assertEqual(srv.request("GET", "/v2/health/live")[0], 200)

    def post_json(self, srv, path, body, auth=True):
        return srv.request("POST", path, json.dumps(body).encode(),
                           {"Content-Type": "application/json", **(AUTH if auth else {})})

    def assert_error(self, result, status, *phrases):
        code, headers, body = result
        self.assertEqual(code, status, body[:500])
        for p in phrases:
            self.assertIn(p, body.decode(errors="replace"))


def deep(n, leaf="1"):
    return "[" * n + leaf + "]" * n


# ------------------------------------------------------------------------------------------ 1-3: crashes
class SingleRequestsThatKilled(Base):
    def test_chunked_trailers_over_64k_on_a_health_route(self):
        srv = servers["keyed"]
        for trailer in (b"X-Pad: " + b"a" * 70_000 + b"\r\n", b"X-Pad: " + b"a" * 1_000_000 + b"\r\n",
                        b"X-P: aaaaaaaaaaaaaaaa\r\n" * 5000):
            with self.subTest(trailer_bytes=len(trailer)):
                data = (b"POST /v2/health/live HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"5\r\nhello\r\n0\r\n" + trailer + b"\r\n")
                s = connect(srv)
                try:
                    try:
                        s.sendall(data)
                        status, headers, _, _ = read_response(s)
                        self.assertIn(status, (400, 413, 431))
                        self.assertEqual(headers.get("connection"), "close")
                    except (ConnectionError, OSError):
                        pass  # closing that one connection is an answer too; the server must live on
                finally:
                    s.close()
                self.assert_alive(srv)

    def test_deep_json_in_every_protocol_is_400(self):
        srv = servers["keyed"]
        kserve = ('{"parameters":{"x":' + deep(DEEP) + '},"inputs":[{"name":"input","datatype":"FP32",'
                  '"shape":[1,64],"data":[' + ",".join(["0"] * 64) + "]}]}")
        openai = ('{"model":"' + LLAMA + '","messages":[{"role":"user","content":"hi"}],"max_tokens":2,'
                  '"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":'
                  + '{"type":"array","items":' * 2000 + '{"type":"object","x":' + deep(DEEP) + "}" + "}" * 2000
                  + "}}}")
        ollama = '{"model":"' + LLAMA + '","prompt":"hi","stream":false,"format":{"x":' + deep(DEEP) + "}}"
        for path, body in ((f"/v2/models/{MLP}/infer", kserve), ("/v1/chat/completions", openai),
                           ("/api/generate", ollama)):
            with self.subTest(path=path):
                code, _, reply = srv.request("POST", path, body.encode(), {"Content-Type": "application/json", **AUTH})
                self.assertEqual(code, 400, reply[:300])
                self.assertIn("deep", reply.decode().lower())
        self.assert_alive(srv)

    def test_a_20000_deep_items_schema_is_refused(self):
        srv = servers["keyed"]
        schema = '{"type":"array","items":' * 20_000 + '{"type":"string"}' + "}" * 20_000
        body = ('{"model":"' + LLAMA + '","messages":[{"role":"user","content":"hi"}],"max_tokens":2,'
                '"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":' + schema + "}}}")
        code, _, reply = srv.request("POST", "/v1/chat/completions", body.encode(),
                                     {"Content-Type": "application/json", **AUTH})
        self.assertEqual(code, 400, reply[:300])
        self.assert_alive(srv)

    def test_a_20000_property_schema_is_refused_and_generation_goes_on(self):
        srv = servers["keyed"]
        props = {f"p{i}": {"type": "integer"} for i in range(20_000)}
        body = {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
                    "type": "object", "properties": props}}}}
        code, _, reply = self.post_json(srv, "/v1/chat/completions", body)
        self.assertEqual(code, 400, reply[:300])
        ok = self.post_json(srv, "/v1/chat/completions",
                            {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
        self.assertEqual(ok[0], 200, ok[2][:300])

    def test_silero_with_a_zero_batch_or_mismatched_state_is_400(self):
        srv = servers["keyed"]

        def silero(batch, state_batch, n=512):
            return {"inputs": [
                {"name": "input", "datatype": "FP32", "shape": [batch, n], "data": [0.0] * (batch * n)},
                {"name": "state", "datatype": "FP32", "shape": [2, state_batch, 128],
                 "data": [0.0] * (2 * state_batch * 128)},
                {"name": "sr", "datatype": "INT64", "shape": [], "data": [16000]}]}

        path = f"/v2/models/{SILERO}/infer"
        self.assert_error(self.post_json(srv, path, silero(0, 0)), 400, "input")
        self.assert_error(self.post_json(srv, path, silero(0, 1)), 400)
        self.assert_error(self.post_json(srv, path, silero(2, 1)), 400)
        self.assert_error(self.post_json(srv, path, silero(1, 1, n=0)), 400)
        self.assertEqual(self.post_json(srv, path, silero(1, 1))[0], 200)
        self.assert_alive(srv)


# ------------------------------------------------------------------------------------------ 4: exhaustion
class StrangersCannotExhaust(Base):
    def test_bodies_on_routes_without_a_key_are_refused_unbuffered(self):
        srv = servers["rss"]
        before = srv.status_field("VmHWM")
        big = 60 << 20
        results = []

        def one(i):
            s = connect(srv)
            try:
                if i % 2 == 0:  # a declared length: refused from the header alone
                    s.sendall(f"POST /v2/health/live HTTP/1.1\r\nHost: x\r\nContent-Length: {big}\r\n\r\n".encode())
                    status, headers, _, _ = read_response(s)
                else:  # chunked: refused as the bytes arrive
                    s.sendall(b"POST /v2/health/ready HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
                    chunk = b"100000\r\n" + b"a" * 0x100000 + b"\r\n"
                    status = None
                    try:
                        for _ in range(60):
                            s.sendall(chunk)
                    except OSError:
                        pass  # the server stopped reading: its answer is waiting
                    status, headers, _, _ = read_response(s)
                results.append((status, headers.get("connection")))
            except (OSError, ConnectionError) as e:
                results.append((repr(e), None))
            finally:
                s.close()

        threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT * 2)
        self.assertEqual(len(results), 16)
        for status, conn in results:
            self.assertEqual((status, conn), (413, "close"))
        grown = srv.status_field("VmHWM") - before
        print(f"\n  16 x 60 MB bodies on unauthenticated routes: peak RSS grew {grown / 2**20:.1f} MiB",
              file=sys.stderr)
        self.assertLess(grown, 64 << 20)
        self.assert_alive(srv)

    def test_only_served_models_become_metric_labels(self):
        srv = servers["keyed"]
        base = len(srv.request("GET", "/metrics", headers=AUTH)[2])
        c = srv.conn()
        try:
            for i in range(300):
                c.request("GET", f"/v2/models/{'n' * 8192}{i}", headers={})
                r = c.getresponse()
                r.read()
                self.assertEqual(r.status, 401)
            for name in ("%FF%FE", "%C0%AF"):
                c.request("GET", f"/v2/models/{name}/ready", headers=AUTH)
                r = c.getresponse()
                r.read()
                self.assertEqual(r.status, 404)
        finally:
            c.close()
        code, _, text = srv.request("GET", "/metrics", headers=AUTH)
        self.assertEqual(code, 200)
        self.assertNotIn(b"nnnnnnnn", text)
        self.assertLess(len(text), base + 16384)
        check = subprocess.run(["promtool", "check", "metrics"], input=without_vllm_names(text), capture_output=True,
                               timeout=30)
        self.assertEqual(check.returncode, 0, check.stderr.decode() + check.stdout.decode())

    def test_connection_limit_answers_503_and_frees_slots(self):
        srv = servers["limits"]  # --max-connections 16
        held = []
        refused = None
        try:
            # Open connections until one is refused; each one held is proven accepted by a keep-alive answer.
            for _ in range(17):
                s = connect(srv)
                s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
                status, headers, _, rest = read_response(s)
                if status == 200:
                    held.append(s)
                    continue
                refused = (status, headers, read_until_closed(s, rest))
                s.close()
                break
            self.assertIsNotNone(refused, "17 connections were all accepted with --max-connections 16")
            status, headers, trailing = refused
            self.assertEqual(status, 503)
            self.assertEqual(headers.get("connection"), "close")
            self.assertIn("retry-after", headers)
            self.assertEqual(trailing, b"")
            self.assertLessEqual(len(held), 16)
        finally:
            for s in held:
                s.close()
        # The slots come back as the server sees the closes: bounded retries, each one a real request.
        for _ in range(200):
            s = connect(srv)
            try:
                s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if read_response(s)[0] == 200:
                    break
            finally:
                s.close()
        else:
            self.fail("no connection slot came back after closing the held connections")

    def test_metadata_is_answered_while_every_worker_is_busy(self):
        srv = servers["small"]  # --workers 1
        texts = ["the quick brown fox jumps over the lazy dog " * 40] * 8  # ~1.5 s of work each
        done, first_done = [], threading.Event()
        mu = threading.Lock()

        def embed():
            code = self.post_json(srv, "/v1/embeddings", {"model": LLAMA, "input": texts}, auth=False)[0]
            with mu:
                done.append(code)
            first_done.set()

        threads = [threading.Thread(target=embed) for _ in range(6)]
        for t in threads:
            t.start()
        # Once one embedding is answered, the others are queued for the single worker.
        self.assertTrue(first_done.wait(TIMEOUT * 4))
        code, _, body = srv.request("GET", "/v1/models")
        with mu:
            finished_before = len(done)
        for t in threads:
            t.join(TIMEOUT * 4)
        self.assertEqual(code, 200, body)
        self.assertEqual(done, [200] * 6)
        # Behind the one worker busy with the embeddings, /v1/models would have come after all of them
        # (the last one's client may not have counted it yet, hence not "< 6"); on its own pool it comes
        # while most (each ~1 s of work) are still running.
        self.assertLessEqual(finished_before, 3)


# ------------------------------------------------------------------------------------------ 5: truth
class AnswersTellTheTruth(Base):
    def test_early_answers_say_connection_close_and_close(self):
        srv = servers["keyed"]
        cases = [
            (b"POST /v2/models/" + MLP.encode() + b"/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n", 401),
            (b"GET /v2/models/" + MLP.encode() + b"/infer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
             KEY.encode() + b"\r\nContent-Length: 10\r\n\r\n", 405),
        ]
        for head, want in cases:
            with self.subTest(want=want):
                status, headers, _, trailing = raw(srv, head + b"0123456789")
                self.assertEqual(status, want)
                self.assertEqual(headers.get("connection"), "close")
                self.assertEqual(trailing, b"")

    def test_a_keep_alive_client_survives_early_answers(self):
        srv = servers["keyed"]
        c = srv.conn()  # http.client reopens when told Connection: close, fails when reset unannounced
        try:
            for i in range(40):
                auth = AUTH if i % 2 else {}
                if i % 4 < 2:
                    c.request("POST", f"/v2/models/{MLP}/infer", body=b'{"inputs":[]}',
                              headers={"Content-Type": "application/json", **auth})
                else:
                    c.request("GET", "/v1/models", headers=auth)
                r = c.getresponse()
                r.read()
                want = (200 if i % 4 >= 2 else 400) if auth else 401
                self.assertEqual(r.status, want, i)
        finally:
            c.close()

    def test_head_has_no_body(self):
        srv = servers["keyed"]
        s = connect(srv)
        try:
            s.sendall(b"HEAD /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\nGET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            status, headers, rest = read_head(s)
            self.assertEqual(status, 200)
            # The next bytes are the second response's status line, not a body.
            while len(rest) < 9:
                rest += s.recv(65536)
            self.assertTrue(rest.startswith(b"HTTP/1.1 "), rest[:100])
            status2, _, body2, _ = read_response(s, rest)
            self.assertEqual(status2, 200)
            self.assertIn(b"live", body2)
        finally:
            s.close()

    def test_expect_100_continue(self):
        srv = servers["keyed"]
        body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 512], "data": [0.0] * 512},
                                      {"name": "state", "datatype": "FP32", "shape": [2, 1, 128], "data": [0.0] * 256},
                                      {"name": "sr", "datatype": "INT64", "shape": [], "data": [16000]}]}).encode()
        s = connect(srv)
        try:
            s.sendall(f"POST /v2/models/{SILERO}/infer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                      f"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n".encode())
            status, _, rest = read_head(s)
            self.assertEqual(status, 100)
            s.sendall(body)
            status, _, reply, _ = read_response(s, rest)
            self.assertEqual(status, 200, reply[:300])
        finally:
            s.close()
        # Refused before the body: the answer comes instead of 100, and the connection closes.
        s = connect(srv)
        try:
            s.sendall(f"POST /v2/models/{SILERO}/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n".encode())
            status, headers, _, _ = read_response(s)
            self.assertEqual(status, 401)
            self.assertEqual(headers.get("connection"), "close")
        finally:
            s.close()

    def test_a_slow_body_gets_408(self):
        srv = servers["limits"]  # --body-timeout 1
        s = connect(srv)
        try:
            s.sendall(b"POST /v2/models/silero_vad_v5/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\"")
            status, headers, body, _ = read_response(s)  # waits for the server's timeout, not ours
            self.assertEqual(status, 408, body)
            self.assertEqual(headers.get("connection"), "close")
        finally:
            s.close()

    def test_a_malformed_chunk_size_is_400(self):
        srv = servers["keyed"]
        status, headers, _, _ = raw(srv, b"POST /v2/health/live HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                         b"\r\nzz\r\nhello\r\n0\r\n\r\n")
        self.assertEqual(status, 400)
        self.assertEqual(headers.get("connection"), "close")

    def test_transfer_encodings_other_than_chunked_are_refused_not_smuggled(self):
        srv = servers["keyed"]
        smuggled = b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n"
        for te in (b"xchunked", b"chunked, identity", b"gzip", b"identity"):
            with self.subTest(te=te):
                data = (b"POST /v2/health/live HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + te +
                        b"\r\nContent-Type: text/plain\r\n\r\n" + smuggled)
                status, headers, _, trailing = raw(srv, data)
                self.assertIn(status, (400, 501))
                self.assertEqual(headers.get("connection"), "close")
                self.assertNotIn(b"HTTP/1.1", trailing)  # no answer to a second, smuggled request

    def test_a_prompt_longer_than_the_context_is_400_on_every_protocol(self):
        srv = servers["keyed"]
        prompt = "word " * 3000
        cases = [
            ("/v1/completions", {"model": LLAMA, "prompt": prompt, "max_tokens": 2}),
            ("/v1/chat/completions", {"model": LLAMA, "messages": [{"role": "user", "content": prompt}],
                                      "max_tokens": 2}),
            ("/api/generate", {"model": LLAMA, "prompt": prompt, "stream": False, "options": {"num_predict": 2}}),
            ("/api/chat", {"model": LLAMA, "messages": [{"role": "user", "content": prompt}], "stream": False,
                           "options": {"num_predict": 2}}),
            (f"/v2/models/{LLAMA}/infer", {"inputs": [{"name": "prompt", "datatype": "BYTES", "shape": [1],
                                                       "data": [prompt]}]}),
        ]
        for path, body in cases:
            with self.subTest(path=path):
                code, headers, reply = self.post_json(srv, path, body)
                self.assertEqual(code, 400, reply[:300])
                self.assertNotIn("retry-after", headers)

    def test_the_in_flight_gauge_does_not_count_the_scrape(self):
        srv = servers["rss"]
        text = srv.request("GET", "/metrics")[2].decode()
        line = [l for l in text.splitlines() if l.startswith("gantry_inflight_requests")]
        self.assertEqual(line, ["gantry_inflight_requests 0"])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v", *sys.argv[3:]])  # then test names, to run only those
