"""Test DAGs for the example adapters: PaidGenerationOperator(provider_hook=...) on plain ``http`` connections.

``ij_prediction_style`` pays through `example_adapters.prediction_style` (its trigger awaits
``astatus``), ``ij_batch_style`` through `example_adapters.batch_style` (two calls per job; its
trigger runs ``status`` in a thread). Both deferrable, retried: the scenario makes the APIs lose
answers. Parsed by every Airflow test, so it imports nothing of the adapters (the hook is a class
path) and defines no DAG while the operator has no ``provider_hook`` yet.
"""

from __future__ import annotations

import inspect
from typing import Any

from airflow.sdk import DAG, task

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator
from tests.airflow.support import CrashingPaidGeneration, manual_dag, report_paid, store_for

FAST_POLL: dict[str, Any] = {"poll_initial_delay": 0.05, "poll_max_delay": 0.2, "poll_timeout": 60}
#: (dag_id, hook class path, connection id)
STYLES = (
    ("ij_prediction_style", "example_adapters.prediction_style.PredictionStyleHook", "ij_prediction_api"),
    ("ij_batch_style", "example_adapters.batch_style.BatchStyleHook", "ij_batch_api"),
)

if "provider_hook" in inspect.signature(PaidGenerationOperator.__init__).parameters:
    for dag_id, hook, conn_id in STYLES:
        with DAG(dag_id, **manual_dag(retries=3)):

            @task(task_id="report")
            def report(**context: Any) -> None:
                report_paid(context, "generate")

            allocate = AllocateEpisodeOperator(task_id="allocate", store=store_for(dag_id))
            generate = CrashingPaidGeneration(
                task_id="generate",
                episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
                provider_conn_id=conn_id,
                provider_hook=hook,
                request={"prompt": "weekly teaser for {{ ti.xcom_pull(task_ids='allocate') }}", "units": 2},
                store=store_for(dag_id),
                deferrable=True,
                **FAST_POLL,
            )
            allocate >> generate >> report()
