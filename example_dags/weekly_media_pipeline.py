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
* a retry after a lost provider answer resends the same token (the connection declares that the
  API honours it) or looks the token up, and adopts the job the lost call made; only with an API
  that offers neither does it fail without retry, naming the ``idempotent-jobs reconcile`` command.

The approval gate is optional: trigger a run with ``{"require_approval": true}`` and ``approve``
asks a person (Airflow's Required Actions page, or its REST API) to approve or reject the episode's
spending before ``generate`` runs; the answer is recorded in the episode, so a retry, a cleared
task or another DAG on the same episode never asks again, and a rejected episode is never paid.
With the default (false) ``approve`` is skipped and the pipeline runs unattended.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, ApproveEpisodeOperator, PaidGenerationOperator

# [START weekly_media_pipeline]
EPISODE = "{{ ti.xcom_pull(task_ids='allocate') }}"
REQUEST = {"prompt": "{{ params.topic }} (" + EPISODE + ")", "units": 2}

with DAG(
    dag_id="weekly_media_pipeline",
    # Mondays 06:00 Berlin time; the ISO week is computed in the DAG's time zone.
    schedule="0 6 * * MON",
    start_date=pendulum.datetime(2026, 1, 5, tz="Europe/Berlin"),
    catchup=False,
    tags=["idempotent-jobs", "example"],
    params={
        "topic": "the week in review",
        "require_approval": Param(False, type="boolean", description="Ask a person before paying"),
    },
    default_args={"retries": 3, "retry_delay": dt.timedelta(minutes=2)},
):
    # One episode per run: 2026-W32-0, then 2026-W32-1 for a second run in that week.
    allocate = AllocateEpisodeOperator(task_id="allocate")

    @task.short_circuit(ignore_downstream_trigger_rules=False)
    def needs_approval(params: dict[str, Any]) -> bool:
        """False: skip only ``approve``; ``generate`` still runs (its trigger rule is none_failed)."""
        return bool(params["require_approval"])

    # Asks once per episode; the answer (who, when, comment) is kept in the episode. Rejected, or no
    # answer within two days: ``generate`` is skipped (a timeout records nothing).
    approve = ApproveEpisodeOperator(
        task_id="approve",
        episode_id=EPISODE,
        request=REQUEST,
        estimated_cost=2.5,
        response_timeout=dt.timedelta(days=2),
        defaults="Reject",
    )

    # Pays for the episode's job at most once, whatever Airflow retries.
    generate = PaidGenerationOperator(
        task_id="generate",
        episode_id=EPISODE,
        provider_conn_id="media_provider",
        request=REQUEST,
        deferrable=True,  # polling runs in the triggerer; set False if you run none
        poll_timeout=2 * 3600,
        trigger_rule="none_failed",  # runs when approve approved, or was skipped (no gate)
        # With the gate on, pays only for an approved episode (even if approve is marked done by hand).
        require_approval="{{ params.require_approval }}",
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

    allocate >> needs_approval() >> approve >> generate
    publish(generate.output)
# [END weekly_media_pipeline]
