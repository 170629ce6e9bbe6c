"""The weekly paid media pipeline written with TaskFlow: one job per scheduled run, never paid twice.

The same pipeline as ``weekly_media_pipeline.py`` (classic operators), with the same Connection
(``media_provider``, of type ``idempotent_jobs_http``) and the same choice of store. Two decorators
from this provider:

* ``@task.paid_generation``: the function returns the request, built from its arguments (here an
  upstream task's XCom and the episode id); the episode pays for it at most once. A retry runs the
  function again: if it builds another request than the one paid for, the task fails without retry
  and sends nothing.
* ``@task.episode``: a step that must never run against a missing episode. The episode is loaded
  before the function runs and handed to it as ``episode``; an unknown id fails without retry.

What Airflow may do, and what happens then, is as in the classic DAG: a retry, a cleared task or a
backfill of the same run keeps its episode and resumes its paid job; a second run in the same ISO
week gets the next episode; a retry that cannot know whether the provider accepted the job fails
without retry and names the ``idempotent-jobs reconcile`` command to run.

The approval gate is optional, as in the classic DAG: trigger a run with ``{"require_approval":
true}`` and ``approve`` asks a person to approve or reject the episode's spending before
``generate`` runs (the decision is kept in the episode); by default it is skipped.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, ApproveEpisodeOperator

# [START weekly_media_pipeline_taskflow]
with DAG(
    dag_id="weekly_media_pipeline_taskflow",
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
    episode_id = AllocateEpisodeOperator(task_id="allocate").output

    @task
    def topic(params: dict[str, Any]) -> str:
        """Where a real pipeline would pick this week's subject."""
        return str(params["topic"])

    @task.short_circuit(ignore_downstream_trigger_rules=False)
    def needs_approval(params: dict[str, Any]) -> bool:
        """False: skip only ``approve``; ``generate`` still runs (its trigger rule is none_failed)."""
        return bool(params["require_approval"])

    # Asks once per episode and keeps the answer in it; rejected or no answer in two days: no payment.
    approve = ApproveEpisodeOperator(
        task_id="approve",
        episode_id=episode_id,
        request={"prompt": "{{ params.topic }} ({{ ti.xcom_pull(task_ids='allocate') }})", "units": 2},
        estimated_cost=2.5,
        response_timeout=dt.timedelta(days=2),
        defaults="Reject",
    )

    # Pays for the episode's job at most once, whatever Airflow retries.
    @task.paid_generation(
        provider_conn_id="media_provider",
        episode_id=episode_id,
        deferrable=True,  # polling runs in the triggerer; set False if you run none
        poll_timeout=2 * 3600,
        trigger_rule="none_failed",  # runs when approve approved, or was skipped (no gate)
        # With the gate on, pays only for an approved episode (even if approve is marked done by hand).
        require_approval="{{ params.require_approval }}",
    )
    def generate(topic: str, episode_id: str) -> dict[str, Any]:
        """The request: the same arguments must build the same request on every try."""
        return {"prompt": f"{topic} ({episode_id})", "units": 2}

    # Runs only for an episode that exists, and receives it.
    @task.episode(episode_id=episode_id)
    def publish(summary: dict[str, Any], episode: Episode) -> dict[str, Any]:
        """Report the finished episode (where a real pipeline would upload or announce it)."""
        report = {
            "episode": episode.episode_id,
            "week": episode.week_id,
            "media": (summary.get("result") or {}).get("url"),
            "cost": summary["cost"],
            "provider_job": summary["remote_ref"],
        }
        print(f"Published episode {report['episode']}: {report['media']} (cost {report['cost']})")
        return report

    paid = generate(topic(), episode_id)
    needs_approval() >> approve >> paid
    publish(paid)
# [END weekly_media_pipeline_taskflow]
