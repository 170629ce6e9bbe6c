"""A local API shaped like Replicate's predictions API, for the real ``replicate`` SDK pointed at it by ``base_url``.

Runnable (``python -m airflow_idempotent_jobs.testing.replicate_api --port 0 --token SECRET`` prints
its URL) and importable (`ReplicateApi`, a context manager serving on a thread). Every call needs
``Authorization: Bearer <token>`` (401 otherwise). Errors are problem details, as the SDK's
``ReplicateError`` reads them: ``{"type", "title", "status", "detail"}``::

    POST /v1/predictions                       {"version", "input", "webhook", "webhook_events_filter"}
                                               (PAID; 201) -> prediction; header Cancel-After: 30s, 5m, 1h
    POST /v1/models/{owner}/{name}/predictions {"input", ...} (PAID; 201) -> prediction, version "hidden"
    GET  /v1/predictions/{id}                  prediction: id, model, version, input, output, logs, error,
                                               status, created_at, started_at, completed_at, data_removed,
                                               source, urls, metrics {predict_time, total_time}, deadline
    GET  /v1/predictions                       newest first, ``page_size`` (100) a page, created_after /
                                               created_before, cursor -> {"next", "previous", "results"}
    POST /v1/predictions/{id}/cancel           -> prediction, canceled

Lifecycle and shape: `_replicate_predictions`. Switches (`ReplicateSwitches`, also through ``POST
/_admin/config``): ``fault`` for the next ``fault_times`` create calls (`PAID_FAULTS`),
``page_faults`` one per listing call (`PAGE_FAULTS`), ``status_faults`` one per get call
(`STATUS_FAULTS`; ``status_errors`` for HTTP codes, with ``retry_after``), ``endless_next`` (every
page names a next one), ``next_base`` (the origin ``next`` URLs name), ``removed``/``remove_all``
(inputs and outputs removed, as an hour after creation), ``strip_inputs`` (input fields the API
drops before storing), ``predict_seconds``, ``predict_time_raw`` (the JSON text sent as
``metrics.predict_time``), ``end_as``, ``clock_offset``. ``POST /_admin/seed`` (`ReplicateApi.seed`)
adds another client's prediction, which no counter counts. Counters (``GET /_admin/stats``):
``submissions`` (create calls), ``accepted`` and ``predictions_per_token`` (predictions created, by
the value of their input's ``token_input`` as sent, else ``untagged``), ``status_calls``,
``list_calls``, ``cancel_calls``, ``unauthorized`` and ``refused_tokens`` (sha256 prefixes of the
tokens refused: which credential reached this server).
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime as dt
import hashlib
import json
import sys
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final
from urllib.parse import parse_qs, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._double import CountedDouble
from ._replicate_predictions import (
    END_AS,
    Prediction,
    PredictionRequestError,
    check_create,
    new_id,
    parse_lifetime,
    rfc3339,
)
from .local_api import (
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

__all__ = ["PAGE_FAULTS", "PAID_FAULTS", "STATUS_FAULTS", "ReplicateApi", "ReplicateSwitches", "main"]

#: Create-call faults: after the prediction exists (``drop_after_accept``: no answer; ``slow``: answered
#: after ``slow_seconds``; ``<code>_after_accept``: that error; ``unreadable_after_accept``: an HTML
#: 200; ``text_created_at_after_accept``: a ``created_at`` of text; ``other_token_after_accept``: the
#: answer shows another token in the input), or before anything exists (``429``, ``500``, ``503``).
PAID_FAULTS: Final = frozenset(
    {"drop_after_accept", "slow", "408_after_accept", "409_after_accept", "429_after_accept", "500_after_accept"}
    | {"503_after_accept", "unreadable_after_accept", "text_created_at_after_accept", "other_token_after_accept"}
    | {"429", "500", "503"}
)
#: Listing faults: an error, another service's JSON 404, a body that is not a page, an HTML 200, a
#: ``created_at`` of text or ``1e999``, a page out of order or with an id twice, a ``next`` that is
#: the same page again or a page of another path.
PAGE_FAULTS: Final = frozenset(
    {"500", "503", "401", "stray_404", "malformed", "html", "text_created_at", "huge_created_at", "out_of_order"}
    | {"duplicate", "loop_next", "foreign_path_next"}
)
#: Get faults: no answer, a late one, an HTML 200, a body that is not a prediction.
STATUS_FAULTS: Final = frozenset({"drop", "slow", "html", "malformed"})
_TITLES: Final = {400: "Bad request", 401: "Unauthenticated", 404: "Not found", 408: "Request timeout"}
_TITLES_MORE: Final = {409: "Conflict", 422: "Input validation failed", 429: "Too many requests"}
_PREDICTIONS: Final = "/v1/predictions"


@dataclass
class ReplicateSwitches(ApiSwitches):
    """The switches of every local API (`ApiSwitches`) and these; see the module docstring."""

    faults: ClassVar[frozenset[str]] = PAID_FAULTS

    page_faults: list[str] = dataclasses.field(default_factory=list)
    status_faults: list[str] = dataclasses.field(default_factory=list)
    retry_after: str | None = None
    endless_next: bool = False
    next_base: str | None = None
    page_size: int = 100
    #: Reads a new prediction stays ``starting`` for (then ``processing`` until it ends).
    starting_polls: int = 0
    end_as: str = "succeeded"
    predict_seconds: float = 2.5
    predict_time_raw: str | None = None
    removed: list[str] = dataclasses.field(default_factory=list)
    remove_all: bool = False
    strip_inputs: list[str] = dataclasses.field(default_factory=list)
    token_input: str = "idempotency_token"
    clock_offset: float = 0.0

    def check(self, changes: dict[str, Any]) -> None:
        super().check(changes)
        for name, known in (("page_faults", PAGE_FAULTS), ("status_faults", STATUS_FAULTS)):
            unknown = sorted(set(changes.get(name, ())) - set(known))
            if unknown:
                raise ValueError(f"unknown {name} {unknown} (of {sorted(known)})")
        if changes.get("end_as", "succeeded") not in END_AS:
            raise ValueError(f"end_as: one of {list(END_AS)}")


@dataclass
class _Answer:
    code: int
    body: Any
    fault: str | None = None
    raw: bytes | None = None
    media: str = "application/json"
    headers: dict[str, str] = dataclasses.field(default_factory=dict)


class ReplicateApi(CountedDouble[ReplicateSwitches], BackgroundServer):
    """The predictions double on a thread: ``with ReplicateApi(api_token=...) as api: api.url``."""

    per_token = "predictions_per_token"

    def __init__(
        self, *, api_token: str = "r8_local0123456789abcdef", host: str = "127.0.0.1", port: int = 0, **config: Any
    ):
        self.config = ReplicateSwitches()
        self.config.update(config)
        self.api_token = api_token
        self.lock = threading.Lock()
        #: Every prediction, ours and seeded, oldest first.
        self.predictions: list[Prediction] = []
        self.counters: dict[str, Any] = dict.fromkeys(
            ("unauthorized", "submissions", "accepted", "status_calls", "list_calls", "cancel_calls"), 0
        )
        self.counters["predictions_per_token"] = {}
        self.counters["refused_tokens"] = []
        stopping = threading.Event()
        super().__init__(UvicornServer((host, port), _app(self, stopping), stopping), host)

    # -- for tests ---------------------------------------------------------------------------------
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=self.config.clock_offset)

    def snapshot(self) -> dict[str, Any]:
        return {
            **json.loads(json.dumps(self.counters)),
            "predictions": {p.id: {**p.public(self.url), "owner": p.owner} for p in self.predictions},
            "config": dataclasses.asdict(self.config),
        }

    def predictions_for(self, token: str) -> list[str]:
        """Our predictions created with ``token`` in their input (as sent), oldest first."""
        with self.lock:
            return [p.id for p in self.predictions if p.owner == "us" and p.extras.get("token") == token]

    def seed(
        self,
        *,
        model: str = "someone/other-model",
        input: dict[str, Any] | None = None,
        source: str = "api",
        deployment: str | None = None,
        age_seconds: float = 0.0,
        removed: bool = False,
    ) -> str:
        """Another client's prediction (ended, created ``age_seconds`` ago); its id."""
        with self.lock:
            return self._seed(model, input or {"prompt": "theirs"}, source, deployment, age_seconds, removed)

    def _seed(
        self, model: str, given: dict[str, Any], source: str, deployment: str | None, age: float, removed: bool
    ) -> str:
        at = self.now() - dt.timedelta(seconds=age)
        one = Prediction(new_id(), model, "hidden", given, at, owner="other", source=source, deployment=deployment)
        one.finish(at, "succeeded")
        one.removed = removed
        self._keep(one)
        return one.id

    def _keep(self, one: Prediction) -> None:
        """Keep ``one`` in creation order, strictly after any prediction as old (never a tie on time)."""
        if self.predictions and one.owner == "us" and one.created_at <= self.predictions[-1].created_at:
            one.created_at = self.predictions[-1].created_at + dt.timedelta(microseconds=1)
        self.predictions.append(one)
        self.predictions.sort(key=lambda p: (p.created_at, p.id))

    # -- the API -----------------------------------------------------------------------------------
    def error(self, code: int, detail: str) -> _Answer:
        title = _TITLES.get(code) or _TITLES_MORE.get(code) or ("Internal server error" if code >= 500 else "Error")
        body = {"type": f"https://replicate.com/docs/errors/{code}", "title": title, "status": code, "detail": detail}
        return _Answer(code, body)

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any, request: Request) -> _Answer:
        if path == _PREDICTIONS:
            if method == "POST":
                return self._create(None, body, request)
            return self._list(query, request)
        parts = path.strip("/").split("/")
        if method == "POST" and len(parts) == 5 and parts[:2] == ["v1", "models"] and parts[4] == "predictions":
            return self._create(f"{parts[2]}/{parts[3]}", body, request)
        if not path.startswith(_PREDICTIONS + "/"):
            return self.error(404, f"Not found: {path}")
        pid, _, action = path[len(_PREDICTIONS) + 1 :].partition("/")
        one = next((p for p in self.predictions if p.id == pid), None)
        if one is None:
            return self.error(404, f"prediction {pid!r} not found")
        if (method, action) == ("GET", ""):
            return self._get(one, request)
        if (method, action) == ("POST", "cancel"):
            self.counters["cancel_calls"] += 1
            one.cancel(self.now())
            return _Answer(200, self._public(one, request))
        return self.error(404, f"Not found: {method} {path}")

    def _advance(self, one: Prediction, polled: bool) -> None:
        cfg = self.config
        one.advance(self.now(), (cfg.starting_polls, cfg.polls_to_finish, cfg.seconds_to_finish), polled)
        one.removed = one.removed or self.config.remove_all or one.id in self.config.removed

    def _public(self, one: Prediction, request: Request) -> dict[str, Any]:
        return one.public(_origin(request))

    def _get(self, one: Prediction, request: Request) -> _Answer:
        self.counters["status_calls"] += 1
        if self.config.status_errors:
            code = self.config.status_errors.pop(0)
            answer = self.error(code, f"get refused with HTTP {code}")
            if self.config.retry_after is not None:
                answer.headers["Retry-After"] = self.config.retry_after
            return answer
        fault = self.config.status_faults.pop(0) if self.config.status_faults else None
        if fault == "html":
            return _Answer(200, None, raw=b"<html><body>Sign in</body></html>", media="text/html")
        if fault == "malformed":
            return _Answer(200, {"id": one.id, "status": "thinking"})
        self._advance(one, polled=True)
        body = self._public(one, request)
        raw = self.config.predict_time_raw
        if raw is not None and one.predict_time is not None:
            text = json.dumps(body).replace(json.dumps(body["metrics"]), f'{{"predict_time": {raw}}}', 1)
            return _Answer(200, None, fault=fault, raw=text.encode())
        return _Answer(200, body, fault=fault)

    def _create(self, path_model: str | None, body: Any, request: Request) -> _Answer:
        self.counters["submissions"] += 1
        fault = self.config.take_fault()
        if fault in ("429", "500", "503"):
            return self.error(int(fault), "refused before anything was created")
        try:
            model, version, given = check_create(path_model, body)
            header = request.headers.get("cancel-after")
            lifetime = None if header is None else parse_lifetime(header)
        except PredictionRequestError as exc:
            return self.error(exc.status, str(exc))
        token = given.get(self.config.token_input)
        stored = {k: v for k, v in given.items() if k not in self.config.strip_inputs}
        cfg = self.config
        one = Prediction(new_id(), model, version, stored, self.now(), cfg.end_as, cfg.predict_seconds, lifetime)
        one.extras["token"] = token
        self._keep(one)
        self.counters["accepted"] += 1
        key = token if isinstance(token, str) else "untagged"
        per = self.counters["predictions_per_token"]
        per[key] = per.get(key, 0) + 1
        return _Answer(201, self._public(one, request), fault=fault)

    def _list(self, query: dict[str, list[str]], request: Request) -> _Answer:
        self.counters["list_calls"] += 1
        fault = self.config.page_faults.pop(0) if self.config.page_faults else None
        if fault in ("500", "503", "401"):
            return self.error(int(fault), "listing failed")
        if fault == "stray_404":
            return _Answer(404, {"detail": "Not Found"})
        if fault == "html":
            return _Answer(200, None, raw=b"<html><body>Sign in</body></html>", media="text/html")
        if fault == "malformed":
            return _Answer(200, {"results": "none", "next": None})
        try:
            after = _when(query, "created_after")
            before = _when(query, "created_before")
            cursor = _cursor(query)
        except ValueError as exc:
            return self.error(400, str(exc))
        newest = [
            p
            for p in reversed(self.predictions)
            if (after is None or p.created_at >= after) and (before is None or p.created_at < before)
        ]
        if cursor is not None:
            newest = [p for p in newest if (p.created_at, p.id) < cursor]
        page, more = newest[: self.config.page_size], len(newest) > self.config.page_size
        for one in page:
            self._advance(one, polled=False)
        data = [self._public(one, request) for one in page]
        next_url = self._next_url(query, request, page, more)
        if fault == "out_of_order" and len(data) > 1:
            data.reverse()
        if fault == "duplicate" and data:
            data.append(data[0])
        if fault == "text_created_at" and data:
            data[0]["created_at"] = "yesterday"
        if fault == "loop_next":
            next_url = f"{self._next_base(request)}{_PREDICTIONS}?{urlencode(_flat(query))}"
        if fault == "foreign_path_next":
            next_url = f"{self._next_base(request)}/v1/trainings?cursor=abc"
        body = {"next": next_url, "previous": None, "results": data}
        if fault == "huge_created_at" and data:
            text = json.dumps(body).replace(json.dumps(data[0]["created_at"]), "1e999", 1)
            return _Answer(200, None, raw=text.encode())
        return _Answer(200, body)

    def _next_base(self, request: Request) -> str:
        return (self.config.next_base or _origin(request)).rstrip("/")

    def _next_url(
        self, query: dict[str, list[str]], request: Request, page: list[Prediction], more: bool
    ) -> str | None:
        if not more and not self.config.endless_next:
            return None
        params = {k: v for k, v in _flat(query).items() if k != "cursor"}
        if page:
            mark = f"{rfc3339(page[-1].created_at)}|{page[-1].id}"
        else:  # endless: a fresh cursor past the end, every time
            mark = f"{rfc3339(dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc))}|{uuid.uuid4().hex}"
        params["cursor"] = base64.urlsafe_b64encode(mark.encode()).decode()
        return f"{self._next_base(request)}{_PREDICTIONS}?{urlencode(params)}"


