"""`EpisodeStoreHook.test_connection` (the Connection form's "Test" button) writes nothing.

Before: its lookup of a key created the store's schema on an empty database and migrated an older
one, although it said "nothing is written". Now it reads the schema's version only: no store yet
and an older schema are reported (the connection works: the first writer of this release creates
or migrates it), a newer schema is a failure that says to upgrade the package.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.hooks.store import EpisodeStoreHook
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from tests.airflow.conftest import postgres_connection
from tests.pg import catalog, install_schema

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(120)]


def connection_test(monkeypatch: pytest.MonkeyPatch, url: str) -> tuple[bool, str]:
    monkeypatch.setenv("AIRFLOW_CONN_IJ_TESTED", postgres_connection(url))
    hook = EpisodeStoreHook("ij_tested")
    try:
        return hook.test_connection()
    finally:
        hook.close()


@pytest.mark.postgres
def test_an_empty_database_is_reachable_and_stays_empty(monkeypatch: pytest.MonkeyPatch, empty_database: str) -> None:
    before = catalog(empty_database)
    ok, message = connection_test(monkeypatch, empty_database)
    assert ok, message
    assert message.startswith("reachable at postgresql://") and message.endswith(
        "; no episode store there yet: the first allocation creates it"
    ), message
    assert catalog(empty_database) == before


@pytest.mark.postgres
def test_an_older_schema_is_reported_and_not_migrated(monkeypatch: pytest.MonkeyPatch, empty_database: str) -> None:
    older = pg_schema.LATEST_VERSION - 1
    install_schema(empty_database, older, [("2026-W32", 0, "old")])
    before = catalog(empty_database)
    ok, message = connection_test(monkeypatch, empty_database)
    assert ok, message
    assert f"is at version {older}, this code reads {pg_schema.LATEST_VERSION}" in message, message
    assert "a writer of this release migrates it" in message, message
    assert catalog(empty_database) == before


@pytest.mark.postgres
def test_a_newer_schema_fails_the_test_and_says_to_upgrade(monkeypatch: pytest.MonkeyPatch, pg_database: str) -> None:
    newer = pg_schema.LATEST_VERSION + 1
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("INSERT INTO idempotent_jobs.schema_version (version, name) VALUES (%s, 'later')", (newer,))
    before = catalog(pg_database)
    ok, message = connection_test(monkeypatch, pg_database)
    assert not ok
    assert f"schema version {newer} is newer than this code's" in message and "upgrade" in message, message
    assert catalog(pg_database) == before


@pytest.mark.postgres
def test_a_current_store_is_reachable(monkeypatch: pytest.MonkeyPatch, pg_database: str) -> None:
    with open_store(pg_database) as store:
        location = store.location
    assert connection_test(monkeypatch, pg_database) == (True, f"episode store reachable at {location}")


def test_a_file_store_not_created_yet_is_reported_and_not_created(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = tmp_path / "not-yet"
    monkeypatch.setenv("AIRFLOW_CONN_IJ_TESTED", json.dumps({"conn_type": "idempotent_jobs_store", "host": str(root)}))
    assert EpisodeStoreHook("ij_tested").test_connection() == (
        True,
        f"reachable at {root}; no episode store there yet: the first allocation creates it",
    )
    assert not root.exists()


def test_a_server_that_does_not_answer_fails_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    ok, message = connection_test(monkeypatch, "postgresql://postgres@127.0.0.1:1/nowhere")
    assert not ok and message.startswith("StoreUnavailable: "), message
