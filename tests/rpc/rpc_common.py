"""Shared by the RPC tests: `gantry rpc-server` processes, a free port, a fake RPC server of another protocol
version, and running gantry commands with a bound on their time."""
import os
import socket
import struct
import subprocess
import tempfile
import threading
import time


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def run(cmd, timeout=300, env=None, check=False):
    """Runs a command; returns (exit code, stdout, stderr)."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p.returncode, p.stdout, p.stderr


class RpcServer:
    """`gantry rpc-server` in the background; ready once its port accepts a connection (a bare connection
    that sends nothing is what ggml's server shrugs off: it reads no command and waits for the next client)."""

    def __init__(self, gantry, port=None, host="127.0.0.1", args=(), prefix=(), connect_host=None, timeout=60):
        self.port = port or free_port()
        self.host = host
        self.dir = tempfile.mkdtemp(prefix="gantry-rpc-")
        self.log = os.path.join(self.dir, "log")
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([*prefix, gantry, "rpc-server", "--host", host, "--port", str(self.port),
                                          *args], stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        target = (connect_host or host, self.port)
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gantry rpc-server exited {self.proc.returncode}: {self.output()}")
            if "serving on" in self.output():
                try:
                    with socket.create_connection(target, timeout=2):
                        return
                except OSError:
                    pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"gantry rpc-server on port {self.port} not ready in {timeout} s: {self.output()}")

    @property
    def endpoint(self):
        return f"{self.host}:{self.port}"

    def output(self):
        with open(self.log, errors="replace") as f:
            return f.read()[-4000:]

    def kill(self, sig=9):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)
        return self.proc.returncode


class FakeOldRpcServer:
    """Answers ggml's HELLO with another protocol version (and closes), on a thread."""

    def __init__(self, major=6, minor=0, patch=0):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.version = (major, minor, patch)
        self.hellos = 0
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                try:
                    header = self._recv(c, 9)
                    cmd, size = header[0], struct.unpack("<Q", header[1:])[0]
                    self._recv(c, size)
                    if cmd != 14:
                        continue
                    self.hellos += 1
                    body = bytes(self.version) + b"\0" + bytes(24)
                    c.sendall(struct.pack("<Q", len(body)) + body)
                    c.recv(1)  # until the client hangs up
                except OSError:
                    pass

    @staticmethod
    def _recv(c, n):
        data = b""
        while len(data) < n:
            chunk = c.recv(n - len(data))
            if not chunk:
                raise OSError("closed")
            data += chunk
        return data

    def close(self):
        self.sock.close()
