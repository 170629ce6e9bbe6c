"""The LLM batch scenarios, in ONE ``dag.test()`` process per vendor (see scenario_process.py).

Started by ``test_llm_batch_runs.py`` with ``IJL_VENDOR`` (``openai`` or ``anthropic``), the vendor's
double in its own OS process (``IJL_API_URL``, ``IJL_API_KEY``) and a DAGs folder holding
``dags_llm_batch/`` and the vendor's example DAG. The double's switches and counters are reached
through its ``/_admin`` API; what each batch's usage was is read back from the double's own answers
(OpenAI's output file, Anthropic's results), so the tests price it on their own.

The worker-kill scenario runs first: each killed run is a forked child of this process (Airflow
already imported, no DAG run yet), SIGKILLed while the double holds the create answer; the retry
is a run of the same DAG run (same run id) in this process.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from tests.airflow.scenario_process import Result, Scenarios, dag_store, provider_admin, run_dag, store_contents, utc
from tests.airflow.scenario_process import killed_run as run_killed

scenario = Scenarios()
VENDOR = os.environ.get("IJL_VENDOR", "openai")
WHEN = utc(2026, 8, 3, 6)
#: The create call's faults, in the double's names: its answer lost (the batch exists), or held.
LOST = {"fault": "drop_after_accept"}
HELD = {"fault": "hang_after_accept" if VENDOR == "openai" else "slow", "fault_times": 1, "slow_seconds": 120}
MODES = ("worker", "deferred")


def admin(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    return provider_admin(os.environ["IJL_API_URL"], os.environ["IJL_API_KEY"], method, path, body)


def accepted() -> int:
    return int(admin("GET", "/_admin/stats")["accepted"])


def api_get(path: str) -> bytes:
    """A read of the vendor's API itself, as its SDK would send it (the double checks the headers)."""
    import httpx

    key = os.environ["IJL_API_KEY"]
    headers = {"Authorization": f"Bearer {key}", "x-api-key": key, "anthropic-version": "2023-06-01"}
    response = httpx.get(os.environ["IJL_API_URL"] + path, headers=headers, timeout=10)
    response.raise_for_status()
    return response.content


def billed(token: str) -> dict[str, Any]:
    """The batches the double created for ``token`` (paid), and the usage lines each reports."""
    stats = admin("GET", "/_admin/stats")
    if VENDOR == "openai":
        ids = [i for i, b in stats["batches"].items() if b["metadata"].get("aij_token") == token]
        count = stats["batches_per_token"].get(token, 0)
        lines = {
            i: api_get(f"/v1/files/{stats['batches'][i]['output_file_id']}/content").decode().splitlines()
            for i in ids
            if stats["batches"][i].get("output_file_id")
        }
    else:
        from airflow_idempotent_jobs.vendors.anthropic._requests import tag_for

        tag = tag_for(token)[:-1]
        ids = [i for i, b in stats["batches"].items() if b["owner"] == "us" and _first_tag(i) == tag]
        count = stats["batches_per_tag"].get(tag, 0)
        lines = {
            i: api_get(f"/v1/messages/batches/{i}/results").decode().splitlines()
            for i in ids
            if stats["batches"][i]["processing_status"] == "ended"
        }
    return {"count": count, "ids": ids, "usage_lines": lines, "batches": {i: stats["batches"][i] for i in ids}}


def _first_tag(batch_id: str) -> str:
    """The tag of a batch's first result line ("" while it runs: it has no results yet)."""
    import httpx

    try:
        first = api_get(f"/v1/messages/batches/{batch_id}/results").decode().splitlines()[0]
    except httpx.HTTPStatusError:
        return ""
    return str(json.loads(first)["custom_id"]).split("_", 1)[0]


def outcome(dag_id: str, run: Result, store: Path | None = None) -> Result:
    episodes = store_contents(store or dag_store(dag_id))
    return {
        "run": run,
        "store": episodes,
        "billed": {e["episode_id"]: billed(e["submission"]["token"]) for e in episodes if e["submission"]["token"]},
        "accepted_total": accepted(),
    }


