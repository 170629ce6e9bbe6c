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

from airflow_idempotent_jobs import open_store
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from tests.airflow.conftest import AirflowHome, postgres_connection
from tests.pg import catalog, install_schema

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
