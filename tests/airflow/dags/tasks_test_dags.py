"""DAGs that ``airflow tasks test`` runs against a PostgreSQL or file store (tests/airflow/test_tasks_test_cli.py).

The week is pinned so that the dry run's answer does not depend on today's date. The PostgreSQL
store comes from the ``ij_tasks_test_pg`` Connection, which the test sets per call
(``AIRFLOW_CONN_IJ_TASKS_TEST_PG``); other runners never run these DAGs.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator
from tests.airflow.support import store_for

with DAG("ij_tasks_test_stores", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    AllocateEpisodeOperator(task_id="allocate_pg", week="2026-W32", store_conn_id="ij_tasks_test_pg")
    AllocateEpisodeOperator(task_id="allocate_file", week="2026-W32", store=store_for("ij_tasks_test_stores"))
