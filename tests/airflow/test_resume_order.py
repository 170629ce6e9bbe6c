"""The order on resume: ``execute_complete`` loads the episode before the request function runs or a
connection is read, as ``execute`` does (docs/design.md, "The Airflow layer").

A deferred task resumes in a new process with whatever store its template renders then; if that
store no longer holds the episode (a restored copy, a changed ``store`` setting), the task must fail
on ``EpisodeNotFound`` without running the user's function (which may read secrets) and without
building the provider (which reads the provider's Connection). Each test resumes a real operator
against a real file store with the trigger's own event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pendulum
import pytest
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.hooks.paid_provider import PaidProviderHook
from airflow_idempotent_jobs.operators import PaidGenerationOperator
from airflow_idempotent_jobs.operators._common import AirflowFailException
from airflow_idempotent_jobs.paid.provider import PaidProvider, RemoteState, RemoteStatus
from airflow_idempotent_jobs.paid.trigger_event import encode_error_event, encode_status_event
from airflow_idempotent_jobs.stores import open_store

pytestmark = pytest.mark.airflow

START = pendulum.datetime(2026, 1, 1, tz="UTC")
EPISODE = "2026-W32-0"
HOOK = f"{__name__}.RecordingHook"


class RecordingHook(PaidProviderHook):
    """Stands for any hook: building its provider is where the provider's Connection is read."""

    built: ClassVar[list[str]] = []

    def get_provider(self) -> PaidProvider:
        RecordingHook.built.append(self.provider_conn_id)
        raise RuntimeError("this test's provider is never needed")


def events() -> list[dict[str, Any]]:
    """Both kinds of event whose text the operator redacts through the provider."""
    failed = RemoteStatus(RemoteState.FAILED, error="the job failed")
    return [
        encode_status_event(EPISODE, "job-1", failed, result_limit=1024, redact=str),
        encode_error_event(EPISODE, "job-1", "the triggerer could not poll"),
    ]


@pytest.fixture
def empty_store(tmp_path: Path) -> str:
    url = f"file://{tmp_path}/store"
    open_store(url).close()
    RecordingHook.built.clear()
    return url


@pytest.mark.parametrize("event", events(), ids=["terminal", "error"])
def test_taskflow_resume_loads_the_episode_before_the_function_or_a_connection(
    empty_store: str, event: dict[str, Any]
) -> None:
    ran: list[str] = []
    with DAG("resume_taskflow", schedule=None, start_date=START) as dag:

        @task.paid_generation(episode_id=EPISODE, provider_conn_id="resume_p", provider_hook=HOOK, store=empty_store)
        def generate() -> dict[str, Any]:
            ran.append("function")
            return {"prompt": "x"}

        generate()
    op = dag.get_task("generate")
    assert isinstance(op, PaidGenerationOperator)
    with pytest.raises(AirflowFailException, match=f"episode {EPISODE} not found"):
        op.execute_complete({}, event)
    assert ran == [] and RecordingHook.built == []


@pytest.mark.parametrize("event", events(), ids=["terminal", "error"])
def test_classic_resume_loads_the_episode_before_a_connection(empty_store: str, event: dict[str, Any]) -> None:
    with DAG("resume_classic", schedule=None, start_date=START):
        op = PaidGenerationOperator(
            task_id="generate",
            episode_id=EPISODE,
            provider_conn_id="resume_p",
            provider_hook=HOOK,
            request={"prompt": "x"},
            store=empty_store,
        )
    with pytest.raises(AirflowFailException, match=f"episode {EPISODE} not found"):
        op.execute_complete({}, event)
    assert RecordingHook.built == []
