"""botocore's exceptions read as the port's three outcomes, for a call whose token Bedrock honours.

boto3 retries the call itself (standard mode: 3 attempts), so the exception that reaches us says how
the LAST attempt ended, not the first: an earlier attempt may have made the job and lost its answer.
With the token honoured that is harmless (a new try replays it), so whatever is not a plain refusal
of the request itself is "maybe sent" (`ProviderOutcomeUnknown`), and the next try resends the same
token. A refusal (`ProviderRejected`) is an answer about the request that no repetition changes:
``ValidationException``, ``AccessDeniedException``, ``ResourceNotFoundException``, or any other 4xx
on the first and only attempt. A conflict (the token held by other parameters) may hide a job made
for this token: unknown, never rejected. Only a call none of whose attempts reached the API (each
failed to connect, or was throttled) is `ProviderUnavailable`: `Attempts` records each one.
"""

from __future__ import annotations

import threading
from typing import Any, Final

from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, ProxyConnectionError

from ...errors import ProviderError, ProviderOutcomeUnknown, ProviderRejected, ProviderUnavailable

__all__ = ["Attempts", "classify"]

#: Errors raised before any byte of the request left: no connection was made.
NOT_SENT: Final = (EndpointConnectionError, ConnectTimeoutError, ProxyConnectionError)

#: Error codes that refuse the request itself, whatever attempt answered them.
REFUSALS: Final = frozenset({"ValidationException", "AccessDeniedException", "ResourceNotFoundException"})
#: Refusals that say "not now": nothing was made, and a later try may be accepted (AWS: "resubmit later").
NOT_NOW: Final = frozenset({"ServiceQuotaExceededException", "ThrottlingException"})
#: 4xx codes that may follow a made job (a timeout at the gateway, a conflict, throttling after a lost try).
_MAYBE_MADE: Final = frozenset({408, 409, 429})


class Attempts:
    """What each of boto3's attempts at one operation came to, recorded from botocore's own
    ``response-received`` event (one per attempt): so "never sent" can be proven for the whole call,
    not only for its last attempt. One list per thread; `start` before each call."""

    def __init__(self, client: Any, operation: str) -> None:
        self._local = threading.local()
        event = f"response-received.{client.meta.service_model.service_id.hyphenize()}.{operation}"
        client.meta.events.register(event, self._record, unique_id=f"aij-attempts-{id(self)}")

    def start(self) -> None:
        self._local.seen = []

    def _record(self, exception: BaseException | None = None, response_dict: Any = None, **_: Any) -> None:
        seen = getattr(self._local, "seen", None)
        if seen is not None:
            status = response_dict.get("status_code") if isinstance(response_dict, dict) else None
            seen.append((exception, status))

    def none_sent(self) -> bool:
        """True when every attempt failed to connect or was throttled (429: refused, nothing made)."""
        seen = getattr(self._local, "seen", None) or []
        return bool(seen) and all(isinstance(exc, NOT_SENT) or status == 429 for exc, status in seen)


def classify(exc: BaseException, what: str, attempts: Attempts | None = None) -> ProviderError:
    """The port's error for ``exc`` (module docstring); with ``attempts``, a call none of whose attempts
    reached the API is `ProviderUnavailable`."""
    if attempts is not None and attempts.none_sent():
        return ProviderUnavailable(f"{what}: not sent ({type(exc).__name__}: {_message(exc)})")
    if isinstance(exc, ClientError):
        response: dict[str, Any] = exc.response or {}
        code = str((response.get("Error") or {}).get("Code") or "")
        meta = response.get("ResponseMetadata") or {}
        status = meta.get("HTTPStatusCode")
        made = int(meta.get("RetryAttempts") or 0) + 1
        tries = f"{made} attempt{'s' if made > 1 else ''}"
        text = f"{what}: {code or 'error'} (HTTP {status}, {tries}): {_message(exc)}"
        if code in REFUSALS:
            return ProviderRejected(text, status=status)
        if code in NOT_NOW and made == 1:  # the only attempt was refused: nothing made, retry later
            return ProviderUnavailable(f"{text}: not made", status=status)
        if code == "ConflictException":
            return ProviderOutcomeUnknown(
                f"{text}: the token is held by other parameters; a job may exist", status=status
            )
        if isinstance(status, int) and 400 <= status < 500 and status not in _MAYBE_MADE and made == 1:
            return ProviderRejected(text, status=status)
        return ProviderOutcomeUnknown(f"{text}: the job may exist", status=status)
    return ProviderOutcomeUnknown(f"{what}: no answer ({type(exc).__name__}: {_message(exc)}): the job may exist")


def _message(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300] + ("..." if len(text) > 300 else "")
