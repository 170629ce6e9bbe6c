"""DAGs for the approval gate (run by tests/airflow/approval_scenarios.py through ``dag.test()``).

The episode comes from the run's conf (the scenario allocates and decides it beforehand); every
reporting task records how ``execute``/``execute_complete`` ended, so the tests see what each try
returned or why it failed. Tasks are retried twice at once: a failure on try 1 proves "no retry".
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.operators import ApproveEpisodeOperator, PaidGenerationOperator
from tests.airflow.support import observe, should_fail, store_for

RETRY_2: dict[str, Any] = {"retries": 2, "retry_delay": dt.timedelta(0)}
START = pendulum.datetime(2026, 1, 1, tz="UTC")
EPISODE = "{{ dag_run.conf['episode'] }}"
EPISODE_TF = "{{ dag_run.conf['episode_tf'] }}"
REQUEST = {"prompt": "approval scenario ({{ dag_run.conf['episode'] }})", "units": 2}
#: One store for every DAG here: a second DAG may gate the same episode.
STORE = store_for("ija")
#: How a task hands control back to Airflow without failing: it waits for a person, or skips downstream.
SIGNALS = frozenset({"TaskAwaitingInput", "DownstreamTasksSkipped"})


class Reporting:
    """Records how ``execute`` and ``execute_complete`` ended, then re-raises (skips included)."""

    def execute(self, context: Any) -> Any:
        return self._reported("execute", context, lambda: super(Reporting, self).execute(context))  # type: ignore[misc]

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        def resumed() -> Any:
            value = super(Reporting, self).execute_complete(context, event)  # type: ignore[misc]
            if should_fail(context):
                raise RuntimeError("simulated crash after the answer was recorded")
            return value

        return self._reported("execute_complete", context, resumed)

    def _reported(self, step: str, context: Any, run: Any) -> Any:
        try:
            value = run()
        except BaseException as exc:
            if type(exc).__name__ in SIGNALS:
                observe("ended", context, step=step, signal=type(exc).__name__)
            else:
                observe("failed", context, step=step, error=type(exc).__name__, message=str(exc))
            raise
        observe("returned", context, step=step, value=value)
        return value


class ReportingApprove(Reporting, ApproveEpisodeOperator):
    pass


class ReportingPaid(Reporting, PaidGenerationOperator):
    pass


def gate(dag_id: str, **approve: Any) -> None:
    """approve >> generate >> publish in a DAG of its own."""
    with DAG(dag_id, schedule=None, start_date=START, default_args=RETRY_2):
        approve_task = ReportingApprove(
            task_id="approve",
            episode_id=EPISODE,
            store=STORE,
            request=REQUEST,
            estimated_cost=2.5,
            weekly_budget=10,
            **approve,
        )
        generate = ReportingPaid(
            task_id="generate", episode_id=EPISODE, store=STORE, provider_conn_id="ij_provider", request=REQUEST
        )

        @task
        def publish(summary: Any) -> str:
            return str(summary["remote_ref"])

        approve_task >> generate
        publish(generate.output)


gate("ija_gate")
# A second DAG gating the same episodes: it finds the decision and does not ask.
gate("ija_gate_again")
gate("ija_gate_strict", fail_on_reject=True)
gate("ija_timeout_reject", defaults="Reject", response_timeout=dt.timedelta(seconds=1))
gate("ija_timeout_fail", response_timeout=dt.timedelta(seconds=1), retries=0)

# Bad ids: refused on try 1, before any HITL request exists.
with DAG("ija_bad_ids", schedule=None, start_date=START, default_args=RETRY_2):
    ReportingApprove(task_id="unknown", episode_id="2026-W32-9", store=STORE)
    ReportingApprove(task_id="malformed", episode_id="2026-W32-09", store=STORE)

# The paid step requires an approved episode: refused before any connection is looked up.
with DAG("ija_required", schedule=None, start_date=START, default_args=RETRY_2):
    ReportingPaid(
        task_id="generate",
        episode_id=EPISODE,
        store=STORE,
        provider_conn_id="ija_provider",
        request=REQUEST,
        require_approval=True,
    )

    @task.paid_generation(episode_id=EPISODE_TF, store=STORE, provider_conn_id="ija_provider", require_approval=True)
    def generate_taskflow(**context: Any) -> dict[str, Any]:
        observe("built", context)
        return {"prompt": "taskflow approval scenario", "units": 1}

    generate_taskflow()
