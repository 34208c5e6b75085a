"""One model over hosts in network namespaces (tests/rpc/netns.py: 1 ms each way, 1 Gbit/s), so the network
is a network: greedy output over RPC is the local output, detect measures at least the round trip the link
imposes, and plan --speed counts that network in its prediction. Run by tests/scripts/rpc_netns.sh; exits 77
with the reason where namespaces are forbidden."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from netns import Hosts, Unavailable  # noqa: E402
from rpc_common import run  # noqa: E402

GANTRY = os.path.abspath(sys.argv[1])
MODELS = sys.argv[2]
TINY = os.path.join(MODELS, "tiny-llama.gguf")
PROMPT = "The lighthouse keeper opened the bottle and read"
HOSTS = None
ENDPOINTS = ""


class RpcOverANetwork(unittest.TestCase):
    def generate(self, *extra):
        code, out, err = run([GANTRY, "run", TINY, "--prompt", PROMPT, "--max-tokens", "32", "--temperature", "0",
                              "--threads", "1", "--ctx", "512", *extra], timeout=300)
        self.assertEqual(code, 0, err)
        return out

    def test_greedy_output_across_the_network_is_the_local_output(self):
        local = self.generate()
        self.assertEqual(self.generate("--rpc", ENDPOINTS, "--ngl", "3"), local)

    def test_detect_measures_the_link(self):
        code, out, err = run([GANTRY, "detect", "--json", "--rpc", ENDPOINTS], timeout=120)
        self.assertEqual(code, 0, err)
        remote = [d for d in json.loads(out)["devices"] if d["kind"] == "remote"]
        self.assertEqual(len(remote), 2)
        for d in remote:
            # The link holds every packet 1 ms each way: no round trip can be shorter than 2 ms.
            self.assertGreaterEqual(d["remote"]["round_trip_s"], 0.0019, d)
            self.assertGreater(d["remote"]["upload_bytes_per_s"], 0)

    def test_plan_speed_counts_the_network(self):
        code, out, err = run([GANTRY, "plan", TINY, "--ctx", "256", "--rpc", ENDPOINTS, "--gpu-layers", "3",
                              "--speed", "--threads", "1", "--json"], timeout=300)
        self.assertEqual(code, 0, err)
        speed = json.loads(out)["speed"]
        self.assertTrue(speed["known"], speed["assumptions"])
        # Two remote devices, each at least one 2 ms round trip per step.
        self.assertGreaterEqual(speed["network_seconds_per_step"], 2 * 0.0019, speed)
        self.assertLessEqual(speed["generation_tokens_per_s"], 1 / (2 * 0.0019))
        ids = [d["id"] for d in speed["devices"] if d["network_seconds_per_step"] > 0]
        self.assertEqual(ids, ["rpc:0", "rpc:1"])


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: network namespaces need root")
        sys.exit(77)
    try:
        with Hosts(2) as hosts:
            print(f"network: {hosts.shaping}", flush=True)
            HOSTS = hosts
            eps = [hosts.start_rpc_server(hosts[i], GANTRY, 50052, ["--threads", "1", "--memory", m])
                   for i, m in enumerate(["1GiB", "2GiB"])]
            ENDPOINTS = ",".join(eps)
            result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
            sys.exit(0 if result.wasSuccessful() else 1)
    except Unavailable as e:
        print(f"SKIP: {e}")
        sys.exit(77)
