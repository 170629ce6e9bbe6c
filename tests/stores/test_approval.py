"""Approval decisions in every store: recorded once, final, append-only, and kept across reopening.

Only the public store API and the `Backend` methods are used, so the suite runs unchanged against
each backend in ``conftest.BACKENDS``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from airflow_idempotent_jobs import Episode, EpisodeStatus, EpisodeStore, SubmissionState
from airflow_idempotent_jobs.episode import Approval, Decision
from airflow_idempotent_jobs.errors import DecisionConflict
from tests.backends import Backend
from tests.pg import spawn_together

W32 = "2026-W32"


def _submitting(episode: Episode) -> Episode:
    moved = episode.submission.moved_to(SubmissionState.SUBMITTING, episode_id=episode.episode_id, token="t-1")
    return dataclasses.replace(episode, submission=moved, status=EpisodeStatus.RUNNING)


def _with_approval(approval: Approval) -> Callable[[Episode], Episode]:
    return lambda episode: dataclasses.replace(episode, approval=approval)


def test_decisions_are_recorded_whole_and_read_back_equal_after_reopening(backend: Backend) -> None:
    with backend.open() as store:
        yes, no = store.allocate(W32, "job-yes"), store.allocate(W32, "job-no")
        approved = store.decide(yes.episode_id, "approved", by="alice", via="cli", comment="within budget")
        rejected = store.decide(no.episode_id, Decision.REJECTED, by="bob", via="airflow")
    assert approved.approval.decision is Decision.APPROVED and approved.status is EpisodeStatus.ALLOCATED
    assert (approved.approval.by, approved.approval.comment, approved.approval.via) == ("alice", "within budget", "cli")
    assert [e["event"] for e in approved.approval.history] == ["approved"]
    assert rejected.status is EpisodeStatus.REJECTED and rejected.approval.comment is None
    with backend.open() as reopened:
        assert reopened.get(yes.episode_id).to_record() == approved.to_record()
        assert reopened.get(no.episode_id).to_record() == rejected.to_record()
        assert [e.to_record() for e in reopened.list(W32)] == [approved.to_record(), rejected.to_record()]
    assert backend.stored(no.episode_id) == rejected.to_record()


@pytest.mark.parametrize("decision", ["approved", "rejected"])
def test_the_same_decision_again_changes_nothing(backend: Backend, store: EpisodeStore, decision: str) -> None:
    episode = store.allocate(W32, "job")
    first = store.decide(episode.episode_id, decision, by="alice", via="cli")
    before = backend.snapshot()
    again = store.decide(episode.episode_id, decision, by="someone-else", via="airflow", comment="me too")
    assert again == first
    assert backend.snapshot() == before


@pytest.mark.parametrize(("first", "second"), [("approved", "rejected"), ("rejected", "approved")])
def test_a_different_decision_is_a_conflict_and_writes_nothing(
    backend: Backend, store: EpisodeStore, first: str, second: str
) -> None:
    episode = store.allocate(W32, "job")
    recorded = store.decide(episode.episode_id, first, by="alice", via="cli")
    before = backend.snapshot()
    with pytest.raises(DecisionConflict, match=f"cannot record {second}: it is already {first} by alice") as caught:
        store.decide(episode.episode_id, second, by="bob", via="airflow")
    assert caught.value.exit_code == 3 and not caught.value.retryable
    assert backend.snapshot() == before
    assert store.get(episode.episode_id) == recorded


def test_rejecting_after_the_paid_call_started_is_refused(backend: Backend, store: EpisodeStore) -> None:
    episode = store.allocate(W32, "job")
    started = store.update(episode.episode_id, _submitting)
    before = backend.snapshot()
    with pytest.raises(DecisionConflict, match=r"it is already submitted \(submitting\)"):
        store.decide(episode.episode_id, "rejected", by="bob", via="cli")
    assert backend.snapshot() == before
    assert store.get(episode.episode_id) == started


def test_questions_append_and_stop_once_decided(backend: Backend, store: EpisodeStore) -> None:
    episode = store.allocate(W32, "job")
    store.ask(episode.episode_id, by="dag.approve.run-1.try-1", via="airflow")
    store.ask(episode.episode_id, by="dag.approve.run-1.try-2", via="airflow")
    decided = store.decide(episode.episode_id, "approved", by="alice", via="airflow")
    assert [(e["event"], e["by"]) for e in decided.approval.history] == [
        ("asked", "dag.approve.run-1.try-1"),
        ("asked", "dag.approve.run-1.try-2"),
        ("approved", "alice"),
    ]
    before = backend.snapshot()
    assert store.ask(episode.episode_id, by="dag.approve.run-2.try-1", via="airflow") == decided
    assert backend.snapshot() == before
    with backend.open() as reopened:
        assert reopened.get(episode.episode_id).to_record() == decided.to_record()


def test_an_update_cannot_drop_or_rewrite_a_decision_or_the_history(backend: Backend, store: EpisodeStore) -> None:
    """Whatever the change passed to `update`, the gate it recorded stays: the store refuses, nothing is written."""
    episode = store.allocate(W32, "job")
    store.ask(episode.episode_id, by="task-1", via="airflow")
    asked = store.get(episode.episode_id)
    before = backend.snapshot()
    with pytest.raises(DecisionConflict, match="without its earlier events"):
        store.update(episode.episode_id, _with_approval(Approval()))
    assert backend.snapshot() == before
    decided = store.decide(episode.episode_id, "approved", by="alice", via="cli")
    before = backend.snapshot()
    rewrites = [
        dataclasses.replace(decided.approval, by="mallory"),
        dataclasses.replace(decided.approval, comment="changed my mind"),
        dataclasses.replace(decided.approval, history=decided.approval.history[1:]),
        Approval(),
    ]
    for rewrite in rewrites:
        with pytest.raises(DecisionConflict, match="it is already approved by alice"):
            store.update(episode.episode_id, _with_approval(rewrite))
    assert backend.snapshot() == before
    assert store.get(episode.episode_id).approval.history[0] == asked.approval.history[0]


def test_a_record_from_before_approvals_reads_and_writes_back_unchanged(backend: Backend, store: EpisodeStore) -> None:
    old = store.allocate(W32, "from-an-earlier-release")
    other = store.allocate(W32, "gated")
    stored = backend.stored(old.episode_id)
    assert "approval" not in stored and stored == old.to_record()
    store.decide(other.episode_id, "approved", by="alice", via="cli")
    with backend.open() as reopened:
        assert reopened.get(old.episode_id).to_record() == stored
        moved = reopened.update(old.episode_id, _submitting)  # a ledger move writes the record again
    assert moved.approval == Approval()
    assert backend.stored(old.episode_id) == moved.to_record()
    assert "approval" not in backend.stored(old.episode_id)


def _decide_at_once(url: str, episode_id: str, decision: str, by: str, barrier: Any, results: Any) -> None:
    try:
        from airflow_idempotent_jobs import open_store

        with open_store(url, lock_timeout=60) as store:
            store.get(episode_id)  # opened (and the schema checked) before the start line
            barrier.wait(timeout=60)
            done = store.decide(episode_id, decision, by=by, via="cli")
            results.put(("ok", by, done.approval.decision.value if done.approval.decision else None))
    except DecisionConflict as exc:
        results.put(("conflict", by, str(exc)))
    except BaseException as exc:
        results.put(("error", by, f"{type(exc).__name__}: {exc}"))


def test_two_processes_deciding_differently_at_once_one_wins(backend: Backend, store: EpisodeStore) -> None:
    for n in range(3):  # three episodes, three fresh races
        episode = store.allocate(W32, f"contested-{n}")
        got = spawn_together(
            _decide_at_once,
            [
                (backend.url, episode.episode_id, "approved", "alice"),
                (backend.url, episode.episode_id, "rejected", "bob"),
            ],
            timeout=120,
        )
        assert sorted(kind for kind, _, _ in got) == ["conflict", "ok"], got
        (winner, decision) = next((by, what) for kind, by, what in got if kind == "ok")
        loser = next(text for kind, _, text in got if kind == "conflict")
        assert f"it is already {decision} by {winner}" in loser
        stored = store.get(episode.episode_id)
        assert (stored.approval.decision.value if stored.approval.decision else None, stored.approval.by) == (
            decision,
            winner,
        )
        assert [e["event"] for e in stored.approval.history] == [decision]
        expected = EpisodeStatus.REJECTED if decision == "rejected" else EpisodeStatus.ALLOCATED
        assert stored.status is expected
