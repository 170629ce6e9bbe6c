"""``--store-conn-id`` and ``--airflow-store``: the store as Airflow's settings name it, never a typed password.

The operations page prints its commands with these (never with a URL that could hold a password);
each call here is the installed command in its own process, with Airflow reading its connections
and ``[idempotent_jobs]`` options from the environment as a deployment's host would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_idempotent_jobs.cli import main as library_main
from airflow_idempotent_jobs.cli._common import INSTALLED
from tests.clirun import run_cli

SECRET = "pw-" + "never-printed"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    done = run_cli("--store", str(root), "allocate", "--week", "2026-W49", "--key", "job-a")
    assert done.code == 0, done.stderr
    return root


def airflow_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "airflow-home"
    home.mkdir(exist_ok=True)
    return {"AIRFLOW_HOME": str(home), **extra}


def store_connection(root: Path) -> str:
    return json.dumps({"conn_type": "idempotent_jobs_store", "host": str(root)})


def test_a_connection_id_opens_the_store_it_names_and_only_the_command_output_reaches_stdout(
    store: Path, tmp_path: Path
) -> None:
    env = airflow_env(tmp_path, AIRFLOW_CONN_IJ_STORE=store_connection(store))
    done = run_cli("--store-conn-id", "ij_store", "show", "2026-W49-0", env=env)
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["allocation_key"] == "job-a"  # no log line of Airflow's before it
    assert "Episode store from connection" not in done.stdout + done.stderr


@pytest.mark.parametrize("setting", ["store", "store_conn_id"])
def test_airflow_store_is_the_deployments_store_from_either_setting(store: Path, tmp_path: Path, setting: str) -> None:
    value = str(store) if setting == "store" else "ij_store"
    env = airflow_env(
        tmp_path,
        AIRFLOW_CONN_IJ_STORE=store_connection(store),
        **{f"AIRFLOW__IDEMPOTENT_JOBS__{setting.upper()}": value},
    )
    done = run_cli("--airflow-store", "list", "--week", "2026-W49", env=env)
    assert done.code == 0, done.stderr
    assert "2026-W49-0" in done.stdout and "job-a" in done.stdout


def test_an_unknown_connection_is_one_line_naming_it(tmp_path: Path) -> None:
    done = run_cli("--store-conn-id", "no_such_store", "list", env=airflow_env(tmp_path))
    assert done.code == 2
    assert done.error_line() == "idempotent-jobs: error: --store-conn-id: Airflow has no connection 'no_such_store'"


def test_a_deployment_setting_naming_an_unknown_connection_is_one_line_naming_it(tmp_path: Path) -> None:
    env = airflow_env(tmp_path, AIRFLOW__IDEMPOTENT_JOBS__STORE_CONN_ID="gone_store")
    done = run_cli("--airflow-store", "list", env=env)
    assert done.code == 2
    assert done.error_line() == (
        "idempotent-jobs: error: --airflow-store: [idempotent_jobs] store_conn_id names 'gone_store': "
        "Airflow has no such connection"
    )


def test_a_connection_with_a_password_in_its_extra_is_refused_without_showing_it(tmp_path: Path) -> None:
    bad = json.dumps({"conn_type": "idempotent_jobs_store", "host": "/nowhere", "extra": {"password": SECRET}})
    done = run_cli("--store-conn-id", "leaky", "list", env=airflow_env(tmp_path, AIRFLOW_CONN_LEAKY=bad))
    assert done.code == 2
    line = done.error_line()
    assert "extra 'password'" in line and SECRET not in done.stdout + done.stderr


def test_a_postgres_connection_that_cannot_connect_never_shows_its_password(tmp_path: Path) -> None:
    conn = json.dumps(
        {"conn_type": "postgres", "host": "127.0.0.1", "port": 1, "login": "ij", "password": SECRET, "schema": "x"}
    )
    done = run_cli("--store-conn-id", "ij_pg", "list", env=airflow_env(tmp_path, AIRFLOW_CONN_IJ_PG=conn))
    assert done.code == 5
    assert SECRET not in done.stdout + done.stderr
    done.error_line()


def test_one_way_to_name_the_store(store: Path, tmp_path: Path) -> None:
    done = run_cli("--store", str(store), "--airflow-store", "list", env=airflow_env(tmp_path))
    assert done.code == 2
    assert "not allowed with argument" in done.error_line()
    empty = run_cli("--store-conn-id", " ", "list", env=airflow_env(tmp_path))
    assert (empty.code, empty.error_line()) == (2, "idempotent-jobs: error: --store-conn-id: an empty connection id")


def test_the_library_entry_without_airflow_refuses_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert library_main(["--airflow-store", "list"]) == 2
    err = capsys.readouterr().err
    assert err == f"idempotent-jobs: error: --store-conn-id and --airflow-store need Airflow: {INSTALLED}\n"
