"""The fail-closed scenarios of the Airflow layer, in ONE ``dag.test()`` process (see scenario_process.py).

Started by ``test_fail_closed_runs.py`` with ``AIRFLOW__CORE__EXECUTOR=CeleryExecutor`` and a DAGs
folder holding only ``dags_fail_closed/``. Settings of the ``[idempotent_jobs]`` section are set in
``os.environ`` around the runs that need them: ``dag.test()`` runs tasks in this process, and
Airflow's configuration reads environment variables on every lookup.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.airflow.scenario_process import Result, Scenarios, dag_store, run_dag, store_contents, utc

scenario = Scenarios()
LONG_DAG_ID = "ijg_long_" + "d" * 241  # as in dags_fail_closed/fail_closed_dags.py


@contextlib.contextmanager
def settings(**values: str) -> Iterator[None]:
    """``[idempotent_jobs]`` options as ``AIRFLOW__IDEMPOTENT_JOBS__<NAME>`` for the ``with`` body."""
    names = {f"AIRFLOW__IDEMPOTENT_JOBS__{k.upper()}": v for k, v in values.items()}
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def rendered_fields(run: Result, dag_id: str) -> dict[str, Any]:
    """What the UI shows as each task's rendered template fields: Airflow's own RTIF rows."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(RenderedTaskInstanceFields).where(
                RenderedTaskInstanceFields.dag_id == dag_id,
                RenderedTaskInstanceFields.run_id == run["run_id"],
            )
        ).all()
        return {f"{row.task_id}[{row.map_index}]": dict(row.rendered_fields) for row in rows}


# -- which store, under an executor that runs tasks on several hosts -------------------------------
@scenario
def default_store(bag: Any) -> Result:
    """No store anywhere under CeleryExecutor; then each deployment setting; then explicit ones."""
    home_store = Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs"
    refused = run_dag(bag, "ijg_default_store", logical_date=utc(2026, 8, 3, 6))
    refused_paid = run_dag(bag, "ijg_default_store_paid", logical_date=utc(2026, 8, 3, 6))
    home_store_after_refusal = home_store.exists()
    by_setting_path = str(dag_store("ijg_default_store") / "by-setting")
    with settings(store=by_setting_path):
        by_setting = run_dag(bag, "ijg_default_store", logical_date=utc(2026, 8, 4, 6))
    with settings(store_conn_id="ijg_file_store"):
        by_setting_conn = run_dag(bag, "ijg_default_store", logical_date=utc(2026, 8, 5, 6))
    with settings(store=by_setting_path, store_conn_id="ijg_file_store"):
        both_settings = run_dag(bag, "ijg_default_store", logical_date=utc(2026, 8, 6, 6))
    with settings(store="ftp://user:hunter2-setting@host/x"):
        bad_setting = run_dag(bag, "ijg_default_store", logical_date=utc(2026, 8, 7, 6))
    explicit = run_dag(bag, "ijg_explicit_store", logical_date=utc(2026, 8, 3, 6))
    return {
        "refused": refused,
        "refused_paid": refused_paid,
        "home_store_after_refusal": home_store_after_refusal,
        "by_setting": by_setting,
        "by_setting_store": store_contents(by_setting_path),
        "by_setting_conn": by_setting_conn,
        "conn_store": store_contents(os.environ["IJG_CONN_STORE"]),
        "both_settings": both_settings,
        "bad_setting": bad_setting,
        "explicit": explicit,
        "explicit_store": store_contents(dag_store("ijg_explicit_store")),
        "home_store_at_end": home_store.exists(),
    }


@scenario
def zones(bag: Any) -> Result:
    # Sundays 22:30 UTC: still Sunday in UTC and New York, Monday (the next ISO week) in Berlin.
    # 2026-08-02 is in 2026-W31, 2026-08-09 in 2026-W32.
    before = run_dag(bag, "ijg_zone_default", logical_date=utc(2026, 8, 2, 22, 30))
    with settings(timezone="Europe/Berlin"):
        default = run_dag(bag, "ijg_zone_default", logical_date=utc(2026, 8, 9, 22, 30))
        new_york = run_dag(bag, "ijg_zone_new_york", logical_date=utc(2026, 8, 9, 22, 30))
    with settings(timezone="Mars/Olympus_Mons"):
        bad = run_dag(bag, "ijg_zone_default", logical_date=utc(2026, 8, 12))
    return {
        "without_setting": before,
        "default": default,
        "new_york": new_york,
        "bad": bad,
        "store": store_contents(dag_store("ijg_zone_default")),
        "new_york_store": store_contents(dag_store("ijg_zone_new_york")),
    }


# -- templates that render "None", "", "null" ------------------------------------------------------
@scenario
def templates(bag: Any) -> Result:
    """Two runs in one week with no conf: every template renders None (or blank) both times."""
    first = run_dag(bag, "ijg_templates", logical_date=utc(2026, 8, 3, 6))
    second = run_dag(bag, "ijg_templates", logical_date=utc(2026, 8, 5, 6))
    return {"first": first, "second": second, "store": store_contents(dag_store("ijg_templates"))}


@scenario
def mapped_key(bag: Any) -> Result:
    run = run_dag(bag, "ijg_mapped_key", logical_date=utc(2026, 8, 3, 6))
    return {
        "run": run,
        "store": store_contents(dag_store("ijg_mapped_key")),
        "shared_store": store_contents(dag_store("ijg_mapped_key_shared")),
    }


# -- a store URL whose password comes from a Variable ----------------------------------------------
@scenario
def secret_store(bag: Any) -> Result:
    if not os.environ.get("IJG_PG_URL"):
        return {"skipped": "no PostgreSQL server for this session"}
    run = run_dag(bag, "ijg_secret_store", logical_date=utc(2026, 8, 3, 6))
    return {
        "run": run,
        "rendered": rendered_fields(run, "ijg_secret_store"),
        "store": store_contents(os.environ["IJG_PG_URL"] + "?namespace=ijg-secret"),
    }


# -- the check operator fed by a mapped allocation -------------------------------------------------
@scenario
def check_mapped(bag: Any) -> Result:
    run = run_dag(bag, "ijg_check_mapped", logical_date=utc(2026, 8, 3, 6))
    return {"run": run, "store": store_contents(dag_store("ijg_check_mapped"))}


# -- the longest ids Airflow allows ----------------------------------------------------------------
@scenario
def long_ids(bag: Any) -> Result:
    first = run_dag(bag, LONG_DAG_ID, logical_date=utc(2026, 8, 3, 6))
    again = run_dag(bag, LONG_DAG_ID, logical_date=utc(2026, 8, 3, 6))  # cleared: same run_id
    return {"first": first, "again": again, "store": store_contents(dag_store("ijg_long"))}


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
