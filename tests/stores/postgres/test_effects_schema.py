"""Schema version 6 (``0006_effects.sql``): stores of version 5 upgrade in place, effects round-trip
through the row, and the database itself keeps every effect, every done effect and every history,
whoever writes the row."""

from __future__ import annotations

import dataclasses
from typing import Any

import psycopg
import pytest

from airflow_idempotent_jobs import Episode, EpisodeStatus, SubmissionState, approval, open_store
from airflow_idempotent_jobs.allocation import new_episode
from airflow_idempotent_jobs.effects import EffectLedger
from airflow_idempotent_jobs.episode import Decision
from airflow_idempotent_jobs.errors import EffectNotDone, IllegalTransition
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.store_check import check_store
from airflow_idempotent_jobs.stores.postgres import PostgresEpisodeStore
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from airflow_idempotent_jobs.stores.postgres._session import EFFECT_CHANGED
from tests.backends import PostgresBackend
from tests.pg import install_schema

pytestmark = pytest.mark.postgres

W32 = "2026-W32"
S = SubmissionState


def _version_5_episodes() -> list[Episode]:
    """Episodes as a version 5 writer left them: fresh, paying, paid, approved, cancelled."""
    week = WeekId.parse(W32)
    fresh = [new_episode(week, n, f"weekly:run-{n}", "sha256:" + "ab" * 32 if n == 1 else None) for n in range(5)]
    paying = fresh[1].submission.moved_to(S.SUBMITTING, episode_id=fresh[1].episode_id, token="tok-1")
    paid = paying.moved_to(S.ACCEPTED, episode_id=fresh[2].episode_id, remote_ref="job-2")
    paid = paid.moved_to(S.SUCCEEDED, episode_id=fresh[2].episode_id, result={"url": "x"}, cost=1.5)
    return [
        fresh[0],
        dataclasses.replace(fresh[1], status=EpisodeStatus.RUNNING, submission=paying),
        dataclasses.replace(fresh[2], status=EpisodeStatus.SUCCEEDED, submission=paid),
        approval.decided(fresh[3], Decision.APPROVED, by="alice", via="cli", comment="fine"),
        dataclasses.replace(fresh[4], status=EpisodeStatus.CANCELLED, metadata={"note": "by hand"}),
    ]


