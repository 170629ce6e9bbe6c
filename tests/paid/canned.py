"""Real HTTP servers on 127.0.0.1 that are NOT the provider's lookup endpoint, for the lookup tests.

`CannedServer` answers every GET with one fixed answer (status, content type, body, extra headers)
and accepts every POST as a new job (201 with an id): a ledger that misread a lookup answer as
"no job" would pay here, and `posts` shows it. `static_file_server` is ``python -m http.server``
in its own process, serving an empty directory (404 HTML for every path).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx

from tests.paid.background_server import BackgroundServer


class CannedServer(BackgroundServer):
    """``with CannedServer(404, "text/html", "<h1>no</h1>") as srv: srv.url``."""

    def __init__(
        self,
        status: int,
        content_type: str,
        body: str,
        *,
        host: str = "127.0.0.1",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.answer = (status, content_type, body.encode(), dict(headers or {}))
        self.requests: list[tuple[str, str]] = []
        super().__init__(self._handler(), host)

    @property
    def posts(self) -> int:
        return sum(1 for method, _ in self.requests if method == "POST")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        canned = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, content_type: str, raw: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(raw)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                canned.requests.append(("GET", self.path))
                self._send(*canned.answer)

            def do_POST(self) -> None:
                canned.requests.append(("POST", self.path))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.dumps({"job": {"id": f"job-canned-{canned.posts}", "status": "queued"}}).encode()
                self._send(201, "application/json", body, {})

        return Handler


@contextmanager
def static_file_server(root: Path) -> Iterator[str]:
    """``python -m http.server`` serving ``root`` (made empty) on a free port; yields its URL."""
    import socket

    root.mkdir(parents=True, exist_ok=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(url + "/", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
