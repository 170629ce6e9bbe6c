"""``airflow tasks test`` (the real CLI): a throwaway run allocates nothing unless allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_idempotent_jobs import open_store
from tests.airflow.conftest import AirflowHome

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(300)]


def test_tasks_test_persists_nothing_unless_allowed(airflow_home: AirflowHome, tmp_path: Path) -> None:
    stores = tmp_path / "stores"
    done = airflow_home.airflow("tasks", "test", "ij_tasks_test", "allocate", IJ_STORES=str(stores))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "__airflow_temporary_run_" in output
    assert "would allocate " in output and "nothing persisted" in output
    store_root = stores / "ij_tasks_test"
    assert not store_root.exists() or open_store(store_root).list() == []

    allowed = airflow_home.airflow("tasks", "test", "ij_tasks_test", "allocate_allowed", IJ_STORES=str(stores))
    assert allowed.returncode == 0, (allowed.stdout + allowed.stderr)[-3000:]
    (episode,) = open_store(store_root).list()  # the positive control: allowed, it does persist
    assert episode.allocation_key.startswith("airflow:ij_tasks_test:allocate_allowed:__airflow_temporary_run_")
