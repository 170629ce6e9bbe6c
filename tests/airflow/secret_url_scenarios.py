"""Hostile store URLs under real ``dag.test()`` runs, in ONE process.

Started by ``test_secret_url_runs.py`` with a DAGs folder holding only ``dags_secret_urls/``. Each
scenario returns what a user of Airflow could see of a run: the task instances, the message each
task failed with, the rendered template fields Airflow stored (RTIF rows) and every XCom.
"""

from __future__ import annotations

import sys
from typing import Any

from tests.airflow.fail_closed_scenarios import rendered_fields, settings
from tests.airflow.scenario_process import Result, Scenarios, run_dag, utc
from tests.hostile_store_urls import HOSTILE

scenario = Scenarios()
#: The URLs also tried as the deployment's ``[idempotent_jobs] store`` (one run each).
SETTING_CASES = ("question", "at", "every-mark", "percent-encoded", "ambiguous-host", "file-url-slash")


def xcoms(run: Result, dag_id: str) -> list[dict[str, Any]]:
    """Every XCom the run's tasks pushed, as stored."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(XComModel).where(XComModel.dag_id == dag_id, XComModel.run_id == run["run_id"])
        ).all()
        return [{"task_id": r.task_id, "map_index": r.map_index, "key": r.key, "value": r.value} for r in rows]


def seen(run: Result, dag_id: str) -> Result:
    return {"run": run, "rendered": rendered_fields(run, dag_id), "xcoms": xcoms(run, dag_id)}


@scenario
def hostile_store(bag: Any) -> Result:
    return seen(run_dag(bag, "ijs_hostile_store", logical_date=utc(2026, 8, 3, 6)), "ijs_hostile_store")


@scenario
def hostile_setting(bag: Any) -> Result:
    found: Result = {}
    for day, hostile in enumerate(h for h in HOSTILE if h.name in SETTING_CASES):
        with settings(store=hostile.at("127.0.0.1:1/ij")):
            run = run_dag(bag, "ijs_hostile_setting", logical_date=utc(2026, 8, 3 + day, 6))
        found[hostile.name] = seen(run, "ijs_hostile_setting")
    return found


@scenario
def hostile_conn(bag: Any) -> Result:
    return seen(run_dag(bag, "ijs_hostile_conn", logical_date=utc(2026, 8, 3, 6)), "ijs_hostile_conn")


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
