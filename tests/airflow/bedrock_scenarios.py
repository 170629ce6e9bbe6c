"""Bedrock's scenarios, in ONE ``dag.test()`` process (see scenario_process.py): ours on async invoke, and
Airflow's ``BedrockBatchInferenceOperator`` side by side with ours on batch inference.

Started by ``test_bedrock_runs.py`` (or ``benchmarks/bedrock_side_by_side.py``, through `launch`) with
the Bedrock Runtime double (``IJB_API_URL``) and the control-plane double (``IJB_CONTROL_URL``) each
in its own OS process, and a DAGs folder holding ``dags_bedrock/`` and the example DAG. The doubles'
switches and counters are reached through their ``/_admin`` API; billed jobs are the doubles' own
counts, not what the operators report.

The worker-kill scenario runs first: each killed run is a forked child of this process (Airflow
already imported, no DAG run yet), SIGKILLed while the double holds the answer to an invocation it
made; the retry is a run of the same DAG run (same run id) in this process.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.airflow.scenario_process import (
    REPO,
    Result,
    ScenarioHome,
    Scenarios,
    dag_store,
    provider_admin,
    run_dag,
    store_contents,
    utc,
)
from tests.airflow.scenario_process import killed_run as run_killed

scenario = Scenarios()
WHEN = utc(2026, 8, 3, 6)
MODES = ("worker", "deferred")
#: boto3 makes 3 attempts per call (standard mode): each lost answer below is one attempt's.
LOST = {"fault": "drop_after_accept"}
HELD = {"fault": "hang_after_accept", "fault_times": 1, "slow_seconds": 120}


Admin = Callable[..., Any]


def admin(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """The runtime double's admin API (it needs no credential)."""
    return provider_admin(os.environ["IJB_API_URL"], "unused", method, path, body)


def control(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """The control-plane double's admin API."""
    return provider_admin(os.environ["IJB_CONTROL_URL"], "unused", method, path, body)


def accepted(api: Admin = admin) -> int:
    return int(api("GET", "/_admin/stats")["accepted"])


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


def killed_run(bag: Any, dag_id: str, when: Any = WHEN, api: Admin = admin) -> Result:
    """`scenario_process.killed_run` on a Bedrock double (the runtime's unless ``api``)."""
    return run_killed(bag, dag_id, logical_date=when, admin=api, held=HELD)


@scenario
def kill(bag: Any) -> Result:
    # Both workers die before this process runs anything: a fork of a process that has run a
    # dag.test() inherits its runner's state without the threads behind it, and hangs.
    killed = {mode: killed_run(bag, f"ijb_{mode}_kill") for mode in MODES}
    for side in SIDES:  # the side-by-side runs' workers too; their retries run in side_by_side
        for rule in NAME_RULES:
            _KILLED[(side, rule)] = killed_run(bag, f"sbs_bedrock_{side}", week(rule, "worker_killed"), control)
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


# -- side by side: Airflow's BedrockBatchInferenceOperator and ours ---------------------------------
SIDES = ("airflow", "ours")
#: Whether Bedrock refuses a job name another job holds: AWS documents neither way for batch jobs
#: (its sibling CreateModelImportJob refuses one); the control double's ``unique_names``.
NAME_RULES = ("unique", "reusable")
FAULTS = {
    "none": ("no fault", None),
    "one_attempt_lost": ("one attempt's answer lost", 1),
    "every_attempt_lost": ("every attempt of try 1 lost (3)", 3),
    "worker_killed": ("worker SIGKILLed, answer held", None),
}
_KILLED: dict[tuple[str, str], Result] = {}


def week(rule: str, fault: str) -> Any:
    """The logical date of a (name rule, fault) cell: a week of its own, so each is a new run."""
    return WHEN + dt.timedelta(weeks=1 + NAME_RULES.index(rule) * len(FAULTS) + list(FAULTS).index(fault))


@scenario
def side_by_side(bag: Any) -> Result:
    table: Result = {}
    for rule in NAME_RULES:
        control("POST", "/_admin/config", {"unique_names": rule == "unique"})
        for fault, (_, lost) in FAULTS.items():
            for side in SIDES:
                killed = _KILLED.get((side, rule)) if fault == "worker_killed" else None
                before = accepted(control)
                if lost:
                    control("POST", "/_admin/config", {"fault": "drop_after_accept", "fault_times": lost})
                run = run_dag(bag, f"sbs_bedrock_{side}", logical_date=week(rule, fault))
                control("POST", "/_admin/config", {"fault": None})
                tries = max(t["try_number"] for t in run["tis"] if t["task_id"] == "pay")
                table[f"{side}/{rule}/{fault}"] = {
                    "billed": accepted(control) - before + (killed["made_before_kill"] if killed else 0),
                    "state": run["state"],
                    "tries": tries,
                    "killed": None if killed is None else killed["made_before_kill"],
                }
    return {"table": table}


def markdown(table: Result) -> str:
    """The side-by-side table: billed jobs, the run's state and its paying task's tries, per cell."""
    head = ["operator", "job names", *(title for title, _ in FAULTS.values())]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    names = {"airflow": "Airflow's BedrockBatchInferenceOperator", "ours": "PaidGenerationOperator (ours)"}
    for side in SIDES:
        for rule in NAME_RULES:
            cells = [names[side], "refused when in use" if rule == "unique" else "reusable"]
            for fault in FAULTS:
                cell = table[f"{side}/{rule}/{fault}"]
                plural = "" if cell["billed"] == 1 else "s"
                tries = "try" if cell["tries"] == 1 else "tries"
                cells.append(f"**{cell['billed']} job{plural}**, {cell['state']} ({cell['tries']} {tries})")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- the launcher (the test module and the benchmark) ------------------------------------------------
HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "dags_bedrock", REPO / "example_dags" / "weekly_video_bedrock.py")


