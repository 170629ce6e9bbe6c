"""Paid execution that never pays twice: the submission ledger, the provider port, an HTTP provider.

No Airflow import here; `http` (httpx) and `server` are imported only when asked for.
"""

from __future__ import annotations

from ..errors import (
    BudgetUnknowable,
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
from .budget import checked_amount
from .fingerprint import canonical_json, request_fingerprint
from .ledger import SubmissionLedger, idempotency_token
from .poll import wait_for_terminal
from .provider import PaidProvider, ProviderCapabilities, RemoteState, RemoteStatus, reported_cost
from .results import DEFAULT_RESULT_LIMIT, Bounded, bound_result, clean_text

__all__ = [
    "DEFAULT_RESULT_LIMIT",
    "Bounded",
    "BudgetUnknowable",
    "InvalidRequest",
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
    "RequestConflict",
    "SubmissionInProgress",
    "SubmissionLedger",
    "bound_result",
    "canonical_json",
    "checked_amount",
    "clean_text",
    "idempotency_token",
    "reported_cost",
    "request_fingerprint",
    "wait_for_terminal",
]
