"""Replicate's scenarios, in ONE ``dag.test()`` process (see scenario_process.py).

Started by ``test_replicate_runs.py`` through `launch`, with the Replicate double
(``airflow_idempotent_jobs.testing.replicate_api``) in its own OS process (``IJR_API_URL``) and a
DAGs folder holding ``dags_replicate/`` and the example DAG. The double's switches and counters are
reached through its ``/_admin`` API; billed predictions are the double's own count per token, not
what the operator reports. The worker-kill scenario runs first: it forks.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.airflow.scenario_process import (
    REPO,
    Result,
    ScenarioHome,
    Scenarios,
    dag_store,
    killed_run,
    provider_admin,
    run_dag,
    store_contents,
    utc,
)

scenario = Scenarios()
WHEN = utc(2026, 8, 3, 6)
SECRET = "r8_airflow-runs-secret-0123456789"


def admin(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """The double's admin API (behind the same Bearer token as the API)."""
    return provider_admin(os.environ["IJR_API_URL"], os.environ["IJR_API_TOKEN"], method, path, body)


def billed(token: str, stats: dict[str, Any]) -> dict[str, Any]:
    """The predictions the double made with the episode's token in their input (each one billed)."""
    mine = {
        pid: p for pid, p in stats["predictions"].items() if (p.get("input") or {}).get("idempotency_token") == token
    }
    return {
        "count": stats["predictions_per_token"].get(token, 0),
        "ids": sorted(mine),
        "predict_times": {pid: (p.get("metrics") or {}).get("predict_time") for pid, p in mine.items()},
    }


def outcome(dag_id: str, run: Result, store: Path | None = None) -> Result:
    episodes = store_contents(store or dag_store(dag_id))
    stats = admin("GET", "/_admin/stats")
    return {
        "run": run,
        "store": episodes,
        "billed": {
            e["episode_id"]: billed(e["submission"]["token"], stats) for e in episodes if e["submission"]["token"]
        },
        "accepted_total": stats["accepted"],
        "list_calls": stats["list_calls"],
        "faults_left": stats["config"]["fault_times"],
    }


@scenario
def kill(bag: Any) -> Result:
    """First (it forks): the worker SIGKILLed while the double holds the create answer, then the same
    DAG run again: the retry finds the prediction by token lookup."""
    held = {"fault": "slow", "fault_times": 1, "slow_seconds": 120}
    killed = killed_run(bag, "ijr_kill", logical_date=WHEN, admin=admin, held=held)
    before = admin("GET", "/_admin/stats")["accepted"]
    return {**killed, **outcome("ijr_kill", run_dag(bag, "ijr_kill", logical_date=WHEN)), "accepted_before": before}


@scenario
def one_lost_answer(bag: Any) -> Result:
    """The create call's answer lost once (the prediction exists): the try fails unknown, the next
    finds the prediction by token lookup and adopts it."""
    before = admin("GET", "/_admin/stats")["accepted"]
    admin("POST", "/_admin/config", {"fault": "drop_after_accept", "fault_times": 1})
    try:
        run = run_dag(bag, "ijr_one", logical_date=WHEN)
    finally:
        admin("POST", "/_admin/config", {"fault": None})
    return {**outcome("ijr_one", run), "accepted_before": before}


@scenario
def example(bag: Any) -> Result:
    run = run_dag(bag, "weekly_image_replicate", logical_date=utc(2026, 9, 7, 4))  # as shipped, no fault
    return outcome("weekly_image_replicate", run, Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs")


# -- the launcher (the test module) ------------------------------------------------------------------
HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "dags_replicate", REPO / "example_dags" / "weekly_image_replicate.py")


@contextlib.contextmanager
def double() -> Iterator[str]:
    """The Replicate double in its own process: its URL."""
    from tests.server_process import server_process

    args = ("--token", SECRET, "--polls-to-finish", "1")
    with server_process("airflow_idempotent_jobs.testing.replicate_api", *args) as api:
        yield api.url


def connections(url: str) -> dict[str, Any]:
    """``replicate_default``: the double's URL and token, the prices of the DAGs' model."""
    from tests.airflow.dags_replicate.replicate_dags import PRICES

    return {
        "replicate_default": {
            "conn_type": "idempotent_jobs_replicate",
            "host": url,
            "password": SECRET,
            "extra": {"prices": PRICES},
        }
    }


def launch(where: ScenarioHome, *, timeout: float = 600) -> Result:
    """The runner, once, in its own process, against the double: its results."""
    with double() as url:
        env = where.env(connections=connections(url), IJR_API_URL=url, IJR_API_TOKEN=SECRET)
        return where.run("tests.airflow.replicate_scenarios", env, timeout=timeout)


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
