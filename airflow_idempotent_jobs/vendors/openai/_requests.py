"""A batch request as this adapter takes it: checked field by field before anything is sent.

The shape (`parse_request`), one of two forms::

    {"endpoint": "/v1/chat/completions",        # or "/v1/responses", "/v1/embeddings"; this is the default
     "completion_window": "24h",                 # the default, and the only value OpenAI offers
     "requests": [{"custom_id": "a", "body": {"model": "gpt-5-mini", "messages": [...], "max_tokens": 500}}],
     "metadata": {"team": "growth"}}             # optional; up to 15 pairs (the adapter adds aij_token)

    {"endpoint": ..., "input_file": {"path": "/data/week.jsonl", "sha256": "<hex>"}}

A prepared file holds OpenAI's own JSONL lines (``custom_id``, ``method`` POST, ``url`` the endpoint,
``body``); `prepare_request` reads it once and fills in its sha256, so that the ledger's request
fingerprint covers the bytes that will be sent. Every request's model must be in the price table.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ...errors import InvalidRequest
from ..llm_batch import PriceTable, RequestBound

__all__ = [
    "ENDPOINTS",
    "MAX_FILE_BYTES",
    "TOKEN_KEY",
    "BatchRequest",
    "Line",
    "file_lines",
    "parse_request",
    "prepare_request",
]

#: The metadata key the adapter's idempotency token travels in.
TOKEN_KEY: Final = "aij_token"
#: The endpoints a batch may use here, with the body fields that bound each request's output.
ENDPOINTS: Final = {
    "/v1/chat/completions": ("max_completion_tokens", "max_tokens"),
    "/v1/responses": ("max_output_tokens",),
    "/v1/embeddings": (),
}
MAX_REQUESTS: Final = 50_000
MAX_FILE_BYTES: Final = 200 * 1024 * 1024
_KEYS: Final = frozenset({"endpoint", "completion_window", "requests", "input_file", "metadata"})
_SHA256: Final = re.compile(r"[0-9a-f]{64}")


def _bad(where: str, reason: str) -> InvalidRequest:
    return InvalidRequest(f"OpenAI batch request: {where}: {reason}")


@dataclass(frozen=True)
class Line:
    """One request of a batch: where it is, its model, its size as sent, its output bound (None: none)."""

    where: str
    model: str
    size: int
    max_tokens: int | None
    #: The body fields that bound its output at its endpoint.
    fields: tuple[str, ...] = ()

    def bound(self) -> RequestBound:
        if self.max_tokens is None:
            fields = " or ".join(self.fields)
            raise _bad(
                f"{self.where}.body", f"has no {fields}: its output, and so the batch's worst case, has no bound"
            )
        return RequestBound(self.model, self.size, self.max_tokens)


@dataclass(frozen=True)
class BatchRequest:
    """A checked request: what `submit` sends (inline JSONL, or a prepared file) and each line's bound."""

    endpoint: str
    completion_window: str
    metadata: dict[str, str]
    lines: tuple[Line, ...]
    #: The JSONL to upload, when the requests were given inline.
    content: bytes | None
    path: Path | None
    #: The file's sha256 as the request declares it (None: not prepared), and as read now.
    declared_sha256: str | None
    sha256: str | None


def _compact(value: Any, where: str) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _bad(where, f"has no JSON form ({exc})") from None


def _check_line(line: Any, where: str, endpoint: str, seen: set[str], prices: PriceTable | None, size: int) -> Line:
    if not isinstance(line, Mapping):
        raise _bad(where, "must be an object with custom_id and body")
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id.strip():
        raise _bad(f"{where}.custom_id", "must be a non-empty string")
    if custom_id in seen:
        raise _bad(f"{where}.custom_id", f"{custom_id!r:.80} is used twice: each request needs its own")
    seen.add(custom_id)
    body = line.get("body")
    if not isinstance(body, Mapping):
        raise _bad(f"{where}.body", "must be an object (the endpoint's request body)")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _bad(f"{where}.body.model", "must be a non-empty string")
    if prices is not None:
        prices.price(model)  # InvalidConfiguration, naming the model, before anything is sent
    fields = ENDPOINTS[endpoint]
    bound: int | None = 0 if not fields else None
    for name in fields:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _bad(f"{where}.body.{name}", f"{value!r:.40} is not a whole number of tokens >= 1")
        bound = value
        break
    return Line(where, model, size, bound, fields)


