"""Bedrock's async invoke in real Airflow: ``dag.test()`` runs against the Bedrock Runtime double in its
own OS process, real boto3 (its default retries on) pointed at it through an ``aws`` connection.

One runner process (``bedrock_scenarios.py``). The paid tasks name only ``aws_default``: resolution
picks our hook. Deferrable and not, after one lost answer (boto3's next attempt gets the invocation
back), after every attempt's answer lost (the try fails unknown, the next resends the token), seven
lost across three episodes of one run, and a worker SIGKILLed while the answer was on its way:
exactly one billed invocation per episode (the double's own count per clientRequestToken), the
episode records it (succeeded, remote ref = that invocation, the output prefix) and its estimate is
the price of the video, computed here.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.conftest import AirflowHome
from tests.airflow.dags_bedrock.bedrock_dags import PRICES, SECONDS, video_request
from tests.airflow.scenario_process import REPO, observed, scenario_home, ti
from tests.server_process import server_process

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(900)]

HERE = Path(__file__).resolve().parent
MODES = ("worker", "deferred")
PRICE = PRICES[video_request()["modelId"]]["per_second"] * SECONDS


@pytest.fixture(scope="module")
def runs(airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    sources = [HERE / "dags_bedrock", REPO / "example_dags" / "weekly_video_bedrock.py"]
    where = scenario_home(airflow_home.home, tmp_path_factory, "bedrock", sources)
    with server_process("airflow_idempotent_jobs.testing.bedrock_api", "--polls-to-finish", "1") as api:
        extra = {"region_name": "us-east-1", "endpoint_url": api.url, "bedrock_prices": PRICES}
        conn = {"conn_type": "aws", "login": "AKIDAIRFLOWRUNS", "password": "airflow-runs-secret", "extra": extra}
        env = where.env(connections={"aws_default": conn}, IJB_API_URL=api.url)
        yield where.run("tests.airflow.bedrock_scenarios", env, timeout=600)


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
def test_every_attempt_lost_fails_the_try_and_the_next_resends_the_token(runs: dict[str, Any], mode: str) -> None:
    data = part(runs, "every_attempt_lost")[mode]
    run = data["run"]
    assert run["state"] == "success" and data["faults_left"] == 0, run
    (episode,) = paid_once(data)
    tries = observed(run, "failed", "pay")
    assert [t["error"] for t in tries] == ["ProviderOutcomeUnknown"], tries
    assert "3 attempts" in tries[0]["message"] or "no answer" in tries[0]["message"], tries
    assert ti(run, "pay")["try_number"] == 2
    assert any("resubmitting with the same token" in note for note in notes(episode)), notes(episode)


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
    assert any("resubmitting with the same token" in note for note in notes(episode)), notes(episode)


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
    assert "airflow-runs-secret" not in log
