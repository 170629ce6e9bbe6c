"""Operators for test DAGs that record how ``execute`` ended (see ``support.observe``), then re-raise.

A test reads back the value a task returned, or its exception's class and message: the one line
a user of Airflow would see in the task's failure.
"""

from __future__ import annotations

from typing import Any

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, CheckEpisodesOperator, PaidGenerationOperator
from tests.airflow.support import observe

__all__ = ["Reporting", "ReportingAllocate", "ReportingCheck", "ReportingPaid"]


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
