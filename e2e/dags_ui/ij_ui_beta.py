"""A DAG of team_b's bundle in the UI deployment (e2e/ui_deployment.py): allocate, then look at the episode.

Its episodes are visible to team_b's users and to admins; the other team's viewer must not see them.
The store is the deployment's (``[idempotent_jobs] store_conn_id``): no store argument here.
"""

from __future__ import annotations

import datetime as dt

import pendulum
from airflow.sdk import DAG

from airflow_idempotent_jobs.decorators import episode_task
from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator

with DAG(
    "ij_ui_beta",
    schedule=None,
    start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
    catchup=False,
    tags=["idempotent-jobs", "team_b"],
):
    allocate = AllocateEpisodeOperator(task_id="allocate")

    @episode_task(episode_id="{{ ti.xcom_pull(task_ids='allocate') }}")
    def look(episode: Episode) -> str:
        return episode.episode_id

    allocate >> look()  # type: ignore[call-arg,misc]  # the episode argument is filled at run time

# A team_b DAG whose keys name team_a's DAG (a copied key pattern, or an attempt to take over):
# with a team_a run's very key it is refused on its first try; with a key that merely reads as
# team_a's it allocates, and the episode is recorded as its own, shown on team_b's page only.
with DAG(
    "ij_ui_beta_mimic",
    schedule=None,
    start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
    catchup=False,
    tags=["idempotent-jobs", "team_b"],
    default_args={"retries": 2, "retry_delay": dt.timedelta(0)},
):
    AllocateEpisodeOperator(
        task_id="allocate",
        allocation_key="{{ dag_run.conf.get('key') or 'airflow:ij_ui_alpha:allocate:' ~ run_id }}",
    )
