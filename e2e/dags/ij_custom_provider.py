"""A DAG of the distributed run that pays through a custom provider hook, deferred to the real triggerer.

`example_adapters.prediction_style.PredictionStyleHook` (a `PaidProviderHook`) on a plain ``http``
connection: the API loses the answer of the first paid call, the retry (possibly on the other
worker) finds the job by listing its token, and the deployment's triggerer process re-creates the
provider from the hook's class path to poll it. Triggered once by e2e/distributed.py; its store is
a namespace of its own (``ij_store_custom``).
"""

from __future__ import annotations

import datetime as dt

import pendulum
from airflow.sdk import DAG

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator

STORE_CONN_ID = "ij_store_custom"

with DAG(
    dag_id="ij_custom_provider",
    schedule=None,
    start_date=pendulum.datetime(2020, 12, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2, "retry_delay": dt.timedelta(seconds=1)},
    tags=["idempotent-jobs", "e2e"],
):
    allocate = AllocateEpisodeOperator(task_id="allocate", store_conn_id=STORE_CONN_ID)
    generate = PaidGenerationOperator(
        task_id="generate",
        episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
        provider_conn_id="prediction_api",
        provider_hook="example_adapters.prediction_style.PredictionStyleHook",
        store_conn_id=STORE_CONN_ID,
        request={"prompt": "weekly teaser ({{ ti.xcom_pull(task_ids='allocate') }})", "units": 2},
        poll_initial_delay=0.2,
        poll_max_delay=1.0,
        poll_timeout=120,
        deferrable=True,
    )
    allocate >> generate
