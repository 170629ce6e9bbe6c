"""Schema version 3 (``0003_approval.sql``): stores of version 2 upgrade in place, and the database
itself keeps a recorded decision final and its history append-only, whoever writes the row."""

from __future__ import annotations

import dataclasses
from typing import Any

import psycopg
import pytest

from airflow_idempotent_jobs import Episode, EpisodeStatus, SubmissionState, open_store
from airflow_idempotent_jobs.allocation import new_episode
from airflow_idempotent_jobs.errors import DecisionConflict
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.store_check import check_store
from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from airflow_idempotent_jobs.stores.postgres._session import DECISION_CHANGED
from tests.backends import PostgresBackend
from tests.pg import insert_before_approvals

pytestmark = pytest.mark.postgres

S = SubmissionState


def _moved(episode: Episode, status: EpisodeStatus, *states: SubmissionState, **changes: Any) -> Episode:
    sub = episode.submission
    for state in states:
        token: dict[str, Any] = {"token": "tok"} if state is S.SUBMITTING else {}
        sub = sub.moved_to(state, episode_id=episode.episode_id, **token)
    return dataclasses.replace(episode, status=status, submission=dataclasses.replace(sub, **changes))


def _version_2_episodes() -> list[tuple[str, Episode]]:
    week = WeekId.parse("2026-W32")
    fresh = [new_episode(week, n, f"weekly:run-{n}", None) for n in range(6)]
    return [
        ("default", fresh[0]),
        ("default", fresh[1]),
        ("default", _moved(fresh[2], EpisodeStatus.RUNNING, S.SUBMITTING)),
        ("default", _moved(fresh[3], EpisodeStatus.RUNNING, S.SUBMITTING, S.ACCEPTED, remote_ref="job-3")),
        ("default", _moved(fresh[4], EpisodeStatus.SUCCEEDED, S.SUBMITTING, S.ACCEPTED, S.SUCCEEDED, remote_ref="j4")),
        ("default", _moved(fresh[5], EpisodeStatus.CANCELLED)),
        ("team-b", new_episode(week, 0, "team-b:first", None)),
    ]


def _rows(url: str, *, without: tuple[str, ...] = ()) -> list[Any]:
    with psycopg.connect(url) as conn:
        query = "SELECT to_jsonb(t) - %s::text[] FROM idempotent_jobs.episodes t ORDER BY namespace, episode_id"
        return [row[0] for row in conn.execute(query, (list(without),))]


def test_a_version_2_store_upgrades_in_place_keeps_every_row_and_then_records_decisions(empty_database: str) -> None:
    made = PostgresEpisodeStore(empty_database)
    with made.engine.begin() as conn:
        pg_schema.migrate(conn, "idempotent_jobs", where="v2", lock_timeout_ms=5000, target=2)
    made.close()
    episodes = _version_2_episodes()
    with psycopg.connect(empty_database) as conn:
        for namespace, episode in episodes:
            insert_before_approvals(conn, namespace, episode)
        for n, namespace in enumerate(("default", "team-b")):
            conn.execute(
                "INSERT INTO idempotent_jobs.store_identity (namespace, identity) VALUES (%s, %s)",
                (namespace, f"{n:032x}"),
            )
    before = _rows(empty_database)
    assert all("approval" not in row for row in before)
    with open_store(empty_database) as store:
        assert [p.message for p in check_store(store)] == [
            f"schema version 2; this code uses version {pg_schema.LATEST_VERSION} (any write migrates it)"
        ]

    with open_store(empty_database) as store:
        listed = store.list()  # a read upgrades the schema
        assert [e.to_record() for e in listed] == [e.to_record() for ns, e in episodes if ns == "default"]
    with psycopg.connect(empty_database) as conn:
        versions = conn.execute("SELECT version, name FROM idempotent_jobs.schema_version ORDER BY 1").fetchall()
    assert versions[:3] == [(1, "initial"), (2, "store_identity"), (3, "approval")]
    assert versions == [(m.version, m.name) for m in pg_schema.MIGRATIONS]
    # every column of every row kept, and the columns of later versions NULL
    assert _rows(empty_database, without=("approval", "effects")) == before
    assert all(row["approval"] is None and row["effects"] is None for row in _rows(empty_database))

    with open_store(empty_database) as store:
        ids = [e.episode_id for ns, e in episodes if ns == "default"]
        store.decide(ids[0], "approved", by="alice", via="cli")
        rejected = store.decide(ids[1], "rejected", by="bob", via="cli", comment="too dear")
        assert rejected.status is EpisodeStatus.REJECTED
        store.decide(ids[3], "approved", by="alice", via="airflow")  # approving a started payment is allowed
        with pytest.raises(DecisionConflict, match=r"already submitted \(submitting\)"):
            store.decide(ids[2], "rejected", by="bob", via="cli")
        assert check_store(store) == []
    with open_store(empty_database + "?namespace=team-b") as other:
        assert other.decide("2026-W32-0", "approved", by="carol", via="cli").approval.by == "carol"
        assert check_store(other) == []


