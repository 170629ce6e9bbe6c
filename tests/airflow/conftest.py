"""Real Airflow for tests: one throwaway AIRFLOW_HOME (SQLite, migrated once per session), a DAGs
folder of its own, and one process that runs every ``dag.test()`` scenario of scenarios.py (the
machinery every scenario runner shares is in scenario_process.py)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from tests.airflow.scenario_process import (
    REPO,
    ScenarioHome,
    airflow_env,
    copy_dags,
    fresh_pg_database,
    provider_server_process,
)

# Airflow reads AIRFLOW_HOME when it is first imported: keep this pytest process (the in-process
# hook, trigger and definition tests) off ~/airflow. The runs use homes of their own (below).
if "AIRFLOW_HOME" not in os.environ:
    _PYTEST_HOME = tempfile.mkdtemp(prefix="ij-pytest-airflow-")
    os.environ["AIRFLOW_HOME"] = _PYTEST_HOME
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    atexit.register(shutil.rmtree, _PYTEST_HOME, True)

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent

#: Test DAGs plus the example DAG that DAG authors copy: it must parse and run too.
DAG_SOURCES = [
    *sorted((HERE / "dags").glob("*.py")),
    REPO / "example_dags" / "weekly_media_pipeline.py",
    REPO / "example_dags" / "first_paid_dag.py",
]


@dataclass
class AirflowHome:
    home: Path
    dags: Path
    env: dict[str, str] = field(default_factory=dict)

    def airflow(self, *args: str, timeout: float = 180, **extra_env: str) -> subprocess.CompletedProcess[str]:
        """The real ``airflow`` CLI against this home."""
        return subprocess.run(
            [str(BIN / "airflow"), *args],
            env={**self.env, **extra_env},
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.home,
        )


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> AirflowHome:
    home = tmp_path_factory.mktemp("airflow-home")
    dags = home / "dags"
    dags.mkdir()
    copy_dags(dags, [source for source in DAG_SOURCES if source.exists()])
    af = AirflowHome(home, dags, airflow_env(home, dags))
    shutil.copy(migrated_database(tmp_path_factory), home / "airflow.db")
    return af


def migrated_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated SQLite metadata database for the whole run, made by whichever pytest-xdist
    worker asks first (the others wait on the lock, then copy it): migrating costs each a minute."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above each worker's own
    template = shared / "airflow-template.db"
    with FileLock(str(shared / "airflow-template.lock")):
        if not template.exists():
            build = Path(tempfile.mkdtemp(prefix="airflow-template-", dir=shared))
            (build / "dags").mkdir()
            done = AirflowHome(build, build / "dags", airflow_env(build, build / "dags")).airflow(
                "db", "migrate", timeout=300
            )
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
            os.replace(build / "airflow.db", template)  # whole or not at all: a worker may die mid-way
    return template


@dataclass
class RunningProvider:
    """The local provider server, in its own OS process."""

    url: str
    token: str

    def connection(self, **config: Any) -> str:
        """An ``AIRFLOW_CONN_*`` value: host = base URL, password = token, extra = the JSON layout."""
        from airflow_idempotent_jobs.testing.server import server_connection

        return json.dumps(server_connection(self.url, self.token, **config))


@pytest.fixture(scope="session")
def provider_server() -> Iterator[RunningProvider]:
    token = "test-provider-token-" + os.urandom(4).hex()
    with provider_server_process("--token", token) as url:
        yield RunningProvider(url, token)


def postgres_connection(url: str) -> str:
    """A plain Airflow ``postgres`` Connection (JSON form) for a ``postgresql://`` URL."""
    parts = urlsplit(url)
    return json.dumps(
        {
            "conn_type": "postgres",
            "host": parts.hostname,
            "port": parts.port,
            "login": unquote(parts.username or ""),
            "password": unquote(parts.password or "") or None,
            "schema": parts.path.lstrip("/"),
        }
    )


@pytest.fixture(scope="session")
def scenario_pg_database(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """A fresh database for the PostgreSQL-store scenario; None where no server answers (outside CI)."""
    with fresh_pg_database(request) as url:
        yield url


@pytest.fixture(scope="session")
def scenario_results(
    airflow_home: AirflowHome,
    provider_server: RunningProvider,
    scenario_pg_database: str | None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    """Every scenario of scenarios.py, run once in one process; tests assert on parts of it."""
    work = tmp_path_factory.mktemp("scenarios")
    where = ScenarioHome(airflow_home.home, airflow_home.dags, work)
    env = where.env(
        provider=(provider_server.url, provider_server.token),
        spy_secrets=True,
        connections={
            "ij_provider": provider_server.connection(),
            "ij_provider_plain": provider_server.connection(tokens_honoured=False, lookup_path=None),
            "ij_provider_bad_config": provider_server.connection(no_such_option=1),
            "media_provider": provider_server.connection(),
        },
    )
    if scenario_pg_database is not None:
        env["IJ_PG_URL"] = scenario_pg_database
        env["AIRFLOW_CONN_IJ_PG_STORE"] = postgres_connection(scenario_pg_database)
    yield where.run("tests.airflow.scenarios", env, timeout=300)


def scenario(results: dict[str, Any], name: str) -> dict[str, Any]:
    """One scenario's result; its traceback becomes the failure message."""
    data: dict[str, Any] = results[name]
    assert "error" not in data, data["error"]
    return data
