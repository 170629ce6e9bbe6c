"""The example adapters under real ``dag.test()`` runs: a lost answer, a retry, deferral; one job, succeeded.

The prediction-style and batch-style APIs run in their own processes (``python -m
example_adapters.prediction_api`` / ``batch_api``), echoing the token in every error answer. The
DAGs (``dags/api_style_dags.py``) pay through ``PaidGenerationOperator(provider_hook=...)`` on plain
``http`` connections, deferrable, with retries:

* prediction style: try 1's submit answer is lost (the job exists): the task fails, retryable;
  try 2 lists the token, adopts the job, defers; the trigger awaits ``astatus``, meets a 503
  (polls on), and the job succeeds.
* batch style: try 1's upload answer is lost (no batch: "not sent", the ledger forgets it); try 2
  uploads again and the batch call's answer is lost (the batch exists); try 3 lists the token,
  adopts the batch, defers; the trigger runs ``status`` in a thread, meets a 503, and succeeds.

This module is also the scenario runner: ``python -m tests.airflow.test_api_style_runs OUT.json``
runs both scenarios in ONE Airflow process (see scenario_process.py); pytest starts it once.
"""

from __future__ import annotations

import contextlib
import json
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
from tests.paid.leaks import TOKEN, leaks
from tests.server_process import server_process

HERE = Path(__file__).resolve().parent
#: The scenario's fault switches per API: which answers are lost, and a status call answered 503.
FAULTS: dict[str, dict[str, Any]] = {
    "PREDICTION": {"fault": "drop_after_accept", "fault_times": 1, "status_errors": [503]},
    "BATCH": {
        "upload_fault": "drop_after_accept",
        "upload_fault_times": 1,
        "fault": "drop_after_accept",
        "fault_times": 1,
        "status_errors": [503],
    },
}

# -- the scenario process ---------------------------------------------------------------------------
scenario = Scenarios()


def admin(api: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    return provider_admin(os.environ[f"IJS_{api}_URL"], os.environ["IJS_TOKEN"], method, path, body)


def style_run(bag: Any, dag_id: str, api: str) -> Result:
    admin(api, "POST", "/_admin/config", FAULTS[api])
    run = run_dag(bag, dag_id, logical_date=utc(2026, 8, 3, 6))
    return {"run": run, "store": store_contents(dag_store(dag_id)), "api": admin(api, "GET", "/_admin/stats")}


@scenario
def prediction_style(bag: Any) -> Result:
    return style_run(bag, "ij_prediction_style", "PREDICTION")


@scenario
def batch_style(bag: Any) -> Result:
    return style_run(bag, "ij_batch_style", "BATCH")


# -- pytest ------------------------------------------------------------------------------------------
pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]


@contextlib.contextmanager
def api_process(module: str, *args: str) -> Iterator[str]:
    """``python -m example_adapters.<module> --port 0 ...`` in its own OS process: its URL."""
    with server_process(f"example_adapters.{module}", *args) as running:
        yield running.url


def http_connection(url: str) -> str:
    """A plain Airflow ``http`` Connection: the base URL as host, the API token as password."""
    return json.dumps({"conn_type": "http", "host": url, "password": TOKEN})


@pytest.fixture(scope="session")
def style_runs(airflow_home: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    where = scenario_home(airflow_home.home, tmp_path_factory, "api-style-home", [HERE / "dags" / "api_style_dags.py"])
    options = ("--token", TOKEN, "--echo-token", "--polls-to-finish", "2")
    with api_process("prediction_api", *options) as prediction_url, api_process("batch_api", *options) as batch_url:
        env = where.env(
            connections={
                "ij_prediction_api": http_connection(prediction_url),
                "ij_batch_api": http_connection(batch_url),
            },
            IJS_TOKEN=TOKEN,
            IJS_PREDICTION_URL=prediction_url,
            IJS_BATCH_URL=batch_url,
        )
        yield where.run("tests.airflow.test_api_style_runs", env, timeout=540)


def finished(results: dict[str, Any], name: str, tries: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The scenario's run, checked to have succeeded on try ``tries`` after its lost answers; and its episode."""
    data = results[name]
    assert "error" not in data, data["error"]
    run = data["run"]
    assert run["state"] == "success", run
    assert ti(run, "generate")["state"] == "success"
    assert ti(run, "generate")["try_number"] == tries, "each lost answer cost one try"
    (episode,) = data["store"]
    sub = episode["submission"]
    assert sub["state"] == "succeeded"
    assert sub["cost"] == 2.5
    notes = [step["note"] for step in sub["history"]]
    assert "found by token lookup" in notes, notes  # the retry adopted the job the lost answer made
    (resumed,) = [o for o in run["observed"] if o["kind"] == "resumed"]
    assert resumed["event"]["state"] == "succeeded", resumed  # through the trigger
    (paid,) = [o for o in run["observed"] if o["kind"] == "paid_xcoms"]
    assert paid["xcoms"]["state"] == "succeeded" and paid["xcoms"]["remote_ref"] == sub["remote_ref"]
    return data, sub


def test_prediction_style_lost_answer_then_retry_one_job_succeeded(style_runs: dict[str, Any]) -> None:
    data, sub = finished(style_runs, "prediction_style", tries=2)
    api = data["api"]
    assert api["submissions"] == 1, "the retry listed the token instead of submitting again"
    assert api["jobs_per_token"] == {sub["token"]: 1}
    assert [job["metadata"] for job in api["jobs"].values()] == [{"token": sub["token"]}]
    assert api["lookup_calls"] >= 1 and api["status_calls"] >= 3  # the 503, then until it succeeded


def test_batch_style_lost_answers_on_both_calls_then_retry_one_batch_succeeded(style_runs: dict[str, Any]) -> None:
    data, sub = finished(style_runs, "batch_style", tries=3)
    api = data["api"]
    assert api["batches_per_token"] == {sub["token"]: 1}, "one paid batch"
    assert api["files_per_name"] == {f"{sub['token']}.json": 2}, "the upload repeated once, as allowed"
    assert api["submissions"] == 1, "the batch call was made once: try 3 adopted it"
    states = [step["to"] for step in sub["history"]]
    assert states[:3] == ["submitting", "none", "submitting"], states  # the lost upload: nothing sent


def test_no_form_of_the_api_token_in_logs_or_records(style_runs: dict[str, Any]) -> None:
    """The APIs echoed the token in their 503 answers; neither the logs nor the stores show it."""
    log = Path(style_runs["_log"]).read_text(errors="replace")
    # Positive control: the triggers met the echoing 503 answers and logged them, redacted.
    assert log.count("status refused with HTTP 503 (token <redacted> is not valid") >= 2
    places = {"runner output (task logs)": log}
    for name in ("prediction_style", "batch_style"):
        places[f"{name} store"] = json.dumps(style_runs[name]["store"])
        places[f"{name} observations"] = json.dumps(style_runs[name]["run"]["observed"])
    found = {where: leaks(text, TOKEN) for where, text in places.items() if leaks(text, TOKEN)}
    assert not found, found


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
