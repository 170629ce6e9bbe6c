"""Run every real-Airflow scenario in ONE process and write what happened as JSON.

``dag.test()`` pays ~20 s of Airflow start-up per process, so the tests start this script once
(see ``conftest.py``; the machinery is ``scenario_process.py``) and assert on its output. Usage:
``python -m tests.airflow.scenarios OUT.json`` with the environment of the ``airflow_home`` fixture.
Each scenario records the real outcome: task-instance states and try numbers from the metadata
database, what the tasks observed (episode ids, XComs), and what the episode store holds afterwards.
"""

from __future__ import annotations

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


# -- allocation ---------------------------------------------------------------------------------
@scenario
def weekly(bag: Any) -> Result:
    """Retry after allocation, a cleared (re-run) run, a second run in the week, the next week."""
    default_store = Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs"
    first = utc(2026, 8, 3, 6)
    return {
        "retried": run_dag(bag, "ij_weekly", logical_date=first, conf={"fail_on_try": 1}),
        "cleared": run_dag(bag, "ij_weekly", logical_date=first),
        "same_week": run_dag(bag, "ij_weekly", logical_date=utc(2026, 8, 5, 6)),
        "next_week": run_dag(bag, "ij_weekly", logical_date=utc(2026, 8, 10, 6)),
        "store": store_contents(default_store),
    }


@scenario
def iso_year(bag: Any) -> Result:
    runs = [run_dag(bag, "ij_iso_year", logical_date=utc(*day)) for day in ((2026, 12, 28), (2027, 1, 1), (2027, 1, 4))]
    return {"runs": runs, "store": store_contents(dag_store("ij_iso_year"))}


@scenario
def berlin(bag: Any) -> Result:
    run = run_dag(bag, "ij_berlin", logical_date=utc(2026, 8, 2, 22, 30))
    return {"run": run, "store": store_contents(dag_store("ij_berlin"))}


@scenario
def manual(bag: Any) -> Result:
    run = run_dag(bag, "ij_manual", logical_date=None, run_after=utc(2026, 8, 12, 9))
    return {"run": run, "store": store_contents(dag_store("ij_manual"))}


@scenario
def week_sources(bag: Any) -> Result:
    # Logical date Monday 2026-08-10 (W33); its weekly interval ended Sunday 2026-08-09 (W32);
    # the run was made on 2026-08-20 (W34).
    run = run_dag(bag, "ij_week_sources", logical_date=utc(2026, 8, 10, 12), run_after=utc(2026, 8, 20, 12))
    return {"run": run, "store": store_contents(dag_store("ij_week_sources"))}


@scenario
def mapped(bag: Any) -> Result:
    run = run_dag(bag, "ij_mapped", logical_date=utc(2026, 8, 3, 6), conf={"fail_on_try": 1})
    return {"run": run, "store": store_contents(dag_store("ij_mapped"))}


@scenario
def pg_store(bag: Any) -> Result:
    """AllocateEpisodeOperator(store_conn_id=<a postgres Connection>): the PostgreSQL store."""
    url = os.environ.get("IJ_PG_URL")
    if not url:
        return {"skipped": "no PostgreSQL server for this session"}
    run = run_dag(bag, "ij_pg_store", logical_date=utc(2026, 8, 3, 6), conf={"fail_on_try": 1})
    return {"run": run, "store": store_contents(url)}


# -- paid generation against the provider server ------------------------------------------------
def paid_run(bag: Any, dag_id: str, **kwargs: Any) -> Result:
    before = len(secrets_lookups())
    run = run_dag(bag, dag_id, **kwargs)
    return {
        "run": run,
        "lookups": secrets_lookups()[before:],
        "store": store_contents(dag_store(dag_id)),
        "provider": provider("GET", "/_admin/stats"),
    }


@scenario
def paid_bad_ids(bag: Any) -> Result:
    from airflow_idempotent_jobs import open_store

    # 2026-W32-0 exists, but its submission record says `accepted` without a remote reference.
    with open_store(dag_store("ij_paid_bad_ids")) as store:
        eid = store.allocate("2026-W32", "corrupt-record").episode_id
    state = dag_store("ij_paid_bad_ids") / "episodes" / "2026-W32" / eid / "state.json"
    record = json.loads(state.read_text(encoding="utf-8"))
    record["submission"].update(state="accepted", token="t")
    state.write_text(json.dumps(record), encoding="utf-8")
    return paid_run(bag, "ij_paid_bad_ids", logical_date=utc(2026, 8, 3, 6))


@scenario
def paid_worker(bag: Any) -> Result:
    return paid_run(bag, "ij_paid_worker", logical_date=utc(2026, 8, 3, 6), conf={"fail_on_try": 1})


@scenario
def paid_deferred(bag: Any) -> Result:
    return paid_run(bag, "ij_paid_deferred", logical_date=utc(2026, 8, 3, 6), conf={"fail_on_try": 1})


@scenario
def paid_lost_answer(bag: Any) -> Result:
    provider("POST", "/_admin/config", {"honour_tokens": False, "lookup": False, "fault": "drop_after_accept"})
    try:
        return paid_run(bag, "ij_paid_lost_answer", logical_date=utc(2026, 8, 3, 6))
    finally:
        provider("POST", "/_admin/config", {"honour_tokens": True, "lookup": True, "fault": None, "fault_times": 1})


@scenario
def paid_bad_config(bag: Any) -> Result:
    return paid_run(bag, "ij_paid_bad_config", logical_date=utc(2026, 8, 3, 6))


