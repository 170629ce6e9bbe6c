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
