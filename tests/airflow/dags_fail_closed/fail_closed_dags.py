"""DAGs for the fail-closed rules of the Airflow layer (run by tests/airflow/fail_closed_scenarios.py).

They live in a DAGs folder of their own: the runner executes them with ``[core] executor =
CeleryExecutor`` (nothing of Celery runs: ``dag.test()`` executes tasks in-process), which is the
configuration under which an implicit per-host store must be refused.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from tests.airflow.reporting import ReportingAllocate, ReportingCheck, ReportingPaid
from tests.airflow.support import observe, store_for

RETRY_3: dict[str, Any] = {"retries": 3, "retry_delay": dt.timedelta(0)}
UTC_START = pendulum.datetime(2026, 1, 1, tz="UTC")

# -- which store, under an executor that runs tasks on several hosts -------------------------------
# No store=, no store_conn_id=: refused unless [idempotent_jobs] store / store_conn_id is set.
with DAG("ijg_default_store", schedule=None, start_date=UTC_START, default_args=RETRY_3):
    # The check runs whatever the allocation did (trigger_rule), so both refusals are seen.
    ReportingAllocate(task_id="allocate") >> ReportingCheck(
        task_id="check", week="2026-W32", require_episodes=False, trigger_rule="all_done"
    )

# The paid step opens its store the same way: refused before any connection is read.
with DAG("ijg_default_store_paid", schedule=None, start_date=UTC_START, default_args=RETRY_3):
    ReportingPaid(
        task_id="generate", episode_id="2026-W32-0", provider_conn_id="ijg_no_such_provider", request={"prompt": "x"}
    )

with DAG("ijg_explicit_store", schedule=None, start_date=UTC_START, default_args=RETRY_3):
    ReportingAllocate(task_id="by_store", store=store_for("ijg_explicit_store"))
    ReportingAllocate(task_id="by_conn", store_conn_id="ijg_file_store")

# The week's time zone: the operator's, else the DAG's own, else [idempotent_jobs] timezone.
# No start_date: the DAG takes Airflow's [core] default_timezone (UTC), i.e. no zone of its own.
with DAG("ijg_zone_default", schedule=None, default_args=RETRY_3):
    ReportingAllocate(task_id="allocate", store=store_for("ijg_zone_default"))
    ReportingAllocate(task_id="allocate_utc", timezone="UTC", store=store_for("ijg_zone_default_utc"))

with DAG(
    "ijg_zone_new_york",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="America/New_York"),
    default_args=RETRY_3,
):
    ReportingAllocate(task_id="allocate", store=store_for("ijg_zone_new_york"))

# -- templates that render "None", "", "null" ------------------------------------------------------
with DAG("ijg_templates", schedule=None, start_date=UTC_START, default_args=RETRY_3):
    store = store_for("ijg_templates")
    ReportingAllocate(task_id="key_none", allocation_key="{{ dag_run.conf.get('key') }}", store=store)
    ReportingAllocate(task_id="key_blank", allocation_key="{{ '  ' }}", store=store)
    ReportingAllocate(task_id="key_null", allocation_key="{{ 'NULL' }}", store=store)
    ReportingAllocate(task_id="key_empty", allocation_key="{{ dag_run.conf.get('key', '') }}", store=store)
    ReportingAllocate(task_id="week_none", week="{{ dag_run.conf.get('week') }}", store=store)
    ReportingAllocate(task_id="fingerprint_none", fingerprint="{{ dag_run.conf.get('hash') }}", store=store)
    ReportingAllocate(task_id="timezone_none", timezone="{{ dag_run.conf.get('tz') }}", store=store)
    ReportingAllocate(task_id="store_empty", store="{{ dag_run.conf.get('store', '') }}")
    ReportingAllocate(task_id="key_given", allocation_key="{{ dag_run.conf.get('key', 'fallback') }}", store=store)

# An explicit key on a mapped task: one episode per map index, unless the author opts out.
with DAG("ijg_mapped_key", schedule=None, start_date=UTC_START, default_args=RETRY_3):
    ReportingAllocate.partial(
        task_id="per_item", allocation_key="batch-{{ ds }}", store=store_for("ijg_mapped_key")
    ).expand(fingerprint=["cover-art", "voice-over", "trailer"])
    ReportingAllocate.partial(
        task_id="shared",
        allocation_key="shared-{{ ds }}",
        key_per_map_index=False,
        store=store_for("ijg_mapped_key_shared"),
    ).expand(lock_timeout=[30.0, 31.0, 32.0])

# -- a store URL whose password comes from a Variable ----------------------------------------------
# The rendered value Airflow stores for the UI must not carry it, long or short (the secrets masker
# skips values under 5 characters), whatever the Variable is called (Airflow masks the values of
# Variables named like "password" by itself: these are not).
PG_STORE = (
    "postgresql://{{ var.value.ijg_pg_user }}:{{ var.value.ijg_pg_pass }}@{{ var.value.ijg_pg_hostport }}"
    "/{{ var.value.ijg_pg_db }}?namespace=ijg-secret"
)
with DAG("ijg_secret_store", schedule=None, start_date=UTC_START, default_args=RETRY_3):
    allocate = ReportingAllocate(task_id="allocate", store=PG_STORE)
    short = ReportingAllocate(
        task_id="allocate_short",
        allocation_key="short-{{ ds }}",
        store=PG_STORE.replace("ijg_pg_pass", "ijg_pg_pw"),
    )
    # A mapped task renders through another path (the unmapped copy of the operator).
    mapped = ReportingAllocate.partial(task_id="mapped", store=PG_STORE.replace("ijg_pg_pass", "ijg_pg_pw")).expand(
        fingerprint=["m0", "m1"]
    )
    allocate >> short >> mapped >> ReportingCheck(task_id="check", week="2026-W32", store=PG_STORE)
    # The paid step renders its store the same way (it fails on the unknown episode, after rendering).
    ReportingPaid(
        task_id="generate",
        episode_id="2026-W32-9",
        provider_conn_id="ijg_no_such_provider",
        request={"prompt": "x"},
        store=PG_STORE.replace("ijg_pg_pass", "ijg_pg_pw"),
    )
    # A template laid out over several lines renders the URL with blanks around it: refused, and
    # its password is still neither shown nor repeated in the refusal.
    ReportingAllocate(task_id="allocate_padded", allocation_key="padded-{{ ds }}", store=f"\n  {PG_STORE}\n")
    # The idempotent_jobs_store connection: credentials in login/password, never in the host.
    ReportingAllocate(task_id="by_conn", allocation_key="conn-{{ ds }}", store_conn_id="ijg_pg_conn")
    ReportingAllocate(task_id="by_conn_host_password", store_conn_id="ijg_pg_conn_host_password")

# -- the check operator fed by a mapped allocation -------------------------------------------------
with DAG("ijg_check_mapped", schedule=None, start_date=UTC_START, default_args=RETRY_3):
    mapped = ReportingAllocate.partial(task_id="allocate", store=store_for("ijg_check_mapped")).expand(
        fingerprint=["a", "b", "c"]
    )
    mapped >> ReportingCheck(
        task_id="check", episode_ids="{{ ti.xcom_pull('allocate') }}", store=store_for("ijg_check_mapped")
    )
    mapped >> ReportingCheck(
        task_id="check_bad", episode_ids="{{ ['2026-W32-0', 7] }}", store=store_for("ijg_check_mapped")
    )
    mapped >> ReportingCheck(
        task_id="check_none", episode_ids="{{ ti.xcom_pull('nothing_here') }}", store=store_for("ijg_check_mapped")
    )

# -- the longest ids Airflow allows (250 characters each) ------------------------------------------
LONG_DAG_ID = "ijg_long_" + "d" * 241
LONG_TASK_ID = "allocate_" + "t" * 241
with DAG(LONG_DAG_ID, schedule=None, start_date=UTC_START, default_args=RETRY_3):

    @task
    def report_long(**context: Any) -> None:
        ti = context["ti"]
        observe("xcoms", context, key=ti.xcom_pull(task_ids=LONG_TASK_ID, key="allocation_key"))

    ReportingAllocate(task_id=LONG_TASK_ID, store=store_for("ijg_long")) >> report_long()
    ReportingAllocate.partial(task_id="mapped_" + "m" * 243, store=store_for("ijg_long")).expand(fingerprint=["x", "y"])