def _flat(query: dict[str, list[str]]) -> dict[str, str]:
    return {key: values[-1] for key, values in query.items()}


def _when(query: dict[str, list[str]], name: str) -> dt.datetime | None:
    if name not in query:
        return None
    text = query[name][-1]
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{name}: {text[:40]!r} is not an ISO 8601 date-time") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def _cursor(query: dict[str, list[str]]) -> tuple[dt.datetime, str] | None:
    if "cursor" not in query:
        return None
    try:
        at, _, pid = base64.urlsafe_b64decode(query["cursor"][-1].encode()).decode().partition("|")
        return dt.datetime.fromisoformat(at.replace("Z", "+00:00")), pid
    except ValueError:
        raise ValueError("cursor: not a cursor of this listing") from None


def _origin(request: Request) -> str:
    """``scheme://host[:port]`` as the client named this server (its ``Host`` header)."""
    return f"{request.url.scheme}://{request.headers.get('host') or request.url.netloc}"


def _app(api: ReplicateApi, stopping: threading.Event) -> Any:
    async def endpoint(request: Request) -> Response:
        path = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
        auth = request.headers.get("authorization") or ""
        raw = await request.body() if request.method == "POST" else b""
        answer = _answer(api, request, path, auth, raw)
        if answer.fault == "drop_after_accept" or answer.fault == "drop":
            await drop_connection(request)  # the prediction exists; the client never hears of it
        elif answer.fault == "slow":
            await hold(stopping, api.config.slow_seconds)
        elif answer.fault == "unreadable_after_accept":
            answer = _Answer(200, None, raw=b"<html><body>Gateway</body></html>", media="text/html")
        elif answer.fault == "text_created_at_after_accept":
            answer.body["created_at"] = "yesterday"
        elif answer.fault == "other_token_after_accept":
            answer.body["input"][api.config.token_input] = "another-episodes-token"
        elif answer.fault and answer.fault.endswith("_after_accept"):
            answer = api.error(int(answer.fault.split("_", 1)[0]), "an error after the prediction was created")
        if answer.code >= 400 and api.config.echo_token and isinstance(answer.body, dict):
            answer.body["detail"] = str(answer.body.get("detail")) + credential_echo(auth)
        if answer.raw is not None:
            return Response(answer.raw, status_code=answer.code, media_type=answer.media, headers=answer.headers)
        response = json_answer(answer.code, answer.body)
        response.headers.update(answer.headers)
        return response

    return with_drops(Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "POST"])]))


