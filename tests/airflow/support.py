"""Helpers the test DAGs import: stores per DAG, an observation log, operators that fail on cue.

Tasks write what they saw (episode ids, XComs, try numbers) to a JSON-lines file; the scenario
runner reads it back. Everything here runs inside real Airflow task execution.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pendulum

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator
from airflow_idempotent_jobs.operators._common import AirflowFailException

XCOM_KEYS = ("return_value", "week_id", "sequence", "allocation_key", "reused")
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def manual_dag(*, retries: int) -> dict[str, Any]:
    """``DAG(dag_id, **manual_dag(retries=N))``: run by hand (``dag.test()``), tasks retried N times at once.

    Arguments, not the DAG: Airflow takes a DAG's file from the frame that constructs it.
    """
    return {
        "schedule": None,
        "start_date": START,
        "catchup": False,
        "default_args": {"retries": retries, "retry_delay": dt.timedelta(0)},
    }


def store_for(dag_id: str) -> str:
    """Each test DAG gets its own file store, so weeks and sequences do not mix between scenarios."""
    root = os.environ.get("IJ_STORES") or os.path.join(os.environ.get("AIRFLOW_HOME", "."), "test-stores")
    return str(Path(root) / dag_id)


def observe(kind: str, context: Any, **data: Any) -> None:
    ti = context["ti"]
    record = {
        "kind": kind,
        "dag_id": ti.dag_id,
        "task_id": ti.task_id,
        "run_id": ti.run_id,
        "map_index": ti.map_index,
        "try_number": ti.try_number,
        **data,
    }
    with open(os.environ["IJ_OBSERVATIONS"], "a", encoding="utf-8") as out:
        out.write(json.dumps(record, default=str) + "\n")


def should_fail(context: Any) -> bool:
    """The run's conf says on which try this task should crash (after doing its work)."""
    conf = context["dag_run"].conf or {}
    return bool(conf.get("fail_on_try") == context["ti"].try_number)


class FlakyAllocate(AllocateEpisodeOperator):
    """Allocates, records what it got, then crashes when the run's conf says so: Airflow retries."""

    def execute(self, context: Any) -> str | None:
        episode_id = super().execute(context)
        ti = context["ti"]
        observe(
            "allocated",
            context,
            episode_id=episode_id,
            reused=ti.xcom_pull(task_ids=ti.task_id, key="reused", map_indexes=ti.map_index),
            logical_date=context.get("logical_date"),
        )
        if should_fail(context):
            raise RuntimeError("simulated crash after allocation")
        return episode_id


def report_xcoms(context: Any, task_id: str) -> None:
    """What a downstream task sees of an allocation: every XCom the operator promises."""
    ti = context["ti"]
    seen = {key: ti.xcom_pull(task_ids=task_id, key=key) for key in XCOM_KEYS}
    observe("xcoms", context, source=task_id, xcoms=seen)


class CrashingPaidGeneration(PaidGenerationOperator):
    """Crashes right after the provider accepted the job (the ledger holds the ref) when told to."""

    def execute(self, context: Any) -> dict[str, Any]:
        self._context = context
        try:
            return super().execute(context)
        except AirflowFailException as exc:
            observe("failed", context, message=str(exc))
            raise

    def execute_complete(self, context: Any, event: Any = None) -> dict[str, Any]:
        observe("resumed", context, event=event)
        return super().execute_complete(context, event)

    def _submit(self, store: Any, eid: str, provider: Any, estimate: float | None) -> Any:
        episode = super()._submit(store, eid, provider, estimate)
        observe("submitted", self._context, episode_id=eid, remote_ref=episode.submission.remote_ref)
        if should_fail(self._context):
            raise RuntimeError("simulated worker crash after the provider accepted the job")
        return episode


def report_paid(context: Any, task_id: str) -> None:
    ti = context["ti"]
    seen = {key: ti.xcom_pull(task_ids=task_id, key=key) for key in ("return_value", "remote_ref", "state", "cost")}
    observe("paid_xcoms", context, source=task_id, xcoms=seen)
