"""Every error this package raises on purpose; each carries the data a caller needs, and its policy.

Policy (``exit_code``, ``retryable``) is read from the class by every caller; see docs/design.md,
"Error policy". The hierarchy (exit code, then ``retry`` when a retry may succeed)::

    IdempotentJobsError ............................ 5 retry  the root
    ├── InvalidIdentifier (ValueError) ............. 2        a week id, episode id, key or fingerprint
    ├── InvalidConfiguration (ValueError) .......... 2        a setting that cannot work
    │   └── InvalidPageSetting ..................... 2        one only the operations page reads
    ├── InvalidRequest (ValueError) ................ 2        a request with no canonical JSON form
    ├── EpisodeNotFound (LookupError) .............. 4
    ├── StoreCorrupted ............................. 5        nothing was overwritten
    │   └── StoreTooNew (also StoreUnavailable) .... 5        written by a later release
    ├── StoreUnavailable ........................... 5 retry  unreachable, or its lock timed out
    │   ├── StoreMissing ........................... 5 retry  a reader found no store
    │   ├── StoreOutdated .......................... 5        a reader found an older schema
    │   └── StoreTooNew
    ├── AllocationConflict ......................... 3        the key is held otherwise
    ├── IllegalTransition .......................... 3        a ledger (submission, effect) says no
    │   └── NotReconcilable ........................ 3
    ├── DecisionConflict ........................... 3        an approval decision is final
    ├── ApprovalRequired ........................... 3        no approved episode: nothing spent
    ├── SubmissionStateUnknown ..................... 3        only reconcile may settle it
    ├── SubmissionInProgress ....................... 5 retry  another live process is submitting
    ├── RequestConflict ............................ 3        the episode paid for another request
    │   └── BillingAccountConflict ................. 3        ... or through another account
    ├── EffectStateUnknown ......................... 3        an effect may have happened: reconcile
    ├── EffectInProgress ........................... 5 retry  another live process runs the effect
    ├── EffectInputConflict ........................ 3        the effect ran with other inputs
    ├── EffectNotDone .............................. 5 retry  a body's word: it certainly did not happen
    ├── BudgetExceeded ............................. 2        nothing was sent
    │   └── BudgetUnknowable ....................... 2        the week's spend cannot be known
    ├── PollTimeout (TimeoutError) ................. 5 retry  the remote job is not finished yet
    ├── ProviderError .............................. 5 retry  a paid API call failed
    │   ├── ProviderRejected ....................... 5 retry  refused: nothing was created
    │   ├── ProviderOutcomeUnknown ................. 5 retry  the answer was lost: a job may exist
    │   └── ProviderUnavailable .................... 5 retry  certainly never sent
    ├── MigrationError ............................. 5 retry  a planned job cannot be completed
    └── LegacyApprovalRefused (ValueError) ......... 2        a legacy approval in doubt

    Below the root only as a cause (translated before it reaches a user):
    ValueError
    ├── UnsafeJson                                            JSON this package refuses to hold
    └── LegacyApprovalError                                   one legacy approval field in doubt

This module imports nothing of the package: every other module may import it.
"""

from __future__ import annotations

import shlex
from typing import ClassVar

__all__ = [
    "AllocationConflict",
    "ApprovalRequired",
    "BillingAccountConflict",
    "BudgetExceeded",
    "BudgetUnknowable",
    "DecisionConflict",
    "EffectInProgress",
    "EffectInputConflict",
    "EffectNotDone",
    "EffectStateUnknown",
    "EpisodeNotFound",
    "IdempotentJobsError",
    "IllegalTransition",
    "InvalidConfiguration",
    "InvalidPageSetting",
    "InvalidIdentifier",
    "InvalidRequest",
    "LegacyApprovalError",
    "LegacyApprovalRefused",
    "MigrationError",
    "NotReconcilable",
    "PollTimeout",
    "ProviderError",
    "ProviderOutcomeUnknown",
    "ProviderRejected",
    "ProviderUnavailable",
    "RequestConflict",
    "StoreCorrupted",
    "StoreMissing",
    "StoreOutdated",
    "StoreTooNew",
    "StoreUnavailable",
    "SubmissionInProgress",
    "SubmissionStateUnknown",
    "UnsafeJson",
]


