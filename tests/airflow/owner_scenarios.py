"""Under real ``dag.test()`` runs, in ONE process (see scenario_process.py).

Started by ``test_owner_runs.py`` with a DAGs folder holding only ``dags_owner/``; every DAG writes
to the one store ``IJO_STORE``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from tests.airflow.scenario_process import Result, Scenarios, run_dag, store_contents, utc

scenario = Scenarios()


@scenario
def owners(bag: Any) -> Result:
    """The victim's runs (plain, mapped, retried), then the mimic's two keys in a run of the same run id."""
    victim = run_dag(bag, "ijo_victim", logical_date=utc(2026, 8, 3, 6), conf={"fail_on_try": 1})
    mimic = run_dag(bag, "ijo_mimic", logical_date=utc(2026, 8, 3, 6))
    return {"victim": victim, "mimic": mimic, "store": store_contents(os.environ["IJO_STORE"])}


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
