"""Bedrock's async invoke in real Airflow: ``dag.test()`` runs against the Bedrock Runtime double in its
own OS process, real boto3 (its default retries on) pointed at it through an ``aws`` connection.

One runner process (``bedrock_scenarios.py``). The paid tasks name only ``aws_default``: resolution
picks our hook. Deferrable and not, after one lost answer (boto3's next attempt gets the invocation
back), after every attempt's answer lost (the try fails unknown, the next finds the invocation by
its token in ListAsyncInvokes and adopts it), seven
lost across three episodes of one run, and a worker SIGKILLed while the answer was on its way:
exactly one billed invocation per episode (the double's own count per clientRequestToken), the
episode records it (succeeded, remote ref = that invocation, the output prefix) and its estimate is
the price of the video, computed here.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.bedrock_scenarios import FAULTS, NAME_RULES, SECRET, SOURCES, launch, markdown
from tests.airflow.conftest import AirflowHome
from tests.airflow.dags_bedrock.bedrock_dags import PRICES, SECONDS, video_request
from tests.airflow.scenario_process import observed, scenario_home, ti

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(900)]

MODES = ("worker", "deferred")
PRICE = PRICES[video_request()["modelId"]]["per_second"] * SECONDS


@pytest.fixture(scope="module")
def runs(airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return launch(scenario_home(airflow_home.home, tmp_path_factory, "bedrock", SOURCES))


def part(runs: dict[str, Any], name: str) -> Any:
    data = runs[name]
    assert "error" not in data, data["error"]
    return data


def paid_once(data: dict[str, Any], episodes: int = 1) -> list[dict[str, Any]]:
    """Each episode: succeeded, one billed invocation, that one recorded, the video's price as its estimate."""
    assert len(data["store"]) == episodes, data["store"]
    for episode in data["store"]:
        sub = episode["submission"]
        billed = data["billed"][episode["episode_id"]]
        assert billed["count"] == 1, (episode["episode_id"], billed)
        (arn,) = billed["arns"]
        assert (sub["state"], sub["remote_ref"]) == ("succeeded", arn), sub
        assert sub["result"]["output_s3_uri"] == video_request()["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"]
        assert sub["estimated_cost"] == pytest.approx(PRICE, rel=1e-12) and sub["cost"] is None
    return list(data["store"])


def notes(episode: dict[str, Any]) -> list[str]:
    return [step["note"] for step in episode["submission"]["history"]]


@pytest.mark.parametrize("mode", MODES)
def test_one_lost_answer_is_answered_by_boto3s_next_attempt(runs: dict[str, Any], mode: str) -> None:
    data = part(runs, "one_lost_answer")[mode]
    assert data["run"]["state"] == "success" and data["faults_left"] == 0, data["run"]
    paid_once(data)
    assert ti(data["run"], "pay")["try_number"] == 1, "boto3 resent the token within the first try"
    (seen,) = observed(data["run"], "paid_xcoms", "report")
    assert seen["xcoms"]["remote_ref"] == data["store"][0]["submission"]["remote_ref"]


@pytest.mark.parametrize("mode", MODES)
def test_every_attempt_lost_fails_the_try_and_the_next_adopts_the_invocation(runs: dict[str, Any], mode: str) -> None:
    data = part(runs, "every_attempt_lost")[mode]
    run = data["run"]
    assert run["state"] == "success" and data["faults_left"] == 0, run
    (episode,) = paid_once(data)
    tries = observed(run, "failed", "pay")
    assert [t["error"] for t in tries] == ["ProviderOutcomeUnknown"], tries
    assert "3 attempts" in tries[0]["message"] or "no answer" in tries[0]["message"], tries
    assert ti(run, "pay")["try_number"] == 2
    assert "found by token lookup" in notes(episode), notes(episode)


@pytest.mark.parametrize("mode", MODES)
def test_seven_lost_answers_over_three_episodes_bill_one_invocation_each(runs: dict[str, Any], mode: str) -> None:
    data = part(runs, "three_episodes_seven_lost")[mode]
    assert data["run"]["state"] == "success" and data["faults_left"] == 0, data["run"]
    episodes = paid_once(data, episodes=3)
    assert len({e["submission"]["remote_ref"] for e in episodes}) == 3
    assert max(ti(data["run"], "pay", index)["try_number"] for index in range(3)) >= 2


