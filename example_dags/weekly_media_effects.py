"""Effects after the payment: publish each episode once, announce it once, whatever Airflow retries.

Two DAGs. ``weekly_media_effects`` allocates the week's episode, pays for its media once (as in
``weekly_media_pipeline_taskflow.py``, with the same ``media_provider`` Connection and store), then
publishes it as an *effect*: ``@task.episode(effect="publish")`` runs the function at most once per
episode, records what it returned, and a retry or a cleared task returns that record instead of
publishing again. The same task emits the episode's one event on the ``WEEKLY_EPISODES`` asset
(``asset_event=``): never a second one for the episode, however often the task is retried or cleared.

``weekly_digest`` is scheduled on that asset: each run reads the episode ids from the events that
triggered it (``triggering_asset_events``) and records them.

What Airflow may do, and what happens then:
* a retry or a clear of ``publish`` after it published: the recorded result is its XCom; nothing is
  published and no event is emitted again (the digest runs once per episode);
* a retry whose ``publish`` would get other arguments than the published ones fails without retry;
* a publish that raised may have happened: with ``effect_capability="none"`` the task fails without
  retry and names ``idempotent-jobs reconcile EPISODE --effect publish``; here the CMS honours the
  effect's token as an idempotency key, so ``"idempotent_key"`` lets a retry send it again safely.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, Asset, task

from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator

# [START weekly_media_effects]
#: One event per episode; its extra holds episode_id, week_id, cost, remote_ref and each effect's result.
WEEKLY_EPISODES = Asset(name="weekly_episodes", uri="media://example/weekly-episodes")

with DAG(
    dag_id="weekly_media_effects",
    schedule="0 6 * * MON",  # Mondays 06:00 Berlin time
    start_date=pendulum.datetime(2026, 1, 5, tz="Europe/Berlin"),
    catchup=False,
    tags=["idempotent-jobs", "example"],
    default_args={"retries": 3, "retry_delay": dt.timedelta(minutes=2)},
):
    episode_id = AllocateEpisodeOperator(task_id="allocate").output

    @task.paid_generation(provider_conn_id="media_provider", episode_id=episode_id)
    def generate(episode_id: str) -> dict[str, Any]:
        return {"prompt": f"the week in review ({episode_id})", "units": 2}

    @task.episode(
        episode_id=episode_id,
        effect="publish",
        effect_capability="idempotent_key",  # the CMS honours the token; "none" (the default) if yours does not
        asset_event=WEEKLY_EPISODES,
    )
    def publish(summary: dict[str, Any], episode: Episode, effect_token: str) -> dict[str, Any]:
        """Publish the media; ``effect_token`` goes to the CMS as its idempotency key."""
        media = (summary.get("result") or {}).get("url")
        print(f"POST /cms/episodes Idempotency-Key: {effect_token} -> {episode.episode_id}: {media}")
        return {"page": f"https://cms.invalid/episodes/{episode.episode_id}", "media": media}

    publish(generate(episode_id))

with DAG(
    dag_id="weekly_digest",
    schedule=[WEEKLY_EPISODES],  # a run per new episode event (several events may share one run)
    start_date=pendulum.datetime(2026, 1, 5, tz="Europe/Berlin"),
    catchup=False,
    tags=["idempotent-jobs", "example"],
):

    @task
    def digest(triggering_asset_events: Any = None) -> list[dict[str, Any]]:
        """Record each episode that triggered this run (where a real digest would mail or post it)."""
        episodes = [
            {"episode_id": e.extra["episode_id"], "page": e.extra["effects"]["publish"]["page"]}
            for e in triggering_asset_events[WEEKLY_EPISODES]
        ]
        for episode in episodes:
            print(f"Digest: episode {episode['episode_id']} at {episode['page']}")
        return episodes

    digest()
# [END weekly_media_effects]
