"""The DAGs of ``make e2e-effects`` (e2e/effects.py): the effects ledger under a real scheduler.

Every sink is a file under ``$AIRFLOW_HOME/sinks`` (LocalExecutor: every task runs on this host),
written with ``O_APPEND``, one line per call that reached it; the runner counts the lines. The kill
DAGs also log every call of their body in ``<dag_id>.calls``.

- ``ij_effects_producer``: allocate >> publish (effect "publish", the episode's one event on
  ``idempotent_jobs_e2e_episodes``); the runner clears its run three times.
- ``ij_effects_digest``: scheduled on that asset; appends each triggering episode id to its sink.
- ``ij_effects_weekly``: the producer on a weekly schedule (no catch-up: the scheduler makes the
  latest week's run); the runner backfills that run's date with ``reprocess_behavior=completed``.
- ``ij_effects_kill_none`` / ``ij_effects_kill_key``: publish's first call reaches the sink, then its
  process is SIGKILLed before the outcome is recorded (a marker file says which call is the first);
  ``retries=1``. ``_none`` (``effect_capability="none"``) must stop at the retry; ``_key``
  (``"idempotent_key"``, a sink that drops a token it has seen) may send the token again.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import signal
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, Asset, task

from airflow_idempotent_jobs.episode import Episode
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator

EPISODES = Asset("idempotent_jobs_e2e_episodes")
#: The kill DAGs' and the weekly DAG's events go to assets of their own, which nothing is scheduled on.
KILLED_EPISODES = Asset("idempotent_jobs_e2e_killed_episodes")
WEEKLY_EPISODES = Asset("idempotent_jobs_e2e_weekly_episodes")
EPISODE = "{{ ti.xcom_pull(task_ids='allocate') }}"
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def sink(name: str) -> Path:
    folder = Path(os.environ["AIRFLOW_HOME"]) / "sinks"
    folder.mkdir(exist_ok=True)
    return folder / name


def append_line(path: Path, line: str) -> None:
    """One write of one line with O_APPEND: a line is in the file once the call returns."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def append_unseen(path: Path, token: str) -> bool:
    """A target honouring the token: appends it only when no line holds it yet; whether it did."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with open(fd, closefd=False) as seen:
            if token in seen.read().splitlines():
                return False
        os.write(fd, (token + "\n").encode())
        os.fsync(fd)
        return True
    finally:
        os.close(fd)


def _producer(dag_id: str, sink_name: str, asset: Asset, schedule: str | None) -> None:
    """allocate >> publish (effect "publish", the episode's one event on ``asset``), appending to ``sink_name``."""
    with DAG(dag_id=dag_id, schedule=schedule, start_date=START, catchup=False, tags=["idempotent-jobs", "e2e"]):

        @task.episode(episode_id=EPISODE, effect="publish", asset_event=asset)
        def publish(episode: Episode | None = None, effect_token: str = "") -> dict[str, Any]:
            assert episode is not None  # given by the operator at run time
            append_line(sink(sink_name), effect_token)
            return {"ref": f"{sink_name}:{episode.episode_id}"}

        AllocateEpisodeOperator(task_id="allocate") >> publish()


_producer("ij_effects_producer", "publish.sink", EPISODES, None)
_producer("ij_effects_weekly", "weekly.sink", WEEKLY_EPISODES, "0 0 * * 1")

with DAG(dag_id="ij_effects_digest", schedule=[EPISODES], start_date=START, tags=["idempotent-jobs", "e2e"]):

    @task
    def digest(triggering_asset_events: Any = None) -> list[str]:
        ids = [str(event.extra["episode_id"]) for event in triggering_asset_events[EPISODES]]
        for episode_id in ids:
            append_line(sink("digest.sink"), episode_id)
        return ids

    digest()


def _killed_once(dag_id: str, capability: str) -> None:
    with DAG(
        dag_id=dag_id,
        default_args={"retries": 1, "retry_delay": dt.timedelta(seconds=1)},
        schedule=None,
        start_date=START,
        tags=["idempotent-jobs", "e2e"],
    ):

        @task.episode(episode_id=EPISODE, effect="publish", effect_capability=capability, asset_event=KILLED_EPISODES)
        def publish(episode: Episode | None = None, effect_token: str = "") -> dict[str, Any]:
            assert episode is not None  # given by the operator at run time
            target = sink(f"{dag_id}.sink")
            append_line(sink(f"{dag_id}.calls"), effect_token)  # every call of the body, sent or not
            if capability == "idempotent_key":
                append_unseen(target, effect_token)
            else:
                append_line(target, effect_token)
            marker = sink(f"{dag_id}.killed")
            if not marker.exists():
                marker.touch()
                os.kill(os.getpid(), signal.SIGKILL)  # the sink answered; the outcome is not recorded
            return {"ref": f"{target.name}:{episode.episode_id}"}

        AllocateEpisodeOperator(task_id="allocate") >> publish()


_killed_once("ij_effects_kill_none", "none")
_killed_once("ij_effects_kill_key", "idempotent_key")