def _rows(url: str, without: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    with psycopg.connect(url) as conn:
        query = "SELECT to_jsonb(t) - %s::text[] FROM idempotent_jobs.episodes t ORDER BY namespace, episode_id"
        return [row[0] for row in conn.execute(query, (list(without),))]


def test_a_version_5_store_upgrades_in_place_keeps_every_row_and_then_records_effects(empty_database: str) -> None:
    episodes = _version_5_episodes()
    install_schema(empty_database, 5, episodes)
    before = _rows(empty_database)
    assert len(before) == 5 and all("effects" not in row for row in before)
    assert before[3]["approval"]["decision"] == "approved"

    with open_store(empty_database) as store:
        assert [p.message for p in check_store(store)] == [
            f"schema version 5; this code uses version {pg_schema.LATEST_VERSION} (any write migrates it)"
        ]
        listed = store.list()  # a read upgrades the schema
    with psycopg.connect(empty_database) as conn:
        versions = conn.execute("SELECT version, name FROM idempotent_jobs.schema_version ORDER BY 1").fetchall()
    assert versions[5:] == [(6, "effects")]
    assert versions == [(m.version, m.name) for m in pg_schema.MIGRATIONS]
    after = _rows(empty_database)
    assert [{k: v for k, v in row.items() if k != "effects"} for row in after] == before  # every column of every row
    assert all(row["effects"] is None for row in after)
    assert [e.to_record() for e in listed] == [e.to_record() for e in episodes]
    assert all("effects" not in e.to_record() for e in listed)

    with open_store(empty_database) as store:
        eid = episodes[2].episode_id
        run = EffectLedger(store).run(eid, "publish", lambda token: {"posted": token})
        assert run.ran and store.get(eid) == run.episode
        assert store.get(eid).submission == episodes[2].submission  # the paid record is untouched
        # The allocation function answers the reused row whole, its effects too.
        retry = store.allocate(W32, episodes[2].allocation_key)
        assert retry.reused and retry.effects == run.episode.effects
        assert check_store(store) == []


def test_effects_round_trip_through_the_row_as_the_ledger_wrote_them(pg_database: str) -> None:
    with open_store(pg_database) as store:
        eid = store.allocate(W32, "job").episode_id
        ledger = EffectLedger(store)
        done = ledger.run(eid, "publish", lambda token: {"id": 7, "token": token, "ratio": 0.1}, inputs={"n": 1})

        def not_done(token: str) -> None:
            raise EffectNotDone("the target said no")

        with pytest.raises(EffectNotDone):
            ledger.run(eid, "notify:slack", not_done)
        with pytest.raises(RuntimeError):
            ledger.run(eid, "upload[3]", _crash, capability="idempotent_key")
        written = store.get(eid)
        assert {n: e.state.value for n, e in written.effects.items()} == {
            "publish": "done",
            "notify:slack": "failed",
            "upload[3]": "unknown",
        }
        assert written.effects["publish"] == done.effect and written.effects["publish"].result["ratio"] == 0.1
        assert PostgresBackend(pg_database).stored(eid)["effects"] == written.to_record()["effects"]
        assert [e.episode_id for e in store.list(W32)] == [eid] and store.list(W32)[0] == written
        again = store.allocate(W32, "job")
        assert again.reused and dataclasses.replace(again, reused=False) == written
        rerun = ledger.run(eid, "publish", _crash, inputs={"n": 1})  # done: read back, never run again
        assert not rerun.ran and rerun.result == done.result
        assert check_store(store) == []


def _crash(token: str) -> None:
    raise RuntimeError(f"lost the answer for {token}")


def _sql(url: str, statement: str, *params: Any) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement, params)


def _effects_store(url: str) -> tuple[str, str]:
    """An episode with a done effect ``publish`` and an unknown one ``notify``; and one without effects."""
    with open_store(url) as store:
        eid = store.allocate(W32, "job").episode_id
        ledger = EffectLedger(store)
        ledger.run(eid, "publish", lambda token: "ok")
        with pytest.raises(RuntimeError):
            ledger.run(eid, "notify", _crash, capability="idempotent_key")
        fresh = store.allocate(W32, "fresh").episode_id
    return eid, fresh


def test_writers_that_bypass_the_store_cannot_drop_change_or_shorten_an_effect(pg_database: str) -> None:
    eid, fresh = _effects_store(pg_database)
    backend = PostgresBackend(pg_database)
    before = backend.snapshot()
    update = "UPDATE idempotent_jobs.episodes SET effects = {} WHERE episode_id = %s"
    refused = [
        "effects - 'publish'",
        "effects - 'notify'",
        "NULL",
        "'{}'",
        "jsonb_set(effects, '{publish,result}', '\"other\"')",
        "jsonb_set(effects, '{publish,state}', '\"pending\"')",
        "jsonb_set(effects, '{publish,attempts}', '2')",
        "jsonb_set(effects, '{notify,history}', (effects -> 'notify' -> 'history') - -1)",
        "jsonb_set(effects, '{notify,history}', '[]')",
        "jsonb_set(effects, '{notify,history}', '{}')",
        "jsonb_set(effects, '{notify,history,0,note}', '\"rewritten\"')",
        "jsonb_set(effects, '{notify}', '\"gone\"')",
        "'[]'",
    ]
    for change in refused:
        with pytest.raises(psycopg.Error) as caught:
            _sql(pg_database, update.format(change), eid)
        assert caught.value.sqlstate == EFFECT_CHANGED == "IJ012", change
    for scalar in ("'[]'", "'\"publish\"'", "'1'", "'null'"):  # a row without effects: the CHECK refuses
        with pytest.raises(psycopg.errors.CheckViolation):
            _sql(pg_database, update.format(scalar), fresh)
    assert backend.snapshot() == before
    # What the guard lets through: other columns, a history that grows, a new effect, an unknown settled.
    _sql(pg_database, "UPDATE idempotent_jobs.episodes SET updated_at = 'later' WHERE episode_id = %s", eid)
    grow = "jsonb_set(effects, '{notify,history}', (effects -> 'notify' -> 'history') || '[{\"to\": \"x\"}]')"
    _sql(pg_database, update.format(grow), eid)
    _sql(pg_database, update.format('effects || \'{"later": {"state": "pending", "token": "t"}}\''), eid)
    _sql(pg_database, update.format("jsonb_set(effects, '{notify,state}', '\"failed\"')"), eid)
    with psycopg.connect(pg_database) as conn:
        row = conn.execute("SELECT effects FROM idempotent_jobs.episodes WHERE episode_id = %s", (eid,)).fetchone()
    assert row is not None and sorted(row[0]) == ["later", "notify", "publish"]
    assert row[0]["notify"]["state"] == "failed" and len(row[0]["notify"]["history"]) == 3


