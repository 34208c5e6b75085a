"""Hosts in network namespaces, so that the network between Gantry and its RPC servers is a network: one
namespace per host, joined to this one by a veth pair, each end shaped to 1 ms of delay and 1 Gbit/s.

The shaping is `tc qdisc ... netem delay 1ms rate 1gbit` on both ends of each pair (2 ms round trip). A kernel
without the netem qdisc (this one: "Specified qdisc kind is unknown") gets the same figures another way, said
on stdout: `tbf rate 1gbit` on both ends for the rate, and a relay inside the namespace (delay_relay.py) that
holds every chunk it forwards for 1 ms in each direction for the delay; the RPC server then listens on the
namespace's loopback behind it.

Usage (root): with Hosts(2) as hosts: hosts[i].run_in([...]) / hosts[i].address ... (torn down on exit).
Namespaces forbidden: Hosts raises Unavailable with the reason (tests skip with it).
"""
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DELAY_MS = 1
RATE = "1gbit"


class Unavailable(Exception):
    pass


def sh(*cmd, check=True):
    p = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return p


class Host:
    def __init__(self, tag, index):
        self.ns = f"{tag}h{index}"
        self.index = index
        self.outside = f"{tag}{index}o"  # interface names are at most 15 bytes: the tag is at most 9
        self.inside = f"{tag}{index}i"
        self.address = f"10.231.{200 + index}.2"
        self.gateway = f"10.231.{200 + index}.1"
        self.procs = []

    def prefix(self):
        return ["ip", "netns", "exec", self.ns]

    def popen(self, cmd, **kw):
        p = subprocess.Popen(self.prefix() + list(cmd), **kw)
        self.procs.append(p)
        return p


class Hosts:
    def __init__(self, n, tag=None):
        self.tag = tag or f"grpc{os.getpid() % 100000}"
        self.hosts = []
        self.netem = False
        self.shaping = ""
        self.n = n

    def __enter__(self):
        if shutil.which("ip") is None or shutil.which("tc") is None:
            raise Unavailable("iproute2 (ip, tc) is not installed")
        try:
            for i in range(self.n):
                h = Host(self.tag, i)
                p = sh("ip", "netns", "add", h.ns, check=False)
                if p.returncode != 0:
                    raise Unavailable(f"network namespaces are forbidden here: ip netns add: {p.stderr.strip()}")
                self.hosts.append(h)
                sh("ip", "link", "add", h.outside, "type", "veth", "peer", "name", h.inside)
                sh("ip", "link", "set", h.inside, "netns", h.ns)
                sh("ip", "addr", "add", f"{h.gateway}/24", "dev", h.outside)
                sh("ip", "link", "set", h.outside, "up")
                sh(*h.prefix(), "ip", "addr", "add", f"{h.address}/24", "dev", h.inside)
                sh(*h.prefix(), "ip", "link", "set", h.inside, "up")
                sh(*h.prefix(), "ip", "link", "set", "lo", "up")
                self.shape(h)
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def shape(self, h):
        netem = ["netem", "delay", f"{DELAY_MS}ms", "rate", RATE]
        p = sh("tc", "qdisc", "add", "dev", h.outside, "root", *netem, check=False)
        if p.returncode == 0:
            sh(*h.prefix(), "tc", "qdisc", "add", "dev", h.inside, "root", *netem)
            self.netem = True
            self.shaping = f"tc netem delay {DELAY_MS}ms rate {RATE} on both ends of each veth pair"
            return
        why = p.stderr.strip()
        tbf = ["tbf", "rate", RATE, "burst", "256kb", "latency", "50ms"]
        sh("tc", "qdisc", "add", "dev", h.outside, "root", *tbf)
        sh(*h.prefix(), "tc", "qdisc", "add", "dev", h.inside, "root", *tbf)
        self.shaping = (f"tc netem is not available here ({why}): tbf rate {RATE} on both ends of each veth pair, "
                        f"and {DELAY_MS} ms each way in a relay inside the namespace (tests/rpc/delay_relay.py)")

    def __exit__(self, *exc):
        for h in self.hosts:
            for p in h.procs:
                if p.poll() is None:
                    p.kill()
                    try:
                        p.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        pass
            sh("ip", "link", "del", h.outside, check=False)
            sh("ip", "netns", "del", h.ns, check=False)
        self.hosts = []

    def __getitem__(self, i):
        return self.hosts[i]

    def __len__(self):
        return len(self.hosts)

    def start_rpc_server(self, h, gantry, port, args=()):
        """`gantry rpc-server` in host h, reachable at (h.address, port) across the shaped link. Returns its
        endpoint once it accepts connections."""
        log = open(os.path.join("/tmp", f"{h.ns}-rpc.log"), "wb")
        if self.netem:
            h.popen([gantry, "rpc-server", "--host", h.address, "--port", str(port), "--insecure-expose-network",
                     *args], stdout=log, stderr=subprocess.STDOUT)
        else:
            inner = port + 1
            h.popen([gantry, "rpc-server", "--host", "127.0.0.1", "--port", str(inner), *args], stdout=log,
                    stderr=subprocess.STDOUT)
            h.popen([sys.executable, os.path.join(HERE, "delay_relay.py"), h.address, str(port), "127.0.0.1",
                     str(inner), str(DELAY_MS)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            ok = sh(*h.prefix(), sys.executable, "-c",
                    "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()",
                    h.address if self.netem else "127.0.0.1", str(port if self.netem else port + 1),
                    check=False).returncode == 0
            relay_ok = self.netem or sh(sys.executable, "-c",
                                        "import socket,sys; socket.create_connection((sys.argv[1], "
                                        "int(sys.argv[2])), 2).close()", h.address, str(port),
                                        check=False).returncode == 0
            if ok and relay_ok:
                return f"{h.address}:{port}"
            time.sleep(0.2)
        raise RuntimeError(f"rpc-server in {h.ns} not reachable: see /tmp/{h.ns}-rpc.log")
