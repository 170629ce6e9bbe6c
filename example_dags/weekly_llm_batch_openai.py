"""A weekly LLM batch through OpenAI's Batch API: one batch per scheduled run, never billed twice.

Copy this file into your DAGs folder. It uses the ``openai_default`` Connection your team may already
have (type ``openai``, as apache-airflow-providers-openai reads it: password = API key, host = base
URL when it is not OpenAI's, extra ``openai_client_kwargs``) with one addition, the extra
``batch_prices``: each model's batch price per million tokens, e.g.
``{"gpt-5-mini": {"input": 0.125, "output": 1.0, "cached_input": 0.0125}}``. A request naming a
model missing there fails before anything is sent.

What happens:
* ``allocate`` gives the run its episode (``2026-W32-0``); a retry, a cleared task or a backfill of
  the same run gets the same one back;
* ``batch`` builds the requests, and the episode pays for them once: the SDK's own retries are off
  for the paid call, the batch carries the episode's token in its metadata, and a retry that lost
  the create answer finds the batch by listing instead of creating another. With no
  ``estimated_cost``, the batch's worst case (every request's ``max_completion_tokens``) is counted
  against ``weekly_budget``: a batch that could pass it is refused, nothing sent. A retry whose
  requests differ from the ones paid for fails without retry;
* ``report`` reads what the episode recorded: the batch id, its usage and its cost.

For a large batch, write the JSONL yourself and return
``prepare_request({"input_file": {"path": "/shared/week.jsonl"}})`` (from
``airflow_idempotent_jobs.vendors.openai``): it records the file's sha256, so a retry after the file
changed is refused instead of paying for other bytes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator

# [START weekly_llm_batch_openai]
with DAG(
    dag_id="weekly_llm_batch_openai",
    schedule="0 6 * * MON",  # Mondays 06:00 Berlin time; the ISO week is the DAG's time zone's
    start_date=pendulum.datetime(2026, 1, 5, tz="Europe/Berlin"),
    catchup=False,
    tags=["idempotent-jobs", "example", "openai"],
    params={"questions": ["Summarise this week's release notes.", "Draft three titles for the newsletter."]},
    default_args={"retries": 3, "retry_delay": dt.timedelta(minutes=5)},
):
    episode_id = AllocateEpisodeOperator(task_id="allocate").output

    @task.paid_generation(
        provider_conn_id="openai_default",
        episode_id=episode_id,
        deferrable=True,  # the triggerer polls the batch (up to 24 hours); set False if you run none
        poll_timeout=26 * 3600,
        poll_max_delay=600,
        weekly_budget=20.0,  # in the currency of batch_prices
    )
    def batch(episode_id: str, params: dict[str, Any]) -> dict[str, Any]:
        """The requests: the same arguments must build the same requests on every try."""
        return {
            "endpoint": "/v1/chat/completions",
            "requests": [
                {
                    "custom_id": f"q{number}",
                    "body": {
                        "model": "gpt-5-mini",
                        "messages": [{"role": "user", "content": question}],
                        "max_completion_tokens": 800,
                    },
                }
                for number, question in enumerate(params["questions"])
            ],
            "metadata": {"episode": episode_id},
        }

    @task.episode(episode_id=episode_id)
    def report(summary: dict[str, Any], episode: Episode) -> dict[str, Any]:
        """What the episode recorded: the batch, its usage, its cost (where a pipeline would fetch the output)."""
        sub = episode.submission
        usage = (sub.result or {}).get("usage")
        print(f"Episode {episode.episode_id}: batch {sub.remote_ref} cost {sub.cost} ({usage})")
        return {"episode": episode.episode_id, "batch_id": sub.remote_ref, "cost": sub.cost, "usage": usage}

    report(batch(episode_id))
# [END weekly_llm_batch_openai]
