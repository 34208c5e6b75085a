"""One model over several hosts, on loopback: two `gantry rpc-server` processes and the gantry commands that
use them (tests/scripts/rpc_loopback.sh runs this).

- rpc-server: loopback by default, a public address refused without --insecure-expose-network, SIGTERM exits 0.
- detect --rpc: the servers' devices in the registry with the memory they report and the link measured.
- greedy output over RPC is token for token the local output (tiny-llama: layer 0 on one server, layer 1 and
  the output layer on the other).
- plan --rpc: the planner's split over this CPU and the servers; plan --measure within 1 % per device
  (bench-100m: layers on all three).
- faults: a server down at load and one of another protocol version are errors naming it (nothing loaded);
  a server killed mid-generation fails that stream and marks its model failed (503), while the server and
  its other model keep serving; once the server is back the model loads again.
"""
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "server"))
sys.path.insert(0, os.path.dirname(__file__))
from rpc_common import FakeOldRpcServer, RpcServer, free_port, run  # noqa: E402
from serve_process import Server  # noqa: E402

GANTRY = sys.argv[1]
MODELS = sys.argv[2]
TINY = os.path.join(MODELS, "tiny-llama.gguf")
BENCH = os.path.join(MODELS, "bench-100m-q8_0.gguf")
PROMPT = "The lighthouse keeper opened the bottle and read"
EOS_BIAS = {"2": -100}  # tiny-llama's </s>: generations run to max_tokens


def servers(n, memories):
    return [RpcServer(GANTRY, args=["--threads", "1", "--memory", m]) for m, _ in zip(memories, range(n))]


