"""Test DAGs for effects (``@task.episode(effect=...)``, `EpisodeEffectOperator`) and the episode's one
Asset event (run by ``test_effect_runs.py`` through ``effects_scenarios.py``).

Every effect body appends one line to a real file opened with ``O_APPEND`` (`sink`): the number of
lines is the number of times the effect happened. Bodies also record each call (``ran``) and every
task records why it failed (``failed``). ``crash_first_try`` is a ``post_execute`` hook: the task
fails on its first try AFTER its effect ran and was recorded (the worker dying between the two).
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, get_current_context, task

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, EpisodeEffectOperator, PaidGenerationOperator
from tests.airflow.support import manual_dag, observe, store_for

#: The producer's asset (its events: one per episode) and the one of the retried emitter.
EPISODES = Asset(name="ije_episodes", uri="media://ije/episodes")
RETRIED_EPISODES = Asset(name="ije_retried_episodes", uri="media://ije/retried-episodes")
FAST_POLL: dict[str, Any] = {"poll_initial_delay": 0.05, "poll_max_delay": 0.2, "poll_timeout": 60}
#: A secret in the error of an effect body (the unknown one): masked in its record and the task's failure.
WEBHOOK_SECRET = "ije-webhook-secret-7f3a"
#: The episode id for classic operators (the decorators take the allocation's XComArg).
EPISODE = "{{ ti.xcom_pull(task_ids='allocate') }}"


def sink(name: str, line: str) -> None:
    """One line appended to the sink ``name`` (``O_APPEND``: each write lands whole at the end)."""
    path = Path(os.environ["IJ_EFFECT_SINKS"]) / f"{name}.log"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def sink_lines(name: str) -> list[str]:
    path = Path(os.environ["IJ_EFFECT_SINKS"]) / f"{name}.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def record_failure(context: Any) -> None:
    observe("failed", context, message=str(context.get("exception")))


def record_retry(context: Any) -> None:
    observe("retried", context, message=str(context.get("exception")))


def crash_first_try(context: Any, result: Any = None) -> None:
    """``post_execute``: the effect ran and was recorded; the task still fails on its first try."""
    if context["ti"].try_number == 1:
        raise RuntimeError("simulated worker crash after the effect")


def dag_args(retries: int) -> dict[str, Any]:
    args = manual_dag(retries=retries)
    callbacks = {"on_failure_callback": record_failure, "on_retry_callback": record_retry}
    args["default_args"] = {**args["default_args"], **callbacks}
    return args


def happened(name: str, episode_id: str, token: str, **extra: Any) -> dict[str, Any]:
    """The effect's body: record the call, append its line, return the result to record."""
    ti = get_current_context()["ti"]
    observe("ran", get_current_context(), effect=name, episode_id=episode_id, token=token)
    sink(name, f"{episode_id} {token} try={ti.try_number} map={ti.map_index}")
    return {"effect": name, "episode_id": episode_id, **extra}


# -- a retry after the effect ran: the decorator and the classic operator ------------------------
def notify(episode: Any, effect_token: str, channel: str) -> dict[str, Any]:
    return happened(f"{channel[1:]}_notify", episode.episode_id, effect_token, channel=channel)


def retry_dag(dag_id: str, store: str) -> None:
    """Decorator and classic operator, each failing after its effect on try 1, on ``store``."""
    with DAG(dag_id, **dag_args(retries=2)):
        retry_allocate = AllocateEpisodeOperator(task_id="allocate", store=store)

        @task.episode(episode_id=retry_allocate.output, store=store, effect="publish", post_execute=crash_first_try)
        def publish(url: str, episode: Any = None, effect_token: Any = None) -> dict[str, Any]:
            return happened(f"{dag_id}_publish", episode.episode_id, effect_token, url=url)

        publish("https://media.invalid/cut.mp4")
        retry_allocate >> EpisodeEffectOperator(
            task_id="notify",
            episode_id=EPISODE,
            effect="notify",
            python_callable=notify,
            op_kwargs={"channel": "#{{ dag.dag_id }}"},
            store=store,
            post_execute=crash_first_try,
        )


retry_dag("ije_retry", store_for("ije_retry"))
if os.environ.get("IJ_EFFECTS_PG"):  # the same on the PostgreSQL store (a database of its own)
    retry_dag("ije_retry_pg", os.environ["IJ_EFFECTS_PG"])

# -- the producer: paid step, two effects, the episode's asset event; run again and again (cleared) --
with DAG("ije_producer", **dag_args(retries=2)):
    producer_allocate = AllocateEpisodeOperator(task_id="allocate", store=store_for("ije_producer"))
    producer_id = producer_allocate.output
    generate = PaidGenerationOperator(
        task_id="generate",
        episode_id=EPISODE,
        provider_conn_id="ije_provider",
        request={"prompt": "the week in review"},
        store=store_for("ije_producer"),
        **FAST_POLL,
    )
    announce = EpisodeEffectOperator(
        task_id="announce",
        episode_id=EPISODE,
        effect="notify:slack",
        python_callable=lambda episode, effect_token: happened(
            "ije_producer_notify", episode.episode_id, effect_token, channel="#media"
        ),
        store=store_for("ije_producer"),
    )

    @task.episode(episode_id=producer_id, store=store_for("ije_producer"), effect="publish", asset_event=EPISODES)
    def publish_episode(summary: Any, episode: Any = None, effect_token: Any = None) -> dict[str, Any]:
        url = (summary.get("result") or {}).get("url")
        return happened("ije_producer_publish", episode.episode_id, effect_token, url=url)

    producer_allocate >> generate >> announce >> publish_episode(generate.output)

