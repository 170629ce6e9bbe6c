"""HTTP servers on a thread of the test process, for servers a test writes itself.

`AppServer` serves a Starlette app (uvicorn). `BackgroundServer` serves an `http.server` handler: for
the conformance proxy's echo API, whose answers are framed by hand (chunked, or until close).
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any

from airflow_idempotent_jobs.testing._background import BackgroundServer as _Background
from airflow_idempotent_jobs.testing._background import ThreadedServer, UvicornServer


class BackgroundServer(_Background):
    """Serves ``handler`` on ``host`` (a free port) inside a ``with`` block; subclasses give the handler."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1") -> None:
        super().__init__(ThreadedServer((host, 0), handler), host)


class AppServer(_Background):
    """Serves the ASGI ``app`` on ``host`` (a free port) inside a ``with`` block."""

    def __init__(self, app: Any, host: str = "127.0.0.1") -> None:
        super().__init__(UvicornServer((host, 0), app), host)
