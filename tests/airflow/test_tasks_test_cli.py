"""``airflow tasks test`` (the real CLI): a throwaway run allocates nothing unless allowed.

A dry run reads the store only as a reader does (`EpisodeStore.require_existing`): on PostgreSQL
it never creates the schema, never migrates an older one and never writes a row; on the file
store it never creates the root. The databases and trees are compared before and after, catalog
for catalog and byte for byte.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.allocation import new_episode
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.stores import pg_schema
from tests.airflow.conftest import AirflowHome, postgres_connection
from tests.backends import PostgresBackend

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(300)]

DAG_ID = "ij_tasks_test_stores"  # tests/airflow/dags/tasks_test_dags.py
OLD_VERSION = pg_schema.LATEST_VERSION - 1


def test_tasks_test_persists_nothing_unless_allowed(airflow_home: AirflowHome, tmp_path: Path) -> None:
    stores = tmp_path / "stores"
    done = airflow_home.airflow("tasks", "test", "ij_tasks_test", "allocate", IJ_STORES=str(stores))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "__airflow_temporary_run_" in output
    assert "would allocate " in output and "nothing persisted" in output
    store_root = stores / "ij_tasks_test"
    assert not store_root.exists()  # not even the directory: a dry run creates no store

    allowed = airflow_home.airflow("tasks", "test", "ij_tasks_test", "allocate_allowed", IJ_STORES=str(stores))
    assert allowed.returncode == 0, (allowed.stdout + allowed.stderr)[-3000:]
    (episode,) = open_store(store_root).list()  # the positive control: allowed, it does persist
    assert episode.allocation_key.startswith("airflow:ij_tasks_test:allocate_allowed:__airflow_temporary_run_")


# -- PostgreSQL --------------------------------------------------------------------------------
def catalog(url: str) -> dict[str, Any]:
    """Every schema, relation, column, function, type and trigger outside PostgreSQL's own, and every row of ours."""
    own = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%%'"
    queries = {
        "schemas": f"SELECT n.nspname FROM pg_namespace n WHERE {own} ORDER BY 1",
        "relations": "SELECT n.nspname, c.relname, c.relkind FROM pg_class c "
        f"JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {own} ORDER BY 1, 2",
        "columns": "SELECT n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE {own} AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2, 3",
        "functions": "SELECT n.nspname, p.proname, md5(p.prosrc) FROM pg_proc p "
        f"JOIN pg_namespace n ON n.oid = p.pronamespace WHERE {own} ORDER BY 1, 2, 3",
        "types": "SELECT n.nspname, t.typname FROM pg_type t "
        f"JOIN pg_namespace n ON n.oid = t.typnamespace WHERE {own} ORDER BY 1, 2",
        "triggers": "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        f"JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {own} AND NOT t.tgisinternal ORDER BY 1, 2",
    }
    with psycopg.connect(url, autocommit=True) as conn:
        found: dict[str, Any] = {name: [list(row) for row in conn.execute(sql)] for name, sql in queries.items()}
    found["rows"] = PostgresBackend(url).snapshot()
    return found


def dry_run_pg(airflow_home: AirflowHome, url: str) -> tuple[int, str]:
    done = airflow_home.airflow(
        "tasks", "test", DAG_ID, "allocate_pg", AIRFLOW_CONN_IJ_TASKS_TEST_PG=postgres_connection(url)
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.postgres
def test_a_dry_run_on_an_empty_database_creates_no_schema(airflow_home: AirflowHome, empty_database: str) -> None:
    before = catalog(empty_database)
    assert pg_schema.DEFAULT_SCHEMA not in [row[0] for row in before["schemas"]]
    code, output = dry_run_pg(airflow_home, empty_database)
    assert code == 0, output[-3000:]
    # A fresh deployment: the first real run would create the store and take the week's first number.
    assert "would allocate 2026-W32-0" in output and "nothing persisted" in output
    assert "yet: the first real run creates it" in output
    assert catalog(empty_database) == before  # no schema, no table, no function, no row


@pytest.mark.postgres
def test_a_dry_run_on_an_older_schema_fails_without_migrating_it(
    airflow_home: AirflowHome, empty_database: str
) -> None:
    install_schema(empty_database, OLD_VERSION, episodes=[("2026-W32", 0, "old-a"), ("2026-W32", 1, "old-b")])
    before = catalog(empty_database)
    assert [OLD_VERSION, pg_schema.MIGRATIONS[OLD_VERSION - 1].name] in [
        [row["version"], row["name"]] for row in schema_versions(empty_database)
    ]
    _, output = dry_run_pg(airflow_home, empty_database)  # `tasks test` exits 0 whatever the task did
    assert "new_state=failed" in output, output[-3000:]
    lines = [line for line in output.splitlines() if "cannot tell what it would allocate" in line]
    assert lines, output[-3000:]
    line = lines[-1]  # the exception, on one line
    assert "AirflowFailException: Test run __airflow_temporary_run_" in line, line
    assert f"is at version {OLD_VERSION}, this code reads {pg_schema.LATEST_VERSION}" in line, line
    assert line.endswith("; nothing was written"), line
    assert catalog(empty_database) == before  # still version OLD_VERSION, the same rows, no new function


@pytest.mark.postgres
def test_a_dry_run_on_a_current_schema_reads_it_and_writes_nothing(
    airflow_home: AirflowHome, empty_database: str
) -> None:
    install_schema(empty_database, pg_schema.LATEST_VERSION, episodes=[("2026-W32", 0, "earlier-run")])
    before = catalog(empty_database)
    code, output = dry_run_pg(airflow_home, empty_database)
    assert code == 0, output[-3000:]
    assert "would allocate 2026-W32-1" in output  # it did read the store: -0 is taken
    assert catalog(empty_database) == before


def install_schema(url: str, version: int, episodes: list[tuple[str, int, str]]) -> None:
    """The store's schema at ``version``, with these episodes, as a writer of that version left it."""
    from airflow_idempotent_jobs.stores.pg_session import row_values, statements

    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.begin() as conn:
            pg_schema.migrate(conn, pg_schema.DEFAULT_SCHEMA, where="test", lock_timeout_ms=5000, target=version)
    finally:
        engine.dispose()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO idempotent_jobs.store_identity (namespace, identity) VALUES ('default', md5('x'))")
        for week, sequence, key in episodes:
            conn.execute(
                statements("idempotent_jobs").insert,
                row_values("default", new_episode(WeekId.parse(week), sequence, key, None)),
            )


def schema_versions(url: str) -> list[dict[str, Any]]:
    with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as conn:
        return list(conn.execute("SELECT version, name FROM idempotent_jobs.schema_version ORDER BY version"))


# -- the file store ----------------------------------------------------------------------------
def tree(root: Path) -> dict[str, Any]:
    """Every entry under ``root``: its kind, mode, mtime and, for a file, its bytes' sha256."""
    found: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        found[os.path.relpath(path, root)] = (info.st_mode, info.st_mtime_ns, digest)
    return found


def test_a_dry_run_on_a_file_store_changes_no_byte_of_it(airflow_home: AirflowHome, tmp_path: Path) -> None:
    stores = tmp_path / "stores"
    with open_store(stores / DAG_ID) as store:
        store.allocate("2026-W32", "earlier-run")
    before = tree(stores / DAG_ID)
    done = airflow_home.airflow("tasks", "test", DAG_ID, "allocate_file", IJ_STORES=str(stores))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "would allocate 2026-W32-1" in output
    assert tree(stores / DAG_ID) == before
