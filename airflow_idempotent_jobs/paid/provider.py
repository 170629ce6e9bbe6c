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

import datetime as dt
import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .. import _moved

__all__ = [
    "PaidProvider",
    "ProviderCapabilities",
    "RemoteState",
    "RemoteStatus",
    "billing_fingerprint",
    "intent_time",
    "look_up",
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
    operator apply it before they store, yield or raise a provider's text), ``async def
    astatus(remote_ref)`` (`status` without blocking an event loop: the deferrable trigger uses
    it, and runs ``status`` in a worker thread otherwise) and ``find_since(idempotency_token,
    since)`` (`find` for an API that can only list jobs by time: ``since`` is when the token's
    first intent was written, an aware UTC datetime; the ledger calls it instead of ``find`` when
    the record says when, and ``find`` when it cannot: `intent_time`) and ``billing_identity() ->
    Mapping`` (which account pays: the API, its endpoint, the account, a digest of the key; never
    the key itself): the ledger binds the submission to it with the intent and refuses to look up,
    submit or resume through another (`BillingAccountConflict`), since another account's lookup
    cannot see the first job.
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


def intent_time(history: Sequence[Mapping[str, Any]]) -> dt.datetime | None:
    """When the first ``submitting`` intent of a submission was written (its history), else None.

    Every paid call for a token was made after its first intent, so a job created for it is no
    older than this (give or take the clocks of the host and the API). None when the history does
    not say it readably: then only a lookup over every job can prove "no job".
    """
    for entry in history:
        if entry.get("to") != "submitting":
            continue
        at = entry.get("at")
        try:
            when = dt.datetime.fromisoformat(at) if isinstance(at, str) else None
        except ValueError:
            return None
        if when is None or when.tzinfo is None:
            return None
        return when.astimezone(dt.timezone.utc)
    return None


def look_up(provider: PaidProvider, token: str, history: Sequence[Mapping[str, Any]]) -> str | None:
    """``provider.find_since(token, since)`` when it has one and the history says when, else ``find``."""
    since = intent_time(history)
    find_since = getattr(provider, "find_since", None)
    if find_since is not None and since is not None:
        found: str | None = find_since(token, since)
        return found
    return provider.find(token)


def billing_fingerprint(provider: PaidProvider) -> str | None:
    """``sha256:<hex>`` of the provider's ``billing_identity()``, or None when it has none."""
    identity = getattr(provider, "billing_identity", None)
    if identity is None:
        return None
    from .fingerprint import request_fingerprint

    return request_fingerprint(identity())


def __getattr__(name: str) -> object:
    return _moved.moved_name(__name__, name)  # names kept one release for old imports: CHANGELOG.md
