"""The test harness's side of the Airflow versions the package supports (3.1, 3.2, 3.3).

The package's own differences live in ``airflow_idempotent_jobs.airflow_compat``; these are the
paths only the tests use, each the newest release's first, then the older one. Resolved on first
use (a module attribute hook), so the secrets backend can import its base class while Airflow's
configuration is still loading, without importing the rest.
"""

from __future__ import annotations

import importlib
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk import CronDataIntervalTimetable
    from airflow.sdk._shared.module_loading import import_string
    from airflow.sdk.bases.secrets_backend import BaseSecretsBackend

__all__ = [
    "AIRFLOW_VERSION",
    "BaseSecretsBackend",
    "CronDataIntervalTimetable",
    "DagBag",
    "at_least",
    "import_string",
    "serialize_for_dag_test",
]

#: Where each name lives: from the newest release's module to the oldest's (Airflow 3.1).
_PLACES: dict[str, tuple[str, ...]] = {
    "DagBag": ("airflow.dag_processing.dagbag", "airflow.models.dagbag"),
    "import_string": ("airflow.sdk._shared.module_loading", "airflow.utils.module_loading"),
    "BaseSecretsBackend": ("airflow.sdk.bases.secrets_backend", "airflow.secrets.base_secrets"),
    "CronDataIntervalTimetable": ("airflow.sdk", "airflow.timetables.interval"),
}

#: (major, minor) of the Airflow under test.
AIRFLOW_VERSION: tuple[int, int] = tuple(int(part) for part in version("apache-airflow").split(".")[:2])  # type: ignore[assignment]
#: Before 3.3 ``dag.test()`` is 4-6x slower per task: a scenario process's timeout is multiplied by
#: this there (3.2.2's scenarios took 240-300 s on a CI machine, over the 300 s that fits 3.3).
DAG_TEST_SLOWDOWN = 1 if AIRFLOW_VERSION >= (3, 3) else 3
#: Airflow 3.1.0's ``dag.test()`` refuses a DAG that is not serialized yet ("Cannot create DagRun ...
#: because the dag is not serialized", apache/airflow#56657, fixed in 3.1.1 by #56660).
_DAG_TEST_NEEDS_SERIALIZED_DAGS = version("apache-airflow") == "3.1.0"


def __getattr__(name: str) -> Any:
    places = _PLACES.get(name)
    if places is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for module in places:
        try:
            found = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        globals()[name] = found
        return found
    raise ImportError(f"{name} is in none of {places} on Airflow {AIRFLOW_VERSION}")


def at_least(major: int, minor: int) -> Any:
    """A pytest mark skipping a test that needs a feature of Airflow ``major.minor`` or later."""
    import pytest

    return pytest.mark.skipif(
        (major, minor) > AIRFLOW_VERSION, reason=f"needs Airflow {major}.{minor}+ (this is {AIRFLOW_VERSION})"
    )


def serialize_for_dag_test(bag: Any) -> None:
    """On Airflow 3.1.0 only: write the bag's DAGs to the metadata database, as ``airflow dags
    reserialize`` does, so that its ``dag.test()`` can run them; every later release does it itself."""
    if not _DAG_TEST_NEEDS_SERIALIZED_DAGS:
        return
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.models.dagbag import sync_bag_to_db

    DagBundlesManager().sync_bundles_to_db()
    sync_bag_to_db(bag, "dags-folder", None)


#: ``dag.test()`` passes the exception to ``on_failure_callback`` from Airflow 3.3 on; before, None.
CALLBACKS_GET_THE_EXCEPTION = AIRFLOW_VERSION >= (3, 3)


def failure_text(observation: dict[str, Any], runner_log: str) -> str:
    """What a failure callback recorded as the task's error; on Airflow 3.1 and 3.2, where ``dag.test()``
    gives the callback no exception, the runner's log instead (every task's error is logged there)."""
    if CALLBACKS_GET_THE_EXCEPTION:
        return str(observation["message"])
    from pathlib import Path

    return Path(runner_log).read_text(errors="replace")
