"""The tutorial's first DAG (docs/tutorial/first-dag.md): one paid job per run, never two.

``allocate`` gives each run its episode of the ISO week (``2026-W38-0``, then ``2026-W38-1`` for a
second run that week); ``generate`` pays for it at most once, whatever Airflow retries or clears;
``publish`` runs at most once per episode. It needs the Connection ``media_provider`` (type
``idempotent_jobs_http``) and, with tasks on several hosts, a PostgreSQL store
(``AIRFLOW__IDEMPOTENT_JOBS__STORE_CONN_ID``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator

with DAG(
    dag_id="first_paid_dag",
    schedule="0 6 * * MON",
    start_date=pendulum.datetime(2026, 1, 5, tz="UTC"),
    catchup=False,
    default_args={"retries": 2, "retry_delay": dt.timedelta(seconds=30)},
    tags=["idempotent-jobs", "tutorial"],
):
    # The run's episode: the same one on every retry, clear or backfill of this run.
    episode_id = AllocateEpisodeOperator(task_id="allocate").output

    # The function returns the request; it is paid for at most once per episode.
    @task.paid_generation(provider_conn_id="media_provider", episode_id=episode_id)
    def generate(episode_id: str) -> dict[str, Any]:
        return {"prompt": f"the week in review ({episode_id})", "units": 2}

    # Runs at most once per episode; a retry or clear returns the recorded result.
    @task.episode(episode_id=episode_id, effect="publish")
    def publish(summary: dict[str, Any], episode: Episode, effect_token: str) -> dict[str, Any]:
        print(f"publishing {episode.episode_id}: job {summary['remote_ref']}, cost {summary['cost']}")
        return {"published": summary["remote_ref"]}

    publish(generate(episode_id))
