"""A local paid-job API for tests and the demo: real HTTP on 127.0.0.1, with faults on demand.

Importable (`ProviderServer`, a context manager running in a thread) and runnable::

    python -m airflow_idempotent_jobs.testing.server --port 0 --token SECRET [--state-file F]

prints its URL on the first stdout line, then serves until SIGTERM/SIGINT.

API (every call needs ``Authorization: Bearer <token>``)::

    POST /jobs               body: JSON object; header Idempotency-Key; -> 201 {"job": {"id", "status"}}
                             (200 with the existing job when tokens are honoured and the token is known)
    GET  /jobs/{id}          {"job": {"id", "status"}, "billing": {"amount"}, "output", "error": {"message"}}
    GET  /jobs?token=T       lookup_style "not_found": 200 {"job": {"id"}} | 404 {"error": {"code": "no_job"}}
                             lookup_style "list":      200 {"jobs": [{"id"}]} | 200 {"jobs": []}
                             501 when lookup is switched off
    GET  /_admin/stats       counters: submissions and accepted jobs, in total and per token
    POST /_admin/config      switch behaviour at run time (fields of `ServerConfig`)

Jobs go ``queued -> rendering -> completed`` (or ``error`` if the request has ``"fail": true``)
after ``polls_to_finish`` status calls or ``seconds_to_finish`` seconds; the cost is
``price * units`` (``units`` from the request, default 1). A request with an empty ``prompt``
is rejected with 422. ``fault`` applies to the next ``fault_times`` submissions (-1: all):
``drop_after_accept`` (create, then close without answering), ``slow`` (create, answer after
``slow_seconds``), ``5xx`` (503, nothing created), ``5xx_after_accept``, ``4xx`` (422), and
``409_after_accept`` (create, then answer 409 as an API does for an idempotency key in use).
``status_errors``/``lookup_errors``: the next status/lookup calls answer these HTTP codes, one
each (e.g. ``[401, 503]``).
``echo_token``: every error answer (and a failed job's error text) repeats the credential the
request carried, as careless APIs do: bare, URL-encoded, base64, JSON-escaped and as the whole
header value (for redaction tests).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ._api_switches import credential_echo, drop_connection, hold, json_answer, with_drops
from ._background import BackgroundServer, UvicornServer, serve_until_terminated
from ._server_config import (
    FAULTS,
    LOOKUP_STYLES,
    TOKEN_HEADER,
    ServerConfig,
    server_connection,
    server_connection_uri,
    server_provider_config,
)

if TYPE_CHECKING:
    from ..paid.http import HttpProviderConfig

__all__ = [
    "FAULTS",
    "ProviderServer",
    "ServerConfig",
    "main",
    "server_connection",
    "server_connection_uri",
    "server_provider_config",
]


class _State:
    """Jobs, counters and config, under one lock; optionally mirrored to a JSON file."""

    def __init__(self, config: ServerConfig, state_file: Path | None) -> None:
        self.lock = threading.Lock()
        self.config = config
        self.state_file = state_file
        self.jobs: dict[str, dict[str, Any]] = {}
        self.counters: dict[str, Any] = {
            "submissions": 0,
            "accepted": 0,
            "status_calls": 0,
            "lookup_calls": 0,
            "unauthorized": 0,
            "submissions_per_token": {},
            "accepted_per_token": {},
        }
        if state_file is not None and state_file.exists():
            saved = json.loads(state_file.read_text())
            self.jobs, self.counters = saved["jobs"], saved["counters"]

    def stats(self) -> dict[str, Any]:
        return {
            **copy.deepcopy(self.counters),
            "jobs": copy.deepcopy(self.jobs),
            "config": dataclasses.asdict(self.config),
        }

    def save(self) -> None:
        if self.state_file is None:
            return
        tmp = self.state_file.with_name(self.state_file.name + ".tmp")
        tmp.write_text(json.dumps({"jobs": self.jobs, "counters": self.counters}, sort_keys=True))
        os.replace(tmp, self.state_file)

    def advance(self, job: dict[str, Any]) -> None:
        """One status call's worth of progress."""
        job["polls"] += 1
        if job["status"] in ("completed", "error"):
            return
        cfg = self.config
        elapsed = time.monotonic() - job["_started"] if "_started" in job else 0.0
        done = job["polls"] >= cfg.polls_to_finish or (
            cfg.seconds_to_finish is not None and elapsed >= cfg.seconds_to_finish
        )
        if not done:
            job["status"] = "rendering"
            return
        units = job["request"].get("units", 1)
        job["cost"] = round(cfg.price * float(units), 6)
        if job["request"].get("fail"):
            job["status"], job["error"] = "error", "generation failed on the provider side"
        else:
            job["status"], job["output"] = "completed", {"url": f"https://media.invalid/{job['id']}.mp4"}


@dataclasses.dataclass
class _Answer:
    """What one call answers; ``fault`` is applied when it is delivered (the job already exists)."""

    code: int
    body: Any
    fault: str | None = None


