"""An episode row deleted by hand from the PostgreSQL store: `check` names it, and its key's retry fails closed.

Each deletion is raw SQL, as an operator (or a superuser in ``session_replication_role = replica``)
would run it. Migration 0005 keeps a tombstone of every deleted row (a trigger that fires in every
replication role) and refuses TRUNCATE, so the retry of a deleted key is `StoreCorrupted` naming its
episode (CLI exit 5, one line), never a new sequence. With the store's triggers disabled no
tombstone is written: `check` still names every sequence below the week's high-water mark that has
no row (exit 1).
"""

from __future__ import annotations

import psycopg
import pytest

from airflow_idempotent_jobs import StoreCorrupted, open_store
from airflow_idempotent_jobs.store_check import check_store
from tests.backends import PostgresBackend
from tests.clirun import run_cli

pytestmark = pytest.mark.postgres

WEEK = "2026-W32"


def _three(url: str) -> list[str]:
    """2026-W32-0..2, keys run-0..2; 2026-W32-1 approved (the issue's case)."""
    with open_store(url) as store:
        ids = [store.allocate(WEEK, f"run-{i}", "fp").episode_id for i in range(3)]
        store.decide(ids[1], "approved", by="alice", via="test")
    return ids


def _sql(url: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def _lines_naming(text: str, episode_id: str) -> list[str]:
    return [line for line in text.splitlines() if any(f"{episode_id}{end}" in line for end in "]: ")]


def _assert_retry_fails_closed(url: str, key: str, episode_id: str) -> None:
    """The retry, by the library and by the CLI: StoreCorrupted naming the episode, nothing written."""
    backend = PostgresBackend(url)
    before = backend.snapshot()
    with open_store(url) as store, pytest.raises(StoreCorrupted) as caught:
        store.allocate(WEEK, key, "fp")
    assert caught.value.where.endswith(f"[default/{episode_id}]"), caught.value.where
    assert "deleted" in caught.value.reason and repr(key) in caught.value.reason, caught.value.reason
    done = run_cli("--store", url, "allocate", "--week", WEEK, "--key", key, "--fingerprint", "fp")
    assert (done.code, done.stdout) == (5, ""), (done.code, done.stdout, done.stderr)
    line = done.error_line()
    assert episode_id in line and "deleted" in line and "restore" in line, line
    assert backend.snapshot() == before


def test_check_names_a_row_deleted_by_hand(pg_database: str) -> None:
    _three(pg_database)
    _sql(pg_database, "DELETE FROM idempotent_jobs.episodes WHERE episode_id = '2026-W32-1'")
    done = run_cli("--store", pg_database, "check")
    assert done.code == 1, (done.stdout, done.stderr)
    assert len(done.stdout.splitlines()) == 1, done.stdout
    [line] = _lines_naming(done.stdout, "2026-W32-1")
    assert "deleted" in line and "'run-1'" in line, line


def test_a_retry_of_a_deleted_key_fails_closed(pg_database: str) -> None:
    _three(pg_database)
    _sql(pg_database, "DELETE FROM idempotent_jobs.episodes WHERE episode_id = '2026-W32-1'")
    _assert_retry_fails_closed(pg_database, "run-1", "2026-W32-1")
    with open_store(pg_database) as store:  # in any week: the key's episode is the deleted one
        with pytest.raises(StoreCorrupted, match="2026-W32-1"):
            store.allocate("2026-W33", "run-1", "fp")
        assert store.allocate(WEEK, "run-2", "fp").reused  # other keys are unaffected
        assert store.allocate(WEEK, "run-3", "fp").episode_id == "2026-W32-3"


def test_a_delete_as_a_replica_still_leaves_its_tombstone(pg_database: str) -> None:
    """``session_replication_role = replica`` turns ordinary triggers off, not the store's."""
    _three(pg_database)
    _sql(
        pg_database,
        "SET session_replication_role = replica",
        "DELETE FROM idempotent_jobs.episodes WHERE episode_id = '2026-W32-1'",
    )
    _assert_retry_fails_closed(pg_database, "run-1", "2026-W32-1")


def test_as_a_replica_a_key_still_cannot_be_moved_off_its_row(pg_database: str) -> None:
    """The guards of versions 1-3 fire in every replication role too: an update is no way around the tombstone."""
    _three(pg_database)
    backend = PostgresBackend(pg_database)
    before = backend.snapshot()
    for statement, state in (
        ("UPDATE idempotent_jobs.episodes SET allocation_key = 'moved' WHERE episode_id = '2026-W32-1'", "IJ002"),
        ("UPDATE idempotent_jobs.episodes SET approval = NULL WHERE episode_id = '2026-W32-1'", "IJ004"),
        ("DELETE FROM idempotent_jobs.store_identity", "IJ003"),
    ):
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute("SET session_replication_role = replica")
            with pytest.raises(psycopg.Error) as caught:
                conn.execute(statement)
        assert caught.value.sqlstate == state, (statement, caught.value)
    assert backend.snapshot() == before


def test_truncate_is_refused_even_as_a_replica(pg_database: str) -> None:
    _three(pg_database)
    backend = PostgresBackend(pg_database)
    before = backend.snapshot()
    for role in ("origin", "replica"):
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute(f"SET session_replication_role = {role}")
            with pytest.raises(psycopg.Error) as caught:
                conn.execute("TRUNCATE idempotent_jobs.episodes")
        assert caught.value.sqlstate == "IJ011", (role, caught.value)
    assert backend.snapshot() == before


def test_a_row_deleted_with_its_weeks_row_keeps_its_sequence_used(pg_database: str) -> None:
    """The week's mark gone too: the tombstone still refuses the key, and the sequence is not handed out again."""
    _three(pg_database)
    _sql(
        pg_database,
        "DELETE FROM idempotent_jobs.episodes WHERE episode_id = '2026-W32-2'",
        "DELETE FROM idempotent_jobs.weeks WHERE week_id = '2026-W32'",
    )
    _assert_retry_fails_closed(pg_database, "run-2", "2026-W32-2")
    done = run_cli("--store", pg_database, "check")
    assert done.code == 1
    [line] = _lines_naming(done.stdout, "2026-W32-2")
    assert "deleted" in line and "'run-2'" in line, line
    with open_store(pg_database) as store:
        assert store.allocate(WEEK, "run-3", "fp").episode_id == "2026-W32-3"


def test_with_the_triggers_off_check_still_names_every_missing_sequence(pg_database: str) -> None:
    """No tombstone is written then; the week's high-water mark still says which ids have no row."""
    with open_store(pg_database) as store:
        for i in range(6):
            store.allocate(WEEK, f"run-{i}", "fp")
        store.allocate("2026-W33", "other", "fp")
    _sql(
        pg_database,
        "ALTER TABLE idempotent_jobs.episodes DISABLE TRIGGER USER",
        "DELETE FROM idempotent_jobs.episodes WHERE episode_id IN ('2026-W32-1', '2026-W32-3', '2026-W32-4')",
        "DELETE FROM idempotent_jobs.episodes WHERE week_id = '2026-W33'",
        "ALTER TABLE idempotent_jobs.episodes ENABLE TRIGGER USER",
    )
    with open_store(pg_database) as store:
        problems = [str(p) for p in check_store(store)]
    assert len(problems) == 3, problems
    done = run_cli("--store", pg_database, "check")
    assert done.code == 1, (done.stdout, done.stderr)
    assert len(done.stdout.splitlines()) == 3, done.stdout
    for missing in ("2026-W32-1", "2026-W32-3", "2026-W33-0"):
        [line] = _lines_naming(done.stdout, missing)
        assert "no row" in line, line
    [line] = _lines_naming(done.stdout, "2026-W32-3")
    assert "2026-W32-4" in line, line  # one range, one line


def test_check_of_named_ids_says_which_was_deleted(pg_database: str) -> None:
    _three(pg_database)
    _sql(pg_database, "DELETE FROM idempotent_jobs.episodes WHERE episode_id = '2026-W32-1'")
    done = run_cli("--store", pg_database, "check", "2026-W32-1", "2026-W32-7")
    assert done.code == 1
    [deleted] = _lines_naming(done.stdout, "2026-W32-1")
    assert "deleted" in deleted and "'run-1'" in deleted, deleted
    [absent] = _lines_naming(done.stdout, "2026-W32-7")
    assert "episode not found" in absent, absent


def test_a_row_replaced_by_hand_under_another_key_is_still_a_deleted_row(pg_database: str) -> None:
    """Its id has a row again, not its key: the key's retry is refused, and check names the tombstone."""
    _three(pg_database)
    _sql(
        pg_database,
        "CREATE TEMP TABLE kept AS SELECT * FROM idempotent_jobs.episodes WHERE episode_id = '2026-W32-1'",
        "DELETE FROM idempotent_jobs.episodes WHERE episode_id = '2026-W32-1'",
        "INSERT INTO idempotent_jobs.episodes SELECT namespace, episode_id, week_id, sequence, 'planted', fingerprint,"
        " status, created_at, updated_at, submission_state, submission, metadata, schema_version, approval FROM kept",
    )
    _assert_retry_fails_closed(pg_database, "run-1", "2026-W32-1")
    with open_store(pg_database) as store:
        [problem] = check_store(store)
    assert problem.where.endswith("[default/2026-W32-1]") and "'run-1' was deleted" in problem.message, problem


def test_a_restored_row_is_its_key_s_episode_again(pg_database: str) -> None:
    """The tombstone keeps the row's last record: restoring it from there gives the retry its episode back."""
    ids = _three(pg_database)
    _sql(
        pg_database,
        "DELETE FROM idempotent_jobs.episodes WHERE episode_id = '2026-W32-1'",
        "INSERT INTO idempotent_jobs.episodes SELECT (jsonb_populate_record(NULL::idempotent_jobs.episodes, record)).*"
        " FROM idempotent_jobs.episode_tombstones WHERE namespace = 'default' AND episode_id = '2026-W32-1'",
    )
    with open_store(pg_database) as store:
        again = store.allocate(WEEK, "run-1", "fp")
        assert (again.episode_id, again.reused, again.approval.decision) == (ids[1], True, "approved")
        assert check_store(store) == []
