"""A weekly video through Amazon Bedrock's async invoke (Nova Reel): one invocation per scheduled run, never two.

Copy this file into your DAGs folder. It uses the ``aws_default`` Connection your team may already
have (type ``aws``, read as the amazon provider reads it: login/password or the extra's keys, or
boto3's own credential chain such as the worker's role; extra ``region_name``; ``endpoint_url`` or
``service_config``) with one addition, the extra ``bedrock_prices``: each model's price, e.g.
``{"amazon.nova-reel-v1:0": {"per_second": 0.08}}`` (per second of video) or ``{"per_invocation": X}``.
A request naming a model missing there fails before anything is sent.

What happens:
* ``allocate`` gives the run its episode (``2026-W32-0``); a retry, a cleared task or a backfill of
  the same run gets the same one back;
* ``video`` builds StartAsyncInvoke's parameters and the episode pays for them once: the episode's
  idempotency token is sent as ``clientRequestToken`` on every attempt, so boto3's own retries and
  Airflow's alike get the one invocation back from Bedrock. The price (seconds x ``per_second``) is
  counted against ``weekly_budget`` before anything is sent; the video lands under the S3 prefix;
* ``report`` reads what the episode recorded: the invocation ARN, its status and the output prefix.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator

# [START weekly_video_bedrock]
with DAG(
    dag_id="weekly_video_bedrock",
    schedule="0 6 * * MON",  # Mondays 06:00 Berlin time; the ISO week is the DAG's time zone's
    start_date=pendulum.datetime(2026, 1, 5, tz="Europe/Berlin"),
    catchup=False,
    tags=["idempotent-jobs", "example", "bedrock"],
    params={"prompt": "A slow pan over a lighthouse at dawn, waves below.", "bucket": "weekly-media"},
    default_args={"retries": 4, "retry_delay": dt.timedelta(minutes=2), "retry_exponential_backoff": 2.0},
):
    episode_id = AllocateEpisodeOperator(task_id="allocate").output

    @task.paid_generation(
        provider_conn_id="aws_default",
        episode_id=episode_id,
        deferrable=True,  # the triggerer polls the invocation; set False if you run none
        poll_timeout=3 * 3600,
        poll_max_delay=120,
        weekly_budget=5.0,  # in the currency of bedrock_prices
    )
    def video(params: dict[str, Any], ds_nodash: str) -> dict[str, Any]:
        """StartAsyncInvoke's parameters: the same arguments must build the same request on every try."""
        return {
            "modelId": "amazon.nova-reel-v1:0",
            "modelInput": {
                "taskType": "TEXT_VIDEO",
                "textToVideoParams": {"text": params["prompt"]},
                "videoGenerationConfig": {"durationSeconds": 6, "fps": 24, "dimension": "1280x720", "seed": 7},
            },
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": f"s3://{params['bucket']}/weekly/{ds_nodash}/"}},
        }

    @task.episode(episode_id=episode_id)
    def report(summary: dict[str, Any], episode: Episode) -> dict[str, Any]:
        """What the episode recorded: where the video is, and what it was priced at."""
        sub = episode.submission
        result = sub.result or {}
        print(f"Episode {episode.episode_id}: {sub.remote_ref} {result.get('status')} -> {result.get('output_s3_uri')}")
        return {
            "episode": episode.episode_id,
            "invocation": sub.remote_ref,
            "video": result.get("output_s3_uri"),
            "price": sub.estimated_cost,
        }

    report(video())
# [END weekly_video_bedrock]
