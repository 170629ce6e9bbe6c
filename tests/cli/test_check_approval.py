"""``check`` on approvals, for every store: consistent gates pass, each contradiction is named with its episode.

The contradictions are written around the store (`Backend.overwrite`), as a hand edit or a writer
that bypasses the store would leave them: the store itself never writes one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from airflow_idempotent_jobs import Episode, EpisodeId, EpisodeStatus, EpisodeStore, SubmissionState
from tests.backends import Backend
from tests.clirun import run_cli

W32 = "2026-W32"
AT = "2026-08-03T09:00:00.000000+00:00"


def _entry(event: str, by: str = "alice", comment: str | None = None) -> dict[str, Any]:
    return {"event": event, "by": by, "at": AT, "comment": comment, "via": "cli"}


def _approval(decision: str | None, *history: dict[str, Any], by: str = "alice") -> dict[str, Any]:
    decided = decision is not None
    return {
        "decision": decision,
        "by": by if decided else None,
        "at": AT if decided else None,
        "comment": None,
        "via": "cli" if decided else None,
        "history": list(history),
    }


def _submitting(episode: Episode) -> Episode:
    moved = episode.submission.moved_to(SubmissionState.SUBMITTING, episode_id=episode.episode_id, token="t-1")
    return dataclasses.replace(episode, submission=moved, status=EpisodeStatus.RUNNING)


def test_consistent_gates_pass_the_check(backend: Backend, store: EpisodeStore) -> None:
    ids = [store.allocate(W32, f"k{n}").episode_id for n in range(4)]
    store.decide(ids[0], "approved", by="alice", via="cli", comment="ok")
    store.decide(ids[1], "rejected", by="bob", via="airflow")
    store.ask(ids[2], by="task-1", via="airflow")
    store.decide(ids[2], "approved", by="carol", via="airflow")
    store.update(ids[0], _submitting)  # approved, then paid
    assert store.check([]).problems == []
    assert run_cli("--store", backend.url, "check").code == 0


def test_each_contradiction_is_reported_naming_its_episode(backend: Backend, store: EpisodeStore) -> None:
    ids = [store.allocate(W32, f"k{n}").episode_id for n in range(6)]
    # PostgreSQL refuses contradictions 0, 1 and 4 itself (episodes_rejected_check): only files can hold them.
    overwrite_rejection = backend.overwrite if backend.name == "file" else _refused_by_the_schema(backend)
    # 0: status rejected, no decision.
    overwrite_rejection(ids[0], "rejected", None)
    # 1: rejected by the store, then its status set back by hand.
    rejected = store.decide(ids[1], "rejected", by="bob", via="cli")
    overwrite_rejection(ids[1], "allocated", rejected.approval.to_dict())
    # 2: two decisions in the history.
    backend.overwrite(ids[2], "allocated", _approval("approved", _entry("approved"), _entry("rejected", "bob")))
    # 3: the decision names another approver than its history's entry.
    backend.overwrite(ids[3], "allocated", _approval("approved", _entry("approved", "bob")))
    # 4: rejected, but its paid call started.
    store.update(ids[4], _submitting)
    overwrite_rejection(ids[4], "rejected", _approval("rejected", _entry("rejected")))
    # 5: asked, then decided, then asked again.
    backend.overwrite(ids[5], "allocated", _approval("approved", _entry("asked"), _entry("approved"), _entry("asked")))

    problems = store.check([]).problems
    found = {(eid, p.message.split(": ", 1)[1]) for p in problems for eid in ids if eid in str(p)}
    expected = {
        (ids[2], "approval history holds 2 decisions"),
        (ids[3], "approval decision disagrees with its history's entry"),
        (ids[5], "approval history goes on after its decision"),
    }
    if backend.name == "file":
        expected |= {
            (ids[0], "status rejected disagrees with approval decision none"),
            (ids[1], "status allocated disagrees with approval decision rejected"),
            (ids[4], "rejected but its submission is submitting"),
        }
    assert found == expected, problems
    assert len(problems) == len(expected), problems
    assert all(p.message.startswith("episode ") for p in problems)
    # Naming one episode checks that one only.
    assert [p.message for p in store.check([EpisodeId.parse(ids[3])]).problems] == [
        f"episode {ids[3]}: approval decision disagrees with its history's entry"
    ]
    done = run_cli("--store", backend.url, "check")
    assert done.code == 1
    for eid in {eid for eid, _ in expected}:
        assert eid in done.stdout, done.stdout


def _refused_by_the_schema(backend: Backend) -> Callable[[str, str, dict[str, Any] | None], None]:
    def overwrite(episode_id: str, status: str, approval: dict[str, Any] | None) -> None:
        with pytest.raises(psycopg.errors.CheckViolation, match="episodes_rejected_check"):
            backend.overwrite(episode_id, status, approval)

    return overwrite
