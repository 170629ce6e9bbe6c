"""A mapped approval gate (run by tests/airflow/approval_hostile_scenarios.py through ``dag.test()``).

``approve`` and ``generate`` expand over the same list of episodes (the run's conf), so map index
``i`` of both is one episode: each index asks (or not) about its own episode, and a rejection skips
only the paid step of the same index.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.operators import ApproveEpisodeOperator, PaidGenerationOperator
from tests.airflow.support import store_for

with DAG(
    "ija_mapped_gate",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    default_args={"retries": 2, "retry_delay": dt.timedelta(0)},
):

    @task
    def episodes(**context: Any) -> list[str]:
        return list(context["dag_run"].conf["episodes"])

    EPISODES = episodes()
    REQUEST = {"prompt": "mapped approval #{{ ti.map_index }}", "units": 1}
    approve = ApproveEpisodeOperator.partial(task_id="approve", store=store_for("ija"), request=REQUEST).expand(
        episode_id=EPISODES
    )
    generate = PaidGenerationOperator.partial(
        task_id="generate", store=store_for("ija"), provider_conn_id="ij_provider", request=REQUEST
    ).expand(episode_id=EPISODES)
    approve >> generate
