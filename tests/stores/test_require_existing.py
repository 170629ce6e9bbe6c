"""`EpisodeStore.require_existing`: how Airflow's page reads a store without ever creating or upgrading one.

Before it, the page's first read of a missing PostgreSQL store created its schema and tables, and
read an older one only after migrating it: a page that "never writes" wrote DDL.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from airflow_idempotent_jobs.errors import StoreCorrupted, StoreUnavailable
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.store_check import check_store
from airflow_idempotent_jobs.stores import open_store
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from tests.pg import catalog, install_schema

WEEK = WeekId.parse("2026-W32")


def test_a_missing_file_store_is_unavailable_and_stays_missing(tmp_path: Path) -> None:
    root = tmp_path / "never-written"
    with open_store(root) as store:
        with pytest.raises(StoreUnavailable, match=r"no episode store at .*never-written"):
            store.require_existing()
        assert not root.exists()
        store.allocate(WEEK, "k1")  # a writer creates it
        store.require_existing()
        assert [e.allocation_key for e in store.list(WEEK)] == ["k1"]


def _schemas(url: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {name for (name,) in conn.execute("SELECT nspname FROM pg_namespace")}


@pytest.mark.postgres
def test_a_missing_postgres_store_is_unavailable_and_nothing_is_created(empty_database: str) -> None:
    before = _schemas(empty_database)
    with open_store(f"{empty_database}?schema=ij_page") as store:
        for _ in range(2):  # a second look does not create it either
            with pytest.raises(StoreUnavailable, match="no episode store in schema ij_page"):
                store.require_existing()
        assert _schemas(empty_database) == before
    with open_store(f"{empty_database}?schema=ij_page") as writer:
        writer.allocate(WEEK, "k1")
    with open_store(f"{empty_database}?schema=ij_page") as store:
        store.require_existing()
        assert [e.allocation_key for e in store.list(WEEK)] == ["k1"]


@pytest.mark.postgres
def test_an_older_postgres_store_is_not_upgraded_by_a_reader(empty_database: str) -> None:
    older = pg_schema.LATEST_VERSION - 1
    engine = sa.create_engine(empty_database.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.begin() as conn:
            pg_schema.migrate(conn, "idempotent_jobs", where="test", lock_timeout_ms=5000, target=older)
    finally:
        engine.dispose()
    with open_store(empty_database) as store:
        with pytest.raises(StoreUnavailable, match=f"at version {older}, this code reads {pg_schema.LATEST_VERSION}"):
            store.require_existing()
        with psycopg.connect(empty_database, autocommit=True) as conn:
            versions = [v for (v,) in conn.execute("SELECT version FROM idempotent_jobs.schema_version")]
        assert max(versions) == older


@pytest.mark.postgres
def test_an_older_postgres_store_is_its_own_error_for_readers(empty_database: str) -> None:
    """`StoreOutdated`: a reader can tell "a writer of this release migrates it" from a server that is down."""
    from airflow_idempotent_jobs.errors import StoreOutdated

    older = pg_schema.LATEST_VERSION - 1
    install_schema(empty_database, older)
    before = catalog(empty_database)
    with open_store(empty_database) as store, pytest.raises(StoreOutdated) as caught:
        store.require_existing()
    assert (caught.value.found, caught.value.supported) == (older, pg_schema.LATEST_VERSION)
    assert not caught.value.retryable and caught.value.exit_code == 5
    assert "a writer of this release migrates it" in str(caught.value)
    assert catalog(empty_database) == before


def _newer_store(url: str) -> int:
    newer = pg_schema.LATEST_VERSION + 1
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO idempotent_jobs.schema_version (version, name) VALUES (%s, 'from_a_later_release')", (newer,)
        )
    return newer


@pytest.mark.postgres
def test_a_newer_postgres_store_tells_a_reader_to_upgrade_the_package(pg_database: str) -> None:
    """Before: "a writer of this version migrates it", which no writer of this version can (it refuses)."""
    newer = _newer_store(pg_database)
    before = catalog(pg_database)
    with open_store(pg_database) as store, pytest.raises(StoreCorrupted) as caught:
        store.require_existing()
    message = str(caught.value)
    assert f"schema version {newer} is newer than this code's {pg_schema.LATEST_VERSION}" in message, message
    assert "upgrade airflow-idempotent-jobs" in message and "migrates" not in message, message
    assert not caught.value.retryable
    with open_store(pg_database) as store:  # `check` says so too, as its finding
        (problem,) = check_store(store)
    assert "upgrade airflow-idempotent-jobs" in problem.message, problem
    assert catalog(pg_database) == before


@pytest.mark.postgres
def test_a_writer_refuses_a_newer_postgres_store_naming_both_versions_and_the_upgrade(pg_database: str) -> None:
    newer = _newer_store(pg_database)
    before = catalog(pg_database)
    with open_store(pg_database) as store:
        for write in (lambda: store.allocate(WEEK, "k1"), lambda: store.update("2026-W32-0", lambda e: e)):
            with pytest.raises(StoreCorrupted) as caught:
                write()
            message = str(caught.value)
            assert f"schema version {newer} is newer than this code's {pg_schema.LATEST_VERSION}" in message
            assert "upgrade airflow-idempotent-jobs" in message, message
    assert catalog(pg_database) == before
