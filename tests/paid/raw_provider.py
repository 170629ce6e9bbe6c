"""A tiny job API on 127.0.0.1 whose status answers are raw JSON text the test chooses.

The project's provider server writes its answers with ``json.dumps``; these tests need answers no
well-behaved server writes: a cost of ``NaN``, ``-5``, ``"1e999"`` or ``1e308``, a 5 MB result, a
result nested 70 levels deep. Same layout as the provider server (``server_provider_config``), so
the real `HttpPaidProvider` reads it.
"""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from airflow_idempotent_jobs.paid.http import HttpPaidProvider
from airflow_idempotent_jobs.testing.server import server_provider_config
from tests.paid.background_server import BackgroundServer

TOKEN = "raw-provider-secret"


class RawProvider(BackgroundServer):
    """``with RawProvider() as api: api.cost = "NaN"``; every job completes on its first status call."""

    def __init__(self) -> None:
        #: JSON text placed as ``billing.amount`` and ``output`` in status answers.
        self.cost = "2.5"
        self.result = '{"url": "https://media.invalid/x.mp4"}'
        #: ``completed`` or ``error``; ``error`` is the failed job's message.
        self.state = "completed"
        self.error: str | None = None
        self.submissions = 0
        self._ids = itertools.count()
        self._lock = threading.Lock()
        super().__init__(self._handler())

    def provider(self) -> HttpPaidProvider:
        config = server_provider_config(self.url, lookup_path=None)
        return HttpPaidProvider(config, auth_header="Authorization", auth_value=f"Bearer {TOKEN}")

    def _status_body(self, job_id: str) -> bytes:
        error = "null" if self.error is None else json.dumps({"message": self.error})
        return (
            f'{{"job": {{"id": "{job_id}", "status": "{self.state}"}}, "billing": {{"amount": {self.cost}}},'
            f' "output": {self.result}, "error": {error}}}'
        ).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _reply(self, code: int, raw: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with api._lock:
                    api.submissions += 1
                    job_id = f"job-{next(api._ids)}"
                self._reply(201, json.dumps({"job": {"id": job_id, "status": "queued"}}).encode())

            def do_GET(self) -> None:
                self._reply(200, api._status_body(self.path.rsplit("/", 1)[-1]))

        return Handler
