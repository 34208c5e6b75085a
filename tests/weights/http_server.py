#!/usr/bin/env python3
"""A loopback HTTP server for the URL source tests. Usage: http_server.py ROOT; prints its port.

/range/F    honours Range (206 + Content-Range), like a CDN
/norange/F  ignores Range (200, whole file)
/drop/F     announces the full length, then closes the connection mid-body
/lie/F      answers 206 with a Content-Range other than the one asked for
/short/F    answers 206 with the right Content-Range but half the bytes and a matching Content-Length
/private/F  like /range/F, for "Authorization: Bearer t0ken" only (else 401)
/hub/org/tiny/resolve/REV/F  the Hub's download path: like /private/F, for the revisions main, v1.0 and
            refs%2Fpr%2F3 (as sent, percent-encoded) of the repository org/tiny; 404 for any other
/redirect   302 to file:///etc/passwd
/stats      total body bytes sent so far (plain text)"""
import http.server
import os
import re
import sys
import threading

ROOT = sys.argv[1]
sent = [0]
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self, data):
        with lock:
            sent[0] += len(data)
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/stats":
            data = str(sent[0]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "file:///etc/passwd")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        parts = self.path.split("/", 2)
        if len(parts) < 3:
            self.send_error(404)
            return
        mode, rel = parts[1], parts[2]
        if mode in ("private", "hub"):
            if self.headers.get("Authorization") != "Bearer t0ken":
                self.send_error(401)
                return
        if mode == "hub":
            hub = re.match(r"org/tiny/resolve/(main|v1\.0|refs%2Fpr%2F3)/(.+)$", rel)
            if hub is None:
                self.send_error(404)
                return
            rel = hub.group(2)
        path = os.path.join(ROOT, rel)
        if not os.path.isfile(path):
            self.send_error(404)
            return
        with open(path, "rb") as f:
            data = f.read()
        m = re.match(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if mode == "norange" or m is None:
            if mode == "drop":
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.body(data[: len(data) // 2])
                self.wfile.flush()
                self.connection.shutdown(2)
                self.close_connection = True
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.body(data)
            return
        a, b = int(m.group(1)), min(int(m.group(2)), len(data) - 1)
        chunk = data[a : b + 1]
        if mode == "lie":
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (0, len(chunk) - 1, len(data)))
            self.send_header("Content-Length", str(len(chunk)))
            self.end_headers()
            self.body(data[: len(chunk)])
            return
        if mode == "drop" and b > a:
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, len(data)))
            self.send_header("Content-Length", str(len(chunk)))
            self.end_headers()
            self.body(chunk[: len(chunk) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)
            self.close_connection = True
            return
        if mode == "short" and b > a:
            half = chunk[: len(chunk) // 2]
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, len(data)))
            self.send_header("Content-Length", str(len(half)))
            self.end_headers()
            self.body(half)
            return
        self.send_response(206)
        self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, len(data)))
        self.send_header("Content-Length", str(len(chunk)))
        self.end_headers()
        self.body(chunk)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
