"""`HttpPaidProvider`: a configurable JSON-over-HTTP job API, driven by httpx (which Airflow ships).

Failures are classified for the ledger (see `provider`): only a request that certainly never left
(connection refused, connect or pool timeout) is retried here, with bounded backoff; 429 means
"not processed"; any other 4xx is a rejection; a read timeout, a dropped connection, a 5xx, 408,
409 (APIs answer it for an idempotency key whose request is in progress or already made the job),
or a success answer without a readable id leaves the outcome unknown. A lookup says "no job" only
with the answer its config declares (`HttpProviderConfig`); anything else is unknown.

Credentials are given at construction and never appear in ``repr``, logs, exceptions or any text
taken from an answer: every such text passes `HttpPaidProvider.redact`, which knows the
credential's escaped forms too (a server that echoes it may have URL- or JSON-encoded it).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

import httpx

from .. import safe_json
from ..errors import InvalidConfiguration, ProviderError, ProviderOutcomeUnknown, ProviderRejected, ProviderUnavailable
from ._http_config import DEFAULT_STATE_MAP, NEVER_NO_JOB, HttpProviderConfig, valid_header_name
from ._redaction import REDACTED, Redactor, secret_forms
from .backoff import doubling
from .provider import ProviderCapabilities, RemoteState, RemoteStatus, reported_cost

__all__ = [
    "DEFAULT_STATE_MAP",
    "NEVER_NO_JOB",
    "REDACTED",
    "HttpPaidProvider",
    "HttpProviderConfig",
    "LookupAnswer",
    "Redactor",
    "secret_forms",
]

log = logging.getLogger(__name__)

#: Failures raised before a single byte of the request was sent.
_NOT_SENT: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
#: Client errors that do not prove the job was refused: a request timeout, and a conflict on the
#: idempotency key (its request is in flight, or already made the job).
_OUTCOME_UNKNOWN_4XX: Final = frozenset({408, 409})
#: A parsed answer that was not JSON (or JSON we refuse to hold).
_NOT_JSON: Final = object()


@dataclass(frozen=True)
class LookupAnswer:
    """A lookup's answer as read (`HttpPaidProvider.lookup_answer`), every text in it redacted.

    For lookups with rules of their own (an effect's, `effects.http_lookup`): what the answer
    proves is theirs to say, the transport and the redaction are the provider's.
    """

    status: int
    #: The parsed JSON body with the credential redacted in every string; None when ``is_json`` is false.
    body: Any
    #: Whether the body is strict JSON (`safe_json`).
    is_json: bool
    #: ``GET <url>`` without the URL's query (tokens travel there), for messages.
    where: str
    #: ``JSON``, else the content type as sent (or a stand-in when it is unreadable).
    kind: str
    #: The answer's error text, redacted, then shortened.
    detail: str

    def ref_at(self, path: str) -> str | None:
        """The id at the dotted ``path`` (a non-empty printable text or an integer, as a job id is read); else None."""
        return _ref(_dig(self.body, path)) if self.is_json else None


class HttpPaidProvider:
    """A `PaidProvider` over HTTP+JSON. ``auth_header``/``auth_value``: e.g. ``Authorization`` / ``Bearer ...``.

    Every exception and every text it returns from an answer (`RemoteStatus.error`, ``result``)
    has the credential redacted, in any form; `redact` does the same for callers' own texts.
    """

    def __init__(
        self, config: HttpProviderConfig, *, auth_header: str | None = None, auth_value: str | None = None
    ) -> None:
        self.config = config
        self._redactor = Redactor([auth_value] if auth_value else [])
        if auth_header is not None and not valid_header_name(auth_header):
            raise InvalidConfiguration("provider auth", "auth_header", "must be an HTTP header name")
        if auth_value is not None and not (auth_value.isascii() and auth_value.isprintable()):
            # Never the value itself: it is the credential.
            raise InvalidConfiguration("provider auth", "auth_value", "must be printable ASCII (the token as sent)")
        if auth_header and any(name.lower() == auth_header.lower() for name in config.headers):
            raise InvalidConfiguration("provider config", "headers", f"must not set {auth_header}: the auth header")
        if auth_header and (config.idempotency_header or "").lower() == auth_header.lower():
            raise InvalidConfiguration("provider config", "idempotency_header", "is the auth header")
        self._auth = {auth_header: auth_value} if auth_header and auth_value else {}
        self._timeout = httpx.Timeout(config.read_timeout, connect=config.connect_timeout)

    @property
    def capabilities(self) -> ProviderCapabilities:
        return self.config.capabilities

    def __repr__(self) -> str:
        auth = f"{next(iter(self._auth))}: {REDACTED}" if self._auth else "none"
        return f"HttpPaidProvider(base_url={self.config.base_url!r}, auth={auth})"

    def redact(self, text: str) -> str:
        """``text`` with the credential replaced by ``<redacted>`` in every form it may take."""
        return self._redactor.text(text)

    @property
    def secret_forms(self) -> tuple[str, ...]:
        """Every text `redact` replaces: for registering with a log masker (Airflow's), never for logging."""
        return self._redactor.forms

    # -- the port ------------------------------------------------------------------------------
    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        """POST (or PUT) the request as JSON with the token header; returns the remote id."""
        cfg = self.config
        with self._clean(ProviderOutcomeUnknown, "submit"):
            headers = {cfg.idempotency_header: idempotency_token} if cfg.idempotency_header else {}
            response = self._send(cfg.submit_method.upper(), cfg.submit_path, json=dict(request), headers=headers)
            ref = _ref(_dig(self._answer(response, "submit"), cfg.ref_path))
            if ref is None:
                raise ProviderOutcomeUnknown(
                    f"submit answered HTTP {response.status_code} without a job id at {cfg.ref_path!r}: "
                    "the job may exist",
                    status=response.status_code,
                )
            return ref

    def status(self, remote_ref: str) -> RemoteStatus:
        """GET the status URL; a 404 is `ProviderRejected` (no such job)."""
        with self._clean(ProviderError, "status"):
            response = self._send("GET", self.config.status_path.format(remote_ref=quote(remote_ref, safe="")))
            return self._status_from(response)

    async def astatus(self, remote_ref: str) -> RemoteStatus:
        """`status` on ``httpx.AsyncClient``, for a deferrable trigger: never blocks the event loop."""
        with self._clean(ProviderError, "status"):
            response = await self._asend("GET", self.config.status_path.format(remote_ref=quote(remote_ref, safe="")))
            return self._status_from(response)

    def find(self, idempotency_token: str) -> str | None:
        """The job the token made, or None only on the declared "no job" answer; else `ProviderError`.

        A 2xx answer with an id at ``lookup_ref_path`` (else ``ref_path``) is the job. None needs
        the answer ``lookup_no_job_*`` declares; any other answer (another status, a body that is
        not JSON or lacks the fields, a redirect, which is never followed) raises
        `ProviderOutcomeUnknown`: whether a job carries the token is not known.
        """
        cfg = self.config
        if cfg.lookup_path is None:
            raise ProviderError("this provider has no lookup_path: it cannot find jobs by token")
        with self._clean(ProviderOutcomeUnknown, "lookup"):
            response = self._look_up(cfg.lookup_path, idempotency_token)
            code, body = response.status_code, self._json(response)
            ref = _ref(_dig(body, cfg.lookup_ref_path or cfg.ref_path)) if body is not _NOT_JSON else None
            no_job = self._declares_no_job(code, body)
            if 200 <= code < 300 and ref is not None and not no_job:
                return ref
            if no_job and ref is None:
                return None
            raise ProviderOutcomeUnknown(
                f"lookup {self._where(response)} answered HTTP {code} ({self._kind(response, body)}), "
                f"which is neither a job id at {cfg.lookup_ref_path or cfg.ref_path!r} nor {self._no_job_shape()}: "
                f"whether a job carries the token is unknown ({self._detail(response)})",
                status=code,
            )

    def lookup_answer(self, token: str) -> LookupAnswer:
        """GET the lookup URL for ``token`` and return the answer as read; what it proves is the caller's rule.

        Raises as `find` does when no answer can be read: `ProviderUnavailable` (never sent, or
        429), `ProviderOutcomeUnknown` (sent, answer lost), every text redacted.
        """
        if self.config.lookup_path is None:
            raise ProviderError("this provider has no lookup_path: it cannot look tokens up")
        with self._clean(ProviderOutcomeUnknown, "lookup"):
            response = self._look_up(self.config.lookup_path, token)
            body = self._json(response)
            return LookupAnswer(
                status=response.status_code,
                body=None if body is _NOT_JSON else self._redactor.json(body),
                is_json=body is not _NOT_JSON,
                where=self._where(response),
                kind=self._kind(response, body),
                detail=self._detail(response),
            )

    def _look_up(self, lookup_path: str, token: str) -> httpx.Response:
        """The lookup's answer; 429 raised as `ProviderUnavailable` (nothing was looked at)."""
        response = self._send("GET", lookup_path.format(token=quote(token, safe="")))
        if response.status_code == 429:
            self._answer(response, "lookup")  # raises ProviderUnavailable
        return response

    # -- answers -------------------------------------------------------------------------------
    def _declares_no_job(self, code: int, body: Any) -> bool:
        cfg = self.config
        if cfg.lookup_no_job_status is None or cfg.lookup_no_job_path is None or body is _NOT_JSON:
            return False
        if code != cfg.lookup_no_job_status:
            return False
        found = _dig(body, cfg.lookup_no_job_path)
        if cfg.lookup_no_job_value is None:
            return isinstance(found, list) and not found
        return isinstance(found, str) and found == cfg.lookup_no_job_value

    def _no_job_shape(self) -> str:
        cfg = self.config
        if cfg.lookup_no_job_status is None:
            return (
                "a declared 'no job' answer (none is declared: lookup_no_job_status and lookup_no_job_path, "
                "in reconcile --no-job-status and --no-job-path)"
            )
        wanted = "an empty list" if cfg.lookup_no_job_value is None else repr(cfg.lookup_no_job_value)
        return f"the declared 'no job' answer (HTTP {cfg.lookup_no_job_status}, {wanted} at {cfg.lookup_no_job_path!r})"

    @staticmethod
    def _kind(response: httpx.Response, body: Any) -> str:
        if body is not _NOT_JSON:
            return "JSON"
        kind = response.headers.get("content-type", "no content type").split(";")[0].strip()
        return kind if kind.isprintable() and len(kind) < 80 else "unreadable content type"

    def _status_from(self, response: httpx.Response) -> RemoteStatus:
        cfg = self.config
        # A status answer's numbers are judged one by one: a NaN cost is the ledger's anomaly to
        # record, not a reason to call a finished, paid job unreadable until the task times out.
        data = self._answer(response, "status", strict_numbers=False)
        word = _dig(data, cfg.state_path)
        mapping = {**DEFAULT_STATE_MAP, **cfg.state_map}
        if not isinstance(word, str) or word not in mapping:
            raise ProviderError(f"status answer has state {_short(word)} at {cfg.state_path!r}; map it in state_map")
        cost_value = reported_cost(_dig(data, cfg.cost_path) if cfg.cost_path else None)
        error = _dig(data, cfg.error_path) if cfg.error_path else None
        return RemoteStatus(
            state=RemoteState(mapping[word]),
            cost=cost_value,
            result=self._redactor.json(_dig(data, cfg.result_path)) if cfg.result_path else None,
            error=None if error is None else self.redact(str(error)),
        )

    def _json(self, response: httpx.Response, *, strict_numbers: bool = True) -> Any:
        try:
            return safe_json.loads(response.content, strict_numbers=strict_numbers)
        except ValueError:
            return _NOT_JSON

    def _answer(self, response: httpx.Response, what: str, *, strict_numbers: bool = True) -> Any:
        """The JSON body of a 2xx answer; anything else raised as the right provider error."""
        code = response.status_code
        if 200 <= code < 300:
            body = self._json(response, strict_numbers=strict_numbers)
            if body is _NOT_JSON:
                raise ProviderOutcomeUnknown(f"{what} answered HTTP {code} with a body that is not JSON", status=code)
            return body
        message = f"{what} {self._where(response)} answered HTTP {code}: {self._detail(response)}"
        if code == 429:
            raise ProviderUnavailable(message, status=code)
        if 400 <= code < 500 and code not in _OUTCOME_UNKNOWN_4XX:
            raise ProviderRejected(message, status=code)
        raise ProviderOutcomeUnknown(message, status=code)

    def _detail(self, response: httpx.Response) -> str:
        """The answer's error text, redacted before it is shortened (a cut must not split the token)."""
        body = self._json(response)
        if body is _NOT_JSON:
            text = self.redact(response.text)
        else:
            body = self._redactor.json(body)
            found = _dig(body, self.config.error_path) if self.config.error_path else None
            text = str(found) if found is not None else str(body)
        text = self.redact(" ".join(text.split()))
        return (text[:300] + ("..." if len(text) > 300 else "")) or response.reason_phrase

    def _where(self, response: httpx.Response) -> str:
        return f"{response.request.method} {_safe(str(response.request.url))}"

    @contextmanager
    def _clean(self, unexpected: type[ProviderError], what: str) -> Iterator[None]:
        """Every exception out of a call: a `ProviderError` with the credential redacted, no chain.

        ``from None`` everywhere: httpx's exceptions carry the request, and with it the auth header.
        """
        try:
            yield
        except ProviderError as exc:
            if not any(self.redact(str(link)) != str(link) for link in _chain(exc)):
                raise
            raise type(exc)(self.redact(str(exc)), status=exc.status) from None
        except Exception as exc:  # a bug or an httpx error we did not classify: never a raw traceback
            raise unexpected(f"{what}: {type(exc).__name__}: {self.redact(str(exc))}") from None

    # -- transport -----------------------------------------------------------------------------
    def _request_args(self, path: str, headers: Mapping[str, str] | None) -> tuple[str, dict[str, str]]:
        url = self.config.base_url.rstrip("/") + path
        return url, {**self.config.headers, **(headers or {}), **self._auth}

    def _send(
        self, method: str, path: str, *, json: Any = None, headers: Mapping[str, str] | None = None
    ) -> httpx.Response:
        url, all_headers = self._request_args(path, headers)
        delays = doubling(self.config.backoff_initial, self.config.backoff_max)
        for attempt in range(self.config.connect_retries + 1):
            if attempt:
                time.sleep(next(delays))
            try:
                with httpx.Client(timeout=self._timeout, verify=_tls(), follow_redirects=False) as client:
                    response = client.request(method, url, json=json, headers=all_headers)
            except _NOT_SENT as exc:
                last: Exception = exc
                log.info("%s %s not sent (attempt %d): %s", method, _safe(url), attempt + 1, type(exc).__name__)
                continue
            except httpx.HTTPError as exc:  # sent, or maybe sent: the answer is lost or unreadable
                raise self._lost(method, url, exc) from None
            log.info("%s %s -> HTTP %d", method, _safe(url), response.status_code)
            return response
        raise self._unreachable(method, url, last) from None

    async def _asend(self, method: str, path: str) -> httpx.Response:
        url, all_headers = self._request_args(path, None)
        tls = await asyncio.to_thread(_tls)  # the first call reads the CA bundle from disk
        delays = doubling(self.config.backoff_initial, self.config.backoff_max)
        for attempt in range(self.config.connect_retries + 1):
            if attempt:
                await asyncio.sleep(next(delays))
            try:
                async with httpx.AsyncClient(timeout=self._timeout, verify=tls, follow_redirects=False) as client:
                    response = await client.request(method, url, headers=all_headers)
            except _NOT_SENT as exc:
                last: Exception = exc
                continue
            except httpx.HTTPError as exc:
                raise self._lost(method, url, exc) from None
            log.info("%s %s -> HTTP %d", method, _safe(url), response.status_code)
            return response
        raise self._unreachable(method, url, last) from None

    def _lost(self, method: str, url: str, exc: Exception) -> ProviderOutcomeUnknown:
        reason = self.redact(str(exc)) or type(exc).__name__
        return ProviderOutcomeUnknown(f"{method} {_safe(url)}: {type(exc).__name__} after sending ({reason})")

    def _unreachable(self, method: str, url: str, exc: Exception) -> ProviderUnavailable:
        tries = self.config.connect_retries + 1
        reason = self.redact(str(exc)) or type(exc).__name__
        return ProviderUnavailable(f"{method} {_safe(url)}: not reachable after {tries} tries ({reason})")


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context per process: building it (loading the CA bundle) costs more than a request."""
    return httpx.create_ssl_context()


def _safe(url: str) -> str:
    """The URL without its query (tokens travel there for lookups; keep logs short)."""
    return url.split("?", 1)[0]


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or during (what a traceback prints)."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def _ref(value: Any) -> str | None:
    """A job id as the provider gave it: a non-empty printable text or an integer; else None."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value)
    return text if text and text.isprintable() and len(text) <= 512 else None


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