@pytest.mark.parametrize("mode", MODES)
def test_a_worker_killed_while_the_answer_was_held_bills_one_invocation(runs: dict[str, Any], mode: str) -> None:
    data = part(runs, "kill")[mode]
    assert data["made_before_kill"] == 1 and data["killed_by"] == signal.SIGKILL
    (held,) = data["store_after_kill"]
    assert held["submission"]["state"] == "submitting", "killed between the intent and the answer"
    assert data["run"]["state"] == "success", data["run"]
    (episode,) = paid_once(data)
    assert episode["episode_id"] == held["episode_id"]
    assert "found by token lookup" in notes(episode), notes(episode)


def test_bad_requests_and_prices_over_budget_are_refused_before_sending(runs: dict[str, Any]) -> None:
    data = part(runs, "refused")
    assert data["sent"] == {"submissions": 0, "accepted": 0}, data["sent"]
    expected = {
        "unpriced": "modelId: 'amazon.no-such-model' has no price",
        "unpriceable": "durationSeconds: a number of seconds is needed to price it",
        "over_budget": "weekly budget 0.01 for 2026-W32 would be exceeded",
    }
    for task_id, said in expected.items():
        assert ti(data["run"], task_id)["state"] == "failed"
        assert ti(data["run"], task_id)["try_number"] == 1, "no retry"
        (failure,) = observed(data["run"], "failed", task_id)
        assert said in failure["message"] and "\n" not in failure["message"], failure
    for episode in data["store"]:
        assert episode["submission"]["state"] == "none", episode


def test_the_example_dag_runs_as_shipped(runs: dict[str, Any]) -> None:
    data = part(runs, "example")
    run = data["run"]
    assert run["state"] == "success", run
    assert [ti(run, t)["state"] for t in ("allocate", "video", "report")] == ["success"] * 3
    (episode,) = data["store"]
    assert episode["episode_id"] == "2026-W37-0"  # Monday 2026-09-07 06:00 Berlin
    sub = episode["submission"]
    assert sub["state"] == "succeeded" and data["billed"][episode["episode_id"]]["count"] == 1
    assert sub["result"]["output_s3_uri"] == "s3://weekly-media/weekly/20260907/"
    assert sub["estimated_cost"] == pytest.approx(0.08 * 6, rel=1e-12)


def test_no_secret_reaches_the_logs(runs: dict[str, Any]) -> None:
    log = Path(runs["_log"]).read_text(errors="replace")
    assert SECRET not in log


# -- side by side with Airflow's BedrockBatchInferenceOperator (batch inference) ----------------------
def test_ours_bills_one_batch_job_per_run_under_every_fault_and_name_rule(runs: dict[str, Any]) -> None:
    table = part(runs, "side_by_side")["table"]
    print(markdown(table))
    for rule in NAME_RULES:
        for fault in FAULTS:
            cell = table[f"ours/{rule}/{fault}"]
            assert (cell["billed"], cell["state"]) == (1, "success"), (rule, fault, cell)


def test_airflows_operator_is_saved_by_boto3_within_a_try_but_not_across_tries(runs: dict[str, Any]) -> None:
    """boto3 fills one clientRequestToken per call and resends it on its own attempts (one job); the
    operator's next try is a new call with a new token and the same job name: a second billed job
    where names may be reused, a run that fails (its one job orphaned) where they may not."""
    table = part(runs, "side_by_side")["table"]
    for rule in NAME_RULES:
        for fault in ("none", "one_attempt_lost"):
            cell = table[f"airflow/{rule}/{fault}"]
            assert (cell["billed"], cell["state"], cell["tries"]) == (1, "success", 1), (rule, fault, cell)
        for fault in ("every_attempt_lost", "worker_killed"):
            reused, refused = table[f"airflow/reusable/{fault}"], table[f"airflow/unique/{fault}"]
            assert (reused["billed"], reused["state"]) == (2, "success"), (fault, reused)
            assert (refused["billed"], refused["state"], refused["tries"]) == (1, "failed", 4), (fault, refused)
