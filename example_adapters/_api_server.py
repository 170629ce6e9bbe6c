"""What both local API servers share: real HTTP on 127.0.0.1, bearer auth, faults on demand, admin calls.

A server is an `ApiServer` subclass that answers its own routes (`ApiServer.route`) with an
`Answer`; this module delivers it, applying the fault the route drew after it created the job:
``drop_after_accept`` (close without answering), ``slow`` (answer after ``slow_seconds``),
``5xx_after_accept`` (answer 500) or ``409_after_accept`` (answer 409). Faults that create nothing
(``5xx``, ``4xx``, ``429``) are answered by the route itself, before it creates anything.

Admin calls, behind the same bearer token, mirror ``airflow_idempotent_jobs.testing.server``::

    GET  /_admin/stats     counters, jobs, and the current config
    POST /_admin/config    change fields of the server's config at run time
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from airflow_idempotent_jobs.testing.local_api import (
    ApiSwitches,
    BackgroundServer,
    UvicornServer,
    credential_echo,
    drop_connection,
    hold,
    json_answer,
    serve_until_terminated,
    with_drops,
)

__all__ = ["FAULTS", "REFUSALS", "Answer", "ApiConfig", "ApiServer", "Progress", "serve_main"]

#: Faults a route may draw for a paid (or upload) call; see the module docstring.
FAULTS: Final = frozenset({"drop_after_accept", "slow", "5xx", "5xx_after_accept", "4xx", "429", "409_after_accept"})
#: Faults answered before anything is created, with their HTTP status.
REFUSALS: Final = {"5xx": 503, "4xx": 422, "429": 429}


@dataclass
class ApiConfig(ApiSwitches):
    """Switches common to both servers (those of every local API, and one more); see `ApiSwitches`."""

    faults: ClassVar[frozenset[str]] = FAULTS

    #: Answer listings with every job, whatever filter was asked (an API that ignores unknown filters).
    ignore_filter: bool = False


@dataclass
class Answer:
    """A route's answer; ``fault`` is applied when it is delivered (the job already exists)."""

    code: int
    body: Any
    fault: str | None = None


class Progress:
    """How a job advances, one status call at a time: ``queued -> running -> done | failed``."""

    def __init__(self, queued: str, running: str, done: str, failed: str) -> None:
        self.queued, self.running, self.done, self.failed = queued, running, done, failed

    def advance(self, job: dict[str, Any], cfg: ApiConfig, units: Any, fail: bool) -> bool:
        """Move ``job`` on; True when it just finished (the caller then sets its output)."""
        job["_polls"] += 1
        if job["status"] in (self.done, self.failed):
            return False
        elapsed = time.monotonic() - job["_started"]
        if job["_polls"] < cfg.polls_to_finish and (cfg.seconds_to_finish is None or elapsed < cfg.seconds_to_finish):
            job["status"] = self.running
            return False
        job["_cost"] = round(cfg.price * float(units if isinstance(units, (int, float)) else 1), 6)
        job["status"] = self.failed if fail else self.done
        return True


def public(job: dict[str, Any]) -> dict[str, Any]:
    """A job as the API shows it: without the server's own ``_`` fields."""
    return {key: copy.deepcopy(value) for key, value in job.items() if not key.startswith("_")}


def bump(counter: dict[str, int], key: Any) -> None:
    counter[str(key)] = counter.get(str(key), 0) + 1


