"""Replicate predictions in real Airflow: ``dag.test()`` runs against the Replicate double in its own OS
process, the real ``replicate`` SDK pointed at it through an ``idempotent_jobs_replicate`` connection.

One runner process (``replicate_scenarios.py``). After one lost answer to the create call (the
prediction exists, the SDK never retries a POST) the try fails unknown and the next finds the
prediction by token lookup; the example DAG runs as shipped. Each time: exactly one billed
prediction per episode (the double's own count per token), the episode records it (succeeded,
remote ref = that prediction) and its cost is the prediction's predict time at the price, computed here.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.conftest import AirflowHome
from tests.airflow.dags_replicate.replicate_dags import MODEL, PRICES
from tests.airflow.replicate_scenarios import SECRET, SOURCES, launch
from tests.airflow.scenario_process import observed, scenario_home, ti

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(900)]

PER_SECOND = PRICES[MODEL]["per_second"]


@pytest.fixture(scope="module")
def runs(airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return launch(scenario_home(airflow_home.home, tmp_path_factory, "replicate", SOURCES))


def part(runs: dict[str, Any], name: str) -> Any:
    data = runs[name]
    assert "error" not in data, data["error"]
    return data


def paid_once(data: dict[str, Any]) -> dict[str, Any]:
    """The one episode: succeeded, one billed prediction, that one recorded, its predict time at the price."""
    (episode,) = data["store"]
    sub = episode["submission"]
    billed = data["billed"][episode["episode_id"]]
    assert billed["count"] == 1, (episode["episode_id"], billed)
    (prediction,) = billed["ids"]
    assert (sub["state"], sub["remote_ref"]) == ("succeeded", prediction), sub
    seconds = billed["predict_times"][prediction]
    assert isinstance(seconds, float) and seconds > 0, billed
    assert sub["cost"] == pytest.approx(seconds * PER_SECOND, rel=1e-12), (sub["cost"], seconds)
    assert sub["result"]["prediction_id"] == prediction and sub["result"]["status"] == "succeeded"
    assert sub["result"]["output"] == [f"https://replicate.delivery/xezq/{prediction}/out-0.png"]
    return dict(episode)


def notes(episode: dict[str, Any]) -> list[str]:
    return [step["note"] for step in episode["submission"]["history"]]


def test_one_lost_answer_is_found_by_token_lookup_on_the_next_try(runs: dict[str, Any]) -> None:
    data = part(runs, "one_lost_answer")
    run = data["run"]
    assert run["state"] == "success" and data["faults_left"] == 0, run
    episode = paid_once(data)
    assert data["accepted_total"] - data["accepted_before"] == 1, "no second prediction was created"
    tries = observed(run, "failed", "pay")
    assert [t["error"] for t in tries] == ["ProviderOutcomeUnknown"], tries
    assert ti(run, "pay")["try_number"] == 2
    assert data["list_calls"] >= 1, "the second try listed predictions"
    assert any("found by token lookup" in note for note in notes(episode)), notes(episode)
    (seen,) = observed(run, "paid_xcoms", "report")
    assert seen["xcoms"]["remote_ref"] == episode["submission"]["remote_ref"]


def test_a_worker_killed_while_the_answer_was_held_bills_one_prediction(runs: dict[str, Any]) -> None:
    data = part(runs, "kill")
    assert data["made_before_kill"] == 1 and data["killed_by"] == signal.SIGKILL
    (held,) = data["store_after_kill"]
    assert held["submission"]["state"] == "submitting", "killed between the intent and the answer"
    assert data["run"]["state"] == "success", data["run"]
    episode = paid_once(data)
    assert episode["episode_id"] == held["episode_id"]
    assert data["accepted_total"] - data["accepted_before"] == 0, "the retry created nothing"
    assert "found by token lookup" in notes(episode), notes(episode)


def test_the_example_dag_runs_as_shipped(runs: dict[str, Any]) -> None:
    data = part(runs, "example")
    run = data["run"]
    assert run["state"] == "success", run
    assert [ti(run, t)["state"] for t in ("allocate", "image", "report")] == ["success"] * 3
    episode = paid_once(data)
    assert episode["episode_id"] == "2026-W37-0"  # Monday 2026-09-07 06:00 Berlin


def test_the_api_token_never_reaches_the_logs(runs: dict[str, Any]) -> None:
    log = Path(runs["_log"]).read_text(errors="replace")
    assert SECRET not in log
