"""Airflow's own ResumableJobMixin and this ledger, side by side, on one API that loses an answer.

Both DAGs pay through the prediction-style example adapter on the same plain ``http`` connection;
the scenario makes the API lose the answer of the first paid call of each run (the prediction
exists). ``ij_mixin`` is an operator built the way Airflow 3.3 documents ``ResumableJobMixin``: it
persists the job's id to ``task_state_store`` after ``submit_job`` returns, so a lost answer leaves
nothing to reconnect to and the retry submits again. ``ij_ledger`` is ``PaidGenerationOperator``
with the adapter's hook: the intent is durable before the call, and the retry finds the job by its
token.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pendulum
from airflow.sdk import DAG, BaseHook, BaseOperator
from airflow.sdk.bases.resumablejobmixin import ResumableJobMixin

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator
from tests.airflow.support import observe, store_for

CONN_ID = "ij_prediction_api"
REQUEST = {"prompt": "weekly teaser", "units": 2}
DEFAULTS: dict[str, Any] = {"retries": 2, "retry_delay": dt.timedelta(0)}
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def _provider() -> Any:
    from example_adapters.prediction_style import PredictionStyleProvider

    conn = BaseHook.get_connection(CONN_ID)
    return PredictionStyleProvider(conn.host or "", conn.password or "", read_timeout=5.0)


class ResumablePrediction(ResumableJobMixin, BaseOperator):
    """The mixin's documented shape: submit_job, status, poll; the id persisted after submit returns."""

    external_id_key = "prediction_id"

    def execute(self, context: Any) -> Any:
        observe("state_store", context, available=context.get("task_state_store") is not None)
        return self.execute_resumable(context)

    def submit_job(self, context: Any) -> Any:
        # The same token on every try (the mixin has no notion of one): the API's listing would find
        # the first job, but the mixin never asks; it only knows ids it managed to persist.
        return _provider().submit(REQUEST, f"mixin-{context['run_id']}")

    def get_job_status(self, external_id: Any, context: Any) -> str:
        return str(_provider().status(str(external_id)).state.value)

    def is_job_active(self, status: str) -> bool:
        return status in ("pending", "running")

    def is_job_succeeded(self, status: str) -> bool:
        return status == "succeeded"

    def poll_until_complete(self, external_id: Any, context: Any) -> None:
        for _ in range(200):
            status = self.get_job_status(external_id, context)
            if not self.is_job_active(status):
                if not self.is_job_succeeded(status):
                    raise RuntimeError(f"prediction {external_id} ended {status}")
                return
            time.sleep(0.05)
        raise TimeoutError(f"prediction {external_id} still running")

    def get_job_result(self, external_id: Any, context: Any) -> Any:
        return str(external_id)


with DAG("ij_mixin", schedule=None, start_date=START, default_args=DEFAULTS):
    ResumablePrediction(task_id="generate")

with DAG("ij_ledger", schedule=None, start_date=START, default_args=DEFAULTS):
    allocate = AllocateEpisodeOperator(task_id="allocate", store=store_for("ij_ledger"))
    allocate >> PaidGenerationOperator(
        task_id="generate",
        episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
        provider_conn_id=CONN_ID,
        provider_hook="example_adapters.prediction_style.PredictionStyleHook",
        request=REQUEST,
        store=store_for("ij_ledger"),
        poll_initial_delay=0.05,
        poll_max_delay=0.2,
        poll_timeout=60,
    )
