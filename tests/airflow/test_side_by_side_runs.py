"""Side by side in real ``dag.test()`` runs: Airflow's ResumableJobMixin pays twice for a lost answer,
the ledger once, through the same custom provider (the prediction-style example adapter).

The API (``python -m example_adapters.prediction_api``, its own process) creates the prediction and
then drops the connection on the first paid call of each run. The mixin persists the job id only
after ``submit_job`` returns (its docstring calls this "a small window"), so its retry has nothing to
reconnect to and submits again: two predictions, both billed. The ledger wrote its intent before the
call; its retry lists the token and adopts the first prediction: one.

This module is also the scenario runner: ``python -m tests.airflow.test_side_by_side_runs OUT.json``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.scenario_process import (
    Result,
    Scenarios,
    dag_store,
    provider_admin,
    run_dag,
    scenario_home,
    store_contents,
    ti,
    utc,
)
from tests.airflow.test_api_style_runs import api_process, http_connection
from tests.paid.leaks import TOKEN

HERE = Path(__file__).resolve().parent
LOST_ANSWER = {"fault": "drop_after_accept", "fault_times": 1}

# -- the scenario process ---------------------------------------------------------------------------
scenario = Scenarios()


def admin(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    return provider_admin(os.environ["IJS_PREDICTION_URL"], os.environ["IJS_TOKEN"], method, path, body)


def lost_answer_run(bag: Any, dag_id: str) -> Result:
    before = admin("GET", "/_admin/stats")["jobs_per_token"]
    admin("POST", "/_admin/config", LOST_ANSWER)
    run = run_dag(bag, dag_id, logical_date=utc(2026, 8, 3, 6))
    after = admin("GET", "/_admin/stats")["jobs_per_token"]
    jobs = {token: count - before.get(token, 0) for token, count in after.items() if count != before.get(token, 0)}
    return {"run": run, "jobs_per_token": jobs, "store": store_contents(dag_store(dag_id))}


@scenario
def mixin(bag: Any) -> Result:
    return lost_answer_run(bag, "ij_mixin")


@scenario
def ledger(bag: Any) -> Result:
    return lost_answer_run(bag, "ij_ledger")


# -- pytest ------------------------------------------------------------------------------------------
pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def side_by_side(airflow_home: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    where = scenario_home(airflow_home.home, tmp_path_factory, "side-by-side-home", [HERE / "dags_side_by_side"])
    with api_process("prediction_api", "--token", TOKEN, "--polls-to-finish", "2") as url:
        env = where.env(
            connections={"ij_prediction_api": http_connection(url)}, IJS_TOKEN=TOKEN, IJS_PREDICTION_URL=url
        )
        yield where.run("tests.airflow.test_side_by_side_runs", env, timeout=540)


def _succeeded_after_one_retry(data: dict[str, Any]) -> None:
    assert "error" not in data, data["error"]
    run = data["run"]
    assert run["state"] == "success", run
    assert ti(run, "generate")["try_number"] == 2, "try 1 lost the answer; try 2 succeeded"


def test_airflows_resumable_job_mixin_pays_twice_for_a_lost_answer(side_by_side: dict[str, Any]) -> None:
    data = side_by_side["mixin"]
    _succeeded_after_one_retry(data)
    (state_store,) = [o for o in data["run"]["observed"] if o["kind"] == "state_store"][:1]
    assert state_store["available"], "a fair comparison: the mixin had its task_state_store"
    assert list(data["jobs_per_token"].values()) == [2], data["jobs_per_token"]  # two billed predictions


def test_the_ledger_pays_once_for_the_same_lost_answer(side_by_side: dict[str, Any]) -> None:
    data = side_by_side["ledger"]
    _succeeded_after_one_retry(data)
    (episode,) = data["store"]
    sub = episode["submission"]
    assert sub["state"] == "succeeded"
    assert data["jobs_per_token"] == {sub["token"]: 1}
    assert "found by token lookup" in [step["note"] for step in sub["history"]]


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
