"""DAGs whose store URL holds a password in a hostile shape (run by tests/airflow/secret_url_scenarios.py).

Every URL of `tests.hostile_store_urls.HOSTILE` comes from a Variable (``ijs_store_<n>``, set by the
test as ``AIRFLOW_VAR_IJS_STORE_<N>``), so Airflow renders it into the task's fields; each points
at a port where nothing listens. No retries: each task fails once, with the message under test.
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import DAG

from tests.airflow.reporting import ReportingAllocate, ReportingCheck, ReportingPaid
from tests.hostile_store_urls import HOSTILE

ONCE: dict[str, Any] = {"retries": 0}
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def variable(index: int) -> str:
    return "{{ var.value.ijs_store_" + str(index) + " }}"


# Every hostile URL through store=, rendered from its Variable; the two shapes also through a
# mapped task (another rendering path), the check and the paid step.
with DAG("ijs_hostile_store", schedule=None, start_date=START, default_args=ONCE):
    for index in range(len(HOSTILE)):
        ReportingAllocate(task_id=f"allocate_{index}", store=variable(index))
    ReportingAllocate.partial(task_id="mapped", store=variable(1)).expand(fingerprint=["m0", "m1"])
    ReportingCheck(task_id="check", week="2026-W32", store=variable(0))
    ReportingPaid(task_id="generate", episode_id="2026-W32-0", provider_conn_id="ijs_no_provider", store=variable(1))

# No store on the task: [idempotent_jobs] store, set by the scenario around each run.
with DAG("ijs_hostile_setting", schedule=None, start_date=START, default_args=ONCE):
    ReportingAllocate(task_id="allocate")

# Connections: a hostile URL in the host field (refused: credentials have fields of their own), and
# a hostile password in the password field (sent whole: the store is merely unreachable).
with DAG("ijs_hostile_conn", schedule=None, start_date=START, default_args=ONCE):
    ReportingAllocate(task_id="url_in_host", store_conn_id="ijs_url_in_host")
    ReportingAllocate(task_id="password_field", store_conn_id="ijs_password_field")
