"""AllocateEpisodeOperator under real Airflow runs (dag.test() on a migrated SQLite metadata DB).

All runs happen once, in one process (the ``scenario_results`` fixture); each test checks one
promise against what the tasks observed, the task instances Airflow recorded, and the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.airflow.conftest import scenario
from tests.airflow.scenario_process import observed, ti

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(400)]


def test_retry_after_allocation_gets_the_same_episode(scenario_results: dict[str, Any]) -> None:
    run = scenario(scenario_results, "weekly")["retried"]
    tries = observed(run, "allocated", "allocate")
    assert [(t["try_number"], t["episode_id"], t["reused"]) for t in tries] == [
        (1, "2026-W32-0", False),
        (2, "2026-W32-0", True),
    ]
    assert ti(run, "allocate") == {"task_id": "allocate", "map_index": -1, "state": "success", "try_number": 2}
    (xcoms,) = observed(run, "xcoms")
    assert xcoms["xcoms"] == {
        "return_value": "2026-W32-0",
        "week_id": "2026-W32",
        "sequence": 0,
        "allocation_key": f"airflow:ij_weekly:allocate:{run['run_id']}",
        "reused": True,
    }


def test_store_agrees_with_xcoms_and_holds_one_episode_per_run(scenario_results: dict[str, Any]) -> None:
    weekly = scenario(scenario_results, "weekly")
    # ij_weekly names no store: the default file store under $AIRFLOW_HOME/idempotent_jobs.
    assert [(e["episode_id"], e["allocation_key"]) for e in weekly["store"]] == [
        ("2026-W32-0", f"airflow:ij_weekly:allocate:{weekly['retried']['run_id']}"),
        ("2026-W32-1", f"airflow:ij_weekly:allocate:{weekly['same_week']['run_id']}"),
        ("2026-W33-0", f"airflow:ij_weekly:allocate:{weekly['next_week']['run_id']}"),
    ]


def test_cleared_run_gets_the_same_episode(scenario_results: dict[str, Any]) -> None:
    weekly = scenario(scenario_results, "weekly")
    cleared = weekly["cleared"]
    # dag.test() on the same logical date clears the run's task instances and runs it again
    # under the same run_id: the key is the same, so is the episode.
    assert cleared["run_id"] == weekly["retried"]["run_id"]
    assert [(t["episode_id"], t["reused"]) for t in observed(cleared, "allocated")] == [("2026-W32-0", True)]
    (xcoms,) = observed(cleared, "xcoms")
    assert xcoms["xcoms"]["return_value"] == "2026-W32-0"


def test_two_runs_in_one_week_then_the_next_week(scenario_results: dict[str, Any]) -> None:
    weekly = scenario(scenario_results, "weekly")
    got = [observed(weekly[name], "xcoms")[0]["xcoms"] for name in ("retried", "same_week", "next_week")]
    assert [(x["return_value"], x["week_id"], x["sequence"], x["reused"]) for x in got] == [
        ("2026-W32-0", "2026-W32", 0, True),
        ("2026-W32-1", "2026-W32", 1, False),
        ("2026-W33-0", "2026-W33", 0, False),
    ]


def test_iso_week_year_boundary(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "iso_year")
    assert [r["logical_date"][:10] for r in result["runs"]] == ["2026-12-28", "2027-01-01", "2027-01-04"]
    assert [e["episode_id"] for e in result["store"]] == ["2026-W53-0", "2026-W53-1", "2027-W01-0"]
    assert [e["allocation_key"] for e in result["store"]] == [
        f"airflow:ij_iso_year:allocate:{run['run_id']}" for run in result["runs"]
    ]


def test_dag_time_zone_decides_the_week_unless_overridden(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "berlin")
    assert result["run"]["logical_date"] == "2026-08-02T22:30:00+00:00"  # Sunday in UTC, Monday in Berlin
    by_task = {e["allocation_key"].split(":")[2]: e["episode_id"] for e in result["store"]}
    assert by_task == {"allocate": "2026-W32-0", "allocate_utc": "2026-W31-0"}


def test_manual_run_without_logical_date_takes_the_week_from_run_after(scenario_results: dict[str, Any]) -> None:
    run = scenario(scenario_results, "manual")["run"]
    (seen,) = observed(run, "run")
    assert seen["logical_date"] is None
    assert seen["run_after"].startswith("2026-08-12 09:00")  # a Wednesday in 2026-W33
    (xcoms,) = observed(run, "xcoms", "report_manual")
    assert (xcoms["xcoms"]["return_value"], xcoms["xcoms"]["week_id"]) == ("2026-W33-0", "2026-W33")
    assert xcoms["xcoms"]["allocation_key"] == f"airflow:ij_manual:allocate:{run['run_id']}"


def test_templated_week_and_key_overrides(scenario_results: dict[str, Any]) -> None:
    run = scenario(scenario_results, "manual")["run"]
    (xcoms,) = observed(run, "xcoms", "report_templated")
    assert xcoms["xcoms"] == {
        "return_value": "2026-W40-0",
        "week_id": "2026-W40",
        "sequence": 0,
        "allocation_key": "batch-7",
        "reused": False,
    }


def test_week_source_the_run_lacks_fails_without_retry(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "manual")
    # week_source="logical_date" on a run without one: AirflowFailException, so retries=2 is not used.
    assert ti(result["run"], "strict") == {"task_id": "strict", "map_index": -1, "state": "failed", "try_number": 1}
    assert not [e for e in result["store"] if ":strict:" in e["allocation_key"]]


def test_mapped_allocation_gives_one_stable_episode_per_item(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "mapped")
    run = result["run"]
    per_try = {(o["map_index"], o["try_number"]): (o["episode_id"], o["reused"]) for o in observed(run, "allocated")}
    assert set(per_try) == {(i, t) for i in range(3) for t in (1, 2)}
    # Mapped instances run in any order: three distinct episodes, each one kept by its retry.
    first = {i: per_try[(i, 1)] for i in range(3)}
    assert sorted(first.values()) == [("2026-W32-0", False), ("2026-W32-1", False), ("2026-W32-2", False)]
    assert {i: per_try[(i, 2)] for i in range(3)} == {i: (eid, True) for i, (eid, _) in first.items()}
    assert [ti(run, "allocate", i)["try_number"] for i in range(3)] == [2, 2, 2]
    (xcoms,) = observed(run, "mapped_xcoms")
    assert xcoms["return_values"] == [first[i][0] for i in range(3)]  # XCom order is the map order
    items = ["cover-art", "voice-over", "trailer"]
    assert sorted((e["episode_id"], e["allocation_key"], e["fingerprint"]) for e in result["store"]) == sorted(
        (first[i][0], f"airflow:ij_mapped:allocate:{run['run_id']}:{i}", items[i]) for i in range(3)
    )


def test_logs_say_allocated_or_reused_with_the_key(scenario_results: dict[str, Any]) -> None:
    log = Path(scenario_results["_log"]).read_text(errors="replace")
    key = f"airflow:ij_weekly:allocate:{scenario_results['weekly']['retried']['run_id']}"
    assert f"Episode 2026-W32-0 allocated for key '{key}'" in log
    assert f"Episode 2026-W32-0 reused for key '{key}'" in log


def test_allocation_conflict_fails_without_retry(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "manual")
    assert ti(result["run"], "conflict") == {"task_id": "conflict", "map_index": -1, "state": "failed", "try_number": 1}
    assert [e["episode_id"] for e in result["store"] if e["allocation_key"] == "batch-7"] == ["2026-W40-0"]
    assert not [e for e in result["store"] if e["week_id"] == "2026-W41"]


def test_unavailable_store_is_left_to_airflow_retries(scenario_results: dict[str, Any]) -> None:
    run = scenario(scenario_results, "manual")["run"]
    # StoreUnavailable is not final: retries=2 gives three tries before the task fails.
    assert ti(run, "unavailable") == {"task_id": "unavailable", "map_index": -1, "state": "failed", "try_number": 3}


def test_store_behind_a_postgres_connection(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "pg_store")
    if "skipped" in result:
        pytest.skip(result["skipped"])
    run = result["run"]
    assert [(t["try_number"], t["episode_id"], t["reused"]) for t in observed(run, "allocated")] == [
        (1, "2026-W32-0", False),
        (2, "2026-W32-0", True),
    ]
    assert [(e["episode_id"], e["allocation_key"]) for e in result["store"]] == [
        ("2026-W32-0", f"airflow:ij_pg_store:allocate:{run['run_id']}")
    ]


def test_week_source_picks_the_date_the_week_comes_from(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "week_sources")
    by_task = {e["allocation_key"].split(":")[2]: e["week_id"] for e in result["store"]}
    assert by_task == {
        "by_default": "2026-W33",  # the logical date
        "by_logical_date": "2026-W33",
        "by_data_interval_end": "2026-W32",
        "by_run_after": "2026-W34",
    }
