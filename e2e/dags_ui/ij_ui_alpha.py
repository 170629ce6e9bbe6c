"""A DAG of team_a's bundle in the UI deployment (e2e/ui_deployment.py): allocate, then look at the episode.

Its episodes are visible to team_a's users and to admins; the other team's viewer must not see them.
The store is the deployment's (``[idempotent_jobs] store_conn_id``): no store argument here.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent_jobs.decorators import episode_task
from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator

with DAG(
    "ij_ui_alpha",
    schedule=None,
    start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
    catchup=False,
    tags=["idempotent-jobs", "team_a"],
):
    allocate = AllocateEpisodeOperator(task_id="allocate")

    @episode_task(episode_id="{{ ti.xcom_pull(task_ids='allocate') }}")
    def look(episode: Episode) -> str:
        return episode.episode_id

    allocate >> look()  # type: ignore[call-arg,misc]  # the episode argument is filled at run time