@scenario
def paid_two_requests(bag: Any) -> Result:
    """A mapped paid step over two requests on one episode (ij_paid_two_requests)."""
    return paid_run(bag, "ij_paid_two_requests", logical_date=utc(2026, 8, 3, 6))


@scenario
def paid_request_changed(bag: Any) -> Result:
    """Try 1 pays and crashes; try 2 renders another request (ij_paid_request_changed)."""
    return paid_run(bag, "ij_paid_request_changed", logical_date=utc(2026, 8, 3, 6), conf={"fail_on_try": 1})


@scenario
def paid_odd_answer(bag: Any) -> Result:
    """A provider reporting a cost of NaN and a 100 KB result, polled by the worker and by the trigger."""
    from airflow_idempotent_jobs.testing.server import ServerConfig, server_connection
    from tests.paid.raw_provider import TOKEN, RawProvider

    with RawProvider() as api:
        api.cost = '"NaN"'
        api.result = json.dumps({"frames": ["x" * 1000] * 100})
        connection = server_connection(api.url, TOKEN, ServerConfig(lookup=False))
        os.environ["AIRFLOW_CONN_IJ_RAW_PROVIDER"] = json.dumps(connection)
        try:
            return {
                "worker": paid_run(bag, "ij_paid_odd_answer", logical_date=utc(2026, 8, 3, 6)),
                "deferred": paid_run(bag, "ij_paid_odd_answer_deferred", logical_date=utc(2026, 8, 3, 6)),
                "raw_submissions": api.submissions,
            }
        finally:
            del os.environ["AIRFLOW_CONN_IJ_RAW_PROVIDER"]


@scenario
def paid_bad_amounts(bag: Any) -> Result:
    """Costs and budgets that are no amount, on an episode that exists (ij_paid_bad_amounts)."""
    from airflow_idempotent_jobs import open_store

    with open_store(dag_store("ij_paid_bad_amounts")) as store:
        store.allocate("2026-W32", "bad-amounts")
    before = provider("GET", "/_admin/stats")["submissions"]
    return {**paid_run(bag, "ij_paid_bad_amounts", logical_date=utc(2026, 8, 3, 6)), "submissions_before": before}


def custom_connection() -> str:
    """A plain ``http`` Connection to the session's provider server, read by the custom hook."""
    url, token = os.environ["IJ_PROVIDER_URL"], os.environ["IJ_PROVIDER_TOKEN"]
    extra = {"tokens": False, "lookup": True}
    return json.dumps({"conn_type": "http", "host": url, "password": token, "extra": extra})


@scenario
def custom_provider(bag: Any) -> Result:
    """provider_hook= on an ``http`` connection; the first submit answer is lost (ij_custom_worker/_deferred)."""
    os.environ["AIRFLOW_CONN_IJ_JOBS"] = custom_connection()
    results: Result = {}
    try:
        for mode in ("worker", "deferred"):
            provider("POST", "/_admin/config", {"honour_tokens": False, "fault": "drop_after_accept", "fault_times": 1})
            try:
                results[mode] = paid_run(bag, f"ij_custom_{mode}", logical_date=utc(2026, 8, 3, 6))
            finally:
                provider("POST", "/_admin/config", {"honour_tokens": True, "fault": None, "fault_times": 1})
    finally:
        del os.environ["AIRFLOW_CONN_IJ_JOBS"]
    return results


@scenario
def custom_bad_hooks(bag: Any) -> Result:
    """provider_hook values that cannot work, an untyped connection, an unknown episode (ij_custom_bad_hooks)."""
    names = [f"AIRFLOW_CONN_{conn_id.upper()}" for conn_id in ("ij_jobs_a", "ij_jobs_b", "ij_jobs_c")]
    names += ["AIRFLOW_CONN_IJ_JOBS_BROKEN", "AIRFLOW_CONN_IJ_JOBS_UNTYPED"]
    os.environ.update(dict.fromkeys(names, custom_connection()))
    try:
        return paid_run(bag, "ij_custom_bad_hooks", logical_date=utc(2026, 8, 3, 6))
    finally:
        for name in names:
            del os.environ[name]


@scenario
def example_dag(bag: Any) -> Result:
    """The example DAG as shipped (deferrable paid step), on the default store."""
    before = len(secrets_lookups())
    run = run_dag(bag, "weekly_media_pipeline", logical_date=utc(2026, 9, 7, 4))
    default_store = Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs"
    return {
        "run": run,
        "lookups": secrets_lookups()[before:],
        "store": [e for e in store_contents(default_store) if e["week_id"] == "2026-W37"],
        "provider": provider("GET", "/_admin/stats"),
    }


@scenario
def tutorial_dag(bag: Any) -> Result:
    """The tutorial's DAG as shipped: two runs in one week, then the first run again (a clear)."""
    monday, wednesday = utc(2026, 9, 14, 6), utc(2026, 9, 16, 6)
    first = run_dag(bag, "first_paid_dag", logical_date=monday)
    second = run_dag(bag, "first_paid_dag", logical_date=wednesday)
    cleared = run_dag(bag, "first_paid_dag", logical_date=monday)
    default_store = Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs"
    return {
        "runs": [first, second, cleared],
        "store": [e for e in store_contents(default_store) if e["week_id"] == "2026-W38"],
        "provider": provider("GET", "/_admin/stats"),
    }


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
