"""Test DAGs for AllocateEpisodeOperator under real Airflow runs (run by tests/airflow/scenarios.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from airflow_idempotent_jobs.operators import AllocateEpisodeOperator
from tests.airflow.support import FlakyAllocate, observe, report_xcoms, store_for
from tests.airflow.versions import CronDataIntervalTimetable

RETRY_ONCE: dict[str, Any] = {"retries": 1, "retry_delay": dt.timedelta(0)}
UTC_START = pendulum.datetime(2026, 1, 1, tz="UTC")

# Retry, clear, two runs in one week, the next week. Uses the default store ($AIRFLOW_HOME/idempotent_jobs).
with DAG("ij_weekly", schedule=None, start_date=UTC_START, catchup=False, default_args=RETRY_ONCE):

    @task
    def report(**context: Any) -> None:
        report_xcoms(context, "allocate")

    FlakyAllocate(task_id="allocate") >> report()

# ISO week-years: 2026-12-28 and 2027-01-01 are both in 2026-W53.
with DAG("ij_iso_year", schedule=None, start_date=UTC_START, catchup=False, default_args=RETRY_ONCE):
    AllocateEpisodeOperator(task_id="allocate", store=store_for("ij_iso_year"))

# The DAG's time zone decides the week unless timezone= overrides it.
with DAG(
    "ij_berlin",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="Europe/Berlin"),
    catchup=False,
    default_args=RETRY_ONCE,
):
    AllocateEpisodeOperator(task_id="allocate", store=store_for("ij_berlin"))
    AllocateEpisodeOperator(task_id="allocate_utc", timezone="UTC", store=store_for("ij_berlin"))

# Runs without a logical date; templated overrides; a week source the run cannot provide.
with DAG(
    "ij_manual",
    schedule=None,
    start_date=UTC_START,
    catchup=False,
    default_args={"retries": 2, "retry_delay": dt.timedelta(0)},
    params={"week": "2026-W40", "batch": "7"},
):

    @task
    def report_manual(**context: Any) -> None:
        observe("run", context, logical_date=context.get("logical_date"), run_after=context["dag_run"].run_after)
        report_xcoms(context, "allocate")

    @task
    def report_templated(**context: Any) -> None:
        report_xcoms(context, "templated")

    AllocateEpisodeOperator(task_id="allocate", store=store_for("ij_manual")) >> report_manual()
    templated = AllocateEpisodeOperator(
        task_id="templated",
        week="{{ params.week }}",
        allocation_key="batch-{{ params.batch }}",
        store=store_for("ij_manual"),
    )
    templated >> report_templated()
    AllocateEpisodeOperator(task_id="strict", week_source="logical_date", store=store_for("ij_manual"))
    # The key templated holds in 2026-W40, asked for in 2026-W41: a conflict, no retry can fix it.
    templated >> AllocateEpisodeOperator(
        task_id="conflict", week="2026-W41", allocation_key="batch-{{ params.batch }}", store=store_for("ij_manual")
    )
    # A store that cannot be opened (its parent is a file): StoreUnavailable, which Airflow retries.
    AllocateEpisodeOperator(task_id="unavailable", store="/etc/hostname/idempotent_jobs")

# One episode per mapped task instance, stable across a retry.
with DAG("ij_mapped", schedule=None, start_date=UTC_START, catchup=False, default_args=RETRY_ONCE):

    @task
    def report_mapped(**context: Any) -> None:
        values = context["ti"].xcom_pull(task_ids="allocate")
        observe("mapped_xcoms", context, return_values=list(values or []))

    (
        FlakyAllocate.partial(task_id="allocate", store=store_for("ij_mapped")).expand(
            fingerprint=["cover-art", "voice-over", "trailer"]
        )
        >> report_mapped()
    )

# `airflow tasks test` runs under a throwaway run id: nothing is persisted unless allowed.
with DAG("ij_tasks_test", schedule=None, start_date=UTC_START, catchup=False):
    AllocateEpisodeOperator(task_id="allocate", store=store_for("ij_tasks_test"))
    AllocateEpisodeOperator(task_id="allocate_allowed", allow_test_runs=True, store=store_for("ij_tasks_test"))

# The store behind a plain `postgres` Connection (skipped by the runner when no server is configured).
with DAG("ij_pg_store", schedule=None, start_date=UTC_START, catchup=False, default_args=RETRY_ONCE):

    @task
    def report_pg(**context: Any) -> None:
        report_xcoms(context, "allocate")

    FlakyAllocate(task_id="allocate", store_conn_id="ij_pg_store") >> report_pg()

# week_source: a weekly data interval ending on Sundays, and a run_after apart from the logical date.
with DAG(
    "ij_week_sources",
    schedule=CronDataIntervalTimetable("0 0 * * SUN", timezone="UTC"),
    start_date=UTC_START,
    catchup=False,
):
    for source in (None, "logical_date", "data_interval_end", "run_after"):
        AllocateEpisodeOperator(
            task_id=f"by_{source or 'default'}", week_source=source, store=store_for("ij_week_sources")
        )
