#!/usr/bin/env python3
"""Every `gantry serve` endpoint and error, through a real HTTP client (Python's http.client).

Run by tests/scripts/serve_http.sh, which starts the servers and sets:
  GANTRY_URL      a server with the MLP, Silero and tiny-llama, no key, --max-body-size 1MiB, --ctx 512
  GANTRY_KEY_URL  a server with an API key (GANTRY_KEY)
"""
import base64
import http.client
import json
import os
import re
import socket
import struct
import subprocess
import time
import unittest
import urllib.parse


def without_vllm_names(metrics: bytes) -> bytes:
    """The exposition without vLLM's router series (vllm:num_requests_waiting, ...): the Gateway API inference
    extension scrapes them by those names, whose ':' Prometheus reserves for recording rules, so promtool's lint
    (exit 3) would refuse them. Everything of Gantry's own stays linted."""
    return b"".join(line for line in metrics.splitlines(keepends=True)
                    if not re.match(rb"(# (HELP|TYPE) )?vllm:", line))

URL = urllib.parse.urlparse(os.environ["GANTRY_URL"])
KEY_URL = urllib.parse.urlparse(os.environ["GANTRY_KEY_URL"])
KEY = os.environ["GANTRY_KEY"]
MLP, SILERO, LLAMA = "mlp_64_128_10", "silero_vad_v5", "tiny-llama"
TIMEOUT = 60


def request(method, path, body=None, headers=None, url=URL):
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=TIMEOUT)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        conn.close()


def get_json(method, path, body=None, headers=None, url=URL):
    status, hdrs, data = request(method, path, body, headers, url)
    return status, hdrs, (json.loads(data) if data else None)


def mlp_input(value=0.5, rows=1):
    return [[value * ((i % 7) - 3) for i in range(64)] for _ in range(rows)]


