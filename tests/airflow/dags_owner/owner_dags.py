"""DAGs for the recorded owner (run by tests/airflow/owner_scenarios.py): who allocated an episode.

All of them write to one store (``IJO_STORE``), as a deployment's DAGs share its store. ``ijo_mimic``
is an author who names ``ijo_victim`` in its allocation keys: once with the victim's very key, once
with a key of its own that merely looks like the victim's.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import pendulum
from airflow.sdk import DAG

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator
from tests.airflow.support import FlakyAllocate, observe

STORE = os.environ.get("IJO_STORE", "")
RETRY_2: dict[str, Any] = {"retries": 2, "retry_delay": dt.timedelta(0)}
START = pendulum.datetime(2026, 1, 1, tz="UTC")


class ObservedAllocate(AllocateEpisodeOperator):
    """Records how ``execute`` ended: the episode id, or the exception's class and message."""

    def execute(self, context: Any) -> str | None:
        try:
            value = super().execute(context)
        except Exception as exc:
            observe("failed", context, error=type(exc).__name__, message=str(exc))
            raise
        observe("returned", context, value=value)
        return value


with DAG("ijo_victim", schedule=None, start_date=START, default_args=RETRY_2):
    ObservedAllocate(task_id="allocate", store=STORE)
    ObservedAllocate.partial(task_id="mapped", store=STORE).expand(fingerprint=["fp-a", "fp-b"])
    # Allocates, then crashes on the try the run's conf names: the retry gets the same episode.
    FlakyAllocate(task_id="retried", store=STORE)

with DAG("ijo_mimic", schedule=None, start_date=START, default_args=RETRY_2):
    # The victim's own key for this run id: not a retry of the victim's task, so refused on try 1.
    ObservedAllocate(task_id="same_key", store=STORE, allocation_key="airflow:ijo_victim:allocate:{{ run_id }}")
    # A key that reads as the victim's: allocated, but owned (and shown) as the mimic's.
    ObservedAllocate(task_id="look_alike", store=STORE, allocation_key="airflow:ijo_victim:allocate:{{ run_id }}:7")
