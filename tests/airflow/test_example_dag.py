"""The example DAG that DAG authors copy runs end to end as shipped (deferrable, default store)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.airflow.conftest import scenario
from tests.airflow.scenario_process import ti

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(400)]


def test_example_dag_allocates_pays_once_and_publishes(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "example_dag")
    run = result["run"]
    assert run["state"] == "success"
    assert [ti(run, t)["state"] for t in ("allocate", "generate", "publish")] == ["success"] * 3
    (episode,) = result["store"]  # 2026-09-07 06:00 Berlin is in 2026-W37
    assert episode["episode_id"] == "2026-W37-0"
    assert episode["allocation_key"] == f"airflow:weekly_media_pipeline:allocate:{run['run_id']}"
    sub = episode["submission"]
    assert (sub["state"], sub["cost"]) == ("succeeded", 2.5)
    job = result["provider"]["jobs"][sub["remote_ref"]]
    assert job["request"] == {"prompt": "the week in review (2026-W37-0)", "units": 2}
    assert result["provider"]["submissions_per_token"][sub["token"]] == 1


def test_the_tutorials_dag_gives_each_run_its_episode_and_pays_once(scenario_results: dict[str, Any]) -> None:
    """docs/tutorial/first-dag.md shows example_dags/first_paid_dag.py and says what these runs show."""
    result = scenario(scenario_results, "tutorial_dag")
    first, second, cleared = result["runs"]
    assert [r["state"] for r in (first, second, cleared)] == ["success"] * 3
    assert cleared["run_id"] == first["run_id"]
    episodes = {e["episode_id"]: e for e in result["store"]}
    assert sorted(episodes) == ["2026-W38-0", "2026-W38-1"]
    assert episodes["2026-W38-0"]["allocation_key"] == f"airflow:first_paid_dag:allocate:{first['run_id']}"
    assert episodes["2026-W38-1"]["allocation_key"] == f"airflow:first_paid_dag:allocate:{second['run_id']}"
    for episode in episodes.values():
        assert episode["submission"]["state"] == "succeeded"
        assert result["provider"]["submissions_per_token"][episode["submission"]["token"]] == 1
        assert episode["effects"]["publish"]["state"] == "done"
        assert episode["effects"]["publish"]["attempts"] == 1