class _Call:
    """One request's routes, on the state (taking its lock); each returns the `_Answer` to deliver."""

    def __init__(self, state: _State, auth_token: str, headers: Headers) -> None:
        self.state = state
        self.auth_token = auth_token
        self.headers = headers

    def _reply(self, code: int, body: Any, fault: str | None = None) -> _Answer:
        if code >= 400 and isinstance(body, dict) and isinstance(body.get("error"), dict):
            body["error"]["message"] = str(body["error"].get("message", "")) + self._echo()
        return _Answer(code, body, fault)

    def _echo(self) -> str:
        """With ``echo_token``: the credential this request carried, in every form an API might echo."""
        if not self.state.config.echo_token:  # one attribute read; some replies hold the lock
            return ""
        return credential_echo(self.headers.get("Authorization") or "")

    def refusal(self) -> _Answer | None:
        """A 401 for a request without this server's bearer token (counted), else None."""
        if self.headers.get("Authorization") == f"Bearer {self.auth_token}":
            return None
        with self.state.lock:
            self.state.counters["unauthorized"] += 1
        return self._reply(401, {"error": {"message": "missing or wrong credentials"}})

    # -- routes --------------------------------------------------------------------------------
    def get(self, path: str, query: str) -> _Answer:
        state = self.state
        if path == "/_admin/stats":
            with state.lock:
                stats = state.stats()
            return self._reply(200, stats)
        if path == "/jobs":
            return self._lookup(parse_qs(query).get("token", [""])[0])
        if not path.startswith("/jobs/"):
            return self._reply(404, {"error": {"message": f"no route {path}"}})
        job_id = path[len("/jobs/") :]
        with state.lock:
            state.counters["status_calls"] += 1
            failing = state.config.status_errors.pop(0) if state.config.status_errors else 0
            job = None if failing else state.jobs.get(job_id)
            if job is not None:
                state.advance(job)
                state.save()
                answer = _status_answer(job)
        if failing:
            return self._reply(failing, {"error": {"message": f"status refused with HTTP {failing}"}})
        if job is None:
            return self._reply(404, {"error": {"message": f"no job {job_id}"}})
        if answer["error"] is not None:
            answer["error"]["message"] += self._echo()
        return self._reply(200, answer)

    def post(self, path: str, raw: bytes) -> _Answer:
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            return self._reply(400, {"error": {"message": "body is not JSON"}})
        if path == "/_admin/config":
            return self._configure(body)
        if path == "/jobs":
            return self._submit(body)
        return self._reply(404, {"error": {"message": f"no route {path}"}})

    def _configure(self, body: Any) -> _Answer:
        state = self.state
        with state.lock:
            try:
                state.config.update(body if isinstance(body, dict) else {})
                answer: tuple[int, Any] = (200, dataclasses.asdict(state.config))
            except ValueError as exc:
                answer = (400, {"error": {"message": str(exc)}})
        return self._reply(*answer)

    def _lookup(self, token: str) -> _Answer:
        state = self.state
        with state.lock:
            state.counters["lookup_calls"] += 1
            failing = state.config.lookup_errors.pop(0) if state.config.lookup_errors else 0
            offered, style = state.config.lookup, state.config.lookup_style
            found = [j["id"] for j in state.jobs.values() if token and j["token"] == token]
        if failing:
            return self._reply(failing, {"error": {"message": f"lookup refused with HTTP {failing}"}})
        if not offered:
            return self._reply(501, {"error": {"message": "lookup by token is not offered"}})
        if style == "list":
            return self._reply(200, {"jobs": [{"id": job_id} for job_id in found]})
        if found:
            return self._reply(200, {"job": {"id": found[0]}})
        return self._reply(404, {"error": {"code": "no_job", "message": "no job for this token"}})

    def _submit(self, body: Any) -> _Answer:
        state = self.state
        token = self.headers.get(TOKEN_HEADER)
        if not isinstance(body, dict):
            return self._reply(400, {"error": {"message": "the request must be a JSON object"}})
        with state.lock:
            counters = state.counters
            counters["submissions"] += 1
            per_token = counters["submissions_per_token"]
            per_token[str(token)] = per_token.get(str(token), 0) + 1
            fault = state.config.take_fault()
            if fault in ("4xx", "5xx") or body.get("prompt") == "":
                state.save()
                if fault == "5xx":
                    return self._reply(503, {"error": {"message": "service unavailable"}})
                return self._reply(422, {"error": {"message": "request rejected: prompt must not be empty"}})
            existing = [j for j in state.jobs.values() if token and j["token"] == token]
            if state.config.honour_tokens and existing:
                job, code = existing[0], 200
            else:
                job_id = "job-" + uuid.uuid4().hex[:12]
                job = {"id": job_id, "token": token, "status": "queued", "polls": 0, "request": body, "cost": None}
                job["_started"] = time.monotonic()
                state.jobs[job_id] = job
                counters["accepted"] += 1
                accepted = counters["accepted_per_token"]
                accepted[str(token)] = accepted.get(str(token), 0) + 1
                code = 201
            state.save()
            answer = {"job": {"id": job["id"], "status": job["status"]}}
        if fault == "5xx_after_accept":
            return self._reply(500, {"error": {"message": "internal error after accepting"}})
        if fault == "409_after_accept":
            return self._reply(409, {"error": {"message": "a request with this idempotency key is in progress"}})
        return self._reply(code, answer, fault)


