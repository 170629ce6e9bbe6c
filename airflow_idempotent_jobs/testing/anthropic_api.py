"""A local API shaped like Anthropic's Message Batches, for the real ``anthropic`` SDK pointed at it by ``base_url``.

Runnable (``python -m airflow_idempotent_jobs.testing.anthropic_api --port 0 --key SECRET`` prints its
URL) and importable (`AnthropicApi`, a context manager serving on a thread). Every call needs
the key (``x-api-key``, or ``Authorization: Bearer``, which the SDK 2.15 sends) and
``anthropic-version``; errors are ``{"type": "error", "error": {"type", "message"}, "request_id"}``
(``invalid_request_error`` 400, ``authentication_error`` 401, ``not_found_error`` 404,
``rate_limit_error`` 429, ``api_error`` 500, ``overloaded_error`` 529)::

    POST /v1/messages/batches               {"requests": [{"custom_id", "params": {"model", "max_tokens",
                                            "messages", ...}}]}  (PAID) -> MessageBatch
    GET  /v1/messages/batches/{id}          MessageBatch: id, type, processing_status (in_progress |
                                            canceling | ended), request_counts, created_at, ended_at,
                                            expires_at, cancel_initiated_at, archived_at, results_url
    GET  /v1/messages/batches               newest first; limit (1-1000, 20), after_id (older), before_id
                                            (newer) -> {"data", "has_more", "first_id", "last_id"}
    GET  /v1/messages/batches/{id}/results  JSONL, one line per request in a shuffled order, once ended:
                                            {"custom_id", "result": {"type": "succeeded", "message"} |
                                            {"type": "errored", "error"} | {"type": "canceled"} | {"type": "expired"}}
    POST /v1/messages/batches/{id}/cancel   in_progress -> canceling (its requests end canceled)

A batch ends after ``polls_to_finish`` retrieve calls or ``seconds_to_finish`` seconds (any read
sees it), unless its id is in ``in_progress`` (``hold_new`` adds every new batch there); its
requests end as ``end_as`` says, cycled over them. Usage is a pure function of the request
(`_anthropic_batches`). Switches (`AnthropicSwitches`, also through ``POST /_admin/config``):
``fault`` for the next ``fault_times`` create calls (`PAID_FAULTS`), ``page_faults`` and
``results_faults`` one per listing / results call (`PAGE_FAULTS`, `RESULTS_FAULTS`), ``gone``
(batches whose results have expired), ``clock_offset`` (the API's clock against ours).
``POST /_admin/seed`` (`AnthropicApi.seed`) adds another client's batch, which no counter counts.
Counters (``GET /_admin/stats``): ``submissions`` (create calls), ``accepted`` and ``batches_per_tag``
(batches created, by the tag before the first ``_`` of their first custom_id when it is ``ij`` and
20 hex digits, else ``untagged``), ``status_calls``, ``list_calls``, ``results_calls``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import re
import sys
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._anthropic_batches import OUTCOMES, Batch, BatchRequestError, check_create
from ._double import CountedDouble
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

__all__ = ["PAGE_FAULTS", "PAID_FAULTS", "RESULTS_FAULTS", "AnthropicApi", "AnthropicSwitches", "main"]

#: Create-call faults: after the batch exists (``drop_after_accept``: no answer; ``slow``: answered after
#: ``slow_seconds``; ``<code>_after_accept``: that error), or before anything exists (``429``, ``500``).
PAID_FAULTS: Final = frozenset(
    {"drop_after_accept", "slow", "408_after_accept", "409_after_accept", "429_after_accept"}
    | {"500_after_accept", "529_after_accept", "429", "500"}
)
#: Listing faults: an error, another service's JSON 404, a body that is not a page, a ``created_at``
#: of ``1e999`` or of text, a page out of order, an HTML 200, ``has_more`` with no cursor.
PAGE_FAULTS: Final = frozenset(
    {"500", "529", "stray_404", "malformed", "huge_created_at", "text_created_at", "out_of_order", "html"}
    | {"no_cursor"}
)
#: Results faults: an error, results gone (404, as after 29 days), a first line that is not JSON, HTML.
RESULTS_FAULTS: Final = frozenset({"500", "gone", "malformed", "html"})
_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_TAG: Final = re.compile(r"ij[0-9a-f]{20}")
_BATCHES: Final = "/v1/messages/batches"


@dataclass
class AnthropicSwitches(ApiSwitches):
    """The switches of every local API (`ApiSwitches`) and these; see the module docstring."""

    faults: ClassVar[frozenset[str]] = PAID_FAULTS

    page_faults: list[str] = dataclasses.field(default_factory=list)
    results_faults: list[str] = dataclasses.field(default_factory=list)
    end_as: list[str] = dataclasses.field(default_factory=lambda: ["succeeded"])
    in_progress: list[str] = dataclasses.field(default_factory=list)
    hold_new: bool = False
    gone: list[str] = dataclasses.field(default_factory=list)
    clock_offset: float = 0.0

    def check(self, changes: dict[str, Any]) -> None:
        super().check(changes)
        for name, known in (("page_faults", PAGE_FAULTS), ("results_faults", RESULTS_FAULTS), ("end_as", OUTCOMES)):
            unknown = sorted(set(changes.get(name, ())) - set(known))
            if unknown:
                raise ValueError(f"unknown {name} {unknown} (of {sorted(known)})")
        if "end_as" in changes and not changes["end_as"]:
            raise ValueError("end_as: needs at least one outcome")


@dataclass
class _Answer:
    code: int
    body: Any
    fault: str | None = None
    raw: bytes | None = None
    media: str = "application/json"


class AnthropicApi(CountedDouble[AnthropicSwitches], BackgroundServer):
    """The Message Batches double on a thread: ``with AnthropicApi(api_key=...) as api: api.url``."""

    per_token = "batches_per_tag"

    def __init__(
        self, *, api_key: str = "sk-ant-local-0123456789", host: str = "127.0.0.1", port: int = 0, **config: Any
    ):
        self.config = AnthropicSwitches()
        self.config.update(config)
        self.api_key = api_key
        self.lock = threading.Lock()
        #: Every batch, ours and seeded, oldest first.
        self.batches: list[Batch] = []
        self.counters: dict[str, Any] = dict.fromkeys(
            ("unauthorized", "submissions", "accepted", "status_calls", "list_calls", "results_calls"), 0
        )
        self.counters["batches_per_tag"] = {}
        stopping = threading.Event()
        super().__init__(UvicornServer((host, port), _app(self, stopping), stopping), host)

    # -- for tests ---------------------------------------------------------------------------------
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=self.config.clock_offset)

    def snapshot(self) -> dict[str, Any]:
        return {
            **json.loads(json.dumps(self.counters)),
            "batches": {b.id: {**b.public(self.url), "owner": b.owner} for b in self.batches},
            "config": dataclasses.asdict(self.config),
        }

    def accepted(self, tag: str | None = None) -> int:
        """Batches created through the API, in all or for one tag."""
        return super().accepted(tag)

    def batches_for(self, tag: str) -> list[str]:
        with self.lock:
            return [b.id for b in self.batches if b.owner == "us" and _tag_of(b) == tag]

    def seed(self, *, custom_ids: Sequence[str] = ("theirs-1",), ended: bool = True, age_seconds: float = 0.0) -> str:
        """Another client's batch (one request per custom_id, created ``age_seconds`` ago); its id."""
        with self.lock:
            return self._seed(list(custom_ids), ended, age_seconds)

    def _seed(self, custom_ids: list[str], ended: bool, age_seconds: float) -> str:
        params = {"model": "claude-other", "max_tokens": 8, "messages": [{"role": "user", "content": "hello there"}]}
        requests = [{"custom_id": custom_id, "params": params} for custom_id in custom_ids]
        batch = Batch.new(requests, ["succeeded"], self.now() - dt.timedelta(seconds=age_seconds), owner="other")
        if ended:
            batch.end(batch.created_at)
        else:
            self.config.in_progress.append(batch.id)
        self._keep(batch)
        return batch.id

    def _keep(self, batch: Batch) -> None:
        """Keep ``batch`` in creation order, strictly after any batch as old (ids never tie on time)."""
        if self.batches and batch.created_at <= self.batches[-1].created_at and batch.owner == "us":
            batch.created_at = self.batches[-1].created_at + dt.timedelta(microseconds=1)
        self.batches.append(batch)
        self.batches.sort(key=lambda b: b.created_at)

    # -- the API -----------------------------------------------------------------------------------
    def error(self, code: int, message: str) -> _Answer:
        kind = _ERROR_TYPES.get(code, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_" + uuid.uuid4().hex}
        return _Answer(code, body)

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> _Answer:
        if path == _BATCHES:
            return self._create(body) if method == "POST" else self._list(query)
        if not path.startswith(_BATCHES + "/"):
            return self.error(404, f"Not found: {path}")
        batch_id, _, action = path[len(_BATCHES) + 1 :].partition("/")
        batch = next((b for b in self.batches if b.id == batch_id), None)
        if batch is None:
            return self.error(404, f"message batch {batch_id!r} not found")
        if (method, action) == ("GET", ""):
            self.counters["status_calls"] += 1
            if self.config.status_errors:
                code = self.config.status_errors.pop(0)
                return self.error(code, f"retrieve refused with HTTP {code}")
            self._advance(batch, polled=True)
            return _Answer(200, batch.public(self.url))
        if (method, action) == ("GET", "results"):
            return self._results(batch)
        if (method, action) == ("POST", "cancel"):
            if batch.status == "in_progress":
                batch.status, batch.cancel_initiated_at = "canceling", self.now()
            return _Answer(200, batch.public(self.url))
        return self.error(404, f"Not found: {method} {path}")

    def _advance(self, batch: Batch, polled: bool = False) -> None:
        if batch.id in self.config.gone and batch.status == "ended":
            batch.archived_at = batch.archived_at or self.now()
        if batch.status == "ended":
            return
        batch.polls += int(polled)
        if batch.status == "canceling":
            batch.end(self.now(), canceled=True)
            return
        if batch.id in self.config.in_progress:
            return
        cfg = self.config
        age = (self.now() - batch.created_at).total_seconds()
        if batch.polls >= cfg.polls_to_finish or (cfg.seconds_to_finish is not None and age >= cfg.seconds_to_finish):
            batch.end(self.now())

    def _create(self, body: Any) -> _Answer:
        self.counters["submissions"] += 1
        fault = self.config.take_fault()
        if fault in ("429", "500"):
            return self.error(int(fault), "refused before anything was created")
        try:
            requests = check_create(body)
        except BatchRequestError as exc:
            return self.error(400, str(exc))
        batch = Batch.new(requests, list(self.config.end_as), self.now())
        self._keep(batch)
        if self.config.hold_new:
            self.config.in_progress.append(batch.id)
        self.counters["accepted"] += 1
        tag = _tag_of(batch)
        self.counters["batches_per_tag"][tag] = self.counters["batches_per_tag"].get(tag, 0) + 1
        return _Answer(200, batch.public(self.url), fault=fault)

    def _list(self, query: dict[str, list[str]]) -> _Answer:
        self.counters["list_calls"] += 1
        fault = self.config.page_faults.pop(0) if self.config.page_faults else None
        if fault in ("500", "529"):
            return self.error(int(fault), "listing failed")
        if fault == "stray_404":
            return _Answer(404, {"detail": "Not Found"})
        if fault == "html":
            return _Answer(200, None, raw=b"<html><body>Sign in</body></html>", media="text/html")
        if fault == "malformed":
            return _Answer(200, {"data": "none", "has_more": False})
        try:
            limit = int(query.get("limit", ["20"])[-1])
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            return self.error(400, "limit: must be an integer from 1 to 1000")
        newest = list(reversed(self.batches))
        ids = [b.id for b in newest]
        start, stop = 0, len(newest)
        for name in ("after_id", "before_id"):
            if name in query and query[name][-1] not in ids:
                return self.error(400, f"{name}: no such batch")
        if "after_id" in query:
            start = ids.index(query["after_id"][-1]) + 1
        if "before_id" in query:
            stop = ids.index(query["before_id"][-1])
            start = max(start, stop - limit)
        page = newest[start:stop][:limit]
        for batch in page:
            self._advance(batch)
        data = [b.public(self.url) for b in page]
        has_more = start + len(page) < stop
        if fault == "out_of_order" and len(data) > 1:
            data.reverse()
        if fault == "huge_created_at" and data:
            return _Answer(
                200,
                None,
                raw=json.dumps({"data": data, "has_more": has_more})
                .replace(json.dumps(data[0]["created_at"]), "1e999", 1)
                .encode(),
            )
        if fault == "text_created_at" and data:
            data[0]["created_at"] = "yesterday"
        body = {"data": data, "has_more": has_more, "first_id": ids[start] if page else None}
        body["last_id"] = None if fault == "no_cursor" else (page[-1].id if page else None)
        if fault == "no_cursor":
            body["has_more"] = True
        return _Answer(200, body)

    def _results(self, batch: Batch) -> _Answer:
        self.counters["results_calls"] += 1
        fault = self.config.results_faults.pop(0) if self.config.results_faults else None
        self._advance(batch)
        if batch.status != "ended":
            return self.error(400, f"message batch {batch.id} is still {batch.status}: results are not ready")
        if fault == "gone" or batch.id in self.config.gone:
            return self.error(404, f"results of message batch {batch.id} have expired")
        if fault == "500":
            return self.error(500, "results unavailable")
        if fault == "html":
            return _Answer(200, None, raw=b"<html><body>Sign in</body></html>", media="text/html")
        text = "".join(json.dumps(line) + "\n" for line in batch.lines)
        if fault == "malformed":
            text = "{not json\n" + text
        return _Answer(200, None, raw=text.encode(), media="application/binary")


def _tag_of(batch: Batch) -> str:
    first = str(batch.requests[0]["custom_id"]) if batch.requests else ""
    tag = first.split("_", 1)[0]
    return tag if _TAG.fullmatch(tag) else "untagged"


def _app(api: AnthropicApi, stopping: threading.Event) -> Any:
    async def endpoint(request: Request) -> Response:
        path = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
        # The docs name ``x-api-key``; the SDK (2.15) sends ``Authorization: Bearer <key>``: both are accepted.
        bearer = request.headers.get("authorization") or ""
        key = request.headers.get("x-api-key") or (bearer[len("Bearer ") :] if bearer.startswith("Bearer ") else "")
        raw = await request.body() if request.method == "POST" else b""
        answer = _answer(api, request, path, key, raw)
        if answer.fault == "drop_after_accept":
            await drop_connection(request)  # the batch exists; the client never hears of it
        elif answer.fault == "slow":
            await hold(stopping, api.config.slow_seconds)
        elif answer.fault and answer.fault.endswith("_after_accept"):
            answer = api.error(int(answer.fault.split("_", 1)[0]), "an error after the batch was created")
        if answer.code >= 400 and api.config.echo_token and isinstance(answer.body, dict):
            answer.body["error"]["message"] = str(answer.body["error"].get("message")) + credential_echo(key)
        if answer.raw is not None:
            return Response(answer.raw, status_code=answer.code, media_type=answer.media)
        return json_answer(answer.code, answer.body)

    return with_drops(Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "POST"])]))


