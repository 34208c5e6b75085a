"""`gantry serve --port 0` as a child process on loopback, for the Python serve tests."""
import http.client
import json
import os
import subprocess
import tempfile
import time

SOCKET_TIMEOUT = 30  # seconds, every socket


class Server:
    """Starts `GANTRY serve --port 0 ARGS...`; the port comes from its first stdout line."""

    def __init__(self, gantry, args, start_timeout=60):
        self.dir = tempfile.mkdtemp(prefix="gantry-serve-")
        self.out_path, self.err_path = os.path.join(self.dir, "out"), os.path.join(self.dir, "err")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen([gantry, "serve", "--port", "0", *args], stdout=out, stderr=err)
        deadline = time.time() + start_timeout
        while time.time() < deadline:  # bounded poll of the log: the process says when it listens
            with open(self.out_path) as f:
                line = f.readline()
            if "listening on http://" in line:
                url = line.split("listening on http://")[1].split()[0]
                self.host, port = url.rsplit(":", 1)
                self.port = int(port)
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"gantry serve exited {self.proc.returncode}: {self.stderr()}")
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"gantry serve did not start in {start_timeout} s: " + self.stderr())

    def stderr(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()[-4000:]

    def alive(self):
        return self.proc.poll() is None

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
