"""A local API shaped like the OpenAI Batch API, for the real ``openai`` SDK pointed at it (``base_url=url + "/v1"``).

Runnable (``python -m airflow_idempotent_jobs.testing.openai_api --port 0 --api-key KEY`` prints its
URL) and importable (`OpenAIApi`, a context manager running in a thread). Every call needs
``Authorization: Bearer <api key>``; errors are ``{"error": {"message", "type", "param", "code"}}``::

    POST /v1/files                  multipart: file, purpose=batch (free)  -> the file object
    GET  /v1/files/{id}/content     the file's bytes (input, output or error JSONL)
    POST /v1/batches                {"input_file_id", "endpoint", "completion_window": "24h", "metadata"}
                                    (PAID: counted in ``accepted`` and, by ``metadata[token_key]``, per token)
    GET  /v1/batches/{id}           the batch; each call moves it on (below)
    GET  /v1/batches?limit=&after=  {"object": "list", "data", "first_id", "last_id", "has_more"}, newest first
    POST /v1/batches/{id}/cancel    validating/in_progress/finalizing -> cancelling (-> cancelled on the next read)

A batch goes ``validating -> in_progress (-> finalizing) -> end_as`` after ``polls_to_finish`` reads
or ``seconds_to_finish`` seconds; an input file that fails validation ends it ``failed``. Ending, it
writes an output file (one line per answered request, usage derived from the request: see
`_openai_batches`) and an error file, and sets ``request_counts``.

Switches (``POST /_admin/config``, fields of `OpenAIConfig`): ``fault`` on the paid create
(``drop_after_accept``, ``hang_after_accept`` for ``slow_seconds``, ``408|409|429_after_accept``,
``500_after_accept``, ``503_after_accept``, or before creating ``429``, ``500``, ``400``);
``upload_fault``; ``list_fault`` on a listing page after ``list_fault_skip`` good ones (``500``,
``503``, ``malformed``, ``out_of_order``, ``foreign_404``, ``created_at_inf``, ``created_at_text``,
``metadata_not_text``, ``repeat``); ``end_as``, ``failed_lines``, ``done_lines``, ``model_suffix``,
``clock_offset``. ``GET /_admin/stats``: counters, batches and files; ``POST /_admin/seed``
``{"count", "age_seconds", "metadata"}`` adds finished batches made long ago (not counted as paid).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._api_switches import ApiSwitches, credential_echo, drop_connection, hold, json_answer, with_drops
from ._background import BackgroundServer, UvicornServer, serve_until_terminated
from ._double import CountedDouble
from ._openai_batches import (
    ENDPOINTS,
    INF,
    error_body,
    faulty_page,
    finish_lines,
    metadata_problem,
    newest_first,
    parse_input,
    public,
)

__all__ = ["CREATE_FAULTS", "LIST_FAULTS", "UPLOAD_FAULTS", "OpenAIApi", "OpenAIConfig", "main"]

CREATE_FAULTS: Final = frozenset(
    {"drop_after_accept", "hang_after_accept", "408_after_accept", "409_after_accept", "429_after_accept"}
    | {"500_after_accept", "503_after_accept"}
    | {"429", "500", "400"}
)
UPLOAD_FAULTS: Final = frozenset({"drop_after_accept", "hang_after_accept", "503", "429", "400"})
LIST_FAULTS: Final = frozenset(
    {"500", "503", "malformed", "out_of_order", "foreign_404", "created_at_inf", "created_at_text"}
    | {"metadata_not_text", "repeat"}
)
END_AS: Final = frozenset({"completed", "failed", "expired", "cancelled"})
_ENDED: Final = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass
class OpenAIConfig(ApiSwitches):
    """The double's switches (those of every local API, and these); see the module docstring."""

    faults: ClassVar[frozenset[str]] = CREATE_FAULTS

    upload_fault: str | None = None
    upload_fault_times: int = 1
    list_fault: str | None = None
    list_fault_times: int = 1
    #: Listing pages answered well before ``list_fault`` fires.
    list_fault_skip: int = 0
    end_as: str = "completed"
    #: ``completed``: the last this many requests fail (error file, HTTP 400 inside).
    failed_lines: int = 0
    #: ``expired``/``cancelled``: requests answered before the end (None: half).
    done_lines: int | None = None
    #: Appended to the model the output names (a snapshot's date, as the real API reports it).
    model_suffix: str = ""
    #: The metadata key counted per token.
    token_key: str = "aij_token"
    #: Seconds added to the API's clock (``created_at``): a clock that runs ahead or behind.
    clock_offset: float = 0.0

    def check(self, changes: dict[str, Any]) -> None:
        allowed = {"fault": CREATE_FAULTS, "upload_fault": UPLOAD_FAULTS, "list_fault": LIST_FAULTS}
        for name, value in changes.items():
            if name in allowed and value is not None and value not in allowed[name]:
                raise ValueError(f"unknown {name} {value!r} (one of {sorted(allowed[name])})")
            if name == "end_as" and value not in END_AS:
                raise ValueError(f"unknown end_as {value!r} (one of {sorted(END_AS)})")