def _status_answer(job: dict[str, Any]) -> dict[str, Any]:
    return {
        "job": {"id": job["id"], "status": job["status"]},
        "billing": {"amount": job["cost"], "currency": "EUR"},
        "output": job.get("output"),
        "error": {"message": job["error"]} if job.get("error") else None,
    }


def _app(state: _State, auth_token: str, stopping: threading.Event) -> Any:
    """The API as a Starlette app: every path and method reaches `endpoint`, which routes as the API does."""

    async def endpoint(request: Request) -> Response:
        if request.method not in ("GET", "POST"):
            return PlainTextResponse(f"Unsupported method ({request.method!r})", status_code=501)
        # The path as sent (percent-escapes kept), as the API matches and names it in a 404.
        path = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
        call = _Call(state, auth_token, request.headers)
        answer = call.refusal()
        if answer is None and request.method == "GET":
            answer = call.get(path, request.scope["query_string"].decode("latin-1"))
        elif answer is None:
            answer = call.post(path, await request.body())
        if answer.fault == "drop_after_accept":
            await drop_connection(request)  # the job exists; the client never hears of it
        elif answer.fault == "slow":
            await hold(stopping, state.config.slow_seconds)
        return json_answer(answer.code, answer.body)

    return with_drops(Starlette(routes=[Route("/{path:path}", endpoint, methods=_METHODS)]))


#: Every method reaches the endpoint, which answers 501 to all but GET and POST.
_METHODS: Final = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


class ProviderServer(BackgroundServer):
    """The provider server in a background thread; ``with ProviderServer() as srv: srv.url``."""

    auth_header: Final = "Authorization"

    def __init__(
        self,
        *,
        auth_token: str = "local-provider-secret",
        host: str = "127.0.0.1",
        port: int = 0,
        state_file: str | os.PathLike[str] | None = None,
        **config: Any,
    ) -> None:
        cfg = ServerConfig()
        cfg.update(config)
        self.auth_token = auth_token
        self._state = _State(cfg, None if state_file is None else Path(state_file))
        stopping = threading.Event()
        super().__init__(UvicornServer((host, port), _app(self._state, auth_token, stopping), stopping), host)

    @property
    def auth_value(self) -> str:
        return f"Bearer {self.auth_token}"

    def configure(self, **changes: Any) -> None:
        with self._state.lock:
            self._state.config.update(changes)

    def stats(self) -> dict[str, Any]:
        with self._state.lock:
            return self._state.stats()

    def accepted(self, token: str | None = None) -> int:
        stats = self.stats()
        return int(stats["accepted"] if token is None else stats["accepted_per_token"].get(token, 0))

    def submissions(self, token: str | None = None) -> int:
        stats = self.stats()
        return int(stats["submissions"] if token is None else stats["submissions_per_token"].get(token, 0))

    def provider_config(self, **overrides: Any) -> HttpProviderConfig:
        """An `HttpProviderConfig` that reads this server's JSON, with its current capabilities."""
        return server_provider_config(self.url, self._state.config, **overrides)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_idempotent_jobs.testing.server", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--token", default=os.environ.get("PROVIDER_SERVER_TOKEN", "local-provider-secret"))
    parser.add_argument("--state-file", help="keep jobs and counters in this JSON file across restarts")
    parser.add_argument("--ignore-tokens", action="store_true", help="never deduplicate by idempotency token")
    parser.add_argument("--no-lookup", action="store_true", help="do not offer GET /jobs?token=")
    parser.add_argument("--lookup-style", choices=sorted(LOOKUP_STYLES), default="not_found")
    parser.add_argument("--echo-token", action="store_true", help="repeat the credential in every error answer")
    parser.add_argument("--polls-to-finish", type=int, default=2)
    parser.add_argument("--seconds-to-finish", type=float)
    parser.add_argument("--price", type=float, default=1.25)
    args = parser.parse_args(argv)
    server = ProviderServer(
        auth_token=args.token,
        host=args.host,
        port=args.port,
        state_file=args.state_file,
        honour_tokens=not args.ignore_tokens,
        lookup=not args.no_lookup,
        lookup_style=args.lookup_style,
        echo_token=args.echo_token,
        polls_to_finish=args.polls_to_finish,
        seconds_to_finish=args.seconds_to_finish,
        price=args.price,
    )
    return serve_until_terminated(server)


if __name__ == "__main__":
    sys.exit(main())
