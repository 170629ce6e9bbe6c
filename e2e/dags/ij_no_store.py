"""A DAG of the distributed run that names no store: on a Celery worker its allocation must be
refused on the first try (retries unused), because the default file store under each worker's
``$AIRFLOW_HOME`` would be a store of its own. Triggered once by e2e/distributed.py.
"""

from __future__ import annotations

import datetime as dt

import pendulum
from airflow.sdk import DAG

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator

with DAG(
    dag_id="ij_no_store",
    schedule=None,
    start_date=pendulum.datetime(2020, 12, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2, "retry_delay": dt.timedelta(seconds=1)},
    tags=["idempotent-jobs", "e2e"],
):
    AllocateEpisodeOperator(task_id="allocate")
