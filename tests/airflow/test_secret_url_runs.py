"""Hostile store URLs under real Airflow: no part of the password in any failure, log line,
rendered field or XCom.

Every URL of `tests.hostile_store_urls.HOSTILE` is rendered into ``store=`` from a Variable; some
are also the deployment's ``[idempotent_jobs] store``; two reach the store through Connections.
One scenario process (``secret_url_scenarios.py``) runs them all on a copy of the session's
migrated metadata database.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.conftest import AirflowHome, scenario
from tests.airflow.scenario_process import observed, scenario_home
from tests.airflow.scenario_process import ti as task_instance
from tests.airflow.secret_url_scenarios import SETTING_CASES
from tests.hostile_store_urls import HOSTILE, Hostile, leaked

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(400)]

HERE = Path(__file__).resolve().parent
NOWHERE = "127.0.0.1:1/ij"
CONN_PASSWORD = "?Kq9z@Vb7m#Nc2r/Ld5s:Mx4wCONN"
EVERY_SECRET = [secret for hostile in HOSTILE for secret in hostile.secrets] + [CONN_PASSWORD]
BY_NAME = {hostile.name: hostile for hostile in HOSTILE}


@pytest.fixture(scope="module")
def results(airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = scenario_home(airflow_home.home, tmp_path_factory, "secret-url-home", [HERE / "dags_secret_urls"])
    connections = {
        "ijs_url_in_host": {"conn_type": "idempotent_jobs_store", "host": BY_NAME["at"].at(NOWHERE)},
        "ijs_password_field": {
            "conn_type": "idempotent_jobs_store",
            "host": f"postgresql://{NOWHERE}",
            "login": "ij",
            "password": CONN_PASSWORD,
        },
    }
    env = where.env(connections=connections)
    env.update({f"AIRFLOW_VAR_IJS_STORE_{i}": hostile.at(NOWHERE) for i, hostile in enumerate(HOSTILE)})
    found = where.run("tests.airflow.secret_url_scenarios", env, timeout=360)
    found["_home"] = str(where.home)
    return found


def failure(run: dict[str, Any], task_id: str, map_index: int = -1) -> tuple[str, str]:
    """(exception class, message) the task failed with, on its only try."""
    found = task_instance(run, task_id, map_index)
    assert (found["state"], found["try_number"]) == ("failed", 1), found
    (seen,) = [o for o in observed(run, "failed", task_id) if o["map_index"] == map_index]
    return seen["error"], seen["message"]


def assert_refused_or_unavailable(hostile: Hostile, error: str, message: str) -> None:
    assert leaked(hostile.secrets, message) == [], message
    if hostile.password is None:
        assert error == "AirflowFailException", (error, message)
        assert "://...)" in message or "file URL: the URL (not repeated" in message, message
    else:
        assert error == "StoreUnavailable", (error, message)
        assert "ij:***@127.0.0.1:1/ij is unavailable" in message, message


@pytest.mark.parametrize("index", range(len(HOSTILE)), ids=[h.name for h in HOSTILE])
def test_a_task_given_the_url_fails_without_showing_the_password(results: dict[str, Any], index: int) -> None:
    hostile = HOSTILE[index]
    result = scenario(results, "hostile_store")
    error, message = failure(result["run"], f"allocate_{index}")
    assert_refused_or_unavailable(hostile, error, message)
    shown = result["rendered"][f"allocate_{index}[-1]"]["store"]
    assert leaked(hostile.secrets, shown) == [], shown
    if hostile.password is not None:
        assert shown == f"{hostile.url.partition('://')[0].lower()}://ij:***@{NOWHERE}", shown


def test_the_mapped_task_the_check_and_the_paid_step_show_it_nowhere(results: dict[str, Any]) -> None:
    result = scenario(results, "hostile_store")
    run = result["run"]
    for task_id, map_index, hostile in (
        ("mapped", 0, HOSTILE[1]),
        ("mapped", 1, HOSTILE[1]),
        ("check", -1, HOSTILE[0]),
        ("generate", -1, HOSTILE[1]),
    ):
        assert_refused_or_unavailable(hostile, *failure(run, task_id, map_index))
        shown = result["rendered"][f"{task_id}[{map_index}]"]["store"]
        assert shown == f"postgresql://ij:***@{NOWHERE}", shown
    assert leaked(EVERY_SECRET, json.dumps(result["rendered"]), json.dumps(result["xcoms"], default=str)) == []


@pytest.mark.parametrize("name", SETTING_CASES)
def test_the_deployment_setting_fails_without_showing_the_password(results: dict[str, Any], name: str) -> None:
    hostile = BY_NAME[name]
    result = scenario(results, "hostile_setting")[name]
    error, message = failure(result["run"], "allocate")
    if hostile.password is None:
        assert "[idempotent_jobs] store" in message, message
    assert_refused_or_unavailable(hostile, error, message)
    assert leaked(hostile.secrets, json.dumps(result["rendered"]), json.dumps(result["xcoms"], default=str)) == []


def test_connections_take_the_password_from_the_password_field_only(results: dict[str, Any]) -> None:
    result = scenario(results, "hostile_conn")
    error, message = failure(result["run"], "url_in_host")
    assert error == "AirflowFailException" and "put it in the connection's password field" in message, message
    assert leaked(BY_NAME["at"].secrets, message) == []
    error, message = failure(result["run"], "password_field")
    assert error == "StoreUnavailable" and "ij:***@127.0.0.1:1/ij is unavailable" in message, message
    assert leaked([CONN_PASSWORD], message) == []


def test_no_log_line_of_any_run_shows_any_password(results: dict[str, Any]) -> None:
    """The scenario process's output (task logs included) and every log file Airflow wrote."""
    texts = [Path(results["_log"]).read_text(errors="replace")]
    texts += [p.read_text(errors="replace") for p in Path(results["_home"], "logs").rglob("*") if p.is_file()]
    assert "ijs_hostile_store" in texts[0]  # the runs did log
    assert leaked(EVERY_SECRET, *texts) == []
