"""A JSON-over-HTTP client that tells failures apart honestly, as the ledger needs (see `paid.provider`).

* Never sent (connection refused, connect or pool timeout): retried ``connect_retries`` times with
  doubling backoff, then `ProviderUnavailable`. So is HTTP 429 (the API says it did not process it).
* Sent, answer lost (read timeout, dropped connection, a body that is no JSON, a redirect, 5xx,
  408, 409): `ProviderOutcomeUnknown`: the job may exist.
* Any other 4xx: `ProviderRejected`: the API refused, nothing was created.

The credential is redacted from every text this client raises, in every form an API may echo it
(`secret_forms`), and no exception chains back to httpx's (they hold the request, auth header included).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Mapping
from typing import Any, Final

import httpx

from airflow_idempotent_jobs import safe_json
from airflow_idempotent_jobs.errors import InvalidConfiguration
from airflow_idempotent_jobs.paid import ProviderOutcomeUnknown, ProviderRejected, ProviderUnavailable
from airflow_idempotent_jobs.paid.backoff import doubling
from airflow_idempotent_jobs.paid.http import Redactor

__all__ = ["JsonClient", "job_ref"]

_NOT_SENT: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
#: Client errors that do not prove a refusal: a request timeout, and a conflict (a request in flight).
_UNKNOWN_4XX: Final = frozenset({408, 409})


class JsonClient:
    """Calls one API at ``base_url`` with ``Authorization: <scheme> <api_token>``; returns parsed JSON."""

    def __init__(
        self,
        what: str,
        base_url: str,
        api_token: str,
        *,
        auth_scheme: str = "Bearer",
        read_timeout: float = 30.0,
        connect_timeout: float = 5.0,
        connect_retries: int = 2,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InvalidConfiguration(what, "base_url", "must be an http:// or https:// URL")
        if not isinstance(api_token, str) or not api_token or not (api_token.isascii() and api_token.isprintable()):
            raise InvalidConfiguration(what, "api_token", "must be non-empty printable ASCII")  # never the token
        if not (isinstance(auth_scheme, str) and (auth_scheme == "" or auth_scheme.isalnum())):
            raise InvalidConfiguration(what, "auth_scheme", "must be one word such as Bearer, or empty")
        self.base_url = base_url.rstrip("/")
        header = f"{auth_scheme} {api_token}" if auth_scheme else api_token
        self._headers = {"Authorization": header}
        self._redactor = Redactor([header])
        self.secret_forms: tuple[str, ...] = self._redactor.forms
        self._timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self._retries = connect_retries
        self._backoff = (backoff_initial, backoff_max)

    def redact(self, text: str) -> str:
        """``text`` with the credential replaced by ``<redacted>`` in every form it may take."""
        return self._redactor.text(text)

    def redact_json(self, value: Any) -> Any:
        """``value`` (parsed JSON) with the credential redacted from every string in it, keys included."""
        return self._redactor.json(value)

    def call(
        self,
        method: str,
        path: str,
        what: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        strict_numbers: bool = True,
    ) -> Any:
        """The JSON of a 2xx answer to ``method path``; any other outcome raised as its provider error.

        ``strict_numbers=False`` for status answers: a NaN cost is the ledger's anomaly to record,
        not a reason to call a finished, paid job unreadable.
        """
        url = self.base_url + path
        delays = doubling(*self._backoff)
        last: Exception | None = None
        for attempt in range(self._retries + 1):
            if attempt:
                time.sleep(next(delays))
            try:
                with httpx.Client(timeout=self._timeout, verify=_tls(), follow_redirects=False) as client:
                    response = client.request(method, url, json=json, params=params, headers=self._headers)
            except _NOT_SENT as exc:
                last = exc
                continue
            except httpx.HTTPError as exc:
                raise self._lost(what, exc) from None
            return self.answer(response, what, strict_numbers=strict_numbers)
        raise ProviderUnavailable(self.redact(f"{what}: {method} {url} not reachable ({type(last).__name__})"))

    async def acall(self, method: str, path: str, what: str, *, strict_numbers: bool = True) -> Any:
        """`call` for a GET on ``httpx.AsyncClient``: never blocks a triggerer's event loop."""
        url = self.base_url + path
        tls = await asyncio.to_thread(_tls)  # the first call reads the CA bundle from disk
        delays = doubling(*self._backoff)
        last: Exception | None = None
        for attempt in range(self._retries + 1):
            if attempt:
                await asyncio.sleep(next(delays))
            try:
                async with httpx.AsyncClient(timeout=self._timeout, verify=tls, follow_redirects=False) as client:
                    response = await client.request(method, url, headers=self._headers)
            except _NOT_SENT as exc:
                last = exc
                continue
            except httpx.HTTPError as exc:
                raise self._lost(what, exc) from None
            return self.answer(response, what, strict_numbers=strict_numbers)
        raise ProviderUnavailable(self.redact(f"{what}: {method} {url} not reachable ({type(last).__name__})"))

    def answer(self, response: httpx.Response, what: str, *, strict_numbers: bool = True) -> Any:
        """A 2xx answer's JSON, or the provider error its status means."""
        code = response.status_code
        if 200 <= code < 300:
            try:
                return safe_json.loads(response.content, strict_numbers=strict_numbers)
            except ValueError:
                raise ProviderOutcomeUnknown(f"{what}: HTTP {code} with a body that is not JSON", status=code) from None
        message = self.redact(f"{what}: HTTP {code}: {self._detail(response)}")
        if code == 429:
            raise ProviderUnavailable(message, status=code)
        if 400 <= code < 500 and code not in _UNKNOWN_4XX:
            raise ProviderRejected(message, status=code)
        raise ProviderOutcomeUnknown(message, status=code)

    def _detail(self, response: httpx.Response) -> str:
        """The answer's text on one line, redacted before it is cut short (a cut must not split the token)."""
        text = self.redact(" ".join(response.text.split()))
        return text[:300] + ("..." if len(text) > 300 else "")

    def _lost(self, what: str, exc: Exception) -> ProviderOutcomeUnknown:
        return ProviderOutcomeUnknown(self.redact(f"{what}: {type(exc).__name__} after sending: {exc}"))


def job_ref(value: Any) -> str | None:
    """A job id as an API gives it: a non-empty printable text of at most 512 characters; else None."""
    if not isinstance(value, str) or not value or not value.isprintable() or len(value) > 512:
        return None
    return value


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context per process: building one (reading the CA bundle) costs ~20 ms, more than a call."""
    return httpx.create_ssl_context()
