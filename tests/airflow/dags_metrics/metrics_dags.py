"""Test DAGs for the metrics the operators send through Airflow's Stats (test_metrics_runs.py)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG

from airflow_idempotent_jobs.operators import PaidGenerationOperator
from tests.airflow.support import FlakyAllocate, manual_dag, store_for

FAST_POLL: dict[str, Any] = {"poll_initial_delay": 0.05, "poll_max_delay": 0.2, "poll_timeout": 60}

# Allocation crashes on try 1 (conf fail_on_try=1): new, then reused; the paid step succeeds once,
# polled by the worker or by the triggerer. Costs: price 0.75 x units.
for dag_id, deferrable, units in (("ijm_paid_worker", False, 3), ("ijm_paid_deferred", True, 4)):
    with DAG(dag_id, **manual_dag(retries=2)):
        FlakyAllocate(task_id="allocate", store=store_for(dag_id)) >> PaidGenerationOperator(
            task_id="generate",
            episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
            provider_conn_id="ijm_provider",
            request={"prompt": "metrics", "units": units},
            store=store_for(dag_id),
            deferrable=deferrable,
            **FAST_POLL,
        )

# The provider neither honours tokens nor offers lookup and the scenario makes it lose the submit
# answer: the paid step meets an outcome only reconcile can settle (unknown, stuck), no retry.
with DAG("ijm_paid_stuck", **manual_dag(retries=2)):
    FlakyAllocate(task_id="allocate", store=store_for("ijm_paid_stuck")) >> PaidGenerationOperator(
        task_id="generate",
        episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
        provider_conn_id="ijm_provider_plain",
        request={"prompt": "lost answer"},
        store=store_for("ijm_paid_stuck"),
        **FAST_POLL,
    )

# A budget that the estimate passes: refused, nothing sent.
with DAG("ijm_paid_refused", **manual_dag(retries=2)):
    FlakyAllocate(task_id="allocate", store=store_for("ijm_paid_refused")) >> PaidGenerationOperator(
        task_id="generate",
        episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
        provider_conn_id="ijm_provider",
        request={"prompt": "too dear"},
        store=store_for("ijm_paid_refused"),
        weekly_budget=1.0,
        estimated_cost=5.0,
        **FAST_POLL,
    )
