#!/usr/bin/env python3
"""`gantry serve`'s model repository under attack (issue 34, items 3 and 8), against real servers on loopback.

Usage: serve_repository_faults_test.py GANTRY_BINARY MODELS_DIR [TEST...]   (run by
tests/scripts/serve_repository_faults.sh)

1. A killed pull: a server is SIGKILLed while /api/pull downloads (the pull source, an HTTP registry in this
   test, stalls after the first 4 MiB chunk, so the kill lands mid-download), leaving its
   `.NAME.gguf.partial-PID-N` (starting with GGUF) in --model-repository; a truncated model is added beside
   the good one. The restart with the same flags starts, serves the good model, reports the bad one as
   failed with its reason (readiness, the repository index, the model's readiness, requests for it),
   removes the dead server's partial and keeps a live process's.
2. Metadata starvation: /api/copy beyond --max-model-copies (and a name beyond 128 characters) is refused
   in Ollama's error shape; /api/tags over every copy reads the GGUF header once per version of the file
   (gantry_model_header_reads_total), not once per name per request, and again once the file changes.
Every test ends by checking that the server is alive and answers. Everything is bounded: sockets have
timeouts, waits have deadlines, loops have counts; the test waits on events, never on sleeps.
"""
import hashlib
import http.client
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

import serve_process

GANTRY, MODELS = sys.argv[1], sys.argv[2]
LLAMA = os.path.join(MODELS, "tiny-llama.gguf")
TIMEOUT = 60
CHUNK = 4 << 20  # ollama_pull.cpp's kChunkBytes: progress and the partial grow by this much
FLAGS = ["--ctx", "256", "--parallel", "1", "--threads", "1", "--grpc-port", "-1"]


def get_json(srv, method, path, body=None):
    status, _, data = srv.request(method, path, body)
    try:
        return status, json.loads(data) if data else None
    except ValueError:
        return status, data.decode(errors="replace")


def header_reads(srv):
    status, _, data = srv.request("GET", "/metrics")
    assert status == 200, status
    m = re.search(r"^gantry_model_header_reads_total (\S+)$", data.decode(), re.M)
    assert m, "gantry_model_header_reads_total missing from /metrics"
    return int(float(m.group(1)))


