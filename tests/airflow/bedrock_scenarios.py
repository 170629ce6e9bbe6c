"""Bedrock's async invoke scenarios, in ONE ``dag.test()`` process (see scenario_process.py).

Started by ``test_bedrock_runs.py`` with the Bedrock Runtime double in its own OS process
(``IJB_API_URL``) and a DAGs folder holding ``dags_bedrock/`` and the example DAG. The double's
switches and counters are reached through its ``/_admin`` API; billed invocations are the double's
own count per clientRequestToken, not what the operator reports.

The worker-kill scenario runs first: each killed run is a forked child of this process (Airflow
already imported, no DAG run yet), SIGKILLed while the double holds the answer to an invocation it
made; the retry is a run of the same DAG run (same run id) in this process.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tests.airflow.scenario_process import Result, Scenarios, dag_store, provider_admin, run_dag, store_contents, utc

scenario = Scenarios()
WHEN = utc(2026, 8, 3, 6)
MODES = ("worker", "deferred")
#: boto3 makes 3 attempts per call (standard mode): each lost answer below is one attempt's.
LOST = {"fault": "drop_after_accept"}
HELD = {"fault": "hang_after_accept", "fault_times": 1, "slow_seconds": 120}


def admin(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    return provider_admin(os.environ["IJB_API_URL"], "unused", method, path, body)  # the admin API needs none


def accepted() -> int:
    return int(admin("GET", "/_admin/stats")["accepted"])


def billed(token: str) -> dict[str, Any]:
    """The invocations the double made for the episode's token (each one billed)."""
    from airflow_idempotent_jobs.vendors.bedrock import client_request_token

    sent = client_request_token(token)
    stats = admin("GET", "/_admin/stats")
    arns = [arn for arn, i in stats["invocations"].items() if i.get("clientRequestToken") == sent]
    return {"count": stats["accepted_per_token"].get(sent, 0), "arns": arns}


def outcome(dag_id: str, run: Result, store: Path | None = None) -> Result:
    episodes = store_contents(store or dag_store(dag_id))
    stats = admin("GET", "/_admin/stats")
    return {
        "run": run,
        "store": episodes,
        "billed": {e["episode_id"]: billed(e["submission"]["token"]) for e in episodes if e["submission"]["token"]},
        "accepted_total": stats["accepted"],
        "faults_left": stats["config"]["fault_times"],
    }


def killed_run(bag: Any, dag_id: str) -> Result:
    """Run ``dag_id`` in a forked child; SIGKILL it once the double made the invocation (its answer held)."""
    from airflow import settings

    admin("POST", "/_admin/config", HELD)
    before = accepted()
    assert settings.engine is not None
    settings.engine.dispose()  # no pooled connection shared with the child
    pid = os.fork()
    if pid == 0:  # the child: the worker that dies
        try:
            run_dag(bag, dag_id, logical_date=WHEN)
        finally:
            os._exit(3)  # never reached when killed as planned
    deadline = time.monotonic() + 120
    while accepted() == before and time.monotonic() < deadline:
        time.sleep(0.05)
    made = accepted() - before
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)  # reaped: its pid is gone, as a dead worker's
    admin("POST", "/_admin/config", {"fault": None})
    return {
        "made_before_kill": made,
        "killed_by": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "store_after_kill": store_contents(dag_store(dag_id)),
    }


@scenario
def kill(bag: Any) -> Result:
    # Both workers die before this process runs anything: a fork of a process that has run a
    # dag.test() inherits its runner's state without the threads behind it, and hangs.
    killed = {mode: killed_run(bag, f"ijb_{mode}_kill") for mode in MODES}
    return {
        mode: {**killed[mode], **outcome(f"ijb_{mode}_kill", run_dag(bag, f"ijb_{mode}_kill", logical_date=WHEN))}
        for mode in MODES
    }


def _with_lost_answers(bag: Any, shape: str, lost: int) -> Result:
    results: Result = {}
    for mode in MODES:
        admin("POST", "/_admin/config", {**LOST, "fault_times": lost})
        results[mode] = outcome(f"ijb_{mode}_{shape}", run_dag(bag, f"ijb_{mode}_{shape}", logical_date=WHEN))
    admin("POST", "/_admin/config", {"fault": None})
    return results


@scenario
def one_lost_answer(bag: Any) -> Result:
    """One attempt's answer lost: boto3's next attempt, same token, gets the invocation back."""
    return _with_lost_answers(bag, "one", 1)


@scenario
def every_attempt_lost(bag: Any) -> Result:
    """Each of boto3's 3 attempts loses its answer: the try fails unknown, Airflow's next try resends."""
    return _with_lost_answers(bag, "lost", 3)


@scenario
def three_episodes_seven_lost(bag: Any) -> Result:
    """Seven answers lost across a mapped run's three episodes: at least one task's every attempt."""
    return _with_lost_answers(bag, "three", 7)


@scenario
def refused(bag: Any) -> Result:
    before = admin("GET", "/_admin/stats")
    run = run_dag(bag, "ijb_refused", logical_date=WHEN)
    after = admin("GET", "/_admin/stats")
    sent = {k: after[k] - before[k] for k in ("submissions", "accepted")}
    return {"run": run, "store": store_contents(dag_store("ijb_refused")), "sent": sent}


@scenario
def example(bag: Any) -> Result:
    run = run_dag(bag, "weekly_video_bedrock", logical_date=utc(2026, 9, 7, 4))  # as shipped, no fault
    return outcome("weekly_video_bedrock", run, Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs")


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
