"""`HttpPaidProvider`: a configurable JSON-over-HTTP job API, driven by httpx (which Airflow ships).

Failures are classified for the ledger (see `provider`): only a request that certainly never left
(connection refused, connect or pool timeout) is retried here, with bounded backoff; 429 means
"not processed"; any other 4xx is a rejection; a read timeout, a dropped connection, a 5xx, 408,
409 (APIs answer it for an idempotency key whose request is in progress or already made the job),
or a success answer without a readable id leaves the outcome unknown.
Credentials are given at construction and never appear in ``repr``, logs or error messages.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote, urlsplit

import httpx

from ..errors import InvalidIdentifier
from .provider import (
    ProviderCapabilities,
    ProviderError,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
    RemoteState,
    RemoteStatus,
)

__all__ = ["DEFAULT_STATE_MAP", "HttpPaidProvider", "HttpProviderConfig"]

log = logging.getLogger(__name__)

#: Provider state words understood out of the box; extend with ``state_map``.
DEFAULT_STATE_MAP: Final[Mapping[str, str]] = {
    "pending": "pending",
    "queued": "pending",
    "submitted": "pending",
    "running": "running",
    "in_progress": "running",
    "succeeded": "succeeded",
    "completed": "succeeded",
    "done": "succeeded",
    "failed": "failed",
    "error": "failed",
    "cancelled": "failed",
}
#: Failures raised before a single byte of the request was sent.
_NOT_SENT: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
#: Client errors that do not prove the job was refused: a request timeout, and a conflict on the
#: idempotency key (its request is in flight, or already made the job).
_OUTCOME_UNKNOWN_4XX: Final = frozenset({408, 409})


@dataclass(frozen=True)
class HttpProviderConfig:
    """Where a job API lives and how its JSON reads; JSON-serialisable (no secrets) for triggers."""

    #: ``http(s)://host[:port][/prefix]``; paths below are appended to it.
    base_url: str
    submit_path: str = "/jobs"
    submit_method: str = "POST"
    #: Status URL template, with ``{remote_ref}``.
    status_path: str = "/jobs/{remote_ref}"
    #: Header carrying the idempotency token, or None if the API has no such header.
    idempotency_header: str | None = "Idempotency-Key"
    #: Whether the API returns the existing job for a repeated token (capability (a)).
    tokens_honoured: bool = True
    #: Lookup URL template with ``{token}`` (capability (b)), or None. A 404 answer means "no job".
    lookup_path: str | None = None
    #: Dotted JSON paths (``data.id``, ``items.0.id``) in the submit/status/lookup answers.
    ref_path: str = "id"
    lookup_ref_path: str | None = None
    state_path: str = "state"
    cost_path: str | None = "cost"
    result_path: str | None = "result"
    error_path: str | None = "error"
    #: Provider state word -> pending|running|succeeded|failed; merged over `DEFAULT_STATE_MAP`.
    state_map: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    #: Retries of a request that certainly did not reach the server, with doubling backoff.
    connect_retries: int = 3
    backoff_initial: float = 0.2
    backoff_max: float = 5.0
    #: Extra non-secret headers sent with every request.
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            self._bad("base_url", "must be an http:// or https:// URL with a host")
        if parts.username or parts.password:
            self._bad("base_url", "must not carry credentials: pass them at construction")
        if self.submit_method.upper() not in ("POST", "PUT"):
            self._bad("submit_method", "must be POST or PUT")
        if "{remote_ref}" not in self.status_path:
            self._bad("status_path", "must contain {remote_ref}")
        if self.lookup_path is not None and "{token}" not in self.lookup_path:
            self._bad("lookup_path", "must contain {token}")
        allowed = {s.value for s in RemoteState}
        for word, state in self.state_map.items():
            if state not in allowed:
                self._bad("state_map", f"{word!r} maps to {state!r}, not one of {sorted(allowed)}")
        numbers = (self.connect_timeout, self.read_timeout, self.backoff_initial, self.backoff_max)
        if min(numbers) < 0 or self.connect_retries < 0:
            self._bad("timeouts", "timeouts, retries and backoff must not be negative")

    @staticmethod
    def _bad(name: str, reason: str) -> None:
        raise InvalidIdentifier("provider config", name, reason)

    @property
    def capabilities(self) -> ProviderCapabilities:
        return ProviderCapabilities(
            idempotent_tokens=self.idempotency_header is not None and self.tokens_honoured,
            lookup=self.lookup_path is not None,
        )

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["state_map"] = dict(self.state_map)
        data["headers"] = dict(self.headers)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HttpProviderConfig:
        """The inverse of `to_dict`; unknown keys are refused rather than ignored."""
        if not isinstance(data, Mapping):
            raise InvalidIdentifier("provider config", data, "must be a JSON object")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise InvalidIdentifier("provider config", sorted(unknown), "unknown keys")
        try:
            return cls(**data)
        except TypeError as exc:
            raise InvalidIdentifier("provider config", dict(data), str(exc)) from exc


class HttpPaidProvider:
    """A `PaidProvider` over HTTP+JSON. ``auth_header``/``auth_value``: e.g. ``Authorization`` / ``Bearer ...``."""

    def __init__(
        self, config: HttpProviderConfig, *, auth_header: str | None = None, auth_value: str | None = None
    ) -> None:
        self.config = config
        self._auth = {auth_header: auth_value} if auth_header and auth_value else {}
        self._secret = auth_value or ""
        self._timeout = httpx.Timeout(config.read_timeout, connect=config.connect_timeout)

    @property
    def capabilities(self) -> ProviderCapabilities:
        return self.config.capabilities

    def __repr__(self) -> str:
        auth = f"{next(iter(self._auth))}: <redacted>" if self._auth else "none"
        return f"HttpPaidProvider(base_url={self.config.base_url!r}, auth={auth})"

    # -- the port ------------------------------------------------------------------------------
    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        """POST (or PUT) the request as JSON with the token header; returns the remote id."""
        cfg = self.config
        headers = {cfg.idempotency_header: idempotency_token} if cfg.idempotency_header else {}
        response = self._send(cfg.submit_method.upper(), cfg.submit_path, json=dict(request), headers=headers)
        data = self._answer(response, "submit")
        ref = _dig(data, cfg.ref_path)
        if not isinstance(ref, (str, int)) or isinstance(ref, bool) or str(ref) == "":
            raise ProviderOutcomeUnknown(
                f"submit answered HTTP {response.status_code} without a job id at {cfg.ref_path!r}: the job may exist",
                status=response.status_code,
            )
        return str(ref)

    def status(self, remote_ref: str) -> RemoteStatus:
        """GET the status URL; a 404 is `ProviderRejected` (no such job)."""
        response = self._send("GET", self.config.status_path.format(remote_ref=quote(remote_ref, safe="")))
        return self._status_from(response)

    async def astatus(self, remote_ref: str) -> RemoteStatus:
        """`status` on ``httpx.AsyncClient``, for a deferrable trigger: never blocks the event loop."""
        response = await self._asend("GET", self.config.status_path.format(remote_ref=quote(remote_ref, safe="")))
        return self._status_from(response)

    def find(self, idempotency_token: str) -> str | None:
        """GET the lookup URL; a 404 (or no id in the answer) means no job carries the token."""
        cfg = self.config
        if cfg.lookup_path is None:
            raise ProviderError("this provider has no lookup_path: it cannot find jobs by token")
        response = self._send("GET", cfg.lookup_path.format(token=quote(idempotency_token, safe="")))
        if response.status_code == 404:
            return None
        ref = _dig(self._answer(response, "lookup"), cfg.lookup_ref_path or cfg.ref_path)
        return None if ref is None or ref == "" else str(ref)

    # -- answers -------------------------------------------------------------------------------
    def _status_from(self, response: httpx.Response) -> RemoteStatus:
        cfg = self.config
        data = self._answer(response, "status")
        word = _dig(data, cfg.state_path)
        mapping = {**DEFAULT_STATE_MAP, **cfg.state_map}
        if not isinstance(word, str) or word not in mapping:
            raise ProviderError(f"status answer has state {word!r} at {cfg.state_path!r}; map it in state_map")
        cost = _dig(data, cfg.cost_path) if cfg.cost_path else None
        if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float, str))):
            raise ProviderError(f"status answer has a non-numeric cost {cost!r}")
        try:
            cost_value = None if cost is None else float(cost)
        except ValueError as exc:
            raise ProviderError(f"status answer has a non-numeric cost {cost!r}") from exc
        error = _dig(data, cfg.error_path) if cfg.error_path else None
        return RemoteStatus(
            state=RemoteState(mapping[word]),
            cost=cost_value,
            result=_dig(data, cfg.result_path) if cfg.result_path else None,
            error=None if error is None else self._redact(str(error)),
        )

    def _answer(self, response: httpx.Response, what: str) -> Any:
        """The JSON body of a 2xx answer; anything else raised as the right provider error."""
        code = response.status_code
        if 200 <= code < 300:
            try:
                return response.json()
            except ValueError as exc:
                raise ProviderOutcomeUnknown(f"{what} answered HTTP {code} with a body that is not JSON") from exc
        detail = self._detail(response)
        message = f"{what} {self._where(response)} answered HTTP {code}: {detail}"
        if code == 429:
            raise ProviderUnavailable(message, status=code)
        if 400 <= code < 500 and code not in _OUTCOME_UNKNOWN_4XX:
            raise ProviderRejected(message, status=code)
        raise ProviderOutcomeUnknown(message, status=code)

    def _detail(self, response: httpx.Response) -> str:
        text = ""
        try:
            body = response.json()
            found = _dig(body, self.config.error_path) if self.config.error_path else None
            text = str(found) if found is not None else str(body)
        except ValueError:
            text = response.text
        text = " ".join(text.split())
        return self._redact(text[:300] + ("..." if len(text) > 300 else "")) or response.reason_phrase

    def _where(self, response: httpx.Response) -> str:
        return f"{response.request.method} {response.request.url.copy_with(query=None)}"

    def _redact(self, text: str) -> str:
        return text.replace(self._secret, "<redacted>") if self._secret else text

    # -- transport -----------------------------------------------------------------------------
    def _request_args(self, path: str, headers: Mapping[str, str] | None) -> tuple[str, dict[str, str]]:
        url = self.config.base_url.rstrip("/") + path
        return url, {**self.config.headers, **(headers or {}), **self._auth}

    def _send(
        self, method: str, path: str, *, json: Any = None, headers: Mapping[str, str] | None = None
    ) -> httpx.Response:
        url, all_headers = self._request_args(path, headers)
        delay = self.config.backoff_initial
        for attempt in range(self.config.connect_retries + 1):
            if attempt:
                time.sleep(delay)
                delay = min(delay * 2, self.config.backoff_max)
            try:
                with httpx.Client(timeout=self._timeout, verify=_tls()) as client:
                    response = client.request(method, url, json=json, headers=all_headers)
            except _NOT_SENT as exc:
                last: Exception = exc
                log.info("%s %s not sent (attempt %d): %s", method, _safe(url), attempt + 1, type(exc).__name__)
                continue
            except httpx.TransportError as exc:
                raise self._lost(method, url, exc) from None
            log.info("%s %s -> HTTP %d", method, _safe(url), response.status_code)
            return response
        raise self._unreachable(method, url, last) from None

    async def _asend(self, method: str, path: str) -> httpx.Response:
        url, all_headers = self._request_args(path, None)
        tls = await asyncio.to_thread(_tls)  # the first call reads the CA bundle from disk
        delay = self.config.backoff_initial
        for attempt in range(self.config.connect_retries + 1):
            if attempt:
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.config.backoff_max)
            try:
                async with httpx.AsyncClient(timeout=self._timeout, verify=tls) as client:
                    response = await client.request(method, url, headers=all_headers)
            except _NOT_SENT as exc:
                last: Exception = exc
                continue
            except httpx.TransportError as exc:
                raise self._lost(method, url, exc) from None
            log.info("%s %s -> HTTP %d", method, _safe(url), response.status_code)
            return response
        raise self._unreachable(method, url, last) from None

    def _lost(self, method: str, url: str, exc: Exception) -> ProviderOutcomeUnknown:
        # `from None`: httpx's own exception would drag the request (and its headers) along.
        reason = self._redact(str(exc)) or type(exc).__name__
        return ProviderOutcomeUnknown(f"{method} {_safe(url)}: {type(exc).__name__} after sending ({reason})")

    def _unreachable(self, method: str, url: str, exc: Exception) -> ProviderUnavailable:
        tries = self.config.connect_retries + 1
        reason = self._redact(str(exc)) or type(exc).__name__
        return ProviderUnavailable(f"{method} {_safe(url)}: not reachable after {tries} tries ({reason})")


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context per process: building it (loading the CA bundle) costs more than a request."""
    return httpx.create_ssl_context()


def _safe(url: str) -> str:
    """The URL without its query (tokens travel there for lookups; keep logs short)."""
    return url.split("?", 1)[0]


def _dig(data: Any, path: str | None) -> Any:
    """The value at a dotted path (``a.b.0.c``), or None when any step is missing."""
    if path is None or path == "":
        return data
    for step in path.split("."):
        if isinstance(data, Mapping):
            data = data.get(step)
        elif isinstance(data, list) and step.lstrip("-").isdigit() and -len(data) <= int(step) < len(data):
            data = data[int(step)]
        else:
            return None
    return data