def _without(episode: Episode, name: str) -> Episode:
    return dataclasses.replace(episode, effects={n: e for n, e in episode.effects.items() if n != name})


def test_the_store_reports_the_guard_and_a_stale_read_as_illegal_transition(pg_database: str) -> None:
    eid, _ = _effects_store(pg_database)
    backend = PostgresBackend(pg_database)
    before = backend.snapshot()
    with open_store(pg_database) as store:
        assert isinstance(store, PostgresEpisodeStore)
        recorded = store.get(eid)
        publish, notify = recorded.effects["publish"], recorded.effects["notify"]
        changes = {
            "effect publish cannot go from done to absent (an effect is never removed)": lambda e: _without(
                e, "publish"
            ),
            "effect publish cannot go from done to done (a done effect never changes)": lambda e: dataclasses.replace(
                e, effects={**e.effects, "publish": dataclasses.replace(publish, result="rewritten")}
            ),
            "effect notify cannot go from unknown to unknown (an effect's history only grows)": lambda e: (
                dataclasses.replace(
                    e, effects={**e.effects, "notify": dataclasses.replace(notify, history=notify.history[1:])}
                )
            ),
        }
        for message, change in changes.items():
            with pytest.raises(IllegalTransition) as caught:
                store.update(eid, change)  # the store's own rule (`effect.effects_kept`) refuses it first
            assert str(caught.value) == f"episode {eid}: {message}" and caught.value.__cause__ is None
            # A writer that skips that rule (an earlier release) reaches the database's guard: the same error.
            with store._session() as session, pytest.raises(IllegalTransition) as caught:
                session.replace(recorded, change(recorded))
            assert str(caught.value) == f"episode {eid}: {message}"
            assert caught.value.exit_code == 3 and not caught.value.retryable
            cause = caught.value.__cause__
            assert isinstance(cause, psycopg.Error) and cause.sqlstate == "IJ012"  # refused by the database
        assert backend.snapshot() == before
        # A writer that read the row before someone else settled notify: its conditional update finds it changed.
        stale = store.get(eid)
        _sql(
            pg_database,
            "UPDATE idempotent_jobs.episodes SET effects = jsonb_set(effects, '{notify,state}', '\"failed\"')"
            " WHERE episode_id = %s",
            eid,
        )
        moved = dataclasses.replace(stale, status=EpisodeStatus.CANCELLED)
        with store._session() as session, pytest.raises(IllegalTransition) as caught:
            session.replace(stale, moved)
        assert str(caught.value) == f"episode {eid}: effect notify cannot go from failed to unknown"
        assert store.get(eid).status is EpisodeStatus.ALLOCATED
