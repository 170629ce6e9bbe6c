"""What a DAG file sees at parse time: cheap imports, no I/O in constructors, templated fields."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_idempotent_jobs.errors import (
    AllocationConflict,
    EpisodeNotFound,
    InvalidIdentifier,
    StoreCorrupted,
    StoreUnavailable,
    SubmissionStateUnknown,
)
from airflow_idempotent_jobs.operators import AllocateEpisodeOperator, PaidGenerationOperator
from airflow_idempotent_jobs.operators._common import AirflowFailException, default_store_path, task_errors
from airflow_idempotent_jobs.operators.allocate import default_allocation_key

pytestmark = pytest.mark.airflow


def test_importing_the_operators_loads_no_store_hook_or_paid_layer() -> None:
    code = (
        "import sys, json, airflow.sdk; before = set(sys.modules);"
        "import airflow_idempotent_jobs.operators;"
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    added = json.loads(done.stdout.strip().splitlines()[-1])
    assert added == [
        "airflow_idempotent_jobs.operators",
        "airflow_idempotent_jobs.operators._common",
        "airflow_idempotent_jobs.operators.allocate",
        "airflow_idempotent_jobs.operators.check",
        "airflow_idempotent_jobs.operators.paid_generation",
    ]


def test_constructors_only_store_their_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    allocate = AllocateEpisodeOperator(task_id="a", store=str(tmp_path / "store"), store_conn_id="not_defined")
    paid = PaidGenerationOperator(
        task_id="p", episode_id="{{ ti.xcom_pull('a') }}", provider_conn_id="not_defined", request={"x": 1}
    )
    assert (allocate.store, allocate.store_conn_id, allocate.week_source) == (
        str(tmp_path / "store"),
        "not_defined",
        None,
    )
    assert (paid.episode_id, paid.provider_conn_id, paid.deferrable) == (
        "{{ ti.xcom_pull('a') }}",
        "not_defined",
        False,
    )
    assert list(tmp_path.iterdir()) == []  # nothing created, no connection looked up (it would raise)


def test_templated_fields() -> None:
    assert set(AllocateEpisodeOperator.template_fields) == {
        "week",
        "allocation_key",
        "fingerprint",
        "store",
        "timezone",
    }
    assert set(PaidGenerationOperator.template_fields) == {"episode_id", "request", "store"}


def test_week_source_is_checked_when_the_dag_is_parsed() -> None:
    with pytest.raises(ValueError, match="week_source must be one of"):
        AllocateEpisodeOperator(task_id="a", week_source="start_date")


def test_default_key_and_default_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert default_allocation_key("d", "t", "scheduled__2026-08-03", -1) == "airflow:d:t:scheduled__2026-08-03"
    assert default_allocation_key("d", "t", "r", None) == "airflow:d:t:r"
    assert default_allocation_key("d", "t", "r", 2) == "airflow:d:t:r:2"
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    assert default_store_path() == tmp_path / "idempotent_jobs"


@pytest.mark.parametrize(
    "error",
    [
        InvalidIdentifier("episode id", "x", "bad"),
        AllocationConflict("k", "held in another week", ("2026-W32-0",)),
        StoreCorrupted("/s/state.json", "unknown schema_version 9"),
        EpisodeNotFound("2026-W32-9"),
        SubmissionStateUnknown("2026-W32-0"),
    ],
)
def test_errors_a_retry_cannot_fix_fail_the_task(error: Exception) -> None:
    with pytest.raises(AirflowFailException) as caught, task_errors():
        raise error
    assert caught.value.__cause__ is error
    assert str(caught.value) == str(error)


@pytest.mark.parametrize("error", [StoreUnavailable("lock timeout"), OSError("disk"), RuntimeError("x")])
def test_other_errors_stay_retryable(error: Exception) -> None:
    with pytest.raises(type(error)) as caught, task_errors():
        raise error
    assert caught.value is error
