"""Operators for test DAGs that record how ``execute`` ended (see ``support.observe``), then re-raise.

A test reads back the value a task returned, or its exception's class and message: the one line
a user of Airflow would see in the task's failure.
"""

from __future__ import annotations

from typing import Any

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, CheckEpisodesOperator, PaidGenerationOperator
from tests.airflow.support import observe, report_paid, store_for

__all__ = ["Reporting", "ReportingAllocate", "ReportingCheck", "ReportingPaid", "allocate_pay_report"]


class Reporting:
    """Records how ``execute`` ended (the value, or the exception's class and message), then re-raises."""

    def execute(self, context: Any) -> Any:
        try:
            value = super().execute(context)  # type: ignore[misc]
        except Exception as exc:
            observe("failed", context, error=type(exc).__name__, message=str(exc))
            raise
        observe("returned", context, value=value)
        return value


class ReportingAllocate(Reporting, AllocateEpisodeOperator):
    pass


class ReportingCheck(Reporting, CheckEpisodesOperator):
    pass


class ReportingPaid(Reporting, PaidGenerationOperator):
    pass


def allocate_pay_report(dag_id: str, **paid: Any) -> None:
    """``allocate >> pay >> report`` in the DAG being defined: an episode on the DAG's own store, the paid
    task (``paid``: its arguments), a step recording the XComs the paid task pushed."""
    from airflow.sdk import task

    @task(task_id="report")
    def report(**context: Any) -> None:
        report_paid(context, "pay")

    allocate = AllocateEpisodeOperator(task_id="allocate", store=store_for(dag_id))
    pay = ReportingPaid(
        task_id="pay", episode_id="{{ ti.xcom_pull(task_ids='allocate') }}", store=store_for(dag_id), **paid
    )
    allocate >> pay >> report()
