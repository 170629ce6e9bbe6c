"""The submission ledger: at most one paid job per episode, whatever crashes in between.

Timeline of one submission, and what a retry finds after a crash at each point::

    1. lock; state none; budget check; write `submitting` (token, claim) durably; unlock
                                  crash before: retry finds `none` and submits normally
    2. provider.submit(request, token)
                                  crash before/during/after: retry finds `submitting`
    3. lock; write `accepted(remote_ref)`; unlock
                                  crash after: retry finds `accepted` and only polls

The intent records the request's fingerprint (`fingerprint`): any later call with another request
(a retry that rendered it differently, a second caller on the same episode) is refused with
`RequestConflict` whatever the state, and is never handed the first request's job.

A retry that finds `submitting` (its writer dead) or `unknown` acts by the provider's capability:
(a) idempotent tokens: submit again with the same token, the provider returns the same job;
(b) lookup: ``find(token)`` and adopt the job, or submit once if there is none;
(a) and (b): look up first (an API may forget a token after a while; the lookup does not), then
submit with the same token if the lookup found none or proved nothing;
(c) neither: raise `SubmissionStateUnknown` and never submit until ``idempotent-jobs reconcile``.
Every decision and write runs inside ``store.update``/``update_in_week`` (the store's lock: a
compare-and-set); provider calls run outside the lock. Whether a claim's writer still lives is
`claims`'s question, the budget `budget`'s; this module keeps the state machine.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from collections.abc import Callable, Mapping
from typing import Any, Final

from ..approval import check_approved
from ..episode import Decision, Episode, EpisodeStatus, Submission, SubmissionState, cost_problem
from ..errors import (
    BillingAccountConflict,
    IllegalTransition,
    InvalidConfiguration,
    NotReconcilable,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
    RequestConflict,
    StoreCorrupted,
    SubmissionInProgress,
    SubmissionStateUnknown,
)
from ..identity import EpisodeId
from ..stores.base import EpisodeLike, EpisodeStore
from . import claims
from .budget import check_budget, checked_amount
from .claims import DEFAULT_CLAIM_LEASE
from .fingerprint import request_fingerprint
from .provider import PaidProvider, RemoteState, billing_fingerprint, look_up
from .provider import RemoteStatus as RemoteStatus
from .results import (
    DEFAULT_RESULT_LIMIT,
    bound_result,
    clean_text,
    redacting,
    redactor,
    ref_problem,
    reraise_redacted,
    short_repr,
    unusable_ref,
)

__all__ = [
    "DEFAULT_CLAIM_LEASE",
    "SubmissionLedger",
    "idempotency_token",
]

_S = SubmissionState


def idempotency_token(store_identity: str, episode_id: str) -> str:
    """The token sent with every submit of ``episode_id``: stable across retries, hosts and processes.

    Readable prefix for operators, plus a digest of the store's identity and the id, so that two
    stores never share one (`EpisodeStore.identity`).
    """
    eid = str(EpisodeId.parse(episode_id))
    digest = hashlib.sha256(f"{store_identity}\x00{eid}".encode()).hexdigest()[:32]
    return f"aij-{eid}-{digest}"


def _utc_clock() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class SubmissionLedger:
    """Runs the submission state machine of episodes in ``store``.

    ``weekly_budget``: refuse a new submission when the week's committed spend (recorded costs,
    else estimates) plus its estimate would pass it. ``clock``: aware UTC ``datetime`` source.
    ``claim_lease``: seconds after which a ``submitting`` intent is abandoned; before that only a
    writer of this host, boot and PID namespace is checked, by its pid (`claims`).
    ``result_limit``: largest result kept in the record, in bytes of canonical JSON
    (`results.bound_result`). A budget that is not a finite number >= 0 is `InvalidConfiguration`.
    """

    def __init__(
        self,
        store: EpisodeStore,
        *,
        weekly_budget: float | None = None,
        clock: Callable[[], dt.datetime] = _utc_clock,
        claim_lease: float = DEFAULT_CLAIM_LEASE,
        result_limit: int = DEFAULT_RESULT_LIMIT,
    ) -> None:
        self.store = store
        self.weekly_budget = checked_amount("weekly_budget", weekly_budget)
        self.clock = clock
        self.claim_lease = claim_lease
        if type(result_limit) is not int or result_limit < 0:
            raise InvalidConfiguration("paid submission settings", "result_limit", "must be a whole number >= 0")
        self.result_limit = result_limit

    def token_for(self, episode_id: EpisodeLike) -> str:
        return idempotency_token(self.store.identity, str(episode_id))

    def preflight(
        self, episode_id: EpisodeLike, request: Mapping[str, Any] | None = None, *, require_approval: bool = False
    ) -> Episode:
        """The episode, validated, before any credential is read or provider client built.

        Raises `InvalidIdentifier` (malformed id), `EpisodeNotFound`, or `StoreCorrupted` (an
        unreadable or self-contradicting submission record): the order docs/design.md asks of callers.
        `ApprovalRequired` when the episode was rejected, or (``require_approval``) is not approved.
        With ``request``: also `InvalidRequest`, and `RequestConflict` when the episode's submission
        was made for another request (whatever its state, terminal included).
        """
        fingerprint = None if request is None else request_fingerprint(request)
        episode = self.store.get(episode_id)
        self._approval_allows(episode, require_approval)
        sub = self._checked(episode)
        if fingerprint is not None:
            self._same_request(episode, sub, fingerprint)
        return episode

    # -- submit ----------------------------------------------------------------------------------
    def submit(
        self,
        episode_id: EpisodeLike,
        provider: PaidProvider,
        request: Mapping[str, Any],
        *,
        estimated_cost: float | None = None,
        require_approval: bool = False,
    ) -> Episode:
        """Make sure the provider has exactly one job for the episode; returns the episode.

        Returns without calling the provider when the submission is already ``accepted`` or
        terminal (``succeeded``/``failed``: check ``episode.submission.state``); a 4xx rejection
        returns the episode ``failed``. Raises `InvalidRequest`, `InvalidConfiguration` (an estimate
        that is not a finite number >= 0), `RequestConflict` (the submission is another request's; its
        `BillingAccountConflict`: it went through another account than ``provider``'s),
        `BudgetExceeded` (nothing sent), `SubmissionStateUnknown` (capability (c): run reconcile),
        `SubmissionInProgress`, `ProviderUnavailable` (nothing sent; retry) or
        `ProviderOutcomeUnknown` (recorded as ``unknown``; with capability (a) or (b) a retry
        settles it). Every error text from the provider goes through its ``redact`` (if it has one).
        `ApprovalRequired` (nothing sent) when the episode was rejected, or, with
        ``require_approval``, is not approved: checked under the lock with the intent's write, so
        a decision recorded after a caller's preflight still stops it.
        """
        eid = str(EpisodeId.parse(episode_id))
        estimated_cost = checked_amount("estimated_cost", estimated_cost)
        fingerprint = request_fingerprint(request)
        billed = billing_fingerprint(provider)
        try:
            for _ in range(3):  # a lookup that lost a race starts over; bounded
                episode = self._attempt(eid, provider, request, estimated_cost, (fingerprint, billed), require_approval)
                if episode is not None:
                    return episode
            raise SubmissionInProgress(eid, "another process (the record kept changing)")
        finally:
            claims.leave(self.store.location, eid)

    def _attempt(
        self,
        eid: str,
        provider: PaidProvider,
        request: Mapping[str, Any],
        estimated_cost: float | None,
        binding: tuple[str, str | None],
        require_approval: bool,
    ) -> Episode | None:
        plan: list[str] = []
        episode = self.store.update_in_week(
            eid, lambda ep, week: self._decide(ep, week, provider, estimated_cost, binding, require_approval, plan)
        )
        if not plan:
            return episode
        if plan[0] == "call":
            return self._call(eid, provider, request, episode)
        # plan "find": look the token up outside the lock, then compare-and-set.
        seen = episode.submission
        assert seen.token is not None
        unproven = ""
        try:
            with redacting(provider):
                ref = look_up(provider, seen.token, seen.history)
        except ProviderOutcomeUnknown as exc:
            if not provider.capabilities.idempotent_tokens:
                raise
            ref, unproven = None, str(exc)  # the token still makes the repetition harmless
        if ref is not None and ref_problem(ref):
            raise SubmissionStateUnknown(eid, unusable_ref("token lookup", ref, redactor(provider)))
        found: list[bool] = []
        episode = self.store.update(eid, lambda ep: self._after_find(ep, seen, ref, found, unproven))
        if not found:
            return None
        return episode if ref is not None else self._call(eid, provider, request, episode)

    def _decide(
        self,
        ep: Episode,
        week: list[Episode],
        provider: PaidProvider,
        estimated_cost: float | None,
        binding: tuple[str, str | None],
        require_approval: bool,
        plan: list[str],
    ) -> Episode:
        fingerprint, billed = binding
        sub = self._checked(ep)
        if sub.state is not _S.NONE:
            self._same_request(ep, sub, fingerprint)
        if sub.state.terminal:
            return ep
        if sub.state is not _S.NONE:  # every path below reaches the provider: through the account that paid
            self._same_account(ep, sub, billed)
        if sub.state is _S.ACCEPTED:
            return ep
        self._approval_allows(ep, require_approval)  # every path below may reach the provider
        if sub.state is _S.SUBMITTING and self._claim_alive(ep.episode_id, sub):
            raise SubmissionInProgress(ep.episode_id, sub.claimed_by)
        if sub.state is _S.NONE:
            check_budget(ep, week, self.weekly_budget, estimated_cost)
            plan.append("call")
            return self._claimed(
                ep,
                "intent written before calling the provider",
                estimated_cost=estimated_cost,
                request_fingerprint=fingerprint,
                billed_to=billed,
            )
        caps = provider.capabilities
        if caps.lookup:  # first, also with tokens: a token the API no longer remembers would pay twice
            plan.append("find")
            return ep
        if caps.idempotent_tokens:
            plan.append("call")
            return self._claimed(ep, f"found {sub.state.value}: resubmitting with the same token")
        raise SubmissionStateUnknown(
            ep.episode_id, f"found {sub.state.value}; the provider neither honours idempotency tokens nor offers lookup"
        )

    def _after_find(self, ep: Episode, seen: Submission, ref: str | None, found: list[bool], unproven: str) -> Episode:
        if ep.submission != seen:
            return ep  # changed while we looked: start over
        found.append(True)
        if ref is not None:
            return self._moved(ep, _S.ACCEPTED, "found by token lookup", remote_ref=ref, remote_state="pending")
        if unproven:
            note = f"token lookup proved nothing ({unproven[:200]}): resubmitting with the same token"
            return self._claimed(ep, note)
        return self._claimed(ep, "token lookup found no job: submitting once with the same token")

    def _claimed(self, ep: Episode, note: str, **changes: Any) -> Episode:
        claims.enter(self.store.location, ep.episode_id)
        sub = ep.submission
        return self._moved(
            ep,
            _S.SUBMITTING,
            note,
            token=sub.token or self.token_for(ep.episode_id),
            attempts=sub.attempts + 1,
            claimed_by=claims.my_claim(),
            claimed_at=self.clock().isoformat(),
            error=None,
            **changes,
        )

    def _call(self, eid: str, provider: PaidProvider, request: Mapping[str, Any], claimed: Episode) -> Episode:
        sub = claimed.submission
        assert sub.token is not None and sub.claimed_by is not None
        # If this call certainly sent nothing, go back: to `none` on a first attempt, else to
        # `unknown`, since an earlier attempt's outcome is still not known.
        back = _S.NONE if sub.history[-1]["from"] == _S.NONE.value else _S.UNKNOWN
        redact = redactor(provider)
        try:
            ref = provider.submit(request, sub.token)
        except ProviderRejected as exc:
            error = clean_text(_text(exc), redact)
            return self._settle(eid, sub.claimed_by, _S.FAILED, "rejected by the provider", error=error)
        except ProviderUnavailable as exc:
            error = clean_text(_text(exc), redact)
            self._settle(eid, sub.claimed_by, back, f"not sent: {error}", error=error)
            reraise_redacted(exc, error)
        except BaseException as exc:
            if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: record, and let it go
                self._settle(eid, sub.claimed_by, _S.UNKNOWN, "outcome of the submit call lost", error=_text(exc))
                raise
            error = clean_text(_text(exc), redact)
            self._settle(eid, sub.claimed_by, _S.UNKNOWN, "outcome of the submit call lost", error=error)
            # The original exception stays out of the chain when its text had to be redacted.
            cause = exc if error == _text(exc) else None
            caps = provider.capabilities
            if not (caps.idempotent_tokens or caps.lookup):
                raise SubmissionStateUnknown(eid, error) from cause
            if not isinstance(exc, ProviderOutcomeUnknown):
                raise ProviderOutcomeUnknown(f"episode {eid}: submit outcome unknown: {error}") from cause
            reraise_redacted(exc, error)
        if ref_problem(ref):  # the job may exist, but no record (or jsonb) can hold this reference
            note = unusable_ref("submit", ref, redact)
            self._settle(eid, sub.claimed_by, _S.UNKNOWN, note, error=note)
            raise SubmissionStateUnknown(eid, note)
        return self._settle(eid, sub.claimed_by, _S.ACCEPTED, "accepted", remote_ref=ref, remote_state="pending")

    def _settle(self, eid: str, claim: str, state: SubmissionState, note: str, **changes: Any) -> Episode:
        """Record the outcome of our own submit call, if the record still carries our claim."""

        def change(ep: Episode) -> Episode:
            sub = ep.submission
            if sub.state is not _S.SUBMITTING or sub.claimed_by != claim:
                seen = ", ".join(f"{k}={v}" for k, v in changes.items() if k in ("remote_ref", "error"))
                raise SubmissionStateUnknown(
                    eid, f"the record changed to {sub.state.value} during the submit call; outcome: {note} {seen}"
                )
            return self._moved(ep, state, note, **changes)

        return self.store.update(eid, change)

    # -- status ----------------------------------------------------------------------------------
    def record_status(
        self, episode_id: EpisodeLike, status: RemoteStatus, *, redact: Callable[[str], str] | None = None
    ) -> Episode:
        """Persist a status answer: cost, remote state, result; ``succeeded``/``failed`` are terminal.

        A terminal submission is returned unchanged (a late answer never reopens it). A cost that
        is not a finite number >= 0 is recorded as ``cost_anomaly``, never as the cost; a result
        over ``result_limit`` (or not storable) as ``result_omitted``; the error text goes through
        ``redact`` (the provider's, when it has one) and is bounded. None of these fail the call:
        the job and its reference are kept.
        """
        eid = str(EpisodeId.parse(episode_id))
        cost, anomaly = status.cost, None
        if cost is not None and cost_problem(cost):
            cost, anomaly = None, f"provider reported cost {short_repr(status.cost)}: {cost_problem(status.cost)}"
        bounded = bound_result(status.result, self.result_limit)
        error = None if status.error is None else clean_text(status.error, redact or redactor(None))

        def change(ep: Episode) -> Episode:
            sub = self._checked(ep)
            if sub.state.terminal:
                return ep
            if sub.state is not _S.ACCEPTED:
                raise IllegalTransition(eid, sub.state.value, status.state.value)
            costs: dict[str, Any] = {
                "cost": cost if cost is not None else sub.cost,
                "cost_anomaly": anomaly or sub.cost_anomaly,
            }
            if status.state is RemoteState.SUCCEEDED:
                done = {**costs, "remote_state": status.state.value, "result_omitted": bounded.omitted}
                return self._moved(ep, _S.SUCCEEDED, "remote job succeeded", result=bounded.value, **done)
            if status.state is RemoteState.FAILED:
                failed = {**costs, "error": error or "the remote job failed", "remote_state": "failed"}
                return self._moved(ep, _S.FAILED, "remote job failed", **failed)
            if (sub.remote_state, sub.cost, sub.cost_anomaly) == (status.state.value, *costs.values()):
                return ep
            updated = dataclasses.replace(sub, remote_state=status.state.value, **costs)
            return dataclasses.replace(ep, submission=updated)

        return self.store.update(eid, change)

    # -- reconcile -------------------------------------------------------------------------------
    def reconcile(
        self,
        episode_id: EpisodeLike,
        *,
        provider: PaidProvider | None = None,
        remote_ref: str | None = None,
        not_submitted: bool = False,
        settled_by: str,
        via: str = "cli",
        comment: str | None = None,
        expected_updated_at: str | None = None,
    ) -> Episode:
        """Settle a ``submitting``/``unknown`` submission; exactly one way must be given.

        ``provider``: look the token up (found: ``accepted``; none: back to ``none``).
        ``remote_ref``: the operator says this remote job is ours (``accepted``).
        ``not_submitted``: the operator says nothing reached the provider (``none``: the next
        submit sends once). Records who settled it, when and how, and in the move's history entry
        also ``by``, ``via`` (``cli``, ``ui``) and the ``comment``. ``expected_updated_at``: the
        episode's ``updated_at`` as the person saw it; a record changed since is refused. Raises
        `NotReconcilable` (exit 3 in the CLI) for any other state or a submitter still alive.
        """
        eid = str(EpisodeId.parse(episode_id))
        if sum((provider is not None, remote_ref is not None, not_submitted)) != 1:
            raise ValueError("reconcile needs exactly one of provider, remote_ref, not_submitted")
        if remote_ref is not None and not remote_ref.strip():
            raise ValueError("remote_ref must not be empty")
        seen = self.check_reconcilable(eid)
        if expected_updated_at is not None and seen.updated_at != expected_updated_at:
            raise NotReconcilable(
                eid, seen.submission.state.value, f"the episode changed since it was shown (updated {seen.updated_at})"
            )
        how = "operator: remote ref given" if remote_ref is not None else "operator: not submitted"
        if provider is not None:
            if not provider.capabilities.lookup:
                raise ValueError("this provider cannot look tokens up; give remote_ref or not_submitted")
            self._same_account(seen, seen.submission, billing_fingerprint(provider))
            assert seen.submission.token is not None
            with redacting(provider):
                remote_ref = look_up(provider, seen.submission.token, seen.submission.history)
            if remote_ref is not None and ref_problem(remote_ref):
                reason = unusable_ref("token lookup", remote_ref, redactor(provider))
                raise NotReconcilable(eid, seen.submission.state.value, reason)
            how = "token lookup: " + ("job found" if remote_ref is not None else "no job for the token")

        def change(ep: Episode) -> Episode:
            if ep.submission != seen.submission:
                raise NotReconcilable(eid, ep.submission.state.value, "the record changed meanwhile; run again")
            settled = {"settled_by": settled_by, "settled_at": self.clock().isoformat(), "settled_how": how}
            entry = {"by": settled_by, "via": via, **({"comment": comment} if comment is not None else {})}
            if remote_ref is not None:
                return self._moved(
                    ep, _S.ACCEPTED, how, entry, remote_ref=remote_ref, remote_state="pending", **settled
                )
            return self._moved(ep, _S.NONE, how, entry, **settled)

        return self.store.update(eid, change)

    def check_reconcilable(self, episode_id: EpisodeLike) -> Episode:
        """The episode, if its submission may be reconciled now; else `NotReconcilable`."""
        ep = self.store.get(episode_id)
        sub = self._checked(ep)
        if sub.state not in (_S.SUBMITTING, _S.UNKNOWN):
            raise NotReconcilable(ep.episode_id, sub.state.value, "only submitting or unknown can be settled")
        if sub.state is _S.SUBMITTING and self._claim_alive(ep.episode_id, sub):
            raise NotReconcilable(ep.episode_id, sub.state.value, f"its submitter {sub.claimed_by} is still running")
        return ep

    # -- rules -----------------------------------------------------------------------------------
    @staticmethod
    def _approval_allows(ep: Episode, require_approval: bool) -> None:
        """`ApprovalRequired` for a rejected episode (always) or, if required, an unapproved one."""
        if require_approval or ep.approval.decision is Decision.REJECTED:
            check_approved(ep)

    def _same_request(self, ep: Episode, sub: Submission, fingerprint: str) -> None:
        """`RequestConflict` unless the submission is this request's.

        A submission recorded before fingerprints existed (None) binds nothing: it resumes as it
        did then, and stays unbound (we cannot prove which request it paid for).
        """
        if sub.request_fingerprint is not None and sub.request_fingerprint != fingerprint:
            raise RequestConflict(ep.episode_id, sub.request_fingerprint, fingerprint)

    @staticmethod
    def _same_account(ep: Episode, sub: Submission, billed: str | None) -> None:
        """`BillingAccountConflict` unless this provider reaches the account the submission went through.

        A submission bound to no account (an older record, a provider that does not say) binds
        nothing; a provider that does not say cannot prove it is the same account, so it is refused.
        """
        if sub.billed_to is not None and sub.billed_to != billed:
            raise BillingAccountConflict(
                ep.episode_id, sub.billed_to, billed or "an account the provider does not name"
            )

    def _moved(
        self,
        ep: Episode,
        state: SubmissionState,
        note: str,
        entry_extra: Mapping[str, Any] | None = None,
        **changes: Any,
    ) -> Episode:
        submission = ep.submission.moved_to(
            state, episode_id=ep.episode_id, note=note, entry_extra=entry_extra, **changes
        )
        # The job's status follows its paid call, so `list` tells at a glance what is done.
        return dataclasses.replace(
            ep, submission=submission, status=_JOB_STATUS[state], updated_at=submission.updated_at
        )

    def _checked(self, ep: Episode) -> Submission:
        """The submission, if it is coherent; a record that contradicts itself fails closed."""
        sub = ep.submission
        problem = ""
        if sub.state is not _S.NONE and not (isinstance(sub.token, str) and sub.token):
            problem = f"state {sub.state.value} without an idempotency token"
        elif sub.state in (_S.ACCEPTED, _S.SUCCEEDED) and not (isinstance(sub.remote_ref, str) and sub.remote_ref):
            problem = f"state {sub.state.value} without a remote reference"
        elif sub.state is _S.SUBMITTING and not sub.claimed_by:
            problem = "state submitting without a claim"
        if problem:
            raise StoreCorrupted(f"{self.store.location} (episode {ep.episode_id})", f"submission record: {problem}")
        return sub

    def _claim_alive(self, eid: str, sub: Submission) -> bool:
        try:
            return claims.claim_alive(
                self.store.location, eid, sub.claimed_by or "", sub.claimed_at, self.clock(), self.claim_lease
            )
        except (TypeError, ValueError) as exc:
            raise StoreCorrupted(
                f"{self.store.location} (episode {eid})", f"unreadable submission claim: {exc}"
            ) from exc


#: The episode status each ledger state implies.
_JOB_STATUS: Final[Mapping[SubmissionState, EpisodeStatus]] = {
    _S.NONE: EpisodeStatus.ALLOCATED,
    _S.SUBMITTING: EpisodeStatus.RUNNING,
    _S.UNKNOWN: EpisodeStatus.RUNNING,
    _S.ACCEPTED: EpisodeStatus.RUNNING,
    _S.SUCCEEDED: EpisodeStatus.SUCCEEDED,
    _S.FAILED: EpisodeStatus.FAILED,
}


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
