"""The ``request=`` scenarios, in ONE ``dag.test()`` process (see scenario_process.py).

Started by ``test_request_runs.py`` with a DAGs folder holding only ``dags_request/``, the recording
secrets backend, and the provider server in its own process. Each run's Connection lookups, the
provider's counters and the store are read before and after it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.airflow.scenario_process import (
    Result,
    Scenarios,
    dag_store,
    provider,
    run_dag,
    secrets_lookups,
    store_contents,
    utc,
)

scenario = Scenarios()


def provider_stats() -> Any:
    return provider("GET", "/_admin/stats")


def observed_run(bag: Any, dag_id: str, **kwargs: Any) -> Result:
    before, stats = len(secrets_lookups()), provider_stats()  # the server is the session's: count this run only
    run = run_dag(bag, dag_id, logical_date=utc(2026, 8, 3, 6), **kwargs)
    after = provider_stats()
    new_jobs = [job for ref, job in after["jobs"].items() if ref not in stats["jobs"]]
    return {
        "run": run,
        "lookups": secrets_lookups()[before:],
        "submissions": after["submissions"] - stats["submissions"],
        "requests_sent": sorted((job["request"] for job in new_jobs), key=json.dumps),
    }


@scenario
def requests(bag: Any) -> Result:
    from airflow_idempotent_jobs import open_store

    with open_store(dag_store("ijr")) as store:  # 2026-W32-0 .. -19: one episode per paid task
        for n in range(20):
            store.allocate("2026-W32", f"episode-{n}")
    results = {name: observed_run(bag, name) for name in ("ijr_refused", "ijr_native_refused", "ijr_decorated")}
    results["ijr_native_ok"] = observed_run(bag, "ijr_native_ok")  # last: the only run that pays
    results["store"] = {e["episode_id"]: e["submission"]["state"] for e in store_contents(dag_store("ijr"))}
    return results


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