class KServe(unittest.TestCase):
    def test_health_and_server_metadata(self):
        self.assertEqual(request("GET", "/v2/health/live")[0], 200)
        self.assertEqual(request("GET", "/v2/health/ready")[0], 200)
        status, _, meta = get_json("GET", "/v2")
        self.assertEqual(status, 200)
        self.assertEqual(meta["name"], "gantry")
        self.assertIn("binary_tensor_data", meta["extensions"])

    def test_model_metadata_and_ready_with_and_without_version(self):
        for path in (f"/v2/models/{MLP}", f"/v2/models/{MLP}/versions/1"):
            status, _, meta = get_json("GET", path)
            self.assertEqual(status, 200, meta)
            self.assertEqual(meta["name"], MLP)
            self.assertEqual(meta["inputs"][0]["datatype"], "FP32")
            self.assertEqual(meta["inputs"][0]["shape"], [-1, 64])
        self.assertEqual(request("GET", f"/v2/models/{MLP}/ready")[0], 200)
        self.assertEqual(request("GET", f"/v2/models/{MLP}/versions/1/ready")[0], 200)
        self.assertEqual(request("GET", f"/v2/models/{MLP}/versions/7")[0], 404)

    def test_infer_json_echoes_id_and_gives_outputs(self):
        body = {"id": "req-42", "inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 64],
                                            "data": mlp_input(0.25, rows=2)}]}
        meta = get_json("GET", f"/v2/models/{MLP}")[2]
        body["inputs"][0]["name"] = meta["inputs"][0]["name"]
        status, _, out = get_json("POST", f"/v2/models/{MLP}/infer", body)
        self.assertEqual(status, 200, out)
        self.assertEqual(out["id"], "req-42")
        self.assertEqual(out["model_name"], MLP)
        self.assertEqual(out["outputs"][0]["shape"], [2, 10])
        self.assertEqual(len(out["outputs"][0]["data"]), 20)
        # Both rows had the same input: the same answer.
        self.assertEqual(out["outputs"][0]["data"][:10], out["outputs"][0]["data"][10:])

    def test_infer_binary_tensors_both_ways(self):
        meta = get_json("GET", f"/v2/models/{MLP}")[2]
        name, out_name = meta["inputs"][0]["name"], meta["outputs"][0]["name"]
        values = [v for row in mlp_input(0.1) for v in row]
        raw = struct.pack(f"<{len(values)}f", *values)
        header = json.dumps({"inputs": [{"name": name, "datatype": "FP32", "shape": [1, 64],
                                         "parameters": {"binary_data_size": len(raw)}}],
                             "outputs": [{"name": out_name, "parameters": {"binary_data": True}}]}).encode()
        status, hdrs, data = request("POST", f"/v2/models/{MLP}/infer", header + raw,
                                     {"Inference-Header-Content-Length": str(len(header)),
                                      "Content-Type": "application/octet-stream"})
        self.assertEqual(status, 200, data[:300])
        n = int(hdrs["inference-header-content-length"])
        head = json.loads(data[:n])
        size = head["outputs"][0]["parameters"]["binary_data_size"]
        self.assertEqual(size, 40)
        binary = struct.unpack("<10f", data[n:n + size])
        # The same input as JSON gives the same numbers.
        status, _, js = get_json("POST", f"/v2/models/{MLP}/infer",
                                 {"inputs": [{"name": name, "datatype": "FP32", "shape": [1, 64], "data": values}]})
        self.assertEqual(status, 200)
        for a, b in zip(binary, js["outputs"][0]["data"]):
            self.assertAlmostEqual(a, b, places=5)

    def test_infer_silero(self):
        body = {"inputs": [
            {"name": "input", "datatype": "FP32", "shape": [1, 512], "data": [0.0] * 512},
            {"name": "state", "datatype": "FP32", "shape": [2, 1, 128], "data": [0.0] * 256},
            {"name": "sr", "datatype": "INT64", "shape": [], "data": [16000]}]}
        status, _, out = get_json("POST", f"/v2/models/{SILERO}/infer", body)
        self.assertEqual(status, 200, out)
        names = [o["name"] for o in out["outputs"]]
        self.assertIn("output", names)
        prob = out["outputs"][names.index("output")]["data"][0]
        self.assertTrue(0.0 <= prob <= 1.0)

    def test_silero_empty_or_mismatched_inputs_are_400_and_the_server_lives(self):
        def silero(batch, width=512, state_batch=None):
            sb = batch if state_batch is None else state_batch
            return get_json("POST", f"/v2/models/{SILERO}/infer", {"inputs": [
                {"name": "input", "datatype": "FP32", "shape": [batch, width], "data": [0.0] * (batch * width)},
                {"name": "state", "datatype": "FP32", "shape": [2, sb, 128], "data": [0.0] * (256 * sb)},
                {"name": "sr", "datatype": "INT64", "shape": [], "data": [16000]}]})
        # The zero batch made ONNX Runtime call std::terminate: the whole server died.
        self.assert_error(silero(0), 400, "input 'input': dimension 0 is 0")
        self.assert_error(silero(1, width=0), 400, "input 'input': dimension 1 is 0")
        self.assert_error(silero(2, state_batch=1), 400, "ONNX Runtime Run failed")  # was a 500
        status, _, out = silero(1)
        self.assertEqual(status, 200, out)
        self.assertEqual(request("GET", "/v2/health/live")[0], 200)

    def test_deep_json_is_400_and_the_server_lives(self):
        deep = "[" * 100000 + "]" * 100000
        body = ('{"parameters": {"p": ' + deep + '}, "inputs": []}').encode()
        status, _, data = request("POST", f"/v2/models/{MLP}/infer", body, {"Content-Type": "application/json"})
        self.assertEqual(status, 400, data[:300])
        self.assertIn("nests deeper than 64 levels", json.loads(data)["error"])
        schema = '{"type": "object", "default": ' + deep + '}'
        for path, doc in (("/v1/chat/completions", '{"model": "%s", "messages": [{"role": "user", "content": "x"}], '
                                                    '"response_format": {"type": "json_schema", "json_schema": '
                                                    '{"name": "x", "schema": %s}}}' % (LLAMA, schema)),
                          ("/api/generate", '{"model": "%s", "prompt": "x", "format": %s}' % (LLAMA, schema))):
            status, _, data = request("POST", path, doc.encode(), {"Content-Type": "application/json"})
            self.assertEqual(status, 400, data[:300])
            self.assertIn(b"nests deeper than 64 levels", data)
        self.assertEqual(request("GET", "/v2/health/live")[0], 200)

    def assert_error(self, status_and_body, want_status, phrase):
        status, _, body = status_and_body
        self.assertEqual(status, want_status, body)
        self.assertIsInstance(body["error"], str)
        self.assertIn(phrase, body["error"])

    def test_bad_inputs_are_400_with_a_reason(self):
        meta = get_json("GET", f"/v2/models/{MLP}")[2]
        name = meta["inputs"][0]["name"]
        path = f"/v2/models/{MLP}/infer"
        self.assert_error(get_json("POST", path, {"inputs": [{"name": name, "datatype": "FP32", "shape": [1, 63],
                                                              "data": [0.0] * 63}]}), 400, "64")
        self.assert_error(get_json("POST", path, {"inputs": [{"name": name, "datatype": "INT32", "shape": [1, 64],
                                                              "data": [0] * 64}]}), 400, "FP32")
        self.assert_error(get_json("POST", path, {"inputs": [{"name": "nope", "datatype": "FP32", "shape": [1, 64],
                                                              "data": [0.0] * 64}]}), 400, "nope")
        self.assert_error(get_json("POST", path, {"inputs": [{"name": name, "datatype": "FP32", "shape": [1, 64],
                                                              "data": [0.0] * 60}]}), 400, name)
        status, _, body = request("POST", path, b'{"inputs": [', {"Content-Type": "application/json"})
        self.assertEqual(status, 400)
        self.assertIn("error", json.loads(body))

    def test_truncated_binary_payload_is_400(self):
        meta = get_json("GET", f"/v2/models/{MLP}")[2]
        name = meta["inputs"][0]["name"]
        header = json.dumps({"inputs": [{"name": name, "datatype": "FP32", "shape": [1, 64],
                                         "parameters": {"binary_data_size": 256}}]}).encode()
        status, _, body = request("POST", f"/v2/models/{MLP}/infer", header + b"\0" * 100,
                                  {"Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(status, 400, body)
        self.assertIn(name, json.loads(body)["error"])

    def test_oversized_body_is_413(self):
        status, _, body = request("POST", f"/v2/models/{MLP}/infer", b"x" * (2 << 20),
                                  {"Content-Type": "application/json"})
        self.assertEqual(status, 413)
        self.assertIn("limit", json.loads(body)["error"])

    def test_unknown_model_and_route_are_404(self):
        self.assert_error(get_json("POST", "/v2/models/nope/infer", {"inputs": []}), 404, "nope")
        self.assert_error(get_json("GET", "/v2/models/nope"), 404, "nope")
        self.assertEqual(request("GET", "/v2/models/nope/ready")[0], 404)
        self.assertEqual(request("GET", "/nothing/here")[0], 404)
        self.assertEqual(request("GET", f"/v2/models/{MLP}/infer")[0], 405)

    def test_repository_index_unload_and_load(self):
        status, _, index = get_json("POST", "/v2/repository/index")
        self.assertEqual(status, 200)
        states = {m["name"]: m["state"] for m in index}
        self.assertEqual(states.get(SILERO), "READY", index)
        self.assertIn(LLAMA, states)
        self.assertEqual(request("POST", f"/v2/repository/models/{SILERO}/unload")[0], 200)
        self.assertEqual(request("GET", f"/v2/models/{SILERO}/ready")[0], 503)
        status, _, body = get_json("POST", f"/v2/models/{SILERO}/infer", {"inputs": []})
        self.assertEqual(status, 503, body)
        self.assertIn("/load", body["error"])
        self.assertEqual(request("POST", f"/v2/repository/models/{SILERO}/load")[0], 200)
        self.assertEqual(request("GET", f"/v2/models/{SILERO}/ready")[0], 200)
        self.assertEqual(request("POST", "/v2/repository/models/../etc/load")[0], 404)


def sse_events(path, body, url=URL):
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=TIMEOUT)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        return r.status, [json.loads(r.read())]
    events = []
    for raw in r.read().decode().split("\n\n"):
        raw = raw.strip()
        if not raw:
            continue
        assert raw.startswith("data: "), raw
        payload = raw[len("data: "):]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    conn.close()
    return r.status, events


class OpenAI(unittest.TestCase):
    def chat(self, **extra):
        body = {"model": LLAMA, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16,
                "temperature": 0, **extra}
        return get_json("POST", "/v1/chat/completions", body)

    def test_models(self):
        status, _, body = get_json("GET", "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(body["object"], "list")
        self.assertEqual({m["id"] for m in body["data"]}, {MLP, SILERO, LLAMA})
        self.assertEqual(get_json("GET", f"/v1/models/{LLAMA}")[2]["id"], LLAMA)
        self.assertEqual(get_json("GET", "/v1/models/nope")[0], 404)

    def test_chat(self):
        status, _, body = self.chat()
        self.assertEqual(status, 200, body)
        self.assertEqual(body["object"], "chat.completion")
        choice = body["choices"][0]
        self.assertEqual(choice["message"]["role"], "assistant")
        self.assertIn(choice["finish_reason"], ("stop", "length"))
        u = body["usage"]
        self.assertGreater(u["prompt_tokens"], 0)
        self.assertEqual(u["total_tokens"], u["prompt_tokens"] + u["completion_tokens"])
        self.assertLessEqual(u["completion_tokens"], 16)
        # Greedy with a seed: the same answer twice.
        self.assertEqual(self.chat()[2]["choices"][0]["message"]["content"], choice["message"]["content"])

    def test_chat_stream_matches_plain_and_ends_with_done(self):
        plain = self.chat()[2]["choices"][0]["message"]["content"]
        status, events = sse_events("/v1/chat/completions", {
            "model": LLAMA, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
        self.assertEqual(status, 200)
        self.assertEqual(events[-1], "[DONE]")
        chunks = events[:-1]
        self.assertTrue(all(c["object"] == "chat.completion.chunk" for c in chunks))
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        self.assertEqual(text, plain)
        self.assertIsNotNone(chunks[-1]["usage"])
        finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
        self.assertIn(finishes[-1], ("stop", "length"))

    def test_completions(self):
        status, _, body = get_json("POST", "/v1/completions",
                                   {"model": LLAMA, "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["object"], "text_completion")
        self.assertIsInstance(body["choices"][0]["text"], str)
        self.assertLessEqual(body["usage"]["completion_tokens"], 8)

    def test_embeddings_float_and_base64(self):
        status, _, f = get_json("POST", "/v1/embeddings", {"model": LLAMA, "input": ["hello", "world"]})
        self.assertEqual(status, 200, f)
        self.assertEqual(len(f["data"]), 2)
        vec = f["data"][0]["embedding"]
        self.assertGreater(len(vec), 0)
        self.assertGreater(f["usage"]["prompt_tokens"], 0)
        status, _, b = get_json("POST", "/v1/embeddings",
                                {"model": LLAMA, "input": "hello", "encoding_format": "base64"})
        self.assertEqual(status, 200, b)
        raw = base64.b64decode(b["data"][0]["embedding"])
        decoded = struct.unpack(f"<{len(raw) // 4}f", raw)
        self.assertEqual(len(decoded), len(vec))
        for x, y in zip(decoded, vec):
            self.assertAlmostEqual(x, y, places=5)

    def assert_openai_error(self, result, want_status, phrase=""):
        status, _, body = result
        self.assertEqual(status, want_status, body)
        err = body["error"]
        for key in ("message", "type", "param", "code"):
            self.assertIn(key, err)
        self.assertIn(phrase, err["message"])

    def test_errors(self):
        self.assert_openai_error(get_json("POST", "/v1/chat/completions",
                                          {"model": "nope", "messages": [{"role": "user", "content": "x"}]}),
                                 404, "nope")
        self.assert_openai_error(get_json("POST", "/v1/chat/completions", {"model": LLAMA, "n": 100,
                                                                          "messages": [{"role": "user", "content": "x"}]}),
                                 400, "'n' is 100")
        status, _, body = request("POST", "/v1/chat/completions", b"{not json", {"Content-Type": "application/json"})
        self.assertEqual(status, 400)
        self.assertIn("message", json.loads(body)["error"])
        self.assert_openai_error(get_json("POST", "/v1/chat/completions",
                                          {"model": MLP, "messages": [{"role": "user", "content": "x"}]}), 400, MLP)

    def test_prompt_longer_than_context_is_400_with_both_numbers(self):
        long_prompt = "word " * 3000
        status, _, body = get_json("POST", "/v1/completions", {"model": LLAMA, "prompt": long_prompt, "max_tokens": 4})
        self.assertEqual(status, 400, body)
        msg = body["error"]["message"]
        digits = [int(t) for t in msg.replace("(", " ").replace(")", " ").split() if t.isdigit()]
        self.assertTrue(any(d > 512 for d in digits) and any(d <= 512 for d in digits), msg)

    # A schema whose every document is short (bounded strings, enums, bounded whitespace): the grammar must
    # end the answer well within max_tokens, so the answer is checked every time, never only when it stops.
    BOUNDED_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["answer", "ok", "word"],
                      "properties": {"answer": {"enum": ["yes", "no"]}, "ok": {"type": "boolean"},
                                     "word": {"type": "string", "maxLength": 8}}}

    def test_json_schema_response_format_gives_a_document_of_the_schema(self):
        for seed, temperature in ((0, 0), (1, 1.0), (2, 1.0)):
            status, _, body = self.chat(max_tokens=256, temperature=temperature, seed=seed, response_format={
                "type": "json_schema", "json_schema": {"name": "r", "strict": True, "schema": self.BOUNDED_SCHEMA}})
            self.assertEqual(status, 200, body)
            choice = body["choices"][0]
            self.assertEqual(choice["finish_reason"], "stop", choice)
            doc = json.loads(choice["message"]["content"])
            self.assertEqual(set(doc), {"answer", "ok", "word"}, doc)
            self.assertIn(doc["answer"], ("yes", "no"))
            self.assertIsInstance(doc["ok"], bool)
            self.assertIsInstance(doc["word"], str)
            self.assertLessEqual(len(doc["word"]), 8)

    def test_json_object_response_format_starts_an_object(self):
        # Any object may go on for ever with this tiny model: it must at least start one, and be one when done.
        status, _, body = self.chat(max_tokens=32, response_format={"type": "json_object"})
        self.assertEqual(status, 200, body)
        choice = body["choices"][0]
        self.assertTrue(choice["message"]["content"].startswith("{"), choice)
        if choice["finish_reason"] == "stop":
            self.assertIsInstance(json.loads(choice["message"]["content"]), dict)

    def test_client_disconnect_frees_the_request(self):
        s = socket.create_connection((URL.hostname, URL.port), timeout=TIMEOUT)
        body = json.dumps({"model": LLAMA, "prompt": "Tell me", "max_tokens": 400, "stream": True,
                           "temperature": 1.0, "seed": 1}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        self.assertIn(b"200", s.recv(4096))
        s.close()
        deadline = time.time() + 10
        while time.time() < deadline:
            m = request("GET", "/metrics")[2].decode()
            inflight = [l for l in m.splitlines() if l.startswith("gantry_inflight_requests")]
            if inflight and float(inflight[0].split()[-1]) <= 1:  # the /metrics request itself
                return
            time.sleep(0.05)
        self.fail("the disconnected stream was still in flight after 10 s")


class OversizedPrompt(unittest.TestCase):
    """A prompt longer than the context (--ctx 512) is the request's fault on every protocol: 400 with a
    reason, never a retryable 429, streamed or not."""
    LONG = "word " * 3000

    def assert_400(self, got, phrase="context length exceeded"):
        status, hdrs, body = got
        self.assertEqual(status, 400, body)
        self.assertNotIn("retry-after", hdrs)
        err = body["error"]
        self.assertIn(phrase, err["message"] if isinstance(err, dict) else err)
        return err

    def test_kserve_infer(self):
        self.assert_400(get_json("POST", f"/v2/models/{LLAMA}/infer", {"inputs": [
            {"name": "prompt", "datatype": "BYTES", "shape": [1], "data": [self.LONG]}]}))

    def test_openai_chat_and_completions_plain_and_streamed(self):
        for path, fields, param in (("/v1/chat/completions", {"messages": [{"role": "user", "content": self.LONG}]},
                                     "messages"),
                                    ("/v1/completions", {"prompt": self.LONG}, "prompt")):
            for stream in (False, True):
                with self.subTest(path=path, stream=stream):
                    err = self.assert_400(get_json("POST", path, {"model": LLAMA, "max_tokens": 4, "stream": stream,
                                                                  **fields}))
                    self.assertEqual(err["code"], "context_length_exceeded")
                    self.assertEqual(err["param"], param)
                    self.assertEqual(err["type"], "invalid_request_error")

    def test_openai_embeddings(self):
        err = self.assert_400(get_json("POST", "/v1/embeddings", {"model": LLAMA, "input": ["hi", self.LONG]}))
        self.assertEqual(err["code"], "context_length_exceeded")

    def test_ollama_generate_chat_and_embed(self):
        for stream in (False, True):  # Ollama streams unless told not to
            with self.subTest(stream=stream):
                self.assert_400(get_json("POST", "/api/generate", {"model": LLAMA, "prompt": self.LONG,
                                                                   "stream": stream}))
                self.assert_400(get_json("POST", "/api/chat", {"model": LLAMA, "stream": stream, "messages": [
                    {"role": "user", "content": self.LONG}]}))
        self.assert_400(get_json("POST", "/api/embed", {"model": LLAMA, "input": self.LONG}))

    def test_the_model_still_answers(self):
        status, _, body = get_json("POST", "/api/generate", {"model": LLAMA, "prompt": "Hi", "stream": False,
                                                             "options": {"num_predict": 4}})
        self.assertEqual(status, 200, body)


class Auth(unittest.TestCase):
    def test_probes_need_no_key(self):
        self.assertEqual(request("GET", "/v2/health/live", url=KEY_URL)[0], 200)
        self.assertEqual(request("GET", "/v2/health/ready", url=KEY_URL)[0], 200)

    def test_missing_or_wrong_key_is_401_in_the_protocols_shape(self):
        status, hdrs, body = get_json("GET", "/v1/models", url=KEY_URL)
        self.assertEqual(status, 401)
        self.assertIn("message", body["error"])
        status, _, body = get_json("GET", f"/v2/models/{SILERO}", url=KEY_URL,
                                   headers={"Authorization": "Bearer wrong"})
        self.assertEqual(status, 401)
        self.assertIsInstance(body["error"], str)
        self.assertEqual(request("GET", "/metrics", url=KEY_URL)[0], 401)

    def test_right_key_in_any_header(self):
        for h in ({"Authorization": f"Bearer {KEY}"}, {"api-key": KEY}, {"x-api-key": KEY}):
            self.assertEqual(request("GET", "/v1/models", headers=h, url=KEY_URL)[0], 200, h)


class Metrics(unittest.TestCase):
    def test_promtool_accepts_and_series_are_there(self):
        # At least one of each kind recorded: a failed infer, a batch, a generation.
        get_json("POST", f"/v2/models/{MLP}/infer", {"inputs": []})
        meta = get_json("GET", f"/v2/models/{MLP}")[2]
        get_json("POST", f"/v2/models/{MLP}/infer", {"inputs": [{"name": meta["inputs"][0]["name"], "datatype": "FP32",
                                                                 "shape": [1, 64], "data": [0.0] * 64}]})
        get_json("POST", "/v1/completions", {"model": LLAMA, "prompt": "Hi", "max_tokens": 2})
        status, _, body = request("GET", "/metrics")
        self.assertEqual(status, 200)
        text = body.decode()
        check = subprocess.run(["promtool", "check", "metrics"], input=without_vllm_names(body), capture_output=True,
                               timeout=30)
        # promtool exits 0 when the text parses; lint warnings (if any) print but do not fail it.
        self.assertEqual(check.returncode, 0, check.stderr.decode() + check.stdout.decode())
        for series in ("gantry_requests_total", "gantry_request_duration_seconds_bucket", "gantry_models_loaded",
                       "gantry_memory_budget_bytes", "gantry_memory_used_bytes", "gantry_model_memory_bytes",
                       "gantry_queue_depth", "gantry_model_evictions_total", "gantry_prompt_tokens_total",
                       "gantry_time_to_first_token_seconds_bucket", "gantry_batch_size_bucket", "vllm:num_requests_waiting"):
            self.assertIn(series, text)



class PromptCache(unittest.TestCase):
    def test_a_repeated_prompt_comes_from_the_cache_with_the_same_text(self):
        body = {"model": LLAMA, "prompt": "The prompt cache keeps this sentence for the next request: one two three",
                "max_tokens": 6, "temperature": 0}
        status, _, first = get_json("POST", "/v1/completions", body)
        self.assertEqual(status, 200, first)
        status, _, second = get_json("POST", "/v1/completions", body)
        self.assertEqual(status, 200, second)
        n = second["usage"]["prompt_tokens"]
        self.assertEqual(second["usage"]["prompt_tokens_details"]["cached_tokens"], n - 1)
        self.assertEqual(second["choices"][0]["text"], first["choices"][0]["text"])
        # llama-server's cache_prompt: false evaluates the whole prompt again, with the same answer.
        status, _, off = get_json("POST", "/v1/completions", dict(body, cache_prompt=False))
        self.assertEqual(status, 200, off)
        self.assertEqual(off["usage"]["prompt_tokens_details"]["cached_tokens"], 0)
        self.assertEqual(off["choices"][0]["text"], first["choices"][0]["text"])
        status, _, bad = get_json("POST", "/v1/completions", dict(body, cache_prompt="no"))
        self.assertEqual(status, 400, bad)
        self.assertEqual(bad["error"]["param"], "cache_prompt")
        text = request("GET", "/metrics")[2].decode()
        cached = [line for line in text.splitlines()
                  if line.startswith("gantry_prompt_tokens_cached_total{") and f'model="{LLAMA}"' in line]
        self.assertEqual(len(cached), 1, text)
        self.assertGreaterEqual(float(cached[0].split()[-1]), n - 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
