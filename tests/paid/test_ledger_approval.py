"""The ledger's approval rule, on both stores and the real provider server.

A rejected episode never submits; with ``require_approval`` an undecided one does not either; and
the rule is checked under the lock with the intent's write, so a rejection recorded (by another
store instance, as another process would) after a caller's preflight still stops the submission.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.episode import Decision, EpisodeStatus, SubmissionState
from airflow_idempotent_jobs.errors import ApprovalRequired
from airflow_idempotent_jobs.paid import SubmissionLedger
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.backends import Backend
from tests.paid.support import provider_for

REQUEST = {"prompt": "weekly video", "units": 2}


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(polls_to_finish=1) as running:
        yield running


def allocated(store: EpisodeStore) -> str:
    return store.allocate("2026-W32", "approval-key").episode_id


def test_a_rejected_episode_never_submits_with_or_without_the_flag(store: EpisodeStore, server: ProviderServer) -> None:
    eid = allocated(store)
    store.decide(eid, Decision.REJECTED, by="alice", via="cli", comment="too expensive")
    ledger = SubmissionLedger(store)
    for required in (False, True):
        with pytest.raises(ApprovalRequired, match=f"episode {eid}: .* rejected by alice") as caught:
            ledger.preflight(eid, REQUEST, require_approval=required)
        assert caught.value.rejected and caught.value.exit_code == 3
        with pytest.raises(ApprovalRequired, match="rejected by alice"):
            ledger.submit(eid, provider_for(server), REQUEST, require_approval=required)
    after = store.get(eid)
    assert after.submission.state is SubmissionState.NONE and after.status is EpisodeStatus.REJECTED
    assert server.submissions() == 0


def test_require_approval_refuses_an_undecided_episode_and_sends_nothing(
    store: EpisodeStore, server: ProviderServer
) -> None:
    eid = allocated(store)
    before = store.get(eid)
    ledger = SubmissionLedger(store)
    with pytest.raises(ApprovalRequired, match=r"no decision is recorded; approve it .* idempotent-jobs approve"):
        ledger.preflight(eid, REQUEST, require_approval=True)
    with pytest.raises(ApprovalRequired, match="no decision is recorded"):
        ledger.submit(eid, provider_for(server), REQUEST, require_approval=True)
    assert store.get(eid) == before  # nothing written: no intent, no claim
    assert server.submissions() == 0
    # Without the flag an undecided episode pays as before.
    assert ledger.submit(eid, provider_for(server), REQUEST).submission.state is SubmissionState.ACCEPTED
    assert server.submissions() == 1


def test_an_approved_episode_pays_once_with_the_flag(store: EpisodeStore, server: ProviderServer) -> None:
    eid = allocated(store)
    store.decide(eid, Decision.APPROVED, by="alice", via="airflow")
    ledger = SubmissionLedger(store)
    ledger.preflight(eid, REQUEST, require_approval=True)
    first = ledger.submit(eid, provider_for(server), REQUEST, require_approval=True)
    again = ledger.submit(eid, provider_for(server), REQUEST, require_approval=True)
    assert first.submission.state is again.submission.state is SubmissionState.ACCEPTED
    assert server.submissions(first.submission.token) == 1


@pytest.mark.parametrize("required", [False, True])
def test_a_rejection_recorded_after_preflight_is_caught_under_the_lock(
    backend: Backend, server: ProviderServer, required: bool
) -> None:
    with backend.open() as store, backend.open() as elsewhere:
        eid = allocated(store)
        ledger = SubmissionLedger(store)
        ledger.preflight(eid, REQUEST)  # undecided: the caller goes on to read credentials
        elsewhere.decide(eid, Decision.REJECTED, by="bob", via="cli")  # another process rejects meanwhile
        with pytest.raises(ApprovalRequired, match="rejected by bob"):
            ledger.submit(eid, provider_for(server), REQUEST, require_approval=required)
        rejected = backend.snapshot()
        with pytest.raises(ApprovalRequired, match="rejected by bob"):
            ledger.submit(eid, provider_for(server), REQUEST, require_approval=required)
        assert backend.snapshot() == rejected  # refused twice, nothing written
        assert store.get(eid).submission.state is SubmissionState.NONE
    assert server.submissions() == 0


def test_require_approval_is_checked_under_the_lock_too(backend: Backend, server: ProviderServer) -> None:
    """A caller that skipped preflight (or raced it) is still refused when it writes the intent."""
    with backend.open() as store:
        eid = allocated(store)
        with pytest.raises(ApprovalRequired, match="no decision is recorded"):
            SubmissionLedger(store).submit(eid, provider_for(server), REQUEST, require_approval=True)
        assert store.get(eid).submission.history == ()
    assert server.submissions() == 0
