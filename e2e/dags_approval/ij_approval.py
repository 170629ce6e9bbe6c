"""The DAGs of ``make e2e-approval`` (e2e/approval.py): the approval gate under a real scheduler.

One set per store: ``file`` (the embedded file store under ``$AIRFLOW_HOME``: LocalExecutor runs
every task on this host) and ``pg`` (the PostgreSQL store through the ``ij_store`` Connection).

- ``ij_approval_<store>``: allocate >> approve >> generate (require_approval) >> publish; the
  runner answers Approve or Reject through the REST API, and clears a finished run.
- ``ij_approval_kill_<store>``: the approval task dies (SIGKILL) on try 1 right after the answer
  was recorded in the episode; try 2 must not ask again.
- ``ij_approval_unknown_<store>``: gates an episode that does not exist.
- ``ij_approval_required_<store>``: the paid step with require_approval=True and no approval task;
  its provider Connection has an id of its own so the recording secrets backend can tell its lookups.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, ApproveEpisodeOperator, PaidGenerationOperator

STORES: dict[str, dict[str, Any]] = {"file": {}, "pg": {"store_conn_id": "ij_store"}}
PROVIDER_CONN_ID = "media_provider"
#: Only the unapproved paid step uses this one: a lookup of it would mean a connection was read.
UNAPPROVED_PROVIDER_CONN_ID = "media_provider_unapproved"
UNKNOWN_EPISODE = "2026-W01-99"
EPISODE = "{{ ti.xcom_pull(task_ids='allocate') }}"
REQUEST = {"prompt": "approval e2e {{ dag.dag_id }} {{ run_id }}", "units": 1}
START = pendulum.datetime(2026, 1, 1, tz="UTC")


class DieAfterRecording(ApproveEpisodeOperator):
    """Try 1 dies as a killed worker would, after the answer is in the episode."""

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        result = super().execute_complete(context, event)
        if context["ti"].try_number == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return result


@task
def publish(summary: dict[str, Any]) -> str:
    return f"published {summary['episode_id']}"


def _generate(store: dict[str, Any], provider_conn_id: str = PROVIDER_CONN_ID) -> PaidGenerationOperator:
    return PaidGenerationOperator(
        task_id="generate",
        episode_id=EPISODE,
        provider_conn_id=provider_conn_id,
        request=REQUEST,
        require_approval=True,
        poll_initial_delay=0.2,
        poll_max_delay=0.5,
        poll_timeout=60,
        **store,
    )


for name, store in STORES.items():
    with DAG(dag_id=f"ij_approval_{name}", schedule=None, start_date=START, tags=["idempotent-jobs", "e2e"]):
        approve = ApproveEpisodeOperator(
            task_id="approve", episode_id=EPISODE, request=REQUEST, estimated_cost=1.0, **store
        )
        generate = _generate(store)
        AllocateEpisodeOperator(task_id="allocate", **store) >> approve >> generate
        publish(generate.output)  # type: ignore[arg-type]  # an XComArg now, the summary at run time

    with DAG(
        dag_id=f"ij_approval_kill_{name}",
        default_args={"retries": 1, "retry_delay": dt.timedelta(seconds=1)},
        schedule=None,
        start_date=START,
        tags=["idempotent-jobs", "e2e"],
    ):
        approve = DieAfterRecording(task_id="approve", episode_id=EPISODE, request=REQUEST, **store)
        generate = _generate(store)
        AllocateEpisodeOperator(task_id="allocate", **store) >> approve >> generate
        publish(generate.output)  # type: ignore[arg-type]  # an XComArg now, the summary at run time

    with DAG(
        dag_id=f"ij_approval_unknown_{name}",
        default_args={"retries": 2, "retry_delay": dt.timedelta(seconds=1)},
        schedule=None,
        start_date=START,
        tags=["idempotent-jobs", "e2e"],
    ):
        ApproveEpisodeOperator(task_id="approve", episode_id=UNKNOWN_EPISODE, **store)

    with DAG(
        dag_id=f"ij_approval_required_{name}",
        default_args={"retries": 2, "retry_delay": dt.timedelta(seconds=1)},
        schedule=None,
        start_date=START,
        tags=["idempotent-jobs", "e2e"],
    ):
        AllocateEpisodeOperator(task_id="allocate", **store) >> _generate(store, UNAPPROVED_PROVIDER_CONN_ID)
