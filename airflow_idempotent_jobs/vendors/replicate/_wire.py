"""Replicate's predictions API through the ``replicate`` SDK (1.0.x), with every answer read strictly by us.

Each call goes through ``replicate.Client._request``, the one function the SDK's own
``predictions.create`` / ``models.predictions.create`` / ``predictions.get`` / ``predictions.list``
call: its httpx client, its ``Authorization: Bearer`` header, its ``RetryTransport`` and its
``ReplicateError``. We call it directly for three reasons: the paid call carries a ``Cancel-After``
header (the SDK's ``create`` sends none), the SDK's pydantic models coerce what they read (an id of
``123`` becomes ``"123"``), and a listing's ``next`` URL must never choose where the token is sent:
the SDK's ``predictions.list(cursor)`` requests that URL as it is, with the token, whatever its host
(test_sdk_facts.py). Here only the ``next`` URL's query (the API's cursor) is used, under our
own base URL.

The ``RetryTransport`` retries GETs on 429/503/504 up to 10 times and sleeps for a numeric
``Retry-After`` uncapped (an answer of ``Retry-After: 86400`` holds a status call for a day):
`BoundedRetryAfter` caps what it reads to `RETRY_AFTER_CAP` seconds.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
from replicate.client import Client

from ... import safe_json
from ...errors import ProviderError, ProviderOutcomeUnknown, UnsafeJson
from ._classify import classify

__all__ = ["RETRY_AFTER_CAP", "BoundedRetryAfter", "Malformed", "Page", "Prediction", "Predictions", "parse_time"]

#: Longest wait a ``Retry-After`` answer may impose on one retried GET, in seconds.
RETRY_AFTER_CAP: Final = 5
STATUSES: Final = frozenset({"starting", "processing", "succeeded", "failed", "canceled", "aborted"})
_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
_LIST: Final = "/v1/predictions"
#: A cursor query as we pass it back: printable ASCII, no fragment, bounded.
_QUERY: Final = re.compile(r"[!-~]{1,4096}")


class Malformed(ValueError):
    """A 2xx answer that is not what the API documents (the text says which field)."""


@dataclass(frozen=True)
class Prediction:
    """The fields of a prediction object the provider relies on; ``raw``: the whole object."""

    id: str
    status: str
    model: str | None
    version: str | None
    created_at: dt.datetime
    #: None when the API removed it (``data_removed``) or sent no object.
    input: Mapping[str, Any] | None
    data_removed: bool
    source: str | None
    deployment: str | None
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class Page:
    predictions: list[Prediction]
    #: The query of the next page (the API's cursor), or None on the last page.
    next_query: str | None


def parse_time(value: object, where: str) -> dt.datetime:
    """An RFC 3339 time (nanoseconds allowed) as an aware UTC datetime; `Malformed` otherwise."""
    when = None
    if isinstance(value, str) and len(value) <= 40:
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            when = None
    if when is None or when.tzinfo is None:
        raise Malformed(f"{where}: {str(value)[:40]!r} is not an RFC 3339 time")
    return when.astimezone(dt.timezone.utc)


def prediction_id(value: object, where: str) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise Malformed(f"{where}: {str(value)[:60]!r} is not a prediction id")
    return value


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def parse_prediction(value: object, where: str) -> Prediction:
    if not isinstance(value, dict):
        raise Malformed(f"{where}: not a prediction object")
    status = value.get("status")
    if status not in STATUSES:
        raise Malformed(f"{where}.status: {str(status)[:40]!r} is not a known status")
    removed = value.get("data_removed") is True
    given = value.get("input")
    return Prediction(
        id=prediction_id(value.get("id"), f"{where}.id"),
        status=str(status),
        model=_text(value.get("model")),
        version=_text(value.get("version")),
        created_at=parse_time(value.get("created_at"), f"{where}.created_at"),
        input=given if isinstance(given, dict) and not removed else None,
        data_removed=removed,
        source=_text(value.get("source")),
        deployment=_text(value.get("deployment")),
        raw=value,
    )


class BoundedRetryAfter(httpx.BaseTransport):
    """httpx's transport, with every ``Retry-After`` above `RETRY_AFTER_CAP` seconds read as the cap."""

    def __init__(self, inner: httpx.BaseTransport | None = None) -> None:
        self.inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        wait = response.headers.get("Retry-After")
        if wait is not None and not (wait.strip().isdigit() and int(wait.strip()) <= RETRY_AFTER_CAP):
            response.headers["Retry-After"] = str(RETRY_AFTER_CAP)
        return response

    def close(self) -> None:
        self.inner.close()


class Predictions:
    """The calls the provider makes, on one SDK client (``replicate.Client``)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def _json(self, response: httpx.Response) -> Any:
        try:
            return safe_json.loads(response.content, strict_numbers=False)
        except UnsafeJson as exc:
            raise Malformed(f"the answer is not JSON ({exc})") from None

    def create(self, path: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> Prediction:
        """The paid call, sent once (the SDK never retries a POST); the new prediction."""
        what = "create prediction"
        try:
            response = self.client._request("POST", path, json=dict(body), headers=dict(headers))
            return parse_prediction(self._json(response), "the create answer")
        except Malformed as exc:
            raise ProviderOutcomeUnknown(f"{what}: {exc}: the prediction may exist") from None
        except Exception as exc:
            raise classify(exc, what) from None

    def get(self, ref: str) -> Prediction:
        what = "get prediction"
        try:
            response = self.client._request("GET", f"{_LIST}/{prediction_id(ref, 'remote ref')}")
            return parse_prediction(self._json(response), "the get answer")
        except Malformed as exc:
            raise ProviderError(f"{what}: {exc}") from None
        except Exception as exc:
            raise classify(exc, what, paid=False) from None

    def page(self, query: str | None) -> Page:
        """One page of the listing, newest first; `Malformed` or a `ProviderError` when it says nothing."""
        what = "list predictions"
        try:
            response = self.client._request("GET", _LIST + (f"?{query}" if query else ""))
            body = self._json(response)
        except Malformed:
            raise
        except Exception as exc:
            raise classify(exc, what, paid=False) from None
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list) or "next" not in body:
            raise Malformed("the listing is not a page (results, next)")
        predictions = [parse_prediction(item, f"results[{i}]") for i, item in enumerate(results)]
        return Page(predictions, cursor_query(body["next"]))


def cursor_query(next_url: object) -> str | None:
    """The query of a ``next`` URL (None: the last page); `Malformed` unless it lists predictions."""
    if next_url is None:
        return None
    parts = urlsplit(next_url) if isinstance(next_url, str) and len(next_url) <= 8192 else None
    if parts is None or not parts.path.rstrip("/").endswith(_LIST) or not _QUERY.fullmatch(parts.query or ""):
        raise Malformed(f"next: {str(next_url)[:120]!r} is not a page of {_LIST} with a cursor")
    return parts.query