class ApiServer(BackgroundServer):
    """One API on a thread of this process: ``with Server(auth_token=...) as api: api.url``.

    Subclasses set ``config_class`` and ``per_token`` (the counter of paid jobs per
    ``metadata.token``), keep their paid jobs in ``jobs`` and answer `route` under ``lock``.
    """

    config_class: type[ApiConfig] = ApiConfig
    per_token: ClassVar[str] = "jobs_per_token"

    def __init__(self, *, auth_token: str = "local-api-secret", host: str = "127.0.0.1", port: int = 0, **config: Any):
        self.config = self.config_class()
        self.config.update(config)
        self.auth_token = auth_token
        self.lock = threading.Lock()
        #: The paid jobs (a batch API's batches), by id, oldest first.
        self.jobs: dict[str, dict[str, Any]] = {}
        self.counters: dict[str, Any] = {
            "unauthorized": 0,
            "status_calls": 0,
            "lookup_calls": 0,
            "submissions": 0,
            "accepted": 0,
            self.per_token: {},
        }
        stopping = threading.Event()
        super().__init__(UvicornServer((host, port), _app(self, stopping), stopping), host)

    # -- the API, for subclasses ---------------------------------------------------------------
    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Answer:
        """Answer one call (``body`` is the parsed JSON, None for a GET); runs with ``lock`` held."""
        raise NotImplementedError

    def error(self, code: int, message: str) -> Answer:
        """An error answer in this API's own shape."""
        return Answer(code, {"error": {"message": message}})

    def snapshot(self) -> dict[str, Any]:
        """What ``GET /_admin/stats`` shows (``lock`` held)."""
        return {**copy.deepcopy(self.counters), "jobs": {job_id: public(job) for job_id, job in self.jobs.items()}}

    def refusal(self, fault: str | None, message: str) -> Answer | None:
        """The answer to a call whose ``fault`` refuses it before anything is created, else None."""
        code = REFUSALS.get(fault or "")
        return None if code is None else self.error(code, f"{message} (HTTP {code})")

    def paid_call(self) -> tuple[str | None, Answer | None]:
        """Count a paid call and draw its fault; with the answer if that fault refuses it before anything exists."""
        self.counters["submissions"] += 1
        fault = self.config.take_fault()
        return fault, self.refusal(fault, "refused before anything was created")

    def accept(self, job_id: str, job: dict[str, Any]) -> None:
        """Keep a new paid job and count it, in all and for its ``metadata.token``."""
        self.jobs[job_id] = job
        self.counters["accepted"] += 1
        bump(self.counters[self.per_token], job["metadata"].get("token"))

    def status_refusal(self) -> Answer | None:
        """Count a status call; the next of ``status_errors`` answers it, if one is queued."""
        self.counters["status_calls"] += 1
        if self.config.status_errors:
            code = self.config.status_errors.pop(0)
            return self.error(code, f"status refused with HTTP {code}")
        return None

    def listing_refusal(self, not_offered: str) -> Answer | None:
        """Count a listing; the next of ``lookup_errors`` answers it, or 501 with ``lookup`` off."""
        self.counters["lookup_calls"] += 1
        if self.config.lookup_errors:
            code = self.config.lookup_errors.pop(0)
            return self.error(code, f"listing refused with HTTP {code}")
        if not self.config.lookup:
            return self.error(501, not_offered)
        return None

    def listed(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        """The jobs matching the ``metadata.*`` filters of ``query`` (all with ``ignore_filter``), newest first."""
        wanted = {key[len("metadata.") :]: values[-1] for key, values in query.items() if key.startswith("metadata.")}
        return [
            public(job)
            for job in reversed(self.jobs.values())
            if self.config.ignore_filter or all(job["metadata"].get(k) == v for k, v in wanted.items())
        ]

    # -- running and tests -----------------------------------------------------------------------
    def configure(self, **changes: Any) -> None:
        with self.lock:
            self.config.update(changes)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {**self.snapshot(), "config": dataclasses.asdict(self.config)}

    def accepted(self, token: str | None = None) -> int:
        """Paid jobs created, in all or for one ``metadata.token``."""
        with self.lock:
            if token is None:
                return int(self.counters["accepted"])
            return int(self.counters[self.per_token].get(token, 0))

    def jobs_for(self, token: str) -> list[str]:
        with self.lock:
            return sorted(job_id for job_id, job in self.jobs.items() if job["metadata"].get("token") == token)


def _app(api: ApiServer, stopping: threading.Event) -> Any:
    """The API as a Starlette app: every path and method reaches `endpoint`, which routes as the API does."""

    async def endpoint(request: Request) -> Response:
        if request.method not in ("GET", "POST"):
            return PlainTextResponse(f"Unsupported method ({request.method!r})", status_code=501)
        # The path as sent (percent-escapes kept), as the API matches and names it.
        path = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
        authorization = request.headers.get("Authorization") or ""
        raw = await request.body() if request.method == "POST" else b""
        answer, slow = _answer(
            api, request.method, path, request.scope["query_string"].decode("latin-1"), authorization, raw
        )
        if answer.fault == "drop_after_accept":
            await drop_connection(request)  # the job exists; the client never hears of it
        elif answer.fault == "slow":
            await hold(stopping, slow)
        if answer.fault == "5xx_after_accept":
            answer = api.error(500, "internal error after accepting")
        elif answer.fault == "409_after_accept":
            answer = api.error(409, "a conflicting request is in progress")
        body = answer.body
        if answer.code >= 400 and api.config.echo_token:
            body = _with_echo(body, credential_echo(authorization))
        return json_answer(answer.code, body)

    return with_drops(Starlette(routes=[Route("/{path:path}", endpoint, methods=_METHODS)]))


#: Every method reaches the endpoint, which answers 501 to all but GET and POST.
_METHODS: Final = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def _answer(api: ApiServer, method: str, path: str, query: str, authorization: str, raw: bytes) -> tuple[Answer, float]:
    """The route's answer to one call, and the ``slow_seconds`` a slow fault holds it for."""
    if authorization != f"Bearer {api.auth_token}":
        with api.lock:
            api.counters["unauthorized"] += 1
        return api.error(401, "missing or wrong credentials"), 0.0
    body: Any = None
    if method == "POST":
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            return api.error(400, "the body is not JSON"), 0.0
    with api.lock:
        if path == "/_admin/stats" and method == "GET":
            answer = Answer(200, {**api.snapshot(), "config": dataclasses.asdict(api.config)})
        elif path == "/_admin/config" and method == "POST":
            try:
                api.config.update(body if isinstance(body, dict) else {})
                answer = Answer(200, dataclasses.asdict(api.config))
            except ValueError as exc:
                answer = api.error(400, str(exc))
        else:
            answer = api.route(method, path, parse_qs(query), body)
        return answer, api.config.slow_seconds


def _with_echo(body: Any, echo: str) -> Any:
    """The error body with ``echo`` appended to its message, whichever shape the API uses."""
    if not echo or not isinstance(body, dict):
        return body
    body = copy.deepcopy(body)
    if isinstance(body.get("error"), dict):
        body["error"]["message"] = str(body["error"].get("message", "")) + echo
    elif "detail" in body:
        body["detail"] = str(body["detail"]) + echo
    return body


def serve_main(server_class: type[ApiServer], prog: str, description: str | None, argv: Sequence[str] | None) -> int:
    """``python -m <server> --port 0 ...``: print the URL on the first stdout line, serve until SIGTERM."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--token", default="local-api-secret", help="the API token clients must send")
    parser.add_argument("--no-lookup", action="store_true", help="do not offer the listing by metadata token")
    parser.add_argument("--echo-token", action="store_true", help="repeat the credential in every error answer")
    parser.add_argument("--polls-to-finish", type=int, default=2)
    parser.add_argument("--seconds-to-finish", type=float)
    parser.add_argument("--price", type=float, default=1.25)
    args = parser.parse_args(argv)
    server = server_class(
        auth_token=args.token,
        host=args.host,
        port=args.port,
        lookup=not args.no_lookup,
        echo_token=args.echo_token,
        polls_to_finish=args.polls_to_finish,
        seconds_to_finish=args.seconds_to_finish,
        price=args.price,
    )
    return serve_until_terminated(server)