def parse_request(request: Any, prices: PriceTable | None) -> BatchRequest:
    """The checked request; `InvalidRequest` (or `InvalidConfiguration` for an unpriced model) naming the field."""
    if not isinstance(request, Mapping):
        raise _bad("request", "must be an object")
    unknown = sorted(str(key) for key in set(request) - _KEYS)
    if unknown:
        raise _bad(unknown[0], f"is not a field (use {', '.join(sorted(_KEYS))})")
    endpoint = request.get("endpoint", "/v1/chat/completions")
    if endpoint not in ENDPOINTS:
        raise _bad("endpoint", f"{endpoint!r:.80} is not one of {', '.join(ENDPOINTS)}")
    window = request.get("completion_window", "24h")
    if window != "24h":
        raise _bad("completion_window", f"{window!r:.40} is not '24h', the only window OpenAI offers")
    metadata = _metadata(request.get("metadata"))
    if ("requests" in request) == ("input_file" in request):
        raise _bad("request", "give either requests (a list) or input_file (a prepared JSONL file), not both")
    if "input_file" in request:
        path, sha256 = _input_file(request["input_file"])
        digest, lines = file_lines(path, endpoint, prices)
        return BatchRequest(endpoint, window, metadata, tuple(lines), None, path, sha256, digest)
    entries = request["requests"]
    if not isinstance(entries, list) or not entries:
        raise _bad("requests", "must be a non-empty list")
    if len(entries) > MAX_REQUESTS:
        raise _bad("requests", f"holds {len(entries)} requests; a batch takes at most {MAX_REQUESTS}")
    seen: set[str] = set()
    lines, chunks = [], []
    for index, entry in enumerate(entries):
        where = f"requests[{index}]"
        if isinstance(entry, Mapping) and set(entry) - {"custom_id", "body"}:
            extra = sorted(str(k) for k in set(entry) - {"custom_id", "body"})[0]
            raise _bad(f"{where}.{extra}", "is not a field (custom_id and body; method and url are set for you)")
        text = _compact({"custom_id": entry.get("custom_id") if isinstance(entry, Mapping) else None,
                         "method": "POST", "url": endpoint,
                         "body": entry.get("body") if isinstance(entry, Mapping) else None}, where)  # fmt: skip
        chunk = (text + "\n").encode()
        lines.append(_check_line(entry, where, endpoint, seen, prices, len(chunk)))
        chunks.append(chunk)
    content = b"".join(chunks)
    if len(content) > MAX_FILE_BYTES:
        raise _bad("requests", f"make {len(content)} bytes of JSONL; a batch file holds at most {MAX_FILE_BYTES}")
    return BatchRequest(endpoint, window, metadata, tuple(lines), content, None, None, None)


def _metadata(raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _bad("metadata", "must map names to strings")
    if len(raw) > 15:
        raise _bad("metadata", f"has {len(raw)} pairs; OpenAI keeps 16 and the adapter needs one ({TOKEN_KEY})")
    for key, value in raw.items():
        if key == TOKEN_KEY:
            raise _bad(f"metadata.{TOKEN_KEY}", "is the adapter's own key (the idempotency token): use another name")
        if not isinstance(key, str) or not 0 < len(key) <= 64:
            raise _bad("metadata", f"key {key!r:.80} must be a string of 1 to 64 characters")
        if not isinstance(value, str) or len(value) > 512:
            raise _bad(f"metadata.{key}", "must be a string of at most 512 characters")
    return dict(raw)


def _input_file(raw: Any) -> tuple[Path, str | None]:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("path"), str) or not raw["path"]:
        raise _bad("input_file", 'must be {"path": "...", "sha256": "<hex>"} (see prepare_request)')
    unknown = sorted(str(key) for key in set(raw) - {"path", "sha256"})
    if unknown:
        raise _bad(f"input_file.{unknown[0]}", "is not a field (path, sha256)")
    sha256 = raw.get("sha256")
    if sha256 is not None and (not isinstance(sha256, str) or not _SHA256.fullmatch(sha256)):
        raise _bad("input_file.sha256", "must be 64 lowercase hex digits (prepare_request fills it in)")
    return Path(raw["path"]), sha256


def _read(path: Path) -> Iterator[bytes]:
    """The file's lines, as bytes; `InvalidRequest` if it cannot be read or is too big."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise _bad("input_file.path", f"{path} holds {size} bytes; a batch file holds at most {MAX_FILE_BYTES}")
        with path.open("rb") as handle:
            yield from handle
    except OSError as exc:
        raise _bad("input_file.path", f"cannot read {path}: {exc.strerror or exc}") from None


def file_lines(path: Path, endpoint: str, prices: PriceTable | None) -> tuple[str, list[Line]]:
    """Read a prepared JSONL file once: its sha256 and its checked lines."""
    digest = hashlib.sha256()
    seen: set[str] = set()
    lines: list[Line] = []
    for number, raw in enumerate(_read(path), start=1):
        digest.update(raw)
        if not raw.strip():
            continue
        where = f"input_file line {number}"
        try:
            line = json.loads(raw, parse_constant=_no_constant)
        except (ValueError, UnicodeDecodeError):
            raise _bad(where, "is not JSON") from None
        if isinstance(line, Mapping) and (line.get("method") != "POST" or line.get("url") != endpoint):
            raise _bad(where, f"needs method POST and url {endpoint} (the batch's endpoint)")
        lines.append(_check_line(line, where, endpoint, seen, prices, len(raw)))
        if len(lines) > MAX_REQUESTS:
            raise _bad("input_file", f"holds more than {MAX_REQUESTS} requests")
    if not lines:
        raise _bad("input_file", f"{path} holds no requests")
    return digest.hexdigest(), lines


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def prepare_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """``request`` with its ``input_file.sha256`` filled in from the file as it is now (read once, checked).

    Call it before handing the request to the ledger: the fingerprint then binds the episode to
    these bytes, and `submit` refuses a file that changed since. An inline request comes back as is.
    """
    if not isinstance(request, Mapping) or "input_file" not in request:
        parse_request(request, None)
        return dict(request)
    path, _ = _input_file(request["input_file"])
    parsed = parse_request({**request, "input_file": {"path": str(path)}}, None)
    assert parsed.path is not None and parsed.sha256 is not None
    return {**request, "input_file": {"path": str(parsed.path), "sha256": parsed.sha256}}
