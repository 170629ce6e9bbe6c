"""DAGs for Replicate in real Airflow (run by tests/airflow/replicate_scenarios.py).

The paid task names only ``replicate_default`` (an ``idempotent_jobs_replicate`` connection): the
operator picks our hook for it. ``ijr_one``: an episode, its prediction, a step reading what was
recorded; the runner drops the create call's answer once.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, task

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator
from tests.airflow.reporting import ReportingPaid
from tests.airflow.support import START, report_paid, store_for

MODEL = "black-forest-labs/flux-schnell"
#: As the connection's extra ``prices`` holds them (the example DAG's model too).
PRICES: dict[str, dict[str, Any]] = {MODEL: {"per_second": 0.0014, "max_seconds": 60}}
FAST_POLL: dict[str, Any] = {"poll_initial_delay": 0.2, "poll_max_delay": 0.5, "poll_timeout": 120}


def image_request() -> dict[str, Any]:
    """A prediction's request for a small image."""
    return {"model": MODEL, "input": {"prompt": "a lighthouse at dawn", "output_format": "png", "seed": 7}}


dag_id = "ijr_one"
with DAG(
    dag_id,
    schedule=None,
    start_date=START,
    catchup=False,
    default_args={"retries": 4, "retry_delay": dt.timedelta(seconds=0)},
):

    @task(task_id="report")
    def report(**context: Any) -> None:
        report_paid(context, "pay")

    (
        AllocateEpisodeOperator(task_id="allocate", store=store_for(dag_id))
        >> ReportingPaid(
            task_id="pay",
            episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
            provider_conn_id="replicate_default",
            request=image_request(),
            store=store_for(dag_id),
            weekly_budget=1.0,  # the worst case (60 s at the price) is well under it
            **FAST_POLL,
        )
        >> report()
    )
