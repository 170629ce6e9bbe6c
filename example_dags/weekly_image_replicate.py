"""A weekly image through Replicate: one prediction per scheduled run, never two.

Copy this file into your DAGs folder. It uses the ``replicate_default`` Connection, of type
``idempotent_jobs_replicate``: password = the API token (``r8_...``; the environment is not read),
host = the base URL (empty: https://api.replicate.com), and the extra ``prices``: each model's
hardware price per second of ``metrics.predict_time``, e.g.
``{"black-forest-labs/flux-schnell": {"per_second": 0.0014, "max_seconds": 60}}``
(optionally ``per_prediction``). ``max_seconds`` is sent as ``Cancel-After``, so it bounds what a
prediction can cost: that bound is counted against ``weekly_budget`` before anything is sent. A
request naming a model missing there fails before anything is sent.

What happens:
* ``allocate`` gives the run its episode (``2026-W32-0``); a retry, a cleared task or a backfill of
  the same run gets the same one back;
* ``image`` builds the prediction's request and the episode pays for it once. Replicate has no
  idempotency key, so the episode's token rides in the input (``idempotency_token``) and the create
  call is never retried blindly: when its answer is lost, the try fails (outcome unknown) and the
  next try lists the predictions created since the episode's intent and adopts the one carrying the
  token ("found by token lookup") instead of creating another. Only if no prediction in that window
  carries it (each one proven another's) is the request sent again, with the same token;
* ``report`` reads what the episode recorded: the prediction id, its output URLs (Replicate removes
  them after an hour: copy the files downstream) and its cost (``predict_time`` x ``per_second``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator

# [START weekly_image_replicate]
with DAG(
    dag_id="weekly_image_replicate",
    schedule="0 6 * * MON",  # Mondays 06:00 Berlin time; the ISO week is the DAG's time zone's
    start_date=pendulum.datetime(2026, 1, 5, tz="Europe/Berlin"),
    catchup=False,
    tags=["idempotent-jobs", "example", "replicate"],
    params={"prompt": "A lighthouse at dawn, watercolor, soft light over the waves."},
    default_args={"retries": 4, "retry_delay": dt.timedelta(minutes=2), "retry_exponential_backoff": 2.0},
):
    episode_id = AllocateEpisodeOperator(task_id="allocate").output

    @task.paid_generation(
        provider_conn_id="replicate_default",
        episode_id=episode_id,
        deferrable=True,  # the triggerer polls the prediction; set False if you run none
        poll_timeout=3600,
        poll_max_delay=60,
        weekly_budget=1.0,  # in the currency of the connection's prices
    )
    def image(params: dict[str, Any]) -> dict[str, Any]:
        """The prediction's request: the same arguments must build the same request on every try."""
        return {
            "model": "black-forest-labs/flux-schnell",
            "input": {"prompt": params["prompt"], "aspect_ratio": "16:9", "output_format": "png", "seed": 7},
        }

    @task.episode(episode_id=episode_id)
    def report(summary: dict[str, Any], episode: Episode) -> dict[str, Any]:
        """What the episode recorded: the prediction, where its images are, and what it cost."""
        sub = episode.submission
        result = sub.result or {}
        output = result.get("output")
        urls = output if isinstance(output, list) else [output] if output else []
        print(f"Episode {episode.episode_id}: prediction {sub.remote_ref} {result.get('status')} -> {urls}")
        print(f"Cost: {sub.cost} ({result.get('predict_time')} s of predict time)")
        return {"episode": episode.episode_id, "prediction": sub.remote_ref, "images": urls, "cost": sub.cost}

    report(image())
# [END weekly_image_replicate]
