#!/usr/bin/env python3
"""A scripted HTTP server for the specs: it answers what real and hostile
servers send (error bodies with HTTP 200, both error dialects, odd keys,
endless bodies, gzip bombs, foreign URLs), and logs every request.

    scripted_server.py SCRIPT.json LOG.jsonl

SCRIPT is {"routes": [{"method": "POST", "path": "/server/x", "responses": [...]}, ...]}.
A path ending in "*" matches a prefix. Responses are used in order; the
last one repeats. A response: {"status": 200, "headers": {...}, "body": "text"
| "json": value | "file": path | "endless": true | "gzip_bomb_mb": N | "delay": seconds,
"pause_at": N, "pause": seconds (the body's first N bytes, a pause, the rest) | "ranges": true (a
Range request gets 206 and Content-Range; "cut_range": N then sends N bytes less than its
Content-Range names, with a Content-Length of what it sends) | "cut": N (N bytes less than the
Content-Length announced, then the connection closes) | "hang_up": true
(read the request, then close the connection without answering: an answer lost in transit)}.
"{ROOT}" in a body is replaced by http://127.0.0.1:PORT; with "json", a string "{NOW_MS+N}" by
the number of epoch milliseconds N after the answer leaves. With "json", "echo": true |
"escaped" makes {REQUEST} and {HEADERS} in its strings the request's body and headers, as
servers reflect a request in their errors ("escaped": as a JSON text of its own, / as \\/ and
punctuation as \\u00XX, so the decoded answer still shows them). Binds
127.0.0.1 on a free port, prints "listening on http://127.0.0.1:PORT", and exits when its
parent process is gone (--exit-with PID) or when killed.
"""
import gzip
import http.server
import io
import json
import os
import re
import sys
import threading
import time

script = json.load(open(sys.argv[1]))
log_path = sys.argv[2]
exit_with = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--exit-with" else None
lock = threading.Lock()
used = {}
root = ""


def find_route(method, path):
    for i, r in enumerate(script["routes"]):
        if r.get("method", method) != method:
            continue
        p = r["path"]
        if (p.endswith("*") and path.startswith(p[:-1])) or p == path:
            return i, r
    return None, None


def echo(text, body, headers, how):
    def escaped(s):
        if how == "escaped":  # embedded as its own JSON text: a decoded answer still shows the escapes
            s = re.sub(r"[&<>+=!%' ]", lambda m: "\\u%04x" % ord(m.group()), json.dumps(s)[1:-1].replace("/", "\\/"))
        return json.dumps(s)[1:-1]
    heads = "".join("%s: %s\n" % kv for kv in headers.items())
    return text.replace("{REQUEST}", escaped(body.decode("latin-1"))).replace("{HEADERS}", escaped(heads))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_one(self, method):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path.split("?")[0]
        with lock:
            with open(log_path, "a") as f:
                f.write(json.dumps({"method": method, "path": self.path, "headers": dict(self.headers),
                                    "body": body.decode("latin-1"), "peer_port": self.client_address[1]}) + "\n")
            i, route = find_route(method, path)
            if route is None:
                resp = {"status": 404, "body": "no route"}
            else:
                n = used.get(i, 0)
                responses = route["responses"]
                resp = responses[min(n, len(responses) - 1)]
                used[i] = n + 1
        if resp.get("delay"):
            time.sleep(resp["delay"])
        if resp.get("hang_up"):
            self.close_connection = True
            return
        status = resp.get("status", 200)
        headers = resp.get("headers", {})
        if resp.get("endless"):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            chunk = b'{"padding":"' + b"x" * 65536
            try:
                self.wfile.write(chunk)
                deadline = time.time() + 30
                while time.time() < deadline:
                    self.wfile.write(b"x" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True
            return
        if resp.get("gzip_bomb_mb"):
            raw = io.BytesIO()
            with gzip.GzipFile(fileobj=raw, mode="wb") as g:
                g.write(b'{"padding":"')
                zeros = b"0" * (1 << 20)
                for _ in range(resp["gzip_bomb_mb"]):
                    g.write(zeros)
                g.write(b'"}')
            data = raw.getvalue()
            headers = dict(headers, **{"Content-Encoding": "gzip", "Content-Type": "application/json"})
        elif "file" in resp:
            data = open(resp["file"], "rb").read()
            headers.setdefault("Content-Type", "application/json")
        elif "json" in resp:
            data = json.dumps(resp["json"]).replace("{ROOT}", root)
            # "{NOW_MS+N}" (a JSON string) becomes the number now + N ms at answer time: a time
            # relative to the answer, whatever the server's start-up took on a loaded machine
            data = re.sub(r'"\{NOW_MS([+-]\d+)\}"', lambda m: str(int(time.time() * 1000) + int(m.group(1))), data)
            data = (echo(data, body, self.headers, resp["echo"]) if resp.get("echo") else data).encode()
            headers.setdefault("Content-Type", "application/json")
        else:
            data = resp.get("body", "").replace("{ROOT}", root).encode()
        byte_range = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range") or "")
        if resp.get("ranges") and byte_range and status == 200:
            # "ranges": true answers a Range request with 206 and Content-Range, as file servers do
            first = int(byte_range.group(1))
            last = min(int(byte_range.group(2) or len(data) - 1), len(data) - 1)
            headers = dict(headers, **{"Content-Range": "bytes %d-%d/%d" % (first, last, len(data))})
            data, status = data[first:last + 1], 206
        announced = len(data)
        if resp.get("cut_range") and status == 206:
            # a short chunk: Content-Range names the whole range, the body (and its length) less
            data = data[:max(0, len(data) - resp["cut_range"])]
            announced = len(data)
        elif resp.get("cut"):
            # a body shorter than its Content-Length: the connection closes early
            data = data[:max(0, len(data) - resp["cut"])]
            self.close_connection = True
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(announced))
        self.end_headers()
        if method != "HEAD":
            split = resp.get("pause_at", len(data))
            self.wfile.write(data[:split])
            if split < len(data):
                self.wfile.flush()
                time.sleep(resp.get("pause", 0))
            self.wfile.write(data[split:])

    def do_GET(self):
        self.handle_one("GET")

    def do_POST(self):
        self.handle_one("POST")


def watch_parent():
    while exit_with:
        try:
            os.kill(exit_with, 0)
        except OSError:
            os._exit(0)
        time.sleep(0.5)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
root = "http://127.0.0.1:%d" % server.server_address[1]
threading.Thread(target=watch_parent, daemon=True).start()
print("listening on " + root, flush=True)
server.serve_forever()
