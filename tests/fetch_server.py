#!/usr/bin/env python3
"""A misbehaving HTTP server for the fetch tests, on 127.0.0.1 at a random port.

Serves files under --root. The first path component picks the behaviour, the rest is the file:
  /ok/F       Range requests honoured (206), else 200
  /drop/F     the first request for F sends the headers and half the body, then closes
  /norange/F  Range ignored (always 200 with the whole file); the first request drops halfway
  /e404/F     404
  /e500/F     500 for the first two requests for F, then as /ok/
  /stall/F    sends one byte of the body, then nothing until the client gives up
  /slow/F     as /ok/ but about 1 MiB/s (for interrupting a fetch at a random point)
  /drip/F     as /ok/ but one byte every --drip seconds (0.7 by default): never stalls outright
  /huge/F     declares a Content-Length of 100 GiB, then sends F and zeros up to 64 MiB; the
              bytes the client took are counted under "sent:/huge/F" in /count
  /count      JSON: requests seen per path
Prints "PORT" on the first line of stdout, then serves until --timeout seconds have passed.
"""
import argparse
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNTS = {}
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        path = self.path.split("?")[0]
        with LOCK:
            COUNTS[path] = COUNTS.get(path, 0) + 1
            n = COUNTS[path]
        if path == "/count":
            body = json.dumps(COUNTS).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        parts = path.lstrip("/").split("/", 1)
        if len(parts) < 2:
            return self.fail(404)
        mode, rel = parts
        if mode == "e404":
            return self.fail(404)
        if mode == "e500" and n <= 2:
            return self.fail(500)
        full = os.path.realpath(os.path.join(self.server.root, rel))
        if not full.startswith(self.server.root + os.sep) or not os.path.isfile(full):
            return self.fail(404)
        with open(full, "rb") as f:
            data = f.read()
        start = 0
        rng = self.headers.get("Range")
        m = re.match(r"bytes=(\d+)-$", rng or "")
        if m and mode != "norange":
            start = int(m.group(1))
            if start >= len(data) and len(data) > 0:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        else:
            self.send_response(200)
        body = data[start:]
        if mode == "huge":
            self.send_header("Content-Length", str(100 << 30))
            self.end_headers()
            key = "sent:" + path
            buf = body + bytes(max(0, (64 << 20) - len(body)))
            try:
                for i in range(0, len(buf), 65536):
                    self.wfile.write(buf[i:i + 65536])
                    with LOCK:
                        COUNTS[key] = COUNTS.get(key, 0) + len(buf[i:i + 65536])
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True
            return
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "none" if mode == "norange" else "bytes")
        self.end_headers()
        try:
            if (mode in ("drop", "norange") and n == 1) or mode == "stall":
                cut = 1 if mode == "stall" else len(body) // 2
                self.wfile.write(body[:cut])
                self.wfile.flush()
                if mode == "stall":
                    time.sleep(self.server.stall)
                self.close_connection = True
                return
            if mode == "drip":
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(self.server.drip)
                return
            if mode == "slow":
                for i in range(0, len(body), 16384):
                    self.wfile.write(body[i:i + 16384])
                    self.wfile.flush()
                    time.sleep(0.015)
                return
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def fail(self, code):
        body = b"error\n"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients that hang up early are what these tests do


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--stall", type=float, default=20)
    ap.add_argument("--drip", type=float, default=0.7)
    a = ap.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    srv.root = os.path.realpath(a.root)
    srv.stall = a.stall
    srv.drip = a.drip
    print(srv.server_address[1], flush=True)
    threading.Timer(a.timeout, lambda: os._exit(0)).start()
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