with DAG("ije_digest", schedule=[EPISODES], start_date=manual_dag(retries=0)["start_date"], catchup=False):

    @task
    def digest(triggering_asset_events: Any = None) -> list[str]:
        """What a downstream DAG reads: the episode ids of the events that triggered this run."""
        events = triggering_asset_events[EPISODES]
        ids = [event.extra["episode_id"] for event in events]
        observe("digest", get_current_context(), episode_ids=ids, extras=[dict(e.extra) for e in events])
        return ids

    digest()

# -- the asset event's try fails after the event was added: the retry adds it again, once ---------
with DAG("ije_emit_retry", **dag_args(retries=2)):
    emit_id = AllocateEpisodeOperator(task_id="allocate", store=store_for("ije_emit_retry")).output

    @task.episode(
        episode_id=emit_id,
        store=store_for("ije_emit_retry"),
        effect="publish",
        asset_event=RETRIED_EPISODES,
        post_execute=crash_first_try,
    )
    def publish_and_emit(episode: Any = None, effect_token: Any = None) -> dict[str, Any]:
        return happened("ije_emit_retry_publish", episode.episode_id, effect_token)

    publish_and_emit()

# -- mapped: one effect per map index, each once ---------------------------------------------------
with DAG("ije_mapped", **dag_args(retries=2)):
    mapped_id = AllocateEpisodeOperator(task_id="allocate", store=store_for("ije_mapped")).output

    @task.episode(episode_id=mapped_id, store=store_for("ije_mapped"), effect="upload", post_execute=crash_first_try)
    def upload(part: str, episode: Any = None, effect_token: Any = None) -> dict[str, Any]:
        return happened("ije_mapped_upload", episode.episode_id, effect_token, part=part)

    upload.expand(part=["intro", "middle", "outro"])

    # The episode's one event cannot come from each map index: refused before anything is read or run.
    @task.episode(episode_id=mapped_id, store=store_for("ije_mapped"), asset_event=RETRIED_EPISODES)
    def emit_mapped(part: str, episode: Any = None) -> None:
        observe("ran", get_current_context(), part=part)

    emit_mapped.expand(part=["intro"])

# -- inputs changed on the retry: refused, nothing run ---------------------------------------------
with DAG("ije_changed_input", **dag_args(retries=3)):
    changed_id = AllocateEpisodeOperator(task_id="allocate", store=store_for("ije_changed_input")).output

    @task.episode(
        episode_id=changed_id, store=store_for("ije_changed_input"), effect="publish", post_execute=crash_first_try
    )
    def publish_take(take: str, episode: Any = None, effect_token: Any = None) -> dict[str, Any]:
        return happened("ije_changed_input_publish", episode.episode_id, effect_token, take=take)

    publish_take("take {{ ti.try_number }}")

    # effect_inputs names what the effect acts on: the changing argument is not part of it.
    @task.episode(
        episode_id=changed_id,
        store=store_for("ije_changed_input"),
        effect="upload",
        effect_inputs={"master": "{{ dag.dag_id }}/final.mp4"},
        post_execute=crash_first_try,
    )
    def upload_take(take: str, episode: Any = None, effect_token: Any = None) -> dict[str, Any]:
        return happened("ije_changed_input_upload", episode.episode_id, effect_token, take=take)

    upload_take("take {{ ti.try_number }}")

    # An argument with no JSON form cannot be fingerprinted: refused before the function runs.
    @task.episode(episode_id=changed_id, store=store_for("ije_changed_input"), effect="notify")
    def notify_after(delay: Any, episode: Any = None, effect_token: Any = None) -> dict[str, Any]:
        return happened("ije_changed_input_notify", episode.episode_id, effect_token)

    notify_after(dt.timedelta(days=1))

# -- capabilities: none (unknown: reconcile), lookup (found: not run again), idempotent key --------
with DAG("ije_capabilities", **dag_args(retries=2)):
    cap_id = AllocateEpisodeOperator(task_id="allocate", store=store_for("ije_capabilities")).output

    def answer_lost(name: str, episode: Any, effect_token: str, target: str = "the target") -> dict[str, Any]:
        """The effect happens, then its answer is lost on the first try."""
        result = happened(name, episode.episode_id, effect_token)
        if get_current_context()["ti"].try_number == 1:
            raise TimeoutError(f"{name}: {target}'s answer was lost")
        return result

    def in_sink(token: str) -> Any:
        from airflow_idempotent_jobs.effects import Happened

        found = [line for line in sink_lines("ije_capabilities_lookup") if f" {token} " in line]
        return Happened({"found": found[0]}) if found else None

    @task.episode(episode_id=cap_id, store=store_for("ije_capabilities"), effect="notify")
    def unknown(episode: Any = None, effect_token: Any = None) -> dict[str, Any]:
        from airflow.sdk.log import mask_secret

        mask_secret(WEBHOOK_SECRET)  # as Airflow does for a connection's password read in the task
        return answer_lost("ije_capabilities_none", episode, effect_token, f"https://hooks.invalid/{WEBHOOK_SECRET}")

    @task.episode(
        episode_id=cap_id,
        store=store_for("ije_capabilities"),
        effect="upload",
        effect_capability="lookup",
        effect_lookup=in_sink,
    )
    def looked_up(episode: Any = None, effect_token: Any = None) -> dict[str, Any]:
        return answer_lost("ije_capabilities_lookup", episode, effect_token)

    @task.episode(
        episode_id=cap_id, store=store_for("ije_capabilities"), effect="publish", effect_capability="idempotent_key"
    )
    def keyed(episode: Any = None, effect_token: Any = None) -> dict[str, Any]:
        return answer_lost("ije_capabilities_key", episode, effect_token)

    unknown()
    looked_up()
    keyed()
