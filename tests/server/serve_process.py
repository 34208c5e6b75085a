"""`gantry serve --port 0` as a child process on loopback, for the Python serve tests."""
import atexit
import http.client
import json
import os
import socket
import subprocess
import tempfile
import threading
import time

SOCKET_TIMEOUT = 30  # seconds, every socket


class Server:
    """Starts `GANTRY serve --port 0 ARGS...`; the port comes from its first stdout line, read from a pipe as
    it is written (no polling). Killed by kill(), at the test's exit, and by the kernel if the test dies."""

    def __init__(self, gantry, args, start_timeout=60):
        self.dir = tempfile.mkdtemp(prefix="gantry-serve-")
        self.out_path, self.err_path = os.path.join(self.dir, "out"), os.path.join(self.dir, "err")
        self.host, self.port = None, None
        listening = threading.Event()  # set on the "listening on" line, or when stdout ends (the process exited)
        with open(self.err_path, "wb") as err:
            # setpriv (util-linux) execs gantry with PR_SET_PDEATHSIG: the kernel kills it if this test dies.
            self.proc = subprocess.Popen(["setpriv", "--pdeathsig", "KILL", gantry, "serve", "--port", "0", *args],
                                         stdout=subprocess.PIPE, stderr=err)
        atexit.register(self.kill)

        def copy_stdout():  # the rest of stdout goes to the out file, so the pipe never fills
            with open(self.out_path, "wb") as out:
                for line in self.proc.stdout:
                    out.write(line)
                    out.flush()
                    text = line.decode(errors="replace")
                    if self.port is None and "listening on http://" in text:
                        url = text.split("listening on http://")[1].split()[0]
                        host, port = url.rsplit(":", 1)
                        self.host, self.port = host, int(port)
                        listening.set()
            listening.set()

        threading.Thread(target=copy_stdout, daemon=True).start()
        if listening.wait(start_timeout) and self.port is not None:
            return
        exited = self.proc.poll() is not None
        self.kill()
        if exited:
            raise RuntimeError(f"gantry serve exited {self.proc.returncode}: {self.stderr()}")
        raise RuntimeError(f"gantry serve did not start in {start_timeout} s: " + self.stderr())

    def stderr(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()[-4000:]

    def stderr_all(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def wait_until(self, condition, limit=3000, pace=0.05):
        """Checks `condition` until it holds (True) or `limit` checks have failed (False); `pace` seconds
        between checks only spaces them out (the condition is the event waited for)."""
        for _ in range(limit):
            if condition():
                return True
            if self.proc.poll() is not None:
                return condition()
            time.sleep(pace)
        return False

    def alive(self):
        return self.proc.poll() is None

    def raw_socket(self, timeout=SOCKET_TIMEOUT):
        """A TCP connection to the server (TCP_NODELAY), for tests that speak HTTP by hand."""
        s = socket.create_connection((self.host, self.port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def conn(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=SOCKET_TIMEOUT)

    def request(self, method, path, body=None, headers=None):
        c = self.conn()
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
                headers = {"Content-Type": "application/json", **(headers or {})}
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def status_field(self, field):
        """A field of /proc/PID/status in bytes (VmRSS, VmHWM)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise KeyError(field)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
