"""Paid execution that never pays twice: the submission ledger, the provider port, an HTTP provider.

No Airflow import here; `http` (httpx) and `server` are imported only when asked for.
"""

from __future__ import annotations

from .ledger import NotReconcilable, SubmissionInProgress, SubmissionLedger, idempotency_token
from .poll import PollTimeout, wait_for_terminal
from .provider import (
    PaidProvider,
    ProviderCapabilities,
    ProviderError,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
    RemoteState,
    RemoteStatus,
)

__all__ = [
    "NotReconcilable",
    "PaidProvider",
    "PollTimeout",
    "ProviderCapabilities",
    "ProviderError",
    "ProviderOutcomeUnknown",
    "ProviderRejected",
    "ProviderUnavailable",
    "RemoteState",
    "RemoteStatus",
    "SubmissionInProgress",
    "SubmissionLedger",
    "idempotency_token",
    "wait_for_terminal",
]
