"""The demo's gated pipeline (demo/approval_demo.py): allocate >> approve >> generate >> publish.

A person answers ``approve`` in the UI or through the REST API; the answer is recorded in the
episode, and ``generate`` (``require_approval=True``) pays only for an approved episode. Triggered
by hand only (``schedule=None``), so the demo's provider sees exactly the runs it starts.
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, ApproveEpisodeOperator, PaidGenerationOperator

EPISODE = "{{ ti.xcom_pull(task_ids='allocate') }}"
REQUEST = {"prompt": "the week in review ({{ ti.xcom_pull(task_ids='allocate') }})", "units": 2}

with DAG(
    dag_id="approved_media_pipeline",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 5, tz="Europe/Berlin"),
    catchup=False,
    tags=["idempotent-jobs", "demo"],
):
    allocate = AllocateEpisodeOperator(task_id="allocate")
    approve = ApproveEpisodeOperator(
        task_id="approve", episode_id=EPISODE, request=REQUEST, estimated_cost=2.0, weekly_budget=10.0
    )
    generate = PaidGenerationOperator(
        task_id="generate",
        episode_id=EPISODE,
        provider_conn_id="media_provider",
        request=REQUEST,
        require_approval=True,
        deferrable=True,
    )

    @task
    def publish(summary: dict[str, Any]) -> str:
        print(f"Published episode {summary['episode_id']} (cost {summary['cost']})")
        return str(summary["episode_id"])

    allocate >> approve >> generate
    publish(generate.output)  # type: ignore[arg-type]  # an XComArg now, the summary at run time
