"""The ``replicate`` SDK's exceptions (1.0.x) read as the port's three outcomes.

The SDK raises `replicate.exceptions.ReplicateError` (``status`` set) for every HTTP answer of 400
to 599 (``Client._request`` -> ``_raise_for_status``), and lets httpx's own exceptions through
unwrapped: ``ConnectError``, ``ConnectTimeout``, ``PoolTimeout`` (nothing was sent), ``ReadTimeout``,
``RemoteProtocolError``, ``ReadError`` (the request may have been processed). Its ``RetryTransport``
never retries a POST and never retries an exception, so for the paid call this one try is the
whole truth (tests/vendors/replicate/test_sdk_facts.py). An unreadable 2xx surfaces as whatever
the parser raised: that may follow a created prediction.
"""

from __future__ import annotations

from typing import Final

from replicate.exceptions import ReplicateError

from ...errors import ProviderError, ProviderOutcomeUnknown, ProviderRejected, ProviderUnavailable
from .._stainless import NOT_SENT_CAUSES

__all__ = ["classify"]

#: Answers that may follow a created prediction: a timeout at the gateway, a conflict, a server error.
_MAYBE_CREATED: Final = frozenset({408, 409})


def classify(exc: BaseException, what: str, *, paid: bool = True) -> ProviderError:
    """The port's error for ``exc`` raised by the SDK in ``what`` (``paid``: the create call, else a read).

    An HTTP 429 refused the request (`ProviderUnavailable`); 408, 409 and 5xx may follow a created
    prediction (`ProviderOutcomeUnknown`); another 4xx refused it (`ProviderRejected`). No answer:
    unsent only when the httpx error is one of `NOT_SENT_CAUSES`. Anything else may have sent it.
    """
    name = type(exc).__name__
    maybe = "the prediction may exist" if paid else "a read: try again"
    if isinstance(exc, ReplicateError):
        code = exc.status
        if not isinstance(code, int):
            return ProviderOutcomeUnknown(f"{what}: an error without a status ({_message(exc)}): {maybe}")
        text = f"{what}: HTTP {code}: {_message(exc)}"
        if code == 429:
            return ProviderUnavailable(f"{text} (refused{'; nothing was created' if paid else ''})", status=code)
        if code in _MAYBE_CREATED or code >= 500:
            return ProviderOutcomeUnknown(f"{text} ({maybe})", status=code)
        return ProviderRejected(text, status=code)
    if {cls.__name__ for cls in type(exc).__mro__} & NOT_SENT_CAUSES:
        return ProviderUnavailable(f"{what}: not sent ({name})")
    if isinstance(exc, OSError) or "httpx" in type(exc).__module__:
        return ProviderOutcomeUnknown(f"{what}: no answer after sending ({name}): {maybe}")
    return ProviderOutcomeUnknown(f"{what}: {name}: {_message(exc)} ({maybe})")


def _message(exc: BaseException) -> str:
    if isinstance(exc, ReplicateError):
        parts = [str(part) for part in (exc.title, exc.detail) if part]
        text = ": ".join(parts) or "no detail"
    else:
        text = str(exc) or type(exc).__name__
    text = " ".join(text.split())
    return text[:300] + ("..." if len(text) > 300 else "")
