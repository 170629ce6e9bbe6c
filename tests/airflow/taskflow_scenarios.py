"""The TaskFlow decorators' and both example DAGs' real-Airflow scenarios, in ONE ``dag.test()`` process.

Started by ``test_taskflow_runs.py`` with a DAGs folder holding ``dags/taskflow_dags.py`` and the two
example DAGs, and one provider server in its own process (``IJ_PROVIDER_*``) whose behaviour each
scenario sets. Usage: ``python -m tests.airflow.taskflow_scenarios OUT.json``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

from tests.airflow.scenario_process import (
    Result,
    Scenarios,
    dag_store,
    provider,
    run_dag,
    secrets_lookups,
    store_contents,
    utc,
)

scenario = Scenarios()

#: The server as most scenarios want it: tokens honoured, lookup offered, no fault.
NORMAL: dict[str, Any] = {"honour_tokens": True, "lookup": True, "fault": None, "fault_times": 1}
#: A server that ignores idempotency tokens (a second submission would be a second job) and loses
#: the answer to the next submission after creating its job.
LOST_ANSWER_NO_DEDUP: dict[str, Any] = {"honour_tokens": False, "lookup": True, "fault": "drop_after_accept"}


def xcoms(dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    """Every XCom the run's tasks pushed, by task id (mapped: ``task_id[i]``) and key.

    Airflow's own ``_link_<name>`` rows (where it keeps each task's extra-link URL) are left out:
    the comparisons are about what the operators push.
    """
    from airflow.utils.session import create_session
    from sqlalchemy import text

    out: dict[str, dict[str, Any]] = {}
    with create_session() as session:
        rows = session.execute(
            text("SELECT task_id, map_index, key, value FROM xcom WHERE dag_id = :dag AND run_id = :run"),
            {"dag": dag_id, "run": run_id},
        ).all()
    for task_id, map_index, key, value in rows:
        if key.startswith("_link_"):
            continue
        name = task_id if map_index < 0 else f"{task_id}[{map_index}]"
        out.setdefault(name, {})[key] = json.loads(value) if isinstance(value, str) else value
    return out


def paid_run(bag: Any, dag_id: str, server: dict[str, Any] | None = None, **kwargs: Any) -> Result:
    provider("POST", "/_admin/config", {**NORMAL, **(server or {})})
    before = len(secrets_lookups())
    try:
        run = run_dag(bag, dag_id, logical_date=utc(2026, 8, 3, 6), **kwargs)
    finally:
        provider("POST", "/_admin/config", NORMAL)
    return {
        "run": run,
        "xcoms": xcoms(dag_id, run["run_id"]),
        "lookups": secrets_lookups()[before:],
        "store": store_contents(dag_store(dag_id)),
        "provider": provider("GET", "/_admin/stats"),
    }


# -- @task.paid_generation ------------------------------------------------------------------------
@scenario
def paid_xcoms(bag: Any) -> Result:
    """The decorated paid step (worker polling) and the classic operator, each on its own episode."""
    return {"taskflow": paid_run(bag, "ijt_paid_xcoms"), "classic": paid_run(bag, "ijt_paid_xcoms_classic")}


@scenario
def paid_deferred(bag: Any) -> Result:
    return paid_run(bag, "ijt_paid_deferred")


@scenario
def paid_lost_answer(bag: Any) -> Result:
    """Try 1's answer is lost; the server ignores tokens, so paying again would make a second job."""
    return paid_run(bag, "ijt_paid_lost_answer", LOST_ANSWER_NO_DEDUP)


@scenario
def paid_request_changed(bag: Any) -> Result:
    """Try 1 pays and loses the answer; try 2's function builds another request."""
    return paid_run(bag, "ijt_paid_request_changed", {"fault": "drop_after_accept"})


@scenario
def paid_custom_hook(bag: Any) -> Result:
    """provider_hook= (a client of its own on an http connection), deferred; try 1's answer is lost."""
    return paid_run(bag, "ijt_paid_custom_hook", LOST_ANSWER_NO_DEDUP)


@scenario
def paid_two_requests(bag: Any) -> Result:
    return paid_run(bag, "ijt_paid_two_requests")


@scenario
def paid_refused(bag: Any) -> Result:
    from airflow_idempotent_jobs import open_store

    with open_store(dag_store("ijt_paid_refused")) as store:
        store.allocate("2026-W32", "refused")  # 2026-W32-0: not_a_dict and nan find their episode
    return paid_run(bag, "ijt_paid_refused")


# -- @task.episode --------------------------------------------------------------------------------
@scenario
def episode_step(bag: Any) -> Result:
    return paid_run(bag, "ijt_episode_step")


@scenario
def episode_refused(bag: Any) -> Result:
    return paid_run(bag, "ijt_episode_refused")


@scenario
def secret_store(bag: Any) -> Result:
    """Both decorators with a store URL holding a password: their rendered fields (Airflow's RTIF rows)."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.utils.session import create_session
    from sqlalchemy import select

    run = run_dag(bag, "ijt_secret_store", logical_date=utc(2026, 8, 3, 6))
    with create_session() as session:
        rows = session.scalars(
            select(RenderedTaskInstanceFields).where(
                RenderedTaskInstanceFields.dag_id == "ijt_secret_store",
                RenderedTaskInstanceFields.run_id == run["run_id"],
            )
        ).all()
        rendered = {row.task_id: dict(row.rendered_fields) for row in rows}
    return {"run": run, "rendered": rendered}


# -- the example DAGs, as shipped, with a lost answer -----------------------------------------------
def example_run(bag: Any, dag_id: str, logical_date: Any, week_id: str) -> Result:
    """The example as shipped but for its retry delay (2 minutes, which ``dag.test()`` waits out)."""
    dag = bag.get_dag(dag_id)
    assert dag is not None, f"{dag_id} not in the bag: {bag.import_errors}"
    for task in dag.tasks:
        task.retry_delay = dt.timedelta(0)
    provider("POST", "/_admin/config", {**NORMAL, **LOST_ANSWER_NO_DEDUP})
    try:
        run = run_dag(bag, dag_id, logical_date=logical_date)
    finally:
        provider("POST", "/_admin/config", NORMAL)
    default_store = Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs"
    return {
        "run": run,
        "xcoms": xcoms(dag_id, run["run_id"]),
        "store": [e for e in store_contents(default_store) if e["week_id"] == week_id],
        "provider": provider("GET", "/_admin/stats"),
    }


@scenario
def example_taskflow_as_shipped(bag: Any) -> Result:
    """The TaskFlow example exactly as shipped (first: the scenarios below change its retry delay)."""
    provider("POST", "/_admin/config", NORMAL)
    run = run_dag(bag, "weekly_media_pipeline_taskflow", logical_date=utc(2026, 9, 21, 4))  # 2026-W39
    default_store = Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs"
    return {
        "run": run,
        "xcoms": xcoms("weekly_media_pipeline_taskflow", run["run_id"]),
        "store": [e for e in store_contents(default_store) if e["week_id"] == "2026-W39"],
        "provider": provider("GET", "/_admin/stats"),
    }


@scenario
def example_classic_lost_answer(bag: Any) -> Result:
    return example_run(bag, "weekly_media_pipeline", utc(2026, 9, 7, 4), "2026-W37")  # Monday 06:00 Berlin


@scenario
def example_taskflow_lost_answer(bag: Any) -> Result:
    return example_run(bag, "weekly_media_pipeline_taskflow", utc(2026, 9, 14, 4), "2026-W38")


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
