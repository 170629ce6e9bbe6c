"""The provider port: what a paid job API must offer, and how its failures are told apart.

The ledger's safety rests on one distinction that every provider must make honestly:

* `ProviderRejected`: the provider answered and refused (HTTP 4xx). Nothing was created: the
  submission is ``failed``, and terminal.
* `ProviderOutcomeUnknown`: the request may have reached the provider, but the answer was lost
  (read timeout, dropped connection, 5xx, an unreadable success answer). The submission is
  ``unknown``, never ``failed``: a job may exist and be billed.
* `ProviderUnavailable`: the request certainly never left (connection refused, connect timeout,
  HTTP 429). The ledger may forget the attempt.

When in doubt a provider must raise `ProviderOutcomeUnknown`; any other exception out of
``submit`` is treated the same way.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .. import _moved
from ..episode import OmittedResult
from ..errors import ProviderError

__all__ = [
    "PaidProvider",
    "ProviderCapabilities",
    "RemoteState",
    "RemoteStatus",
    "decode_event",
    "encode_error_event",
    "encode_status_event",
    "reported_cost",
]


class RemoteState(str, enum.Enum):
    """A remote job's state as the provider reports it, mapped to four values."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in (RemoteState.SUCCEEDED, RemoteState.FAILED)


@dataclass(frozen=True)
class RemoteStatus:
    """One answer to ``status(remote_ref)``."""

    #: Where the remote job stands.
    state: RemoteState
    #: What the job cost so far (or in total, once terminal), in the provider's unit; None if not said.
    cost: float | None = None
    #: The job's result payload (JSON-like), normally set once ``succeeded``.
    result: Any = None
    #: The provider's error text for a ``failed`` job.
    error: str | None = None


def reported_cost(value: Any) -> float | None:
    """A provider's billing field as `RemoteStatus.cost`: None when absent; what is no number is NaN.

    The ledger records NaN, an infinity or a negative figure as a cost anomaly and keeps the job:
    a provider's odd billing field (text, a bool, an object) must never stop a paid job from settling.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return math.nan
    try:
        return float(value)
    except (ValueError, OverflowError):
        return math.nan


@dataclass(frozen=True)
class ProviderCapabilities:
    """What a retry may do when it finds a submission in ``submitting`` or ``unknown``."""

    #: The provider returns the existing job for a token it has seen: resubmitting is safe.
    idempotent_tokens: bool = False
    #: The provider can look a token up (``find``): a retry reconciles to the existing job.
    lookup: bool = False


@runtime_checkable
class PaidProvider(Protocol):
    """A paid job API. Implementations: `HttpPaidProvider`; anything with these members works.

    ``find`` is only called when ``capabilities.lookup`` is true. Optional members: ``redact(text)
    -> str`` (remove the provider's credential from any text: the ledger, the trigger and the
    operator apply it before they store, yield or raise a provider's text) and ``async def
    astatus(remote_ref)`` (`status` without blocking an event loop: the deferrable trigger uses
    it, and runs ``status`` in a worker thread otherwise).
    """

    @property
    def capabilities(self) -> ProviderCapabilities:
        """What a retry may do with an uncertain submission; a plain attribute works too."""
        ...

    def submit(self, request: Mapping[str, Any], idempotency_token: str) -> str:
        """Create the remote job; returns its remote reference.

        Raises `ProviderRejected` (refused, nothing created), `ProviderUnavailable` (certainly
        not sent) or `ProviderOutcomeUnknown` (may have been created).
        """
        ...

    def status(self, remote_ref: str) -> RemoteStatus:
        """The remote job's current state, cost and result; safe to call any number of times."""
        ...

    def find(self, idempotency_token: str) -> str | None:
        """The remote reference of the job created with this token, or None if there is none.

        None is a promise that no job carries the token (the ledger then submits once): return it
        only on the provider's positive "no such job" answer, and raise `ProviderOutcomeUnknown`
        for any answer that does not say either way.
        """
        ...


def __getattr__(name: str) -> object:
    return _moved.moved_name(__name__, name)  # names kept one release for old imports: CHANGELOG.md


# -- the trigger's event: encoded by `PaidJobTrigger`, decoded by the operator's execute_complete ---
#: ``status`` of an event carrying a terminal `RemoteStatus`, and of one saying polling failed.
TERMINAL_EVENT, ERROR_EVENT = "terminal", "error"


def encode_status_event(
    episode_id: str, remote_ref: str, status: RemoteStatus, *, result_limit: int, redact: Callable[[str], str]
) -> dict[str, Any]:
    """A terminal status as the event's strict-JSON payload (a row in Airflow's database).

    The result is bounded (`results.bound_result`: over ``result_limit``, only its size and
    sha256 travel), the error text redacted and bounded, and a cost JSON cannot hold (NaN, an
    infinity) travels as text, for the ledger to record as an anomaly.
    """
    from .results import bound_result, clean_text

    bounded = bound_result(status.result, result_limit)
    payload: dict[str, Any] = {
        "episode_id": episode_id,
        "remote_ref": remote_ref,
        "status": TERMINAL_EVENT,
        "state": status.state.value,
        "cost": _event_cost(status.cost),
        "result": bounded.value,
        "error": None if status.error is None else clean_text(status.error, redact),
    }
    if bounded.omitted is not None:
        payload["result_omitted"] = bounded.omitted.to_dict()
    return payload


def encode_error_event(episode_id: str, remote_ref: str, message: str) -> dict[str, Any]:
    """An event saying the trigger could not poll; ``message`` must be redacted already."""
    from .results import clean_text

    return {"episode_id": episode_id, "remote_ref": remote_ref, "status": ERROR_EVENT, "message": clean_text(message)}


def decode_event(event: object, episode_id: str, *, redact: Callable[[str], str]) -> RemoteStatus:
    """The `RemoteStatus` a terminal event for ``episode_id`` carries.

    An error event raises `ProviderError` (retryable: polling again may work), its message
    through ``redact``. Anything else (not an event of ours, another episode's, a malformed one)
    raises ValueError, whose text is safe to show.
    """
    from .results import clean_text

    if not isinstance(event, Mapping) or event.get("status") not in (TERMINAL_EVENT, ERROR_EVENT):
        raise ValueError(f"unexpected trigger event: {clean_text(repr(event))}")
    if event.get("episode_id") != episode_id:
        raise ValueError(f"trigger event for episode {event.get('episode_id')!r:.80}, expected {episode_id}")
    if event["status"] == ERROR_EVENT:
        message = clean_text(str(event.get("message")), redact)
        raise ProviderError(f"episode {episode_id}: polling in the triggerer failed: {message}")
    try:
        omitted = event.get("result_omitted")
        cost = event.get("cost")
        if isinstance(cost, bool) or not (cost is None or isinstance(cost, (int, float, str))):
            raise TypeError(f"cost {cost!r:.80}")
        return RemoteStatus(
            state=RemoteState(event["state"]),
            cost=None if cost is None else float(cost),
            result=event.get("result") if omitted is None else OmittedResult.from_dict(omitted),
            error=None if event.get("error") is None else clean_text(str(event["error"]), redact),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed trigger event for episode {episode_id}: {clean_text(repr(event))}") from exc


def _event_cost(cost: float | None) -> float | str | None:
    """The cost as JSON can hold it: NaN and infinities as text (``float()`` reads them back)."""
    if cost is None or (isinstance(cost, (int, float)) and math.isfinite(cost)):
        return cost
    return repr(cost)