@contextlib.contextmanager
def doubles() -> Iterator[dict[str, str]]:
    """Both Bedrock doubles, each in its own process: their URLs."""
    from tests.server_process import server_process

    with (
        server_process("airflow_idempotent_jobs.testing.bedrock_api", "--polls-to-finish", "1") as runtime,
        server_process("airflow_idempotent_jobs.testing.bedrock_control_api", "--polls-to-finish", "1") as plane,
    ):
        yield {"runtime": runtime.url, "control": plane.url}


def connections(urls: dict[str, str]) -> dict[str, Any]:
    """``aws_default`` (async invoke) and ``aws_batch`` (batch inference, Airflow's operator and ours)."""
    from tests.airflow.dags_bedrock.bedrock_dags import BATCH_PRICES, PRICES

    keys = {"conn_type": "aws", "login": "AKIDAIRFLOWRUNS", "password": SECRET}
    runtime = {"region_name": "us-east-1", "endpoint_url": urls["runtime"], "bedrock_prices": PRICES}
    batch = {
        "region_name": "us-east-1",
        "endpoint_url": urls["control"],
        "bedrock_api": "batch_inference",
        "bedrock_prices": BATCH_PRICES,
    }
    return {"aws_default": {**keys, "extra": runtime}, "aws_batch": {**keys, "extra": batch}}


SECRET = "airflow-runs-secret"


def launch(where: ScenarioHome, *, timeout: float = 600) -> Result:
    """The runner, once, in its own process, against both doubles: its results."""
    with doubles() as urls:
        env = where.env(connections=connections(urls), IJB_API_URL=urls["runtime"], IJB_CONTROL_URL=urls["control"])
        return where.run("tests.airflow.bedrock_scenarios", env, timeout=timeout)


@scenario
def example(bag: Any) -> Result:
    run = run_dag(bag, "weekly_video_bedrock", logical_date=utc(2026, 9, 7, 4))  # as shipped, no fault
    return outcome("weekly_video_bedrock", run, Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs")


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