def _answer(api: ReplicateApi, request: Request, path: str, auth: str, raw: bytes) -> _Answer:
    if auth != f"Bearer {api.api_token}":
        with api.lock:
            api.counters["unauthorized"] += 1
            bare = auth[len("Bearer ") :] if auth.startswith("Bearer ") else auth
            api.counters["refused_tokens"].append(hashlib.sha256(bare.encode()).hexdigest()[:16] if bare else None)
        return api.error(401, "You did not pass a valid authentication token")
    body: Any = None
    if request.method == "POST":
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            return api.error(400, "the body is not JSON")
    with api.lock:
        if path == "/_admin/stats":
            return _Answer(200, api.snapshot())
        if path == "/_admin/config":
            try:
                api.config.update(body if isinstance(body, dict) else {})
            except ValueError as exc:
                return api.error(400, str(exc))
            return _Answer(200, dataclasses.asdict(api.config))
        if path == "/_admin/seed":
            seed = body if isinstance(body, dict) else {}
            given = seed["input"] if isinstance(seed.get("input"), dict) else {"prompt": "theirs"}
            model, source = str(seed.get("model", "someone/other-model")), str(seed.get("source", "api"))
            made = api._seed(model, given, source, seed.get("deployment"), float(seed.get("age_seconds", 0)), False)
            return _Answer(200, {"id": made})
        return api.route(request.method, path.split("?", 1)[0], parse_qs(request.url.query), body, request)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m airflow_idempotent_jobs.testing.replicate_api``: print the URL, serve until SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m airflow_idempotent_jobs.testing.replicate_api", description=__doc__
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--token", default="r8_local0123456789abcdef", help="the Bearer token clients must send")
    parser.add_argument("--polls-to-finish", type=int, default=2)
    parser.add_argument("--seconds-to-finish", type=float)
    parser.add_argument("--echo-token", action="store_true", help="repeat the token in every error answer")
    args = parser.parse_args(argv)
    server = ReplicateApi(
        api_token=args.token,
        host=args.host,
        port=args.port,
        polls_to_finish=args.polls_to_finish,
        seconds_to_finish=args.seconds_to_finish,
        echo_token=args.echo_token,
    )
    return serve_until_terminated(server)


if __name__ == "__main__":
    sys.exit(main())