class StallingRegistry:
    """An HTTP registry speaking Ollama's API for one model, "big", whose blob stalls on its second 4 MiB
    chunk while `stall` is set: `reached` is set when the server asks for it, by then the first chunk is
    in the partial file."""

    def __init__(self):
        self.blob = b"GGUF" + bytes(range(256)) * ((CHUNK + CHUNK // 2) // 256)
        self.digest = "sha256:" + hashlib.sha256(self.blob).hexdigest()
        self.manifest = json.dumps({"schemaVersion": 2, "layers": [
            {"mediaType": "application/vnd.ollama.image.model", "digest": self.digest,
             "size": len(self.blob)}]}).encode()
        self.stall, self.reached, self.release = threading.Event(), threading.Event(), threading.Event()
        self.stall.set()
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/v2/library/big/manifests/latest":
                    return self.answer(200, registry.manifest)
                if self.path != "/v2/library/big/blobs/" + registry.digest:
                    return self.answer(404, b"{}")
                m = re.match(r"bytes=(\d+)-(\d+)$", self.headers.get("Range", ""))
                if not m:
                    return self.answer(200, registry.blob)
                first, last = int(m.group(1)), min(int(m.group(2)), len(registry.blob) - 1)
                if first >= CHUNK and registry.stall.is_set():
                    registry.reached.set()
                    registry.release.wait(TIMEOUT)  # until the test is done with the killed server
                    return
                self.answer(206, registry.blob[first:last + 1],
                            {"Content-Range": f"bytes {first}-{last}/{len(registry.blob)}"})

            def answer(self, status, body, headers=None):
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.release.set()
        self.httpd.shutdown()


class KilledPull(unittest.TestCase):
    """Item 3: a SIGKILL during /api/pull, and a bad model file, must not keep the server down."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gantry-repo-faults-")
        cls.repo = os.path.join(cls.dir, "repo")
        os.makedirs(cls.repo)
        shutil.copy(LLAMA, os.path.join(cls.repo, "tiny-llama.gguf"))
        cls.registry = StallingRegistry()
        cls.flags = ["--model-repository", cls.repo, "--pull-source", cls.registry.url, *FLAGS]

        # The first server: killed while it downloads "big".
        first = serve_process.Server(GANTRY, cls.flags)
        cls.killed_pid = first.proc.pid

        def pull():
            try:
                c = http.client.HTTPConnection(first.host, first.port, timeout=TIMEOUT)
                c.request("POST", "/api/pull", body=json.dumps({"model": "big"}),
                          headers={"Content-Type": "application/json"})
                c.getresponse().read()  # ends when the server dies
            except (OSError, http.client.HTTPException):
                pass

        puller = threading.Thread(target=pull, daemon=True)
        puller.start()
        reached = cls.registry.reached.wait(TIMEOUT)
        cls.partial = os.path.join(cls.repo, f".big.gguf.partial-{cls.killed_pid}-0")
        cls.partial_head = b""
        if reached and os.path.exists(cls.partial):
            with open(cls.partial, "rb") as f:
                cls.partial_head = f.read(4)
            cls.partial_size = os.path.getsize(cls.partial)
        first.kill()  # SIGKILL, and reaped: its pid is gone
        puller.join(TIMEOUT)
        cls.registry.release.set()
        cls.reached = reached

        # A truncated model beside the good one (its tensor data runs past the end of the file).
        with open(LLAMA, "rb") as f:
            data = f.read()
        with open(os.path.join(cls.repo, "broken.gguf"), "wb") as f:
            f.write(data[: len(data) * 6 // 10])
        # A download another live process is writing (this test's own id: alive) must be kept.
        cls.live_partial = os.path.join(cls.repo, f".other.gguf.partial-{os.getpid()}-0")
        with open(cls.live_partial, "wb") as f:
            f.write(b"GGUF" + bytes(64))

        # The restart, with the same flags.
        cls.srv = serve_process.Server(GANTRY, cls.flags)

    @classmethod
    def tearDownClass(cls):
        cls.srv.kill()
        cls.registry.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def tearDown(self):
        self.assertTrue(self.srv.alive(), "gantry serve died: " + self.srv.stderr())
        status, _, _ = self.srv.request("GET", "/v2/health/live")
        self.assertEqual(status, 200)

    def test_the_kill_left_a_partial_download_starting_with_gguf(self):
        # The attack as it happens: without this the restart below would prove nothing.
        self.assertTrue(self.reached, "the pull never asked for its second chunk")
        self.assertEqual(self.partial_head, b"GGUF")
        self.assertGreaterEqual(self.partial_size, CHUNK)

    def test_the_restart_serves_the_good_model(self):
        status, body = get_json(self.srv, "POST", "/api/generate",
                                {"model": "tiny-llama", "prompt": "hi", "stream": False,
                                 "options": {"num_predict": 2, "temperature": 0}})
        self.assertEqual(status, 200, body)
        self.assertTrue(body["done"])

    def test_readiness_is_ok_and_names_the_failed_model_and_why(self):
        status, body = get_json(self.srv, "GET", "/v2/health/ready")
        self.assertEqual(status, 200, body)
        self.assertTrue(body["ready"])
        failed = {m["name"]: m["reason"] for m in body["failed_models"]}
        self.assertEqual(list(failed), ["broken"])
        self.assertIn("past the end of the file", failed["broken"])

    def test_the_repository_index_says_which_model_failed(self):
        status, index = get_json(self.srv, "POST", "/v2/repository/index", {})
        self.assertEqual(status, 200, index)
        by_name = {m["name"]: m for m in index}
        self.assertEqual(sorted(by_name), ["broken", "tiny-llama"], "no partial download is listed")
        self.assertEqual(by_name["tiny-llama"]["state"], "READY")
        self.assertEqual(by_name["broken"]["state"], "UNAVAILABLE")
        self.assertIn("past the end of the file", by_name["broken"]["reason"])

    def test_the_failed_model_says_why_when_asked_for(self):
        status, body = get_json(self.srv, "GET", "/v2/models/broken/ready")
        self.assertEqual(status, 503)
        self.assertIn("failed to load", body["error"])
        self.assertIn("past the end of the file", body["error"])
        status, body = get_json(self.srv, "POST", "/api/generate",
                                {"model": "broken", "prompt": "hi", "stream": False})
        self.assertEqual(status, 503, body)
        self.assertIn("past the end of the file", body["error"])

    def test_the_dead_servers_partial_is_removed_a_live_ones_kept(self):
        self.assertFalse(os.path.exists(self.partial), "the killed server's partial download is still there")
        self.assertTrue(os.path.exists(self.live_partial), "a live process's partial download was removed")
        self.assertIn("removed " + self.partial, self.srv.stderr())


class CopyBounds(unittest.TestCase):
    """Item 8: copies are bounded, and listing them reads each file's header once per version."""

    MAX = 40

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gantry-copies-")
        cls.repo = os.path.join(cls.dir, "repo")
        os.makedirs(cls.repo)
        shutil.copy(LLAMA, os.path.join(cls.repo, "tiny-llama.gguf"))
        cls.srv = serve_process.Server(GANTRY, ["--model-repository", cls.repo, "--load-on-demand",
                                                "--max-model-copies", str(cls.MAX), *FLAGS])

    @classmethod
    def tearDownClass(cls):
        cls.srv.kill()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def tearDown(self):
        self.assertTrue(self.srv.alive(), "gantry serve died: " + self.srv.stderr())
        status, _, _ = self.srv.request("GET", "/v1/models")
        self.assertEqual(status, 200)

    def copy(self, destination, source="tiny-llama"):
        return get_json(self.srv, "POST", "/api/copy", {"source": source, "destination": destination})

    def tags(self):
        status, body = get_json(self.srv, "GET", "/api/tags")
        self.assertEqual(status, 200, body)
        return {m["name"]: m for m in body["models"]}

    def test_copies_beyond_the_bound_are_refused_and_tags_reads_each_header_once(self):
        self.assertEqual(header_reads(self.srv), 0)
        self.assertEqual(list(self.tags()), ["tiny-llama:latest"])
        self.assertEqual(header_reads(self.srv), 1)
        for i in range(self.MAX):
            status, body = self.copy(f"copy-{i}")
            self.assertEqual(status, 200, body)
        status, body = self.copy("one-too-many")
        self.assertEqual(status, 400, body)
        self.assertEqual(list(body), ["error"], "Ollama's error shape")
        self.assertIn(f"at most {self.MAX}", body["error"])
        self.assertIn("--max-model-copies", body["error"])
        status, body = self.copy("x" * 129)
        self.assertEqual(status, 400, body)
        self.assertIn("is not a model name", body["error"])

        for _ in range(3):
            models = self.tags()
            self.assertEqual(len(models), self.MAX + 1)
            self.assertNotIn("one-too-many:latest", models)
            self.assertEqual({m["details"]["family"] for m in models.values()}, {"llama"})
        status, body = get_json(self.srv, "POST", "/api/show", {"model": "copy-7"})
        self.assertEqual(status, 200, body)
        self.assertIn("general.architecture", body["model_info"])
        self.assertEqual(header_reads(self.srv), 1, "a header read per copy or per request")

        # The file replaced (a new version): read again, once, for every name.
        fresh = os.path.join(self.repo, ".fresh")
        shutil.copy(LLAMA, fresh)
        os.replace(fresh, os.path.join(self.repo, "tiny-llama.gguf"))
        self.assertEqual(len(self.tags()), self.MAX + 1)
        self.assertEqual(len(self.tags()), self.MAX + 1)
        self.assertEqual(header_reads(self.srv), 2)

        # A deleted copy frees its place.
        status, body = get_json(self.srv, "DELETE", "/api/delete", {"model": "copy-0"})
        self.assertEqual(status, 200, body)
        status, body = self.copy("one-more")
        self.assertEqual(status, 200, body)
        self.assertIn("one-more:latest", self.tags())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v", *sys.argv[3:]])  # then test names, to run only those
