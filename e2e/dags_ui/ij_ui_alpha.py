"""A DAG of team_a's bundle in the UI deployment (e2e/ui_deployment.py): allocate, then look at the episode.

Its episodes are visible to team_a's users and to admins; the other team's viewer must not see them.
The store is the deployment's (``[idempotent_jobs] store_conn_id``): no store argument here.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_idempotent_jobs.decorators import episode_task
from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator

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

# team_a's paying DAG: its paid step calls a provider that is not there (the UI deployment's
# media_provider points at a closed port), so each run fails there on its one try; the page shows
# the run's and the paid task's states and the link to that try's log, as Airflow's REST API says.
with DAG(
    "ij_ui_alpha_paid",
    schedule=None,
    start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
    catchup=False,
    tags=["idempotent-jobs", "team_a"],
):
    PaidGenerationOperator(
        task_id="generate",
        episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
        provider_conn_id="media_provider",
        request={"prompt": "the week in review"},
        retries=0,
    ).set_upstream(AllocateEpisodeOperator(task_id="allocate"))

# team_a's DAG that pays a live provider with neither idempotency tokens nor a lookup (capability (c)):
# a lost answer leaves its submission unknown and fails the task for good; a person settles it on the
# page, and a clear of the run then resumes the job (ours: REF) or submits once (not submitted).
with DAG(
    "ij_ui_alpha_settle",
    schedule=None,
    start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
    catchup=False,
    tags=["idempotent-jobs", "team_a"],
):
    PaidGenerationOperator(
        task_id="generate",
        episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
        provider_conn_id="settle_provider",
        request={"prompt": "the week in review"},
        retries=0,
        poll_initial_delay=0.5,
    ).set_upstream(AllocateEpisodeOperator(task_id="allocate"))
