"""An HTTP server on a thread of the test process, for servers a test writes itself."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

from airflow_idempotent_jobs.testing._background import BackgroundServer as _Background
from airflow_idempotent_jobs.testing._background import ThreadedServer


class BackgroundServer(_Background):
    """Serves ``handler`` on ``host`` (a free port) inside a ``with`` block; subclasses give the handler."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1") -> None:
        super().__init__(ThreadedServer((host, 0), handler), host)
