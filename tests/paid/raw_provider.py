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

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from airflow_idempotent_jobs.paid.http import HttpPaidProvider
from airflow_idempotent_jobs.testing.server import server_provider_config
from tests.paid.background_server import AppServer

TOKEN = "raw-provider-secret"


class RawProvider(AppServer):
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
        super().__init__(self._app())

    def provider(self) -> HttpPaidProvider:
        config = server_provider_config(self.url, lookup_path=None)
        return HttpPaidProvider(config, auth_header="Authorization", auth_value=f"Bearer {TOKEN}")

    def _status_body(self, job_id: str) -> bytes:
        error = "null" if self.error is None else json.dumps({"message": self.error})
        return (
            f'{{"job": {{"id": "{job_id}", "status": "{self.state}"}}, "billing": {{"amount": {self.cost}}},'
            f' "output": {self.result}, "error": {error}}}'
        ).encode()

    def _app(self) -> Starlette:
        async def submit(request: Request) -> Response:
            await request.body()
            with self._lock:
                self.submissions += 1
                job_id = f"job-{next(self._ids)}"
            return _json(201, json.dumps({"job": {"id": job_id, "status": "queued"}}).encode())

        async def status(request: Request) -> Response:
            return _json(200, self._status_body(request.url.path.rsplit("/", 1)[-1]))

        return Starlette(routes=[Route("/{path:path}", submit, methods=["POST"]), Route("/{path:path}", status)])


def _json(code: int, raw: bytes) -> Response:
    return Response(raw, status_code=code, media_type="application/json")
