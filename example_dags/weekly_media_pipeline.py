"""A weekly paid media pipeline: one job per scheduled run, never paid twice.

Copy this file into your DAGs folder. It needs one Connection, ``media_provider``, of type
``idempotent_jobs_http`` (host: the provider's base URL, password: its API token, extra: the
JSON layout of its API). Jobs live in the store named by ``store=`` or ``store_conn_id=``, else by
the deployment's ``[idempotent_jobs] store`` (``AIRFLOW__IDEMPOTENT_JOBS__STORE=postgresql://...``)
or ``store_conn_id``, else in the file store at ``$AIRFLOW_HOME/idempotent_jobs``. That last one is
per host: under CeleryExecutor, KubernetesExecutor or any executor that is not LocalExecutor the
operators refuse it (the task fails on its first try, saying what to set).

What Airflow may do, and what happens then:
* a retry, a cleared task or a backfill of the same run keeps the ``run_id``: ``allocate`` returns
  the same episode (``2026-W32-0``), and ``generate`` resumes the same paid job instead of paying again;
* a second run in the same ISO week (a manual run, say) gets the next episode (``2026-W32-1``);
* a retry that cannot know whether the provider accepted the job fails without retry and names the
  ``idempotent-jobs reconcile`` command to run.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator

# [START weekly_media_pipeline]
with DAG(
    dag_id="weekly_media_pipeline",
    # Mondays 06:00 Berlin time; the ISO week is computed in the DAG's time zone.
    schedule="0 6 * * MON",
    start_date=pendulum.datetime(2026, 1, 5, tz="Europe/Berlin"),
    catchup=False,
    tags=["idempotent-jobs", "example"],
    params={"topic": "the week in review"},
    default_args={"retries": 3, "retry_delay": dt.timedelta(minutes=2)},
):
    # One episode per run: 2026-W32-0, then 2026-W32-1 for a second run in that week.
    allocate = AllocateEpisodeOperator(task_id="allocate")

    # Pays for the episode's job at most once, whatever Airflow retries.
    generate = PaidGenerationOperator(
        task_id="generate",
        episode_id="{{ ti.xcom_pull(task_ids='allocate') }}",
        provider_conn_id="media_provider",
        request={
            "prompt": "{{ params.topic }} ({{ ti.xcom_pull(task_ids='allocate') }})",
            "units": 2,
        },
        deferrable=True,  # polling runs in the triggerer; set False if you run none
        poll_timeout=2 * 3600,
    )

    @task
    def publish(summary: dict[str, Any]) -> dict[str, Any]:
        """Report the finished episode (where a real pipeline would upload or announce it)."""
        report = {
            "episode": summary["episode_id"],
            "media": (summary.get("result") or {}).get("url"),
            "cost": summary["cost"],
            "provider_job": summary["remote_ref"],
        }
        print(f"Published episode {report['episode']}: {report['media']} (cost {report['cost']})")
        return report

    allocate >> generate
    publish(generate.output)
# [END weekly_media_pipeline]
