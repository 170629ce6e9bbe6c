"""The exceptions of the Stainless-built SDKs (``openai``, ``anthropic``), read as the port's three outcomes.

Both SDKs raise the same tree: ``APIStatusError`` (an HTTP answer of 4xx/5xx, ``status_code`` set),
``APIConnectionError`` and its ``APITimeoutError`` (no answer; the transport's own error is the
``__cause__``), ``APIResponseValidationError`` (a 2xx whose body is not what the SDK expects).
Whether a request left is read from that cause, by class name, so that both transports the SDKs
accept (``httpx2`` and ``httpx``) are read alike: a connection that was never opened, or a wait for
a free one, sent nothing; a read timeout, a reset or a closed connection after the request was
written may have created a job. With ``max_retries=0`` (`PAID_CALL_OPTIONS`) that one try is the
whole truth; with the SDK's retries on, a "not sent" on the last try says nothing of the first.
"""

from __future__ import annotations

import hashlib
from types import ModuleType
from typing import Any, Final

from ..errors import ProviderError, ProviderOutcomeUnknown, ProviderRejected, ProviderUnavailable

__all__ = ["NOT_SENT_CAUSES", "PAID_CALL_OPTIONS", "billing_identity", "classify"]

#: Client options for a call that costs money: the SDK must not send it twice on its own.
PAID_CALL_OPTIONS: Final = {"max_retries": 0}

#: Transport errors (httpx and httpx2 name them alike) raised before any byte of the request left.
NOT_SENT_CAUSES: Final = frozenset(
    {"ConnectError", "ConnectTimeout", "PoolTimeout", "UnsupportedProtocol", "InvalidURL"}
)

#: Answers that may follow a created job: a timeout at the gateway, a conflict, a server error.
_MAYBE_CREATED: Final = frozenset({408, 409})


def classify(exc: BaseException, sdk: ModuleType, what: str) -> ProviderError:
    """The port's error for ``exc``, raised by ``sdk`` (the ``openai`` or ``anthropic`` module) in ``what``.

    An HTTP 429 refused the request (`ProviderUnavailable`); 408, 409 and 5xx may follow a created
    job (`ProviderOutcomeUnknown`); another 4xx refused it (`ProviderRejected`). No answer: unsent
    only when the cause is one of `NOT_SENT_CAUSES`. Anything else, ours or the SDK's, may have
    sent it.
    """
    name = type(exc).__name__
    if isinstance(exc, sdk.APIStatusError):
        code = int(exc.status_code)
        text = f"{what}: HTTP {code}: {_message(exc)}"
        if code == 429:
            return ProviderUnavailable(f"{text} (refused; nothing was created)", status=code)
        if code in _MAYBE_CREATED or code >= 500:
            return ProviderOutcomeUnknown(f"{text} (the job may exist)", status=code)
        return ProviderRejected(text, status=code)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        seen = type(cause).__name__ if cause is not None else name
        if cause is not None and {k.__name__ for k in type(cause).__mro__} & NOT_SENT_CAUSES:
            return ProviderUnavailable(f"{what}: not sent ({seen})")
        return ProviderOutcomeUnknown(f"{what}: no answer after sending ({seen}): the job may exist")
    return ProviderOutcomeUnknown(f"{what}: {name}: {_message(exc)} (the job may exist)")


def _message(exc: BaseException) -> str:
    text = " ".join(str(getattr(exc, "message", "") or exc).split()) or type(exc).__name__
    return text[:300] + ("..." if len(text) > 300 else "")


def billing_identity(api: str, client: Any, *fields: str) -> dict[str, str | None]:
    """Which account a client's calls bill: the API, its base URL, ``fields`` of the client (OpenAI's
    ``organization``, ``project``) and a digest of its key (16 hex digits of its sha256: the key
    itself is never recorded). A rotated key reads as another account: the ledger then refuses to
    go on until someone says which job is the episode's (fail closed)."""
    key = getattr(client, "api_key", None)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16] if isinstance(key, str) and key else None
    identity: dict[str, str | None] = {"api": api, "base_url": str(client.base_url).rstrip("/"), "key_sha256": digest}
    for name in fields:
        value = getattr(client, name, None)
        identity[name] = value if isinstance(value, str) else None
    return identity
