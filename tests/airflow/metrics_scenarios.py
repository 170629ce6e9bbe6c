"""Scenarios for test_metrics_runs.py: real ``dag.test()`` runs with ``[metrics] statsd_on``.

Between scenarios the process sends a marker datagram (``ijm.marker.<name>``) to the test's StatsD
listener, so the test can tell which run sent what. Usage: ``python -m tests.airflow.metrics_scenarios
OUT.json [NAME ...]`` (or names in ``IJM_ONLY``) with ``IJM_STATSD_PORT`` and the provider
connections set; ``IJM_MARKER_PREFIX`` prefixes the markers' names.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

from tests.airflow.scenario_process import (
    Result,
    Scenarios,
    dag_store,
    provider,
    run_dag,
    store_contents,
    utc,
)

scenario = Scenarios()
MONDAY = utc(2026, 8, 3, 6)


def marker(name: str) -> None:
    """One datagram the test splits the stream at (sent after every metric of the runs before)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        line = f"ijm.marker.{os.environ.get('IJM_MARKER_PREFIX', '')}{name}:1|c"
        sock.sendto(line.encode(), ("127.0.0.1", int(os.environ["IJM_STATSD_PORT"])))


def measured(name: str, bag: Any, dag_id: str, **kwargs: Any) -> Result:
    marker(f"{name}.start")
    run = run_dag(bag, dag_id, **kwargs)
    marker(f"{name}.end")
    return {"run": run, "store": store_contents(dag_store(dag_id))}


@scenario
def worker(bag: Any) -> Result:
    """Allocation retried (new, reused), one paid success; then the same run again (reused only)."""
    return {
        "first": measured("worker", bag, "ijm_paid_worker", logical_date=MONDAY, conf={"fail_on_try": 1}),
        "again": measured("worker_again", bag, "ijm_paid_worker", logical_date=MONDAY),
    }


@scenario
def deferred(bag: Any) -> Result:
    return measured("deferred", bag, "ijm_paid_deferred", logical_date=MONDAY, conf={"fail_on_try": 1})


@scenario
def stuck(bag: Any) -> Result:
    provider("POST", "/_admin/config", {"honour_tokens": False, "lookup": False, "fault": "drop_after_accept"})
    try:
        return measured("stuck", bag, "ijm_paid_stuck", logical_date=MONDAY, conf={"fail_on_try": 1})
    finally:
        provider("POST", "/_admin/config", {"honour_tokens": True, "lookup": True, "fault": None, "fault_times": 1})


@scenario
def refused(bag: Any) -> Result:
    return measured("refused", bag, "ijm_paid_refused", logical_date=MONDAY, conf={"fail_on_try": 1})


if __name__ == "__main__":
    scenario.main(sys.argv[1:] + os.environ.get("IJM_ONLY", "").split())
