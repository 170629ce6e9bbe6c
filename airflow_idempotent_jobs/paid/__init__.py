"""Paid execution that never pays twice: the face for adapter authors and for callers of the ledger.

An adapter implements `PaidProvider` (`paid.provider` holds its contract) and answers with a
`RemoteStatus`, raising the three provider errors honestly; the ledger (`SubmissionLedger`,
`wait_for_terminal`) does the rest. Everything else in `paid` is a module of its own, imported by
path. No Airflow import here; `http` (httpx) is imported only when asked for.
"""

from __future__ import annotations

from .. import _moved
from ..errors import (
    InvalidRequest,
    NotReconcilable,
    PollTimeout,
    ProviderError,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
    RequestConflict,
    SubmissionInProgress,
)
from .fingerprint import request_fingerprint
from .ledger import SubmissionLedger, idempotency_token
from .poll import wait_for_terminal
from .provider import PaidProvider, ProviderCapabilities, RemoteState, RemoteStatus, reported_cost

__all__ = [
    # The port an adapter implements, and what it answers.
    "PaidProvider",
    "ProviderCapabilities",
    "RemoteState",
    "RemoteStatus",
    "reported_cost",
    # What an adapter raises: the ledger's safety rests on telling these apart.
    "ProviderError",
    "ProviderOutcomeUnknown",
    "ProviderRejected",
    "ProviderUnavailable",
    # The ledger, and what its callers meet.
    "SubmissionLedger",
    "idempotency_token",
    "request_fingerprint",
    "wait_for_terminal",
    "InvalidRequest",
    "NotReconcilable",
    "PollTimeout",
    "RequestConflict",
    "SubmissionInProgress",
]


def __getattr__(name: str) -> object:
    return _moved.moved_name(__name__, name)  # names kept one release for old imports: CHANGELOG.md
