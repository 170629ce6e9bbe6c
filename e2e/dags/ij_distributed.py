"""The DAG of the distributed run (e2e/distributed.py): daily, backfilled over the turn of 2020/2021.

Every run allocates its episode in the PostgreSQL store (reached through the ``ij_store``
Connection, a plain ``postgres`` one), then crashes on its first try: the retry, possibly on the
other Celery worker, must get the same episode back. Then the paid job is submitted to the local
provider server, which does NOT deduplicate by idempotency token, so any second submission would
show as a second job. The paid step defers its polling to the triggerer, and on even days crashes
once after its job succeeded.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import pendulum
from airflow.sdk import DAG

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator

STORE_CONN_ID = "ij_store"
PROVIDER_CONN_ID = "media_provider"


def _worker() -> str:
    return os.environ.get("IJ_WORKER", "?")


class CrashAfterAllocating(AllocateEpisodeOperator):
    """Allocates, then dies on the first try: the case the allocation key exists for."""

    def execute(self, context: Any) -> str | None:
        episode_id = super().execute(context)
        context["ti"].xcom_push(key="worker", value=_worker())
        if context["ti"].try_number == 1:
            raise RuntimeError(f"simulated crash on {_worker()} after allocating {episode_id}")
        return episode_id


class CrashAfterPaying(PaidGenerationOperator):
    """Submits and defers to the triggerer; on even days dies once after the job succeeded.

    `_finish` is where both paths end: the resumed `execute_complete` of try 1, and try 2's
    `execute`, which finds the submission terminal (the retry must not pay again).
    """

    def _finish(self, context: Any, episode: Any) -> dict[str, Any]:
        summary = super()._finish(context, episode)
        context["ti"].xcom_push(key="worker", value=_worker())
        if context["ti"].try_number == 1 and context["logical_date"].day % 2 == 0:
            raise RuntimeError(f"simulated crash on {_worker()} after paying for {summary['episode_id']}")
        return summary


with DAG(
    dag_id="ij_distributed",
    schedule="@daily",
    start_date=pendulum.datetime(2020, 12, 1, tz="UTC"),
    # No scheduled run of "today": only the backfill's runs exist.
    end_date=pendulum.datetime(2021, 1, 6, tz="UTC"),
    catchup=False,
    max_active_runs=7,
    default_args={"retries": 2, "retry_delay": dt.timedelta(seconds=1)},
    tags=["idempotent-jobs", "e2e"],
):
    allocate = CrashAfterAllocating(task_id="allocate", store_conn_id=STORE_CONN_ID)
    generate = CrashAfterPaying(
        task_id="generate",
        episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
        provider_conn_id=PROVIDER_CONN_ID,
        store_conn_id=STORE_CONN_ID,
        request={"prompt": "daily digest {{ ds }} ({{ ti.xcom_pull(task_ids='allocate') }})", "units": 1},
        poll_initial_delay=0.2,
        poll_max_delay=1.0,
        poll_timeout=120,
        deferrable=True,  # polling runs in the deployment's triggerer process
    )
    allocate >> generate