@dataclass
class _Reply:
    code: int
    body: Any
    fault: str | None = None
    raw: bytes | None = None


def _error(code: int, message: str, param: str | None = None, error_code: str | None = None) -> _Reply:
    return _Reply(code, error_body(code, message, param, error_code))


class OpenAIApi(CountedDouble[OpenAIConfig], BackgroundServer):
    """The double on a thread of this process: ``with OpenAIApi(api_key=...) as api: api.url + "/v1"``."""

    per_token = "batches_per_token"

    def __init__(
        self, *, api_key: str = "sk-local-0penai-d0uble", host: str = "127.0.0.1", port: int = 0, **config: Any
    ):
        self.config = OpenAIConfig()
        self.config.update(config)
        self.api_key = api_key
        self.lock = threading.Lock()
        self.files: dict[str, dict[str, Any]] = {}
        #: Batches by id, in creation order (seeded ones included).
        self.batches: dict[str, dict[str, Any]] = {}
        self.counters: dict[str, Any] = dict.fromkeys(
            ("unauthorized", "uploads", "content_calls", "submissions", "accepted", "status_calls", "lookup_calls"), 0
        )
        self.counters["batches_per_token"] = {}
        stopping = threading.Event()
        super().__init__(UvicornServer((host, port), _app(self, stopping), stopping), host)

    @property
    def base_url(self) -> str:
        """What the SDK takes as ``base_url``."""
        return self.url + "/v1"

    # -- for tests (configure, stats, accepted per ``metadata[token_key]``: CountedDouble) ---------
    def batches_for(self, token: str) -> list[str]:
        with self.lock:
            key = self.config.token_key
            return sorted(
                b["id"] for b in self.batches.values() if not b["_seeded"] and b["metadata"].get(key) == token
            )

    def seed(self, count: int, age_seconds: float, metadata: dict[str, str] | None = None) -> list[str]:
        with self.lock:
            return self._seed({"count": count, "age_seconds": age_seconds, "metadata": metadata or {}}).body["ids"]  # type: ignore[no-any-return]

    def snapshot(self) -> dict[str, Any]:
        """What ``GET /_admin/stats`` shows (``lock`` held)."""
        return {
            **copy.deepcopy(self.counters),
            "batches": {i: public(b) for i, b in self.batches.items()},
            "files": {i: public(f) for i, f in self.files.items()},
            "config": dataclasses.asdict(self.config),
        }

    # -- the API (``lock`` held) -------------------------------------------------------------------
    def now(self) -> int:
        return int(time.time() + self.config.clock_offset)

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> _Reply:
        parts = path.strip("/").split("/")
        if (method, path) == ("POST", "/v1/files"):
            return self._upload(body)
        if method == "GET" and len(parts) == 4 and parts[:2] == ["v1", "files"] and parts[3] == "content":
            return self._content(parts[2])
        if (method, path) == ("POST", "/v1/batches"):
            return self._create(body)
        if (method, path) == ("GET", "/v1/batches"):
            return self._list(query)
        if method == "GET" and len(parts) == 3 and parts[:2] == ["v1", "batches"]:
            return self._retrieve(parts[2])
        if method == "POST" and len(parts) == 4 and parts[:2] == ["v1", "batches"] and parts[3] == "cancel":
            return self._cancel(parts[2])
        if (method, path) == ("GET", "/_admin/stats"):
            return _Reply(200, self.snapshot())
        if (method, path) == ("POST", "/_admin/config"):
            try:
                self.config.update(body if isinstance(body, dict) else {})
            except ValueError as exc:
                return _error(400, str(exc))
            return _Reply(200, dataclasses.asdict(self.config))
        if (method, path) == ("POST", "/_admin/seed"):
            return self._seed(body)
        return _error(404, f"Invalid URL ({method} {path})")

    def _upload(self, form: Any) -> _Reply:
        self.counters["uploads"] += 1
        fault = self.config.take_fault("upload_fault")
        if fault in ("503", "429", "400"):
            return _error(int(fault), f"upload refused (HTTP {fault})")
        if not isinstance(form, dict) or form.get("purpose") != "batch" or not isinstance(form.get("file"), tuple):
            return _error(400, "a file and purpose 'batch' are required", "purpose")
        name, content = form["file"]
        file_id = self._store_file(content, name, "batch")
        return _Reply(200, public(self.files[file_id]), fault=fault)

    def _store_file(self, content: bytes, name: str, purpose: str) -> str:
        file_id = "file-" + uuid.uuid4().hex[:24]
        self.files[file_id] = {"id": file_id, "object": "file", "bytes": len(content), "created_at": self.now(),
                               "filename": name, "purpose": purpose, "status": "processed", "expires_at": None,
                               "status_details": None, "_content": content}  # fmt: skip
        return file_id

    def _content(self, file_id: str) -> _Reply:
        self.counters["content_calls"] += 1
        found = self.files.get(file_id)
        if found is None:
            return _error(404, f"No such File object: {file_id}", "id")
        return _Reply(200, None, raw=found["_content"])

    def _create(self, body: Any) -> _Reply:
        self.counters["submissions"] += 1
        fault = self.config.take_fault()
        if fault in ("429", "500", "400"):
            return _error(int(fault), f"refused before anything was created (HTTP {fault})")
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object")
        source = self.files.get(str(body.get("input_file_id")))
        if source is None or source["purpose"] != "batch":
            return _error(404, f"No such File object: {body.get('input_file_id')}", "input_file_id")
        endpoint = body.get("endpoint")
        if endpoint not in ENDPOINTS:
            return _error(400, f"Invalid endpoint {endpoint!r}", "endpoint")
        if body.get("completion_window") != "24h":
            return _error(400, "completion_window must be '24h'", "completion_window")
        metadata = body.get("metadata") or {}
        problem = metadata_problem(metadata)
        if problem:
            return _error(400, problem, "metadata")
        lines, invalid = parse_input(source["_content"], endpoint)
        batch = self._new_batch(source["id"], endpoint, metadata, self.now())
        batch.update(_lines=lines, _invalid=invalid)
        self.counters["accepted"] += 1
        token = metadata.get(self.config.token_key)
        per_token = self.counters["batches_per_token"]
        per_token[str(token)] = per_token.get(str(token), 0) + 1
        return _Reply(200, public(batch), fault=fault)

    def _new_batch(self, file_id: str, endpoint: str, metadata: dict[str, str], created: int) -> dict[str, Any]:
        batch_id = "batch_" + uuid.uuid4().hex[:24]
        stamps = dict.fromkeys(("in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at",
                                "cancelling_at", "cancelled_at"))  # fmt: skip
        batch: dict[str, Any] = {"id": batch_id, "object": "batch", "endpoint": endpoint, "errors": None,
                 "input_file_id": file_id,
                 "completion_window": "24h", "status": "validating", "output_file_id": None, "error_file_id": None,
                 "created_at": created, "expires_at": created + 86400, **stamps,
                 "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": dict(metadata),
                 "_polls": 0, "_started": time.monotonic(), "_seeded": False, "_lines": [],
                 "_invalid": None}  # fmt: skip
        self.batches[batch_id] = batch
        return batch

    def _retrieve(self, batch_id: str) -> _Reply:
        self.counters["status_calls"] += 1
        if self.config.status_errors:
            code = self.config.status_errors.pop(0)
            return _error(code, f"status refused (HTTP {code})")
        batch = self.batches.get(batch_id)
        if batch is None:
            return _error(404, f"No batch found with id '{batch_id}'.", "batch_id")
        self._advance(batch)
        return _Reply(200, public(batch))

    def _advance(self, batch: dict[str, Any]) -> None:
        batch["_polls"] += 1
        if batch["status"] in _ENDED:
            return
        if batch["status"] == "cancelling":
            self._finish(batch, "cancelled")
            return
        cfg = self.config
        elapsed = time.monotonic() - batch["_started"]
        if batch["_polls"] >= cfg.polls_to_finish or (
            cfg.seconds_to_finish is not None and elapsed >= cfg.seconds_to_finish
        ):
            self._finish(batch, "failed" if batch["_invalid"] else cfg.end_as)
        elif batch["_polls"] >= 2 and batch["_polls"] == cfg.polls_to_finish - 1:
            batch.update(status="finalizing", finalizing_at=self.now())
        else:
            batch.update(status="in_progress", in_progress_at=batch["in_progress_at"] or self.now())

    def _finish(self, batch: dict[str, Any], end_as: str) -> None:
        now, lines = self.now(), batch["_lines"]
        if end_as == "failed":
            why = batch["_invalid"] or "the batch failed"
            error = {"code": "invalid_request", "message": why, "param": None, "line": None}
            batch.update(status="failed", failed_at=now, errors={"object": "list", "data": [error]})
            return
        cfg = self.config
        output, errors, counts = finish_lines(
            lines, batch["endpoint"], end_as, failed_lines=cfg.failed_lines, done_lines=cfg.done_lines,
            model_suffix=cfg.model_suffix,
        )  # fmt: skip
        if output:
            batch["output_file_id"] = self._store_file(output, f"{batch['id']}_output.jsonl", "batch_output")
        if errors:
            batch["error_file_id"] = self._store_file(errors, f"{batch['id']}_error.jsonl", "batch_output")
        batch.update({"status": end_as, f"{end_as}_at": now, "request_counts": counts})

    def _cancel(self, batch_id: str) -> _Reply:
        batch = self.batches.get(batch_id)
        if batch is None:
            return _error(404, f"No batch found with id '{batch_id}'.", "batch_id")
        if batch["status"] not in ("validating", "in_progress", "finalizing"):
            return _error(400, f"Cannot cancel a batch with status '{batch['status']}'.")
        batch.update(status="cancelling", cancelling_at=self.now())
        return _Reply(200, public(batch))

    def _list(self, query: dict[str, list[str]]) -> _Reply:
        self.counters["lookup_calls"] += 1
        if self.config.lookup_errors:
            code = self.config.lookup_errors.pop(0)
            return _error(code, f"listing refused (HTTP {code})")
        try:
            limit = int(query.get("limit", ["20"])[-1])
        except ValueError:
            limit = 0
        if not 1 <= limit <= 100:
            return _error(400, "limit must be between 1 and 100", "limit")
        ordered = newest_first(iter(self.batches.values()))
        start = 0
        if "after" in query:
            ids = [b["id"] for b in ordered]
            if query["after"][-1] not in ids:
                return _error(400, f"No batch found with id '{query['after'][-1]}'.", "after")
            start = ids.index(query["after"][-1]) + 1
        data = [public(b) for b in ordered[start : start + limit]]
        page = {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None, "has_more": start + limit < len(ordered)}  # fmt: skip
        fault = None
        if self.config.list_fault is not None and self.config.list_fault_skip > 0:
            self.config.list_fault_skip -= 1
        else:
            fault = self.config.take_fault("list_fault")
        if fault is None:
            return _Reply(200, page)
        return _Reply(*faulty_page(page, ordered[max(start - limit, 0) : start], fault))

    def _seed(self, body: Any) -> _Reply:
        spec = body if isinstance(body, dict) else {}
        count, age, metadata = spec.get("count", 1), spec.get("age_seconds", 86400), spec.get("metadata") or {}
        ids = []
        for _ in range(int(count)):
            batch = self._new_batch("file-seeded", "/v1/chat/completions", metadata, self.now() - int(age))
            batch.update(status="completed", completed_at=batch["created_at"] + 60, _seeded=True)
            ids.append(batch["id"])
        return _Reply(200, {"ids": ids})