def _sql(url: str, statement: str, *params: Any) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement, params)


def test_writers_that_bypass_the_store_cannot_change_a_decision_or_shorten_the_history(pg_database: str) -> None:
    with open_store(pg_database) as store:
        decided = store.allocate("2026-W32", "decided").episode_id
        store.ask(decided, by="task-1", via="airflow")
        recorded = store.decide(decided, "approved", by="alice", via="airflow", comment="fine")
        asked = store.allocate("2026-W32", "asked").episode_id
        store.ask(asked, by="task-1", via="airflow")
        store.ask(asked, by="task-2", via="airflow")
        fresh = store.allocate("2026-W32", "fresh").episode_id
    backend = PostgresBackend(pg_database)
    before = backend.snapshot()
    update = "UPDATE idempotent_jobs.episodes SET approval = {} WHERE episode_id = %s"
    refused = {
        decided: [
            "jsonb_set(approval, '{decision}', '\"rejected\"')",
            "jsonb_set(approval, '{by}', '\"mallory\"')",
            "approval - 'comment'",
            "NULL",
            "jsonb_set(approval, '{history}', (approval -> 'history') - 0)",
            "jsonb_set(approval, '{history}', '[]')",
            "jsonb_set(approval, '{history,0,by}', '\"someone-else\"')",
        ],
        asked: [
            "NULL",
            "jsonb_set(approval, '{history}', (approval -> 'history') - 1)",
            "jsonb_set(approval, '{history}', (approval -> 'history') - 0)",
            "jsonb_set(approval, '{history}', '{}')",
        ],
    }
    for episode_id, changes in refused.items():
        for change in changes:
            with pytest.raises(psycopg.Error) as caught:
                _sql(pg_database, update.format(change), episode_id)
            assert caught.value.sqlstate == DECISION_CHANGED == "IJ004", change
    for scalar in ("'\"approved\"'", "'{\"decision\": null}'"):  # a row without an approval: the CHECK refuses
        with pytest.raises(psycopg.errors.CheckViolation):
            _sql(pg_database, update.format(scalar), fresh)
    with pytest.raises(psycopg.Error) as caught:
        _sql(pg_database, update.format("'\"approved\"'"), decided)
    assert caught.value.sqlstate == "IJ004"
    assert backend.snapshot() == before
    # What the guard lets through: other columns, and a history that grows.
    _sql(pg_database, "UPDATE idempotent_jobs.episodes SET updated_at = 'later' WHERE episode_id = %s", decided)
    grow = "jsonb_set(approval, '{history}', (approval -> 'history') || (approval -> 'history' -> 0))"
    _sql(pg_database, update.format(grow), asked)
    with open_store(pg_database) as store:
        assert store.get(decided).approval == recorded.approval
        assert len(store.get(asked).approval.history) == 3


def test_the_store_reports_the_guard_and_a_stale_decision_as_decision_conflict(pg_database: str) -> None:
    with open_store(pg_database) as opened:
        store = opened
        assert isinstance(store, PostgresEpisodeStore)
        episode = store.allocate("2026-W32", "k")
        stale = store.get(episode.episode_id)
        decided = store.decide(episode.episode_id, "approved", by="alice", via="cli")
        backend = PostgresBackend(pg_database)
        before = backend.snapshot()
        # Past the policy (approval.kept): the database's guard refuses dropping the decision.
        dropped = dataclasses.replace(decided, approval=stale.approval)
        with store._session() as session, pytest.raises(DecisionConflict, match="already approved by alice"):
            session.replace(decided, dropped)
        # A writer that read the row before the decision: its conditional update finds it changed.
        rejecting = dataclasses.replace(stale, status=EpisodeStatus.REJECTED)
        with store._session() as session, pytest.raises(DecisionConflict, match="already approved by alice"):
            session.replace(stale, rejecting)
        assert backend.snapshot() == before
        assert store.get(episode.episode_id) == decided