class IdempotentJobsError(Exception):
    """Root of every error this package raises on purpose."""

    #: The CLI's exit code: 5 (a store or provider error) unless a subclass says otherwise.
    exit_code: ClassVar[int] = 5
    #: Whether trying again later may succeed (a lock timeout, a server down): Airflow retries these.
    retryable: ClassVar[bool] = True


# -- Bad input: refused before anything is touched -------------------------------------------------


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


class InvalidPageSetting(InvalidConfiguration):
    """A setting only the operations page reads (``weekly_budget``, ``currency``): the page answers 503
    naming it, not "store misconfigured"; the operators never read these."""


class InvalidRequest(IdempotentJobsError, ValueError):
    """A request that has no canonical JSON form (NaN, a non-string key, an object JSON cannot hold)."""

    exit_code = 2
    retryable = False


class UnsafeJson(ValueError):
    """Text that is not JSON, or JSON this package refuses to hold."""


# -- The store -------------------------------------------------------------------------------------


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


# -- The episode's rules: allocation, the submission state machine, approval -----------------------


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


class IllegalTransition(IdempotentJobsError):
    """A move of a ledger (the submission's, or an effect's: ``what``) that its state machine does not allow."""

    exit_code = 3
    retryable = False

    def __init__(self, episode_id: str, current: str, wanted: str, *, what: str = "submission") -> None:
        self.episode_id = episode_id
        self.current = current
        self.wanted = wanted
        self.what = what
        super().__init__(f"episode {episode_id}: {what} cannot go from {current} to {wanted}")


class NotReconcilable(IllegalTransition):
    """Reconcile applies only to a submission (or an effect: ``what``) whose writer is gone, or ``unknown``."""

    def __init__(self, episode_id: str, current: str, reason: str, *, what: str = "a submission") -> None:
        super().__init__(episode_id, current, "reconciled", what=what)
        self.reason = reason
        self.args = (f"episode {episode_id}: cannot reconcile {what} in state {current}: {reason}",)


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


# -- The paid submission (the ledger, its budget, polling) -----------------------------------------


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


class SubmissionInProgress(IdempotentJobsError):
    """Another live process wrote the ``submitting`` intent and is waiting for the provider; retry later."""

    def __init__(self, episode_id: str, claimed_by: str | None) -> None:
        self.episode_id = episode_id
        self.claimed_by = claimed_by
        super().__init__(f"episode {episode_id}: a submission is in progress in {claimed_by}; retry later")


class RequestConflict(IdempotentJobsError):
    """The episode's paid submission was made for another request; nothing was sent or resumed."""

    exit_code = 3
    retryable = False

    def __init__(self, episode_id: str, recorded: str, requested: str) -> None:
        self.episode_id = episode_id
        self.recorded = recorded
        self.requested = requested
        super().__init__(
            f"episode {episode_id}: its paid submission was made for request {recorded}, "
            f"not for this request {requested}; refusing to submit or resume a different request "
            "(one episode pays for one request: allocate another episode for another request)"
        )


class BillingAccountConflict(RequestConflict):
    """The episode's submission was made through another billing account; nothing was sent or looked up.

    A lookup in another account cannot see the first job, so it would prove "no job" and pay again.
    """

    def __init__(self, episode_id: str, recorded: str, requested: str) -> None:
        self.episode_id = episode_id
        self.recorded = recorded
        self.requested = requested
        IdempotentJobsError.__init__(
            self,
            f"episode {episode_id}: its paid submission was made through billing account {recorded}, not through"
            f" this one ({requested}): the connection now reaches another account or endpoint; refusing to look"
            " up, submit or resume there (a job there cannot prove the first one absent). Point the connection"
            f" back, or settle it by hand: idempotent-jobs reconcile {episode_id} --remote-ref REF | --not-submitted",
        )


# -- Effects after the payment (`effects`) ----------------------------------------------------------


class EffectStateUnknown(IdempotentJobsError):
    """An episode's effect may have happened; it is never run again blindly, only reconcile settles it."""

    exit_code = 3
    retryable = False

    def __init__(self, episode_id: str, name: str, detail: str = "") -> None:
        self.episode_id = episode_id
        self.name = name
        # Quoted for a shell: ``publish[3]`` is a glob pattern there.
        self.command = f"idempotent-jobs reconcile {episode_id} --effect {shlex.quote(name)}"
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"episode {episode_id}: effect {name} may already have happened{extra}; refusing to run it again."
            f" Settle it with: {self.command} --done REF | --not-done"
        )


