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
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.paid.background_server import AppServer


class CannedServer(AppServer):
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
        super().__init__(self._app(), host)

    @property
    def posts(self) -> int:
        return sum(1 for method, _ in self.requests if method == "POST")

    def _app(self) -> Starlette:
        async def get(request: Request) -> Response:
            self.requests.append(("GET", _target(request)))
            status, content_type, raw, headers = self.answer
            return Response(raw, status_code=status, headers={"Content-Type": content_type, **headers})

        async def post(request: Request) -> Response:
            self.requests.append(("POST", _target(request)))
            await request.body()
            body = json.dumps({"job": {"id": f"job-canned-{self.posts}", "status": "queued"}}).encode()
            return Response(body, status_code=201, media_type="application/json")

        return Starlette(routes=[Route("/{path:path}", post, methods=["POST"]), Route("/{path:path}", get)])


def _target(request: Request) -> str:
    """The request's path and query as sent."""
    path: bytes = request.scope["raw_path"]
    query: bytes = request.scope["query_string"]
    return path.decode("latin-1") + (f"?{query.decode('latin-1')}" if query else "")


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