def _app(api: OpenAIApi, stopping: threading.Event) -> Any:
    async def endpoint(request: Request) -> Response:
        path = request.url.path
        authorization = request.headers.get("Authorization") or ""
        body: Any = None
        if authorization != f"Bearer {api.api_key}":
            with api.lock:
                api.counters["unauthorized"] += 1
            reply = _error(401, "Incorrect API key provided.", None, "invalid_api_key")
        elif request.method == "POST" and path == "/v1/files":
            body = await _form(request)
            reply = _locked(api, request, path, body)
        else:
            if request.method == "POST":
                raw = await request.body()
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = None
            reply = _locked(api, request, path, body)
        if reply.fault == "drop_after_accept":
            await drop_connection(request)  # created; the client never hears of it
        elif reply.fault == "hang_after_accept":
            await hold(stopping, api.config.slow_seconds)
        elif reply.fault is not None and reply.fault.endswith("_after_accept"):
            code = int(reply.fault.split("_", 1)[0])
            reply = _error(code, f"HTTP {code} after the batch was created")
        if reply.raw is not None:
            return Response(reply.raw, status_code=reply.code, media_type="application/octet-stream")
        answer = reply.body
        if reply.code >= 400 and api.config.echo_token and isinstance(answer, dict) and "error" in answer:
            answer["error"]["message"] += credential_echo(authorization)
        if reply.code == 200 and INF in json.dumps(answer):
            return Response(json.dumps(answer).replace(f'"{INF}"', "1e999").encode(), media_type="application/json")
        return json_answer(reply.code, answer)

    return with_drops(Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "POST"])]))


def _locked(api: OpenAIApi, request: Request, path: str, body: Any) -> _Reply:
    with api.lock:
        return api.route(request.method, path, parse_qs(request.url.query), body)


async def _form(request: Request) -> dict[str, Any]:
    form = await request.form()
    upload = form.get("file")
    fields: dict[str, Any] = {"purpose": form.get("purpose")}
    if isinstance(upload, UploadFile):
        fields["file"] = (upload.filename or "upload.jsonl", await upload.read())
    return fields


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_idempotent_jobs.testing.openai_api", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--api-key", default="sk-local-0penai-d0uble", help="the API key clients must send")
    parser.add_argument("--polls-to-finish", type=int, default=2)
    parser.add_argument("--seconds-to-finish", type=float)
    args = parser.parse_args(argv)
    server = OpenAIApi(api_key=args.api_key, host=args.host, port=args.port, polls_to_finish=args.polls_to_finish,
                       seconds_to_finish=args.seconds_to_finish)  # fmt: skip
    return serve_until_terminated(server)


if __name__ == "__main__":
    sys.exit(main())