def _answer(api: AnthropicApi, request: Request, path: str, key: str, raw: bytes) -> _Answer:
    if key != api.api_key:
        with api.lock:
            api.counters["unauthorized"] += 1
        return api.error(401, "invalid x-api-key")
    if not request.headers.get("anthropic-version") and not path.startswith("/_admin/"):
        return api.error(400, "anthropic-version: header is required")
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
            custom_ids = [str(c) for c in seed.get("custom_ids", ["theirs-1"])]
            batch_id = api._seed(custom_ids, bool(seed.get("ended", True)), float(seed.get("age_seconds", 0)))
            return _Answer(200, {"id": batch_id})
        return api.route(request.method, path.split("?", 1)[0], parse_qs(request.url.query), body)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m airflow_idempotent_jobs.testing.anthropic_api``: print the URL, serve until SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m airflow_idempotent_jobs.testing.anthropic_api", description=__doc__
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--key", default="sk-ant-local-0123456789", help="the x-api-key clients must send")
    parser.add_argument("--polls-to-finish", type=int, default=2)
    parser.add_argument("--seconds-to-finish", type=float)
    parser.add_argument("--echo-token", action="store_true", help="repeat the key in every error answer")
    args = parser.parse_args(argv)
    server = AnthropicApi(
        api_key=args.key,
        host=args.host,
        port=args.port,
        polls_to_finish=args.polls_to_finish,
        seconds_to_finish=args.seconds_to_finish,
        echo_token=args.echo_token,
    )
    return serve_until_terminated(server)


if __name__ == "__main__":
    sys.exit(main())