class EffectInProgress(IdempotentJobsError):
    """Another live process wrote the effect's ``pending`` intent and runs its body; retry later."""

    def __init__(self, episode_id: str, name: str, claimed_by: str | None) -> None:
        self.episode_id = episode_id
        self.name = name
        self.claimed_by = claimed_by
        super().__init__(f"episode {episode_id}: effect {name} is running in {claimed_by}; retry later")


class EffectInputConflict(RequestConflict):
    """The episode's effect began with other inputs; nothing was run."""

    def __init__(self, episode_id: str, name: str, recorded: str, requested: str) -> None:
        self.episode_id = episode_id
        self.name = name
        self.recorded = recorded
        self.requested = requested
        IdempotentJobsError.__init__(
            self,
            f"episode {episode_id}: effect {name} began with inputs {recorded}, not with these {requested};"
            " refusing to run it with different inputs (one episode has one effect of each name:"
            " give the other a name of its own)",
        )


class EffectNotDone(IdempotentJobsError):
    """Raised by an effect's body (or its lookup's caller) when the effect certainly did not happen.

    The effect is recorded ``failed`` and a retry runs it again; any other exception from the body
    leaves it ``unknown``.
    """


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


class BudgetUnknowable(BudgetExceeded):
    """The week's spend cannot be known: a provider reported a cost that is no cost, with no estimate to count."""

    def __init__(self, episode_id: str, week_id: str, budget: float, unknown: list[str]) -> None:
        super().__init__(episode_id, week_id, budget, float("nan"), 0.0)
        self.unknown = unknown
        self.args = (
            f"episode {episode_id}: weekly budget {budget:g} for {week_id} cannot be checked: the provider "
            f"reported no valid cost for {', '.join(unknown)} and no estimate stands in for it; nothing was sent "
            "(give those submissions' jobs an estimated_cost, or settle their cost with the provider)",
        )


class PollTimeout(IdempotentJobsError, TimeoutError):
    """The remote job did not reach a terminal state in time; the ledger still says ``accepted``."""

    def __init__(self, episode_id: str, timeout: float, last_state: str | None, last_error: str | None) -> None:
        self.episode_id = episode_id
        self.timeout = timeout
        self.last_state = last_state
        self.last_error = last_error
        extra = f"; last poll error: {last_error}" if last_error else ""
        super().__init__(
            f"episode {episode_id}: remote job not finished after {timeout:g}s "
            f"(last remote state {last_state or 'unknown'}){extra}; polling again later is safe"
        )


# -- The paid API's answers (raised by a `PaidProvider`: `paid.provider` says how to tell them apart) ---


class ProviderError(IdempotentJobsError):
    """A provider call failed; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class ProviderRejected(ProviderError):
    """The provider answered with a clear refusal (4xx): nothing was created."""


class ProviderOutcomeUnknown(ProviderError):
    """The request may have been received, but its answer was lost (timeout, dropped connection, 5xx)."""


class ProviderUnavailable(ProviderError):
    """The request certainly did not reach the provider (connection refused, connect timeout, 429)."""


# -- The migration of legacy state -----------------------------------------------------------------


class MigrationError(IdempotentJobsError):
    """A job cannot be completed as planned (a file lost in between, a key taken meanwhile)."""


class LegacyApprovalError(ValueError):
    """A legacy approval that cannot be read as exactly one decision (or none); ``field`` is a pointer."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"field {field}: {reason}")
        self.field = field
        self.reason = reason


class LegacyApprovalRefused(IdempotentJobsError, ValueError):
    """A legacy state's approval in doubt: the whole migration is refused (bad input, nothing changed).

    Not a skipped week: a job whose spending gate cannot be read must not be left for a later run to
    guess, and the operator fixes one field and runs the migration again.
    """

    exit_code = 2
    retryable = False

    def __init__(self, path: str, problem: LegacyApprovalError) -> None:
        self.path = path
        self.field = problem.field
        self.reason = problem.reason
        super().__init__(f"legacy approval in {path}: {problem}; nothing was migrated")


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