class RpcLoopback(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # 1 GiB and 2 GiB reported: the split between them is fixed whatever this machine has free.
        cls.rpc = servers(2, ["1GiB", "2GiB"])
        cls.endpoints = ",".join(s.endpoint for s in cls.rpc)

    @classmethod
    def tearDownClass(cls):
        for s in cls.rpc:
            s.kill()

    def test_rpc_server_stays_on_loopback_unless_told(self):
        code, _, err = run([GANTRY, "rpc-server", "--host", "0.0.0.0", "--port", str(free_port())], timeout=60)
        self.assertEqual(code, 2, err)
        self.assertIn("--insecure-expose-network", err)
        self.assertIn("no authentication", err)
        s = RpcServer(GANTRY, host="0.0.0.0", connect_host="127.0.0.1",
                      args=["--insecure-expose-network", "--threads", "1"])
        self.assertIn("WARNING", s.output())
        self.assertEqual(s.kill(signal.SIGTERM), 0, s.output())  # SIGTERM ends it cleanly
        self.assertIn("SIGTERM: stopped", s.output())

    def test_detect_lists_the_remote_devices(self):
        code, out, err = run([GANTRY, "detect", "--json", "--rpc", self.endpoints], timeout=120)
        self.assertEqual(code, 0, err)
        from jsonschema import Draft202012Validator  # Debian's python3-jsonschema
        with open("schema/registry.schema.json") as f:
            validator = Draft202012Validator(json.load(f))
        self.assertEqual([e.message for e in validator.iter_errors(json.loads(out))], [])
        remote = [d for d in json.loads(out)["devices"] if d["kind"] == "remote"]
        self.assertEqual([d["id"] for d in remote], ["rpc:0", "rpc:1"])
        self.assertEqual([d["memory_total_bytes"] for d in remote], [1 << 30, 2 << 30])
        for d, s in zip(remote, self.rpc):
            self.assertEqual(d["family"], "rpc")
            self.assertEqual(d["remote"]["endpoint"], s.endpoint)
            self.assertEqual(d["remote"]["protocol"], "7.0.0")
            self.assertGreater(d["remote"]["round_trip_s"], 0)
            self.assertGreater(d["remote"]["upload_bytes_per_s"], 0)
        code, out, _ = run([GANTRY, "detect", "--rpc", self.endpoints], timeout=120)
        self.assertEqual(code, 0)
        self.assertIn("Remote", out)
        self.assertIn("no authentication", out)

    def generate(self, *extra):
        code, out, err = run([GANTRY, "run", TINY, "--prompt", PROMPT, "--max-tokens", "48", "--temperature", "0",
                              "--threads", "1", "--ctx", "512", *extra], timeout=240)
        self.assertEqual(code, 0, err)
        return out

    def test_greedy_output_over_rpc_is_the_local_output(self):
        local = self.generate()
        # --ngl 3: both layers and the output layer offloaded, split 1:2 by the servers' reported memory.
        remote = self.generate("--rpc", self.endpoints, "--ngl", "3")
        self.assertGreater(len(local.strip()), 0)
        self.assertEqual(remote, local)
        # The planner's own split (no --ngl) gives the same text too.
        self.assertEqual(self.generate("--rpc", self.endpoints), local)

    def test_plan_splits_by_free_memory_and_measure_agrees_within_one_percent(self):
        code, out, err = run([GANTRY, "plan", BENCH, "--ctx", "1024", "--rpc", self.endpoints, "--gpu-layers",
                              "9", "--measure", "--json"], timeout=300)
        self.assertEqual(code, 0, err)
        j = json.loads(out)
        planned = {d["id"]: d for d in j["devices"]}
        self.assertEqual(sorted(planned), ["cpu", "rpc:0", "rpc:1"])
        # 9 offloaded (8 layers and the output) split 1:2 by the servers' memory: 3 and 5 + output.
        self.assertEqual(planned["cpu"]["layers"], [0, 1, 2, 3])
        self.assertEqual(planned["rpc:0"]["layers"], [4, 5, 6])
        self.assertEqual(planned["rpc:1"]["layers"], [7, 8, 9, 10, 11])
        self.assertTrue(planned["rpc:1"]["output_layer"])
        self.assertEqual(planned["rpc:0"]["remote"], self.rpc[0].endpoint)
        measured = {d["device"]: d["measured_bytes"] for d in j["measured"]["devices"]}
        self.assertEqual(sorted(measured), ["cpu", "rpc:0", "rpc:1"])
        for dev in ("cpu", "rpc:0", "rpc:1"):
            p = planned[dev]["predicted_bytes"]["total"]
            m = measured[dev]["total"]
            self.assertLessEqual(abs(p - m) / m, 0.01, f"{dev}: predicted {p}, measured {m}: {json.dumps(j)[:3000]}")
            for part in ("weights", "kv_cache"):
                self.assertEqual(planned[dev]["predicted_bytes"][part], measured[dev][part], f"{dev} {part}")

    def test_a_server_down_at_load_is_named_and_nothing_loads(self):
        port = free_port()
        code, _, err = run([GANTRY, "run", TINY, "--prompt", "hi", "--max-tokens", "4", "--rpc",
                            f"127.0.0.1:{port}"], timeout=120)
        self.assertEqual(code, 1, err)
        self.assertIn(f"127.0.0.1:{port} is not reachable", err)

    def test_a_server_of_another_protocol_version_is_refused_by_name(self):
        old = FakeOldRpcServer(6, 1, 0)
        try:
            code, _, err = run([GANTRY, "run", TINY, "--prompt", "hi", "--max-tokens", "4", "--rpc",
                                f"127.0.0.1:{old.port}"], timeout=120)
            self.assertEqual(code, 1, err)
            self.assertIn(f"127.0.0.1:{old.port} speaks RPC protocol 6.1.0", err)
            code, _, err = run([GANTRY, "detect", "--rpc", f"127.0.0.1:{old.port}"], timeout=60)
            self.assertEqual(code, 1)
            self.assertIn("speaks RPC protocol 6.1.0", err)
        finally:
            old.close()

    def test_a_server_lost_mid_generation_fails_its_model_only(self):
        a, b = servers(2, ["1GiB", "1GiB"])
        pkg = tempfile.mkdtemp(prefix="gantry-rpc-pkg-")
        srv = None
        try:
            shutil.copy(TINY, os.path.join(pkg, "model.gguf"))
            with open(os.path.join(pkg, "model.gguf"), "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            with open(os.path.join(pkg, "gantry.json"), "w") as f:
                json.dump({"name": "tiny-rpc", "version": "1.0.0", "format": "gguf", "model_file": "model.gguf",
                           "sha256": {"model.gguf": digest},
                           "llama": {"rpc": [a.endpoint, b.endpoint], "n_gpu_layers": 3, "n_ctx": 2048,
                                     "parallel": 2}}, f)
            srv = Server(GANTRY, [pkg, TINY, "--threads", "1", "--ctx", "2048"], start_timeout=120)
            body = {"model": "tiny-rpc", "prompt": PROMPT, "max_tokens": 1500, "temperature": 0,
                    "logit_bias": EOS_BIAS, "stream": True}
            conn = srv.conn()
            conn.request("POST", "/v1/completions", body=json.dumps(body),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            first = r.readline()  # the stream has begun: tokens are being generated over RPC
            self.assertTrue(first.startswith(b"data: "), first)
            b.kill()  # the server holding layer 1 and the output layer is gone
            rest = r.read().decode()
            conn.close()
            self.assertIn("was lost", rest)
            self.assertNotIn('"finish_reason":"length"', rest.replace(" ", ""))

            status, _, raw = srv.request("POST", "/v1/completions",
                                         {"model": "tiny-rpc", "prompt": "hi", "max_tokens": 4})
            self.assertEqual(status, 503, raw)
            self.assertIn(b"failed", raw)
            self.assertIn(b"was lost", raw)
            status, _, raw = srv.request("GET", "/v2/models/tiny-rpc/ready")
            self.assertNotEqual(status, 200, raw)
            # The server and its other model go on.
            self.assertTrue(srv.alive())
            status, _, raw = srv.request("POST", "/v1/completions",
                                         {"model": "tiny-llama", "prompt": "hi", "max_tokens": 4})
            self.assertEqual(status, 200, raw)

            # The host comes back: the model loads again and generates.
            b2 = RpcServer(GANTRY, port=b.port, args=["--threads", "1", "--memory", "1GiB"])
            try:
                status, _, raw = srv.request("POST", "/v2/repository/models/tiny-rpc/load")
                self.assertEqual(status, 200, raw)
                status, _, raw = srv.request("POST", "/v1/completions",
                                             {"model": "tiny-rpc", "prompt": PROMPT, "max_tokens": 8,
                                              "temperature": 0})
                self.assertEqual(status, 200, raw)
            finally:
                b2.kill()
        finally:
            if srv:
                srv.kill()
            a.kill()
            b.kill()
            shutil.rmtree(pkg, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
