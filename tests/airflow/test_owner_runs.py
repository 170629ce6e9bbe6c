"""Under real Airflow: the allocating task instance is recorded, and the page uses it.

``ijo_victim`` allocates (a plain task, a mapped one, one retried after a crash); ``ijo_mimic``
names the victim in its keys. The page's rule (`plugins.page_auth.Access` over `VisibleStore`, the read
model of `operations`) is applied to the store the runs left behind, for a viewer of each DAG.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.operations import week_view
from airflow_idempotent_jobs.plugins.page_auth import Access, VisibleStore
from airflow_idempotent_jobs.stores import open_store
from tests.airflow.conftest import AirflowHome, scenario
from tests.airflow.scenario_process import observed, scenario_home, ti

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(400)]

HERE = Path(__file__).resolve().parent
WEEK = "2026-W32"
NOW = dt.datetime(2026, 8, 7, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def owner_results(airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = scenario_home(airflow_home.home, tmp_path_factory, "owner-home", [HERE / "dags_owner"])
    results = where.run("tests.airflow.owner_scenarios", where.env(IJO_STORE=str(where.work / "store")), timeout=360)
    results["store_path"] = str(where.work / "store")
    return results


def _owner(dag_id: str, task_id: str, run_id: str, map_index: int | None) -> dict[str, Any]:
    return {"dag_id": dag_id, "task_id": task_id, "run_id": run_id, "map_index": map_index}


def test_the_allocating_task_instance_is_recorded_in_the_episode(owner_results: dict[str, Any]) -> None:
    result = scenario(owner_results, "owners")
    run_id = result["victim"]["run_id"]
    by_key = {e["allocation_key"]: e for e in result["store"]}
    expected = {
        f"airflow:ijo_victim:allocate:{run_id}": _owner("ijo_victim", "allocate", run_id, None),
        f"airflow:ijo_victim:mapped:{run_id}:0": _owner("ijo_victim", "mapped", run_id, 0),
        f"airflow:ijo_victim:mapped:{run_id}:1": _owner("ijo_victim", "mapped", run_id, 1),
        f"airflow:ijo_victim:retried:{run_id}": _owner("ijo_victim", "retried", run_id, None),
        f"airflow:ijo_victim:allocate:{run_id}:7": _owner("ijo_mimic", "look_alike", run_id, None),
    }
    assert {key: by_key[key]["metadata"] for key in by_key} == {
        key: {"allocated_by": owner} for key, owner in expected.items()
    }
    # The retry found its episode; the owner is the one its first try recorded.
    assert ti(result["victim"], "retried")["try_number"] == 2
    assert [o["reused"] for o in observed(result["victim"], "allocated", "retried")] == [False, True]


def test_a_dag_that_reuses_another_dags_key_is_refused_on_its_first_try(owner_results: dict[str, Any]) -> None:
    result = scenario(owner_results, "owners")
    mimic, victim = result["mimic"], result["victim"]
    assert mimic["run_id"] == victim["run_id"], "the mimic's template must render the victim's very key"
    found = ti(mimic, "same_key")
    assert (found["state"], found["try_number"]) == ("failed", 1)
    (failed,) = observed(mimic, "failed", "same_key")
    assert failed["error"] == "AirflowFailException"
    assert "'ijo_victim'" in failed["message"] and "'ijo_mimic'" in failed["message"]
    assert "AllocationConflict" in failed["message"] or "allocation key" in failed["message"]
    held = next(e for e in result["store"] if e["allocation_key"] == f"airflow:ijo_victim:allocate:{victim['run_id']}")
    assert held["metadata"]["allocated_by"]["dag_id"] == "ijo_victim"


@pytest.mark.parametrize("viewer", ["ijo_victim", "ijo_mimic"])
def test_each_dags_page_shows_its_own_episodes_only(owner_results: dict[str, Any], viewer: str) -> None:
    result = scenario(owner_results, "owners")
    access = Access(readable_dags=frozenset({viewer}), known_dags=frozenset(), store_wide=False)
    with open_store(owner_results["store_path"]) as store:
        view = week_view(VisibleStore(store, access), WEEK, budget=None, now=NOW)
    mine = sorted(e["episode_id"] for e in result["store"] if e["metadata"]["allocated_by"]["dag_id"] == viewer)
    assert sorted(row["episode_id"] for row in view["episodes"]) == mine and mine
    assert {(row["owner"]["dag_id"], row["owner_source"]) for row in view["episodes"]} == {(viewer, "recorded")}
    assert sum(view["counts"]["status"].values()) == len(mine)