def killed_run(bag: Any, dag_id: str) -> Result:
    """`scenario_process.killed_run` on the vendor's double, the batch's create answer held."""
    killed = run_killed(bag, dag_id, logical_date=WHEN, admin=admin, held=HELD)
    return {**killed, "created_before_kill": killed.pop("made_before_kill")}


@scenario
def kill(bag: Any) -> Result:
    # Both workers die before this process runs anything: a fork of a process that has run a
    # dag.test() inherits its runner's state without the threads behind it, and hangs.
    killed = {mode: killed_run(bag, f"ijl_{VENDOR}_{mode}_kill") for mode in MODES}
    results: Result = {}
    for mode in MODES:
        dag_id = f"ijl_{VENDOR}_{mode}_kill"
        results[mode] = {**killed[mode], **outcome(dag_id, run_dag(bag, dag_id, logical_date=WHEN))}
    return results


@scenario
def one_lost_answer(bag: Any) -> Result:
    results: Result = {}
    for mode in MODES:
        dag_id = f"ijl_{VENDOR}_{mode}_one"
        admin("POST", "/_admin/config", {**LOST, "fault_times": 1})
        results[mode] = outcome(dag_id, run_dag(bag, dag_id, logical_date=WHEN))
    return results


@scenario
def three_lost_answers(bag: Any) -> Result:
    results: Result = {}
    for mode in MODES:
        dag_id = f"ijl_{VENDOR}_{mode}_three"
        admin("POST", "/_admin/config", {**LOST, "fault_times": 3})
        results[mode] = outcome(dag_id, run_dag(bag, dag_id, logical_date=WHEN))
        results[mode]["faults_left"] = admin("GET", "/_admin/stats")["config"]["fault_times"]
    admin("POST", "/_admin/config", {"fault": None})
    return results


@scenario
def refused(bag: Any) -> Result:
    dag_id = f"ijl_{VENDOR}_refused"
    before = admin("GET", "/_admin/stats")
    run = run_dag(bag, dag_id, logical_date=WHEN)
    after = admin("GET", "/_admin/stats")
    sent = {k: after[k] - before[k] for k in ("submissions", "accepted", "uploads") if k in after}
    return {"run": run, "store": store_contents(dag_store(dag_id)), "sent": sent}


@scenario
def prepared_file(bag: Any) -> Result:
    if VENDOR != "openai":
        return {"skipped": "OpenAI only"}
    from tests.airflow.dags_llm_batch.llm_batch_dags import batch_request

    dag_id, path = "ijl_openai_file", Path(os.environ["IJL_JSONL"])
    lines = [{**line, "method": "POST", "url": "/v1/chat/completions"} for line in batch_request("openai")["requests"]]
    original = "".join(json.dumps(line) + "\n" for line in lines)
    path.write_text(original, encoding="utf-8")
    admin("POST", "/_admin/config", {**LOST, "fault_times": 1})
    lost = run_dag(bag, dag_id, logical_date=WHEN)  # no retries: the run fails, the batch exists
    after_lost = admin("GET", "/_admin/stats")
    path.write_text(original.replace("sky blue", "sky green"), encoding="utf-8")
    changed = run_dag(bag, dag_id, logical_date=WHEN)  # the same run again, after the file changed
    after_changed = admin("GET", "/_admin/stats")
    path.write_text(original, encoding="utf-8")
    same = run_dag(bag, dag_id, logical_date=WHEN)  # the same run again, with the same bytes
    return {
        "lost": lost,
        "changed": changed,
        "uploads_while_changed": after_changed["uploads"] - after_lost["uploads"],
        "submissions_while_changed": after_changed["submissions"] - after_lost["submissions"],
        **outcome(dag_id, same),
    }


@scenario
def example(bag: Any) -> Result:
    dag_id = f"weekly_llm_batch_{VENDOR}"  # as shipped: its retries wait minutes, so no fault here
    run = run_dag(bag, dag_id, logical_date=utc(2026, 9, 7, 4))
    return outcome(dag_id, run, Path(os.environ["AIRFLOW_HOME"]) / "idempotent_jobs")


if __name__ == "__main__":
    scenario.main(sys.argv[1:])
