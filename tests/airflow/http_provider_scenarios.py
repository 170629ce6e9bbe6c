"""The HTTP provider's real-Airflow scenarios, in ONE ``dag.test()`` process (see scenarios.py).

Started by ``test_http_provider_runs.py`` with a DAGs folder holding only ``dags/http_provider_dags.py``
and two provider servers in their own processes: ``IJH_ECHO_*`` echoes the token in every error
answer, ``IJH_PLAIN_*`` ignores idempotency tokens and offers no lookup.
Usage: ``python -m tests.airflow.http_provider_scenarios OUT.json``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.airflow.scenarios import Result, dag_store, run_dag, store_contents, utc

SCENARIOS: dict[str, Callable[[Any], Result]] = {}


def scenario(fn: Callable[[Any], Result]) -> Callable[[Any], Result]:
    SCENARIOS[fn.__name__] = fn
    return fn


def admin(server: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """A provider server's admin API; ``server`` is ECHO or PLAIN."""
    import httpx

    headers = {"Authorization": f"Bearer {os.environ[f'IJH_{server}_TOKEN']}"}
    response = httpx.request(method, os.environ[f"IJH_{server}_URL"] + path, json=body, headers=headers, timeout=10)
    response.raise_for_status()
    return response.json()


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


def main(out: str, only: list[str]) -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    results: Result = {"import_errors": {str(k): str(v) for k, v in bag.import_errors.items()}}
    for name, fn in SCENARIOS.items():
        if only and name not in only:
            continue
        try:
            results[name] = fn(bag)
        except Exception:
            results[name] = {"error": traceback.format_exc()}
    results["metadata"] = metadata_rows()
    Path(out).write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
