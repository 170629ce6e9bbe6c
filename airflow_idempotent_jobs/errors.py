"""One error root; each subclass carries the data a caller needs to act on it, and its policy.

The policy is two class attributes that every caller reads instead of keeping its own table:
``exit_code`` (what the CLI exits with, docs/design.md lists them) and ``retryable`` (whether a
retry could succeed: Airflow gets `AirflowFailException` for the errors a retry cannot fix).
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "AllocationConflict",
    "ApprovalRequired",
    "BudgetExceeded",
    "DecisionConflict",
    "EpisodeNotFound",
    "IdempotentJobsError",
    "IllegalTransition",
    "InvalidConfiguration",
    "InvalidIdentifier",
    "StoreCorrupted",
    "StoreMissing",
    "StoreOutdated",
    "StoreTooNew",
    "StoreUnavailable",
    "SubmissionStateUnknown",
]


class IdempotentJobsError(Exception):
    """Root of every error this package raises on purpose."""

    #: The CLI's exit code: 5 (a store or provider error) unless a subclass says otherwise.
    exit_code: ClassVar[int] = 5
    #: Whether trying again later may succeed (a lock timeout, a server down): Airflow retries these.
    retryable: ClassVar[bool] = True


class InvalidIdentifier(IdempotentJobsError, ValueError):
    """A week id, episode id, allocation key or fingerprint that breaks its grammar."""

    exit_code = 2
    retryable = False

    def __init__(self, kind: str, value: object, reason: str) -> None:
        self.kind = kind
        self.value = value
        self.reason = reason
        super().__init__(f"invalid {kind} {_short(value)}: {reason}")


class InvalidConfiguration(IdempotentJobsError, ValueError):
    """A provider, store or connection setting that cannot work; ``field`` names it (never its secret)."""

    exit_code = 2
    retryable = False

    def __init__(self, what: str, field: str, reason: str) -> None:
        self.what = what
        self.field = field
        self.reason = reason
        super().__init__(f"invalid {what}: {field}: {reason}")


class AllocationConflict(IdempotentJobsError):
    """The key is held in another week, by several episodes, or with another fingerprint."""

    exit_code = 3
    retryable = False

    def __init__(self, allocation_key: str, reason: str, episode_ids: tuple[str, ...] = ()) -> None:
        self.allocation_key = allocation_key
        self.reason = reason
        self.episode_ids = episode_ids
        held = f" (held by {', '.join(episode_ids)})" if episode_ids else ""
        super().__init__(f"allocation key {_short(allocation_key)}: {reason}{held}")


class EpisodeNotFound(IdempotentJobsError, LookupError):
    """No episode with this id exists in the store."""

    exit_code = 4
    retryable = False

    def __init__(self, episode_id: str, where: str = "") -> None:
        self.episode_id = episode_id
        super().__init__(f"episode {episode_id} not found" + (f" in {where}" if where else ""))


class StoreCorrupted(IdempotentJobsError):
    """A stored file or row is unreadable or has an unknown schema; nothing was overwritten."""

    retryable = False

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(f"store corrupted at {where}: {reason}")


class StoreUnavailable(IdempotentJobsError):
    """The store cannot be reached or locked (lock timeout, unwritable root, database down)."""


class StoreMissing(StoreUnavailable):
    """A reader (`EpisodeStore.require_existing`) found no store at all: nothing was ever written there.

    A class of its own so that a dry run (``airflow tasks test``) can tell a store not created yet,
    which it can answer for, from one it cannot read.
    """


class StoreOutdated(StoreUnavailable):
    """A reader found the store's schema older than this release reads; a writer of this release migrates it.

    Readers never migrate (`EpisodeStore.require_existing`), and waiting does not help them unless
    a writer runs first: not retryable.
    """

    retryable = False

    def __init__(self, where: str, found: int, supported: int) -> None:
        self.where = where
        self.found = found
        self.supported = supported
        super().__init__(
            f"the episode store {where} is at version {found}, this code reads {supported}: "
            "a writer of this release migrates it, readers do not"
        )


class StoreTooNew(StoreCorrupted, StoreUnavailable):
    """The store's schema is newer than this release: no process of it may read or write it; upgrade the package.

    A `StoreCorrupted` (an unknown schema: nothing touches it, not retryable) that is also a
    `StoreUnavailable`: it names no record, so Airflow's page tells every user, not a damaged record.
    """

    def __init__(self, where: str, found: int, supported: int, release: str) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            where,
            f"schema version {found} is newer than this code's {supported}: a later release wrote it; "
            f"upgrade airflow-idempotent-jobs (this is {release}) to use this store; nothing was changed",
        )
        self.args = (f"episode store {where}: {self.reason}",)  # not "corrupted": nothing is damaged


class IllegalTransition(IdempotentJobsError):
    """A submission-ledger transition that the state machine does not allow."""

    exit_code = 3
    retryable = False

    def __init__(self, episode_id: str, current: str, wanted: str) -> None:
        self.episode_id = episode_id
        self.current = current
        self.wanted = wanted
        super().__init__(f"episode {episode_id}: submission cannot go from {current} to {wanted}")


class SubmissionStateUnknown(IdempotentJobsError):
    """A paid submission may or may not have been accepted; only reconcile may settle it."""

    exit_code = 3
    retryable = False

    def __init__(self, episode_id: str, detail: str = "") -> None:
        self.episode_id = episode_id
        self.command = f"idempotent-jobs reconcile {episode_id}"
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"episode {episode_id}: the provider may already have accepted this submission{extra}; "
            f"refusing to submit again. Settle it with: {self.command}"
        )


class DecisionConflict(IdempotentJobsError):
    """An approval decision that contradicts the one recorded (a decision is final)."""

    exit_code = 3
    retryable = False

    def __init__(self, episode_id: str, current: str, wanted: str, by: str | None, at: str | None) -> None:
        self.episode_id = episode_id
        self.current = current
        self.wanted = wanted
        who = f" by {by} at {at}" if by and at else ""
        super().__init__(
            f"episode {episode_id}: cannot record {wanted}: it is already {current}{who}; a decision is final "
            "(to ask again, allocate a new episode with a new allocation key)"
        )


class ApprovalRequired(IdempotentJobsError):
    """A paid step that requires an approved episode found none; nothing was read or sent."""

    exit_code = 3
    retryable = False

    def __init__(self, episode_id: str, reason: str, *, rejected: bool = False) -> None:
        self.episode_id = episode_id
        self.reason = reason
        self.rejected = rejected
        hint = (
            "a decision is final (to ask again, allocate a new episode with a new allocation key)"
            if rejected
            else f"approve it in Airflow or with: idempotent-jobs approve {episode_id} --by NAME"
        )
        super().__init__(f"episode {episode_id}: approval required before spending, but {reason}; {hint}")


class BudgetExceeded(IdempotentJobsError):
    """The week's spending would pass its budget; nothing was sent."""

    exit_code = 2
    retryable = False

    def __init__(self, episode_id: str, week_id: str, budget: float, spent: float, requested: float) -> None:
        self.episode_id = episode_id
        self.week_id = week_id
        self.budget = budget
        self.spent = spent
        self.requested = requested
        super().__init__(
            f"episode {episode_id}: weekly budget {budget:g} for {week_id} would be exceeded "
            f"(already committed {spent:g}, this submission {requested:g}); nothing was sent"
        )


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
