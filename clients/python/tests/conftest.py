"""Real parts for the client's tests: a `sarvcrawl serve` process (the binary of this checkout,
or `SARVCRAWL_BIN`), a fixture site and a fake SearXNG on 127.0.0.1, a webhook receiver, and a
proxy that loses the answer to the first submit it carries."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import subprocess
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
KEY = "py-client-key-0123456789"


def page(title: str, body: str) -> bytes:
    return f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>".encode()


PAGES = {
    "/": page("Home", '<p>Welcome.</p><a href="/a">A</a> <a href="/b">B</a>'),
    "/a": page("Page A", "<p>Alpha text.</p>"),
    "/b": page("Page B", '<p>Beta text.</p><a href="/a">back</a>'),
    # Linked from nowhere: only fetched by name.
    "/long": page("Long", "<p>" + "word " * 1000 + "</p>"),
}


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        path = urllib.parse.urlparse(self.path).path
        if path.startswith("/slow"):
            time.sleep(3)
            body = page("Slow", '<a href="/slow/1">1</a><a href="/slow/2">2</a><a href="/slow/3">3</a>')
        elif path == "/search":
            # A SearXNG instance's JSON answer, its hits on this site.
            base = f"http://127.0.0.1:{self.server.server_port}"
            hits = [{"url": f"{base}/a", "title": "Page A", "content": "alpha"},
                    {"url": f"{base}/b", "title": "Page B", "content": "beta"}]
            return self.send(200, json.dumps({"results": hits}).encode(), "application/json")
        elif path in PAGES:
            body = PAGES[path]
        else:
            return self.send(404, b"not found", "text/plain")
        self.send(200, body, "text/html; charset=utf-8")

    def send(self, status, body, content_type):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve_in_thread(handler) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="session")
def site():
    server = serve_in_thread(Handler)
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.fixture(scope="session")
def api(site):
    """The URL of a running `sarvcrawl serve` with one key, loopback open, search configured."""
    binary = os.environ.get("SARVCRAWL_BIN") or str(ROOT / "target" / "debug" / "sarvcrawl")
    with tempfile.TemporaryDirectory() as tmp:
        addr_file = Path(tmp) / "addr"
        env = dict(os.environ, SARVCRAWL_API_KEYS=f"py:{KEY}", SARVCRAWL_SEARXNG_URL=site, RUST_LOG="error")
        env.pop("SARVCRAWL_BACKEND", None)
        proc = subprocess.Popen(
            [binary, "serve", "--addr", "127.0.0.1:0", "--addr-file", str(addr_file),
             "--data-dir", str(Path(tmp) / "data"), "--allow-net", "127.0.0.1/32", "--no-render"],
            env=env,
        )
        try:
            for _ in range(200):
                if addr_file.exists() and addr_file.read_text().strip():
                    break
                time.sleep(0.05)
            yield "http://" + addr_file.read_text().strip()
        finally:
            proc.terminate()
            proc.wait(timeout=10)


class Receiver:
    """Records every POST (its raw body and headers) and answers 200."""

    def __init__(self):
        received = self.received = []

        class Receive(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                received.append((body, {k.lower(): v for k, v in self.headers.items()}))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = serve_in_thread(Receive)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"

    def wait_for(self, n: int, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while len(self.received) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.received)


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


class LosingProxy:
    """Passes requests to the API, but for the first POST it drops the connection after the API
    answered: the client never sees the answer of a submit that did happen."""

    def __init__(self, target: str):
        target_host, target_port = urllib.parse.urlparse(target).netloc.split(":")
        self.posts = []
        proxy = self

        class Forward(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def forward(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                conn = http.client.HTTPConnection(target_host, int(target_port), timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                if self.command == "POST":
                    proxy.posts.append(self.headers.get("idempotency-key"))
                    if len(proxy.posts) == 1:
                        self.close_connection = True
                        return
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

            do_GET = do_POST = do_DELETE = forward

        self.server = serve_in_thread(Forward)
        self.url = f"http://127.0.0.1:{self.server.server_port}"


@pytest.fixture
def losing_proxy(api):
    p = LosingProxy(api)
    yield p
    p.server.shutdown()
