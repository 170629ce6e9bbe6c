"""DAGs for Replicate in real Airflow (run by tests/airflow/replicate_scenarios.py).

The paid task names only ``replicate_default`` (an ``idempotent_jobs_replicate`` connection): the
operator picks our hook for it. ``ijr_one``: an episode, its prediction, a step reading what was
recorded; the runner drops the create call's answer once. ``ijr_kill``: the same; the runner SIGKILLs
the worker while the double holds the answer to a prediction it made.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG

from tests.airflow.reporting import allocate_pay_report
from tests.airflow.support import START

MODEL = "black-forest-labs/flux-schnell"
#: As the connection's extra ``prices`` holds them (the example DAG's model too).
PRICES: dict[str, dict[str, Any]] = {MODEL: {"per_second": 0.0014, "max_seconds": 60}}
FAST_POLL: dict[str, Any] = {"poll_initial_delay": 0.2, "poll_max_delay": 0.5, "poll_timeout": 120}


def image_request() -> dict[str, Any]:
    """A prediction's request for a small image."""
    return {"model": MODEL, "input": {"prompt": "a lighthouse at dawn", "output_format": "png", "seed": 7}}


for shape in ("one", "kill"):
    dag_id = f"ijr_{shape}"
    retries = {"retries": 4, "retry_delay": dt.timedelta(seconds=0)}
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, default_args=retries):
        allocate_pay_report(
            dag_id,
            provider_conn_id="replicate_default",
            request=image_request(),
            weekly_budget=1.0,  # the worst case (60 s at the price) is well under it
            **FAST_POLL,
        )
