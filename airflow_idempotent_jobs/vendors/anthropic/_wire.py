"""The Message Batches API through the ``anthropic`` SDK, with every answer read strictly by us.

The SDK builds its models without validating them (a ``{}`` answer becomes a batch without an id,
an HTML page a string), so each call asks for the raw answer (``with_raw_response``) and this
module parses it with `safe_json` and checks every field it uses (`Malformed` otherwise). Errors of
the SDK are the port's (`_stainless.classify`). Results are read from
``/v1/messages/batches/{id}/results`` under the client's own base URL, never from the answer's
``results_url``: a batch's answer must not choose where our key is sent. Lines are streamed, each
at most `MAX_LINE` bytes, never the whole file at once.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import anthropic
import httpx2

from ... import safe_json
from ...errors import ProviderError, ProviderOutcomeUnknown, UnsafeJson
from .._stainless import classify
from ..llm_batch import Usage

__all__ = ["MAX_LINE", "BatchInfo", "Batches", "Line", "Malformed", "Page", "parse_line"]

#: Longest results line read (a message of the largest outputs is well under it).
MAX_LINE: Final = 32 * 1024 * 1024
STATES: Final = frozenset({"in_progress", "canceling", "ended"})
COUNTS: Final = ("processing", "succeeded", "errored", "canceled", "expired")
OUTCOMES: Final = frozenset(COUNTS[1:])
_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")


class Malformed(ValueError):
    """A 2xx answer that is not what the API documents (the text says which field)."""


@dataclass(frozen=True)
class BatchInfo:
    """The fields of a ``MessageBatch`` the provider relies on."""

    id: str
    status: str
    created_at: dt.datetime
    counts: dict[str, int]
    results_ready: bool
    archived: bool


@dataclass(frozen=True)
class Page:
    batches: list[BatchInfo]
    has_more: bool
    last_id: str | None


@dataclass(frozen=True)
class Line:
    """One results line: its custom_id (as sent), outcome, model and usage (succeeded), error text (errored)."""

    custom_id: str
    outcome: str
    model: str | None
    usage: Usage | None
    error: str | None
    raw: dict[str, Any]


def batch_id(value: object, where: str) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise Malformed(f"{where}: {str(value)[:60]!r} is not a batch id")
    return value


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Malformed(f"{where}: {str(value)[:40]!r} is not a count")
    return value


def _time(value: object, where: str) -> dt.datetime:
    when = None
    if isinstance(value, str) and len(value) <= 40:
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            when = None
    if when is None or when.tzinfo is None:
        raise Malformed(f"{where}: {str(value)[:40]!r} is not an RFC 3339 time")
    return when.astimezone(dt.timezone.utc)


def parse_batch(value: object, where: str) -> BatchInfo:
    if not isinstance(value, dict) or value.get("type") != "message_batch":
        raise Malformed(f"{where}: not a message_batch object")
    status = value.get("processing_status")
    if status not in STATES:
        raise Malformed(f"{where}.processing_status: {str(status)[:40]!r} is not a known state")
    counts = value.get("request_counts")
    if not isinstance(counts, dict):
        raise Malformed(f"{where}.request_counts: missing")
    return BatchInfo(
        id=batch_id(value.get("id"), f"{where}.id"),
        status=str(status),
        created_at=_time(value.get("created_at"), f"{where}.created_at"),
        counts={name: _count(counts.get(name), f"{where}.request_counts.{name}") for name in COUNTS},
        results_ready=isinstance(value.get("results_url"), str) and bool(value["results_url"]),
        archived=value.get("archived_at") is not None,
    )


def parse_line(raw: bytes) -> Line:
    """One results line, or `Malformed`."""
    try:
        value = safe_json.loads(raw)
    except UnsafeJson as exc:
        raise Malformed(f"a results line is not JSON ({exc})") from None
    result = value.get("result") if isinstance(value, dict) else None
    custom_id = value.get("custom_id") if isinstance(value, dict) else None
    outcome = result.get("type") if isinstance(result, dict) else None
    if not isinstance(custom_id, str) or not custom_id or outcome not in OUTCOMES:
        raise Malformed("a results line without a custom_id and a known result type")
    assert isinstance(result, dict) and isinstance(value, dict)
    if outcome != "succeeded":
        error = result.get("error")
        inner = error.get("error") if isinstance(error, dict) else None
        text = str(inner.get("message"))[:300] if isinstance(inner, dict) and inner.get("message") else None
        return Line(custom_id, str(outcome), None, None, text, value)
    message = result.get("message")
    usage = message.get("usage") if isinstance(message, dict) else None
    model = message.get("model") if isinstance(message, dict) else None
    if not isinstance(usage, dict) or not isinstance(model, str) or not model:
        raise Malformed(f"the succeeded line {custom_id[:80]!r} carries no model and usage")
    where = f"line {custom_id[:80]!r}: usage"
    used = Usage(
        input_tokens=_count(usage.get("input_tokens"), f"{where}.input_tokens"),
        output_tokens=_count(usage.get("output_tokens"), f"{where}.output_tokens"),
        cache_write_tokens=_count(
            usage.get("cache_creation_input_tokens") or 0, f"{where}.cache_creation_input_tokens"
        ),
        cached_input_tokens=_count(usage.get("cache_read_input_tokens") or 0, f"{where}.cache_read_input_tokens"),
    )
    return Line(custom_id, "succeeded", model, used, None, value)


class Batches:
    """The four calls the provider makes, on one SDK client (``anthropic.Anthropic``)."""

    def __init__(self, client: anthropic.Anthropic, paid_call_options: dict[str, Any]) -> None:
        self.client = client
        self.paid_call_options = paid_call_options

    def create(self, requests: list[dict[str, Any]]) -> str:
        """The paid call, sent once (`PAID_CALL_OPTIONS`); the new batch's id."""
        what = "create message batch"
        try:
            paid = self.client.with_options(**self.paid_call_options)
            raw = paid.messages.batches.with_raw_response.create(requests=requests)  # type: ignore[arg-type]
            return parse_batch(_json(raw.read()), "the create answer").id
        except Malformed as exc:
            raise ProviderOutcomeUnknown(f"{what}: {exc}: the batch may exist") from None
        except Exception as exc:
            raise classify(exc, anthropic, what) from None

    def retrieve(self, ref: str) -> BatchInfo:
        what = "retrieve message batch"
        try:
            raw = self.client.messages.batches.with_raw_response.retrieve(batch_id(ref, "remote ref"))
            return parse_batch(_json(raw.read()), "the retrieve answer")
        except Malformed as exc:
            raise ProviderError(f"{what}: {exc}") from None
        except Exception as exc:
            raise classify(exc, anthropic, what) from None

    def page(self, after_id: str | None, limit: int) -> Page:
        """One page of the listing, newest first; `Malformed` or a `ProviderError` when it says nothing."""
        what = "list message batches"
        try:
            if after_id is None:
                raw = self.client.messages.batches.with_raw_response.list(limit=limit)
            else:
                raw = self.client.messages.batches.with_raw_response.list(limit=limit, after_id=after_id)
            body = _json(raw.read())
        except Malformed:
            raise
        except Exception as exc:
            raise classify(exc, anthropic, what) from None
        data = body.get("data") if isinstance(body, dict) else None
        has_more = body.get("has_more") if isinstance(body, dict) else None
        if not isinstance(data, list) or not isinstance(has_more, bool) or len(data) > limit:
            raise Malformed("the listing is not a page (data, has_more)")
        batches = [parse_batch(item, f"data[{i}]") for i, item in enumerate(data)]
        last = body.get("last_id")
        if has_more and (not batches or last != batches[-1].id):
            raise Malformed("the listing says has_more, but its last_id is not its last batch")
        return Page(batches, has_more, batches[-1].id if batches else None)

    @contextmanager
    def results(self, ref: str) -> Iterator[Iterator[bytes]]:
        """The batch's results lines, streamed (closed when the ``with`` ends)."""
        what = "read message batch results"
        path = f"/v1/messages/batches/{batch_id(ref, 'remote ref')}/results"
        try:
            response = self.client.get(
                path, cast_to=httpx2.Response, stream=True, options={"headers": {"Accept": "application/binary"}}
            )
        except Exception as exc:
            raise classify(exc, anthropic, what) from None
        try:
            kind = response.headers.get("content-type", "")
            if "html" in kind:
                raise Malformed(f"the results are {kind.split(';')[0]!r}, not JSON lines")
            yield _lines(response.iter_bytes(), what)
        finally:
            response.close()


def _lines(chunks: Iterator[bytes], what: str) -> Iterator[bytes]:
    pending = bytearray()
    try:
        for chunk in chunks:
            pending += chunk
            while (end := pending.find(b"\n")) >= 0:
                line = bytes(pending[:end])
                del pending[: end + 1]
                if line.strip():
                    yield line
            if len(pending) > MAX_LINE:
                raise Malformed(f"a results line longer than {MAX_LINE} bytes")
    except Malformed:
        raise
    except Exception as exc:  # the stream broke off
        raise classify(exc, anthropic, what) from None
    if bytes(pending).strip():
        yield bytes(pending)


def _json(raw: bytes) -> Any:
    try:
        return safe_json.loads(raw)
    except UnsafeJson as exc:
        raise Malformed(f"the answer is not JSON ({exc})") from None
