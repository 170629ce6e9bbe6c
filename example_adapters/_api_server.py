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
import base64
import copy
import dataclasses
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import parse_qs, quote, urlsplit

__all__ = ["FAULTS", "REFUSALS", "Answer", "ApiConfig", "ApiServer", "Progress", "serve_main"]

#: Faults a route may draw for a paid (or upload) call; see the module docstring.
FAULTS: Final = frozenset({"drop_after_accept", "slow", "5xx", "5xx_after_accept", "4xx", "429", "409_after_accept"})
#: Faults answered before anything is created, with their HTTP status.
REFUSALS: Final = {"5xx": 503, "4xx": 422, "429": 429}


@dataclass
class ApiConfig:
    """Switches common to both servers; all can change at run time (``POST /_admin/config``)."""

    #: Offer the listing by metadata token (capability (b)); off, the listing answers 501.
    lookup: bool = True
    #: Answer listings with every job, whatever filter was asked (an API that ignores unknown filters).
    ignore_filter: bool = False
    polls_to_finish: int = 2
    seconds_to_finish: float | None = None
    price: float = 1.25
    #: Fault for the next ``fault_times`` paid calls (-1: all of them).
    fault: str | None = None
    fault_times: int = 1
    slow_seconds: float = 5.0
    #: The next status calls answer these HTTP codes, one per call.
    status_errors: list[int] = dataclasses.field(default_factory=list)
    #: The same for listings by token.
    lookup_errors: list[int] = dataclasses.field(default_factory=list)
    #: Repeat the request's credential in every error answer, as careless APIs do (redaction tests).
    echo_token: bool = False

    def update(self, changes: dict[str, Any]) -> None:
        known = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)}")
        for name, value in changes.items():
            if name.endswith("fault") and value is not None and value not in FAULTS:
                raise ValueError(f"unknown {name} {value!r} (one of {sorted(FAULTS)})")
            setattr(self, name, list(value) if isinstance(value, list) else value)  # never the caller's list


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


def take_fault(cfg: ApiConfig, name: str = "fault") -> str | None:
    """The fault the next call draws (and one fewer left), from the config fields ``name``/``name_times``."""
    fault = getattr(cfg, name)
    times = getattr(cfg, f"{name}_times")
    if fault is None or times == 0:
        return None
    if times > 0:
        setattr(cfg, f"{name}_times", times - 1)
    return str(fault)


def public(job: dict[str, Any]) -> dict[str, Any]:
    """A job as the API shows it: without the server's own ``_`` fields."""
    return {key: copy.deepcopy(value) for key, value in job.items() if not key.startswith("_")}


def bump(counter: dict[str, int], key: Any) -> None:
    counter[str(key)] = counter.get(str(key), 0) + 1


class ApiServer:
    """One API on a thread of this process: ``with Server(auth_token=...) as api: api.url``.

    Subclasses set ``config_class``, fill ``counters`` and answer `route` under ``lock``.
    """

    config_class: type[ApiConfig] = ApiConfig

    def __init__(self, *, auth_token: str = "local-api-secret", host: str = "127.0.0.1", port: int = 0, **config: Any):
        self.config = self.config_class()
        self.config.update(config)
        self.auth_token = auth_token
        self.host = host
        self.lock = threading.Lock()
        self.counters: dict[str, Any] = {"unauthorized": 0, "status_calls": 0, "lookup_calls": 0}
        self.stopping = threading.Event()
        self._http = _HttpServer((host, port), self)
        self._thread: threading.Thread | None = None

    # -- the API, for subclasses ---------------------------------------------------------------
    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Answer:
        """Answer one call (``body`` is the parsed JSON, None for a GET); runs with ``lock`` held."""
        raise NotImplementedError

    def error(self, code: int, message: str) -> Answer:
        """An error answer in this API's own shape."""
        return Answer(code, {"error": {"message": message}})

    def snapshot(self) -> dict[str, Any]:
        """What ``GET /_admin/stats`` shows (``lock`` held)."""
        return copy.deepcopy(self.counters)

    # -- running -------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> ApiServer:
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._http.shutdown()
        self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Any:  # Any: the subclass's own type, for its helpers
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def configure(self, **changes: Any) -> None:
        with self.lock:
            self.config.update(changes)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {**self.snapshot(), "config": dataclasses.asdict(self.config)}


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a held ("slow") or idle keep-alive handler must not stall stop()

    def __init__(self, address: tuple[str, int], api: ApiServer) -> None:
        super().__init__(address, _Handler)
        self.api = api


class _Handler(BaseHTTPRequestHandler):
    server: _HttpServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read counters, not logs

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        api = self.server.api
        parts = urlsplit(self.path)
        if self.headers.get("Authorization") != f"Bearer {api.auth_token}":
            with api.lock:
                api.counters["unauthorized"] += 1
            self._deliver(api.error(401, "missing or wrong credentials"))
            return
        body: Any = None
        if method == "POST":
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                self._deliver(api.error(400, "the body is not JSON"))
                return
        query = parse_qs(parts.query)
        with api.lock:
            if parts.path == "/_admin/stats" and method == "GET":
                answer = Answer(200, {**api.snapshot(), "config": dataclasses.asdict(api.config)})
            elif parts.path == "/_admin/config" and method == "POST":
                try:
                    api.config.update(body if isinstance(body, dict) else {})
                    answer = Answer(200, dataclasses.asdict(api.config))
                except ValueError as exc:
                    answer = api.error(400, str(exc))
            else:
                answer = api.route(method, parts.path, query, body)
            slow = api.config.slow_seconds
        self._deliver(answer, slow)

    def _deliver(self, answer: Answer, slow: float = 0.0) -> None:
        if answer.fault == "drop_after_accept":
            self.close_connection = True  # the job exists; the client never hears of it
            return
        if answer.fault == "slow":
            self.server.api.stopping.wait(slow)
        if answer.fault == "5xx_after_accept":
            answer = self.server.api.error(500, "internal error after accepting")
        elif answer.fault == "409_after_accept":
            answer = self.server.api.error(409, "a conflicting request is in progress")
        body = answer.body
        if answer.code >= 400:
            body = _with_echo(body, self._echo())
        raw = json.dumps(body).encode()
        self.send_response(answer.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        try:
            self.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client is gone (killed while we held the answer)

    def _echo(self) -> str:
        """With ``echo_token``: the credential this request carried, in every form an API might echo."""
        if not self.server.api.config.echo_token:
            return ""
        header = self.headers.get("Authorization") or ""
        bare = header.split(" ", 1)[1] if " " in header else header
        encoded = base64.b64encode(bare.encode()).decode()
        return (
            f" (token {bare} is not valid; url {quote(bare, safe='')}; b64 {encoded}; "
            f"json {json.dumps(bare)[1:-1]}; header Authorization: {header})"
        )


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


def serve_main(
    prog: str,
    description: str | None,
    factory: Callable[[argparse.Namespace], ApiServer],
    argv: Sequence[str] | None,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
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
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    server = factory(args)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with server:
        sys.stdout.write(server.url + "\n")
        sys.stdout.flush()
        try:
            done.wait()
        except KeyboardInterrupt:
            pass
    return 0


def common_config(args: argparse.Namespace) -> dict[str, Any]:
    """The `ApiConfig` fields `serve_main`'s common options set."""
    return {
        "lookup": not args.no_lookup,
        "echo_token": args.echo_token,
        "polls_to_finish": args.polls_to_finish,
        "seconds_to_finish": args.seconds_to_finish,
        "price": args.price,
    }
