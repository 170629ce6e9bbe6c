"""Tasks that read a store write nothing into it, under real ``dag.test()`` runs on PostgreSQL.

Before: `CheckEpisodesOperator` listing a week created the store's schema on an empty database and
migrated an older one (then passed); `ApproveEpisodeOperator` and the paid step created the schema
before saying that their episode does not exist. Now a checker fails without retry, in one line,
when no store exists there or its schema is older (nothing migrated); a step that needs an existing
episode fails as for an unknown episode, creating nothing. The approval gate still migrates an
older schema: it writes (``asked``, the decision), and writers of a release migrate, readers never.

Every database is compared catalog for catalog and row for row before and after the runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_idempotent_jobs import approval
from airflow_idempotent_jobs.allocation import new_episode
from airflow_idempotent_jobs.episode import Decision
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.stores.postgres import _schema as pg_schema
from tests.airflow.conftest import AirflowHome, postgres_connection, scenario
from tests.airflow.scenario_process import observed, scenario_home, ti
from tests.pg import catalog, install_schema, pg_url

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.timeout(400)]

HERE = Path(__file__).resolve().parent
OLD_VERSION = pg_schema.LATEST_VERSION - 1
#: Each DAG's database, as the test prepares it (the DAG's Connection is named after it).
DATABASES = {
    "ijr_check_missing": "empty",
    "ijr_check_older": "older",
    "ijr_check_current": "current",
    "ijr_approve_missing": "empty",
    "ijr_approve_older": "older, approved",
    "ijr_paid_missing": "empty",
}


def _approved() -> Any:
    episode = new_episode(WeekId.parse("2026-W32"), 0, "approved-before-the-upgrade", None)
    return approval.decided(episode, Decision.APPROVED, by="carol", via="cli", comment=None)


def _prepare(url: str, how: str) -> None:
    if how == "older":
        install_schema(url, OLD_VERSION, [("2026-W32", 0, "old")])
    elif how == "current":
        install_schema(url, pg_schema.LATEST_VERSION, [("2026-W32", 0, "current")])
    elif how == "older, approved":
        install_schema(url, OLD_VERSION, [_approved()])


@pytest.fixture(scope="session")
def reader_runs(
    airflow_home: AirflowHome, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    server = request.getfixturevalue("pg_server")
    names = {dag_id: server.create(empty=True) for dag_id in DATABASES}
    try:
        urls = {dag_id: pg_url(name) for dag_id, name in names.items()}
        for dag_id, how in DATABASES.items():
            _prepare(urls[dag_id], how)
        before = {dag_id: catalog(url) for dag_id, url in urls.items()}
        where = scenario_home(airflow_home.home, tmp_path_factory, "store-readers-home", [HERE / "dags_store_readers"])
        env = where.env(connections={dag_id: postgres_connection(url) for dag_id, url in urls.items()})
        results = where.run("tests.airflow.store_readers_scenarios", env, timeout=360)
        results["_before"] = before
        results["_after"] = {dag_id: catalog(url) for dag_id, url in urls.items()}
        results["_urls"] = urls
        yield results
    finally:
        for name in names.values():
            server.drop(name)


def run_of(results: dict[str, Any], dag_id: str) -> dict[str, Any]:
    run: dict[str, Any] = scenario(results, dag_id)["run"]
    return run


def failed_on_try_1(run: dict[str, Any], task_id: str) -> str:
    """The task failed without retry (try 1 of 4); its one-line message."""
    assert ti(run, task_id) == {"task_id": task_id, "map_index": -1, "state": "failed", "try_number": 1}, run["tis"]
    (failure,) = observed(run, "failed", task_id)
    assert failure["error"] == "AirflowFailException", failure
    message: str = failure["message"]
    assert "\n" not in message, message
    return message


def unchanged(results: dict[str, Any], dag_id: str) -> None:
    assert results["_after"][dag_id] == results["_before"][dag_id], f"{dag_id}: the database changed"


# -- A: the checker ---------------------------------------------------------------------------------
def test_a_check_of_an_empty_database_fails_without_retry_and_creates_nothing(reader_runs: dict[str, Any]) -> None:
    run = run_of(reader_runs, "ijr_check_missing")
    for task_id in ("check_week", "check_ids"):
        message = failed_on_try_1(run, task_id)
        assert "no episode store in schema idempotent_jobs of postgresql://" in message, message
        assert "nothing was ever written there" in message, message
    unchanged(reader_runs, "ijr_check_missing")
    assert pg_schema.DEFAULT_SCHEMA not in json.dumps(reader_runs["_after"]["ijr_check_missing"]["schemas"])


def test_a_check_of_an_older_schema_fails_without_retry_and_migrates_nothing(reader_runs: dict[str, Any]) -> None:
    run = run_of(reader_runs, "ijr_check_older")
    for task_id in ("check_week", "check_ids"):
        message = failed_on_try_1(run, task_id)
        assert f"is at version {OLD_VERSION}, this code reads {pg_schema.LATEST_VERSION}" in message, message
        assert "a writer of this release migrates it" in message, message
    unchanged(reader_runs, "ijr_check_older")


def test_a_check_of_a_current_store_passes_and_writes_nothing(reader_runs: dict[str, Any]) -> None:
    """The positive control: the same checks read a current store and find nothing wrong."""
    run = run_of(reader_runs, "ijr_check_current")
    for task_id in ("check_week", "check_ids"):
        assert ti(run, task_id)["state"] == "success", run["tis"]
    unchanged(reader_runs, "ijr_check_current")


# -- B: steps that need an existing episode ----------------------------------------------------------
@pytest.mark.parametrize(("dag_id", "task_id"), [("ijr_approve_missing", "approve"), ("ijr_paid_missing", "generate")])
def test_a_step_on_an_episode_of_an_empty_database_fails_as_not_found_and_creates_nothing(
    reader_runs: dict[str, Any], dag_id: str, task_id: str
) -> None:
    message = failed_on_try_1(run_of(reader_runs, dag_id), task_id)
    assert message.startswith("episode 2026-W32-0 not found in postgresql://"), message
    assert message.endswith("no episode store exists there"), message
    unchanged(reader_runs, dag_id)


def test_the_approval_gate_migrates_an_older_schema_as_every_writer_does(reader_runs: dict[str, Any]) -> None:
    """Decided before the upgrade: the gate goes on without asking, and the store is now current."""
    run = run_of(reader_runs, "ijr_approve_older")
    assert ti(run, "approve") == {"task_id": "approve", "map_index": -1, "state": "success", "try_number": 1}
    with psycopg.connect(reader_runs["_urls"]["ijr_approve_older"]) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM idempotent_jobs.schema_version")]
        (decision,) = conn.execute("SELECT approval->>'decision' FROM idempotent_jobs.episodes").fetchone() or (None,)
    assert max(versions) == pg_schema.LATEST_VERSION
    assert decision == "approved"
