"""The store-reader scenarios, in ONE ``dag.test()`` process (see scenario_process.py).

Started by ``test_store_readers_runs.py`` with a DAGs folder holding only ``dags_store_readers/``
and one ``AIRFLOW_CONN_IJR_*`` Connection per database it prepared.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from tests.airflow.scenario_process import Result, Scenarios, run_dag, utc

scenario = Scenarios()
DAG_IDS = (
    "ijr_check_missing",
    "ijr_check_older",
    "ijr_check_current",
    "ijr_approve_missing",
    "ijr_approve_older",
    "ijr_paid_missing",
)


def _one_run(dag_id: str) -> Callable[[Any], Result]:
    """A scenario that runs ``dag_id`` once; the test reads the databases afterwards."""
    return lambda bag: {"run": run_dag(bag, dag_id, logical_date=utc(2026, 8, 3, 6))}


for _dag_id in DAG_IDS:
    scenario.by_name[_dag_id] = _one_run(_dag_id)


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
