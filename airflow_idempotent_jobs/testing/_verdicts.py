"""What the conformance kit expects of an adapter under each fault, and why.

The error classes a fault calls for (`expected_submit`, `expected_read`) with the reason the report
gives, and the outcomes that are unsafe whatever the fault (`unsafe_submit`: the ledger would pay
twice or lose a billed job). `_port_checks` runs the calls and judges them by these.
"""

from __future__ import annotations

import math
from typing import Final

from ..errors import ProviderError, ProviderOutcomeUnknown, ProviderRejected, ProviderUnavailable
from ..paid.provider import ProviderCapabilities, RemoteStatus
from ._calls import Outcome
from ._plan import PaidRoutes
from .fault_proxy import Exchange, Fault

__all__ = [
    "ANY_ERROR",
    "REJECTED",
    "TRY_AGAIN",
    "UNAVAILABLE",
    "UNKNOWN",
    "Classes",
    "describe_routes",
    "expected_read",
    "expected_submit",
    "same_status",
    "unsafe_submit",
    "why_read",
]

Classes = tuple[type[BaseException], ...]
UNKNOWN: Final[Classes] = (ProviderOutcomeUnknown,)
UNAVAILABLE: Final[Classes] = (ProviderUnavailable,)
REJECTED: Final[Classes] = (ProviderRejected,)
#: What a read (status, find) may raise for a lost or failed answer: the poll tries again.
TRY_AGAIN: Final[Classes] = (ProviderUnavailable, ProviderOutcomeUnknown)
ANY_ERROR: Final[Classes] = (ProviderError,)

WHY_UNKNOWN: Final = (
    "the API may have created the job, so the submission must stay 'unknown' (a retry finds it or resubmits "
    "its token); ProviderRejected would mark it failed while a billed job runs, ProviderUnavailable would let "
    "a retry pay again"
)
WHY_REJECTED: Final = (
    "the API refused the call and created nothing; ProviderRejected records the failure and its reason"
)
WHY_429: Final = "the API did not process the call (429); ProviderUnavailable lets a retry send it again at once"
WHY_REFUSED: Final = "the connection was refused, so nothing was sent; ProviderUnavailable lets a retry send it"
WHY_FREE: Final = (
    "the paid call ({paid}) was never sent, so nothing can have been created; ProviderUnavailable lets a retry "
    "start over (the free call may repeat), ProviderOutcomeUnknown would leave the submission unknown for nothing"
)
WHY_FREE_REFUSED: Final = "the API refused a free call before the paid one: nothing was created"
WHY_PAID_BEFORE: Final = "a paid call of this submit already went through, so the job may exist"
WHY_READ: Final = (
    "status and find only read: a lost or failed answer means 'try again' (ProviderUnavailable or "
    "ProviderOutcomeUnknown, which the poll retries), never a job state"
)
WHY_READ_4XX: Final = "an answer that says nothing about the job must raise a ProviderError, never become its state"
WHY_NO_JOB: Final = (
    "None promises that no job carries the token, but the API created one (the lost submit's): the ledger "
    "would submit again and pay twice"
)


WHY_NO_JOB_ELSEWHERE: Final = (
    f"{WHY_NO_JOB}; that submit was made by another process (a retry runs in a fresh one) after this one had "
    "asked for the token: a lookup that answers from its own process's memory (what it sent, or an earlier "
    "'no job', on an object, a class or in a module) cannot see it"
)
WHY_STRAY: Final = (
    "this answer is not the API's declared 'no job': a wrong path, a gateway or another service behind the "
    "host answers like it, and proves nothing about the job"
)


def describe_routes(exchanges: list[Exchange]) -> str:
    """The requests an API got and what it answered, for a report line."""
    return ", ".join(f"{e.route} -> {e.upstream_status or 'no answer'}" for e in exchanges) or "no request"


def expected_read(fault: Fault) -> Classes:
    """What a read must raise under ``fault``: a refusing 4xx or an unreadable 2xx is any ProviderError
    (never a job state), the rest 'try again'."""
    if fault.unreadable:
        return ANY_ERROR
    return TRY_AGAIN if fault.forwards or fault.status == 429 else ANY_ERROR


def why_read(expected: Classes) -> str:
    return WHY_READ if expected is TRY_AGAIN else WHY_READ_4XX


def same_status(one: RemoteStatus, other: RemoteStatus) -> bool:
    """Equal answers; two NaN costs are the same answer (NaN is never equal to itself)."""
    costs = (one.cost, other.cost)
    same_cost = one.cost == other.cost or all(isinstance(c, float) and math.isnan(c) for c in costs)
    return same_cost and (one.state, one.result, one.error) == (other.state, other.result, other.error)


def expected_submit(
    fault: Fault, faulted: Exchange, exchanges: list[Exchange], paid: PaidRoutes
) -> tuple[Classes, str]:
    """The class the fault calls for: by what it did to the paid call, or to a free call before it."""
    if any(paid(e.method, e.path) and e.forwarded and e.seq < faulted.seq for e in exchanges):
        return UNKNOWN, WHY_PAID_BEFORE
    if paid(faulted.method, faulted.path):
        if fault.forwards:
            return UNKNOWN, WHY_UNKNOWN
        return (UNAVAILABLE, WHY_429) if fault.status == 429 else (REJECTED, WHY_REJECTED)
    if not fault.forwards and fault.status != 429:
        return (ProviderRejected, ProviderUnavailable), WHY_FREE_REFUSED
    return UNAVAILABLE, WHY_FREE.format(paid=paid.describe())


def unsafe_submit(
    outcome: Outcome, sent: list[Exchange], created: list[Exchange], caps: ProviderCapabilities
) -> str | None:
    """Why this submit's outcome makes the ledger pay twice or lose a billed job, by what the API got; or None."""
    if isinstance(outcome.error, ProviderUnavailable) and sent:
        return (
            f"ProviderUnavailable says the paid call certainly was not sent, but the API received {sent[0].route}: "
            "the ledger forgets the attempt and a retry pays again"
        )
    if isinstance(outcome.error, ProviderRejected) and created:
        return (
            f"ProviderRejected says nothing was created, but the API created the job ({created[0].route} answered "
            f"HTTP {created[0].upstream_status}): the submission is marked failed while the job runs and is billed"
        )
    if len(sent) > 1 and not caps.idempotent_tokens:
        return (
            f"one submit sent the paid call {len(sent)} times ({describe_routes(sent)}) without declaring idempotent "
            f"tokens: up to {len(sent)} billed jobs"
        )
    return None
