"""The HTTP provider's real-Airflow scenarios, in ONE ``dag.test()`` process (see scenario_process.py).

Started by ``test_http_provider_runs.py`` with a DAGs folder holding only ``dags/http_provider_dags.py``
and two provider servers in their own processes: ``IJH_ECHO_*`` echoes the token in every error
answer, ``IJH_PLAIN_*`` ignores idempotency tokens and offers no lookup.
Usage: ``python -m tests.airflow.http_provider_scenarios OUT.json``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from tests.airflow.scenario_process import Result, Scenarios, dag_store, provider_admin, run_dag, store_contents, utc

scenario = Scenarios()


def admin(server: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """A provider server's admin API; ``server`` is ECHO or PLAIN."""
    return provider_admin(os.environ[f"IJH_{server}_URL"], os.environ[f"IJH_{server}_TOKEN"], method, path, body)


def paid_run(bag: Any, dag_id: str, server: str, config: dict[str, Any]) -> Result:
    admin(server, "POST", "/_admin/config", config)
    run = run_dag(bag, dag_id, logical_date=utc(2026, 8, 3, 6))
    return {"run": run, "store": store_contents(dag_store(dag_id)), "provider": admin(server, "GET", "/_admin/stats")}


@scenario
def secret_worker(bag: Any) -> Result:
    """Try 1: submit answered 503 (unknown, retried); try 2: resubmitted, two status errors, job failed."""
    return paid_run(bag, "ijh_secret_worker", "ECHO", {"fault": "5xx", "fault_times": 1, "status_errors": [503, 500]})


@scenario
def secret_deferred(bag: Any) -> Result:
    """The trigger meets a 401 (error event, retried), then a 503 (polled again), then the failed job."""
    return paid_run(bag, "ijh_secret_deferred", "ECHO", {"fault": None, "status_errors": [401, 503]})


@scenario
def secret_wrong_token(bag: Any) -> Result:
    """The connection's token is wrong: 401 echoing it, the submission failed (no retry)."""
    return paid_run(bag, "ijh_secret_wrong_token", "ECHO", {"fault": None, "status_errors": []})


@scenario
def uri_lost_answer(bag: Any) -> Result:
    """``?tokens_honoured=false`` and a lost answer: capability (c) refuses the retry; one job."""
    return paid_run(bag, "ijh_uri_lost_answer", "PLAIN", {"fault": "drop_after_accept", "fault_times": 1})


@scenario
def uri_bad_values(bag: Any) -> Result:
    return paid_run(bag, "ijh_uri_bad_values", "PLAIN", {"fault": None})


def metadata_rows() -> dict[str, Any]:
    """The XComs and the trigger-related columns Airflow kept, as text (for the token search)."""
    from airflow.utils.session import create_session
    from sqlalchemy import text

    out: dict[str, Any] = {}
    with create_session() as session:
        for table, columns in (
            ("xcom", "dag_id, task_id, key, value"),
            ("task_instance", "dag_id, task_id, next_kwargs"),
        ):
            rows = session.execute(text(f"SELECT {columns} FROM {table} WHERE dag_id LIKE 'ijh_%'")).all()
            out[table] = [[str(value) for value in row] for row in rows]
    return out


if __name__ == "__main__":
    scenario.main(sys.argv[1:], finish=lambda: {"metadata": metadata_rows()})
