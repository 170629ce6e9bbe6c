"""A weekly LLM batch through Anthropic's Message Batches: one batch per scheduled run, never billed twice.

Copy this file into your DAGs folder. It uses the ``anthropic_default`` Connection your team may
already have (type ``anthropic``, as apache-airflow-providers-anthropic reads it: password = API
key, host = base URL when it is not Anthropic's, extra ``anthropic_client_kwargs``) with one
addition, the extra ``batch_prices``: each model's batch price per million tokens, e.g.
``{"claude-haiku-4-5": {"input": 0.5, "output": 2.5, "cached_input": 0.05, "cache_write": 0.625}}``.
A request naming a model missing there fails before anything is sent.

What happens:
* ``allocate`` gives the run its episode (``2026-W32-0``); a retry, a cleared task or a backfill of
  the same run gets the same one back;
* ``batch`` builds the requests (custom_ids of at most 41 characters: the episode's tag goes in
  front of each), and the episode pays for them once: the SDK's own retries are off for the paid
  call. Anthropic batches carry no metadata, so a retry that lost the create answer can tell its
  batch only from the results: it fails and retries (paying nothing) until every batch created
  since its first attempt has ended, then adopts its own, or submits once when none is. With no
  ``estimated_cost``, the worst case (every request's ``max_tokens``) is counted against
  ``weekly_budget``: a batch that could pass it is refused, nothing sent;
* ``report`` reads what the episode recorded: the batch id, its usage and its cost.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator

# [START weekly_llm_batch_anthropic]
with DAG(
    dag_id="weekly_llm_batch_anthropic",
    schedule="0 6 * * MON",  # Mondays 06:00 Berlin time; the ISO week is the DAG's time zone's
    start_date=pendulum.datetime(2026, 1, 5, tz="Europe/Berlin"),
    catchup=False,
    tags=["idempotent-jobs", "example", "anthropic"],
    params={"questions": ["Summarise this week's release notes.", "Draft three titles for the newsletter."]},
    # A retry after a lost create answer waits for the batches of its window to end: space them out.
    default_args={"retries": 6, "retry_delay": dt.timedelta(minutes=10), "retry_exponential_backoff": 2.0},
):
    episode_id = AllocateEpisodeOperator(task_id="allocate").output

    @task.paid_generation(
        provider_conn_id="anthropic_default",
        episode_id=episode_id,
        deferrable=True,  # the triggerer polls the batch (up to 24 hours); set False if you run none
        poll_timeout=26 * 3600,
        poll_max_delay=600,
        weekly_budget=20.0,  # in the currency of batch_prices
    )
    def batch(params: dict[str, Any]) -> dict[str, Any]:
        """The requests: the same arguments must build the same requests on every try."""
        return {
            "requests": [
                {
                    "custom_id": f"q{number}",
                    "params": {
                        "model": "claude-haiku-4-5",
                        "max_tokens": 800,
                        "system": "You write for a weekly engineering newsletter.",
                        "messages": [{"role": "user", "content": question}],
                    },
                }
                for number, question in enumerate(params["questions"])
            ]
        }

    @task.episode(episode_id=episode_id)
    def report(summary: dict[str, Any], episode: Episode) -> dict[str, Any]:
        """What the episode recorded: the batch, its usage, its cost (where a pipeline would fetch the results)."""
        sub = episode.submission
        usage = (sub.result or {}).get("usage")
        print(f"Episode {episode.episode_id}: batch {sub.remote_ref} cost {sub.cost} ({usage})")
        return {"episode": episode.episode_id, "batch_id": sub.remote_ref, "cost": sub.cost, "usage": usage}

    report(batch())
# [END weekly_llm_batch_anthropic]
