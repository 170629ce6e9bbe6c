"""Airflow's own LLM batch operators against ours, measured in real ``dag.test()`` runs: the runner and its launcher.

Six weekly DAGs (``dags_llm_side_by_side/``) pay one batch of the same two prompts each, three
times: with no fault, with the answer to one "create batch" call lost (the batch exists, the
connection drops), and with the answers to the next three create calls lost. The doubles of the
OpenAI and Anthropic APIs run in their own OS processes; a run's billed batches are read from
their counters (batches created during the run), not from what the operators report.

- The scenario process (``python -m tests.airflow.llm_side_by_side_scenarios OUT.json``): one
  scenario per fault, each running every DAG once (a week of its own) and writing, per operator,
  the batches billed, the create calls made, the run's state and the tries of ``generate``.
- The launcher (`doubles`, `runner_env`, `migrated_home`, `run_side_by_side`), for the test
  module and ``benchmarks/llm_side_by_side.py``; `rows` and `markdown` read the results as a table.

Module level imports only the standard library: the scenario process imports this before Airflow.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import traceback
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from tests.airflow.scenario_process import (
    Result,
    ScenarioHome,
    Scenarios,
    airflow_env,
    copy_dags,
    dag_store,
    provider_admin,
    run_dag,
    store_contents,
    ti,
    utc,
)
from tests.server_process import server_process

HERE = Path(__file__).resolve().parent
DAGS = HERE / "dags_llm_side_by_side"

OPENAI_CONN: Final = "sbs_openai"
ANTHROPIC_CONN: Final = "sbs_anthropic"
PYDANTICAI_OPENAI_CONN: Final = "sbs_pydanticai_openai"
PYDANTICAI_ANTHROPIC_CONN: Final = "sbs_pydanticai_anthropic"
OPENAI_KEY: Final = "sk-sbs-0penai-5e1d7c"
ANTHROPIC_KEY: Final = "sk-ant-sbs-4b7f20"
OPENAI_MODEL: Final = "gpt-5-mini"
ANTHROPIC_MODEL: Final = "claude-test-1"
PROMPTS: Final = ("Summarize this week's episode in one sentence.", "Suggest a title for this week's episode.")
MAX_TOKENS: Final = 64
#: Batch prices per million tokens (ours needs them before it sends anything; Airflow's ignore them).
PRICES: Final = {
    OPENAI_MODEL: {"input": 0.125, "output": 1.0, "cached_input": 0.0125},
    ANTHROPIC_MODEL: {"input": 1.5, "output": 7.5, "cached_input": 0.15, "cache_write": 1.875},
}

#: The operators compared: (row, DAG id, the API it pays through), in the table's order.
OPERATORS: Final = (
    ("OpenAITriggerBatchOperator (providers-openai 2.2.0)", "sbs_openai_trigger", "openai"),
    ("LLMBatchOperator, OpenAI (providers-common-ai 1.0.0)", "sbs_llm_batch_openai", "openai"),
    ("AnthropicBatchOperator (providers-anthropic 1.2.0)", "sbs_anthropic_batch", "anthropic"),
    ("LLMBatchOperator, Anthropic (providers-common-ai 1.0.0)", "sbs_llm_batch_anthropic", "anthropic"),
    ("ours: PaidGenerationOperator, OpenAI", "sbs_ours_openai", "openai"),
    ("ours: PaidGenerationOperator, Anthropic", "sbs_ours_anthropic", "anthropic"),
)
#: Scenario name -> (column title, create-call answers lost, the run's Monday in August 2026).
SCENARIOS: Final = {
    "no_fault": ("no fault", 0, 3),
    "one_lost_answer": ("1 lost create answer", 1, 10),
    "three_lost_answers": ("3 lost create answers", 3, 17),
}

# -- the scenario process ---------------------------------------------------------------------------
scenario = Scenarios()


def admin(vendor: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """A double's admin API (``vendor``: openai or anthropic): counters and fault switches."""
    key = OPENAI_KEY if vendor == "openai" else ANTHROPIC_KEY
    return provider_admin(os.environ[f"IJ_SBS_{vendor.upper()}_URL"], key, method, path, body)


def _counts(vendor: str) -> dict[str, Any]:
    stats = admin(vendor, "GET", "/_admin/stats")
    per = stats["batches_per_token"] if vendor == "openai" else stats["batches_per_tag"]
    return {"accepted": stats["accepted"], "submissions": stats["submissions"], "per": dict(per)}


def measure(bag: Any, dag_id: str, vendor: str, lost: int, logical_date: Any) -> Result:
    """One run of ``dag_id`` with the next ``lost`` create answers lost: what it billed, and how it ended."""
    before = _counts(vendor)
    if lost:
        admin(vendor, "POST", "/_admin/config", {"fault": "drop_after_accept", "fault_times": lost})
    try:
        run = run_dag(bag, dag_id, logical_date=logical_date)
    finally:
        left = admin(vendor, "GET", "/_admin/stats")["config"]["fault_times"] if lost else 0
        admin(vendor, "POST", "/_admin/config", {"fault": None, "fault_times": 0})  # none carried to the next run
    after = _counts(vendor)
    per = {k: n - before["per"].get(k, 0) for k, n in after["per"].items() if n != before["per"].get(k, 0)}
    return {
        "dag_id": dag_id,
        "billed": after["accepted"] - before["accepted"],
        "create_calls": after["submissions"] - before["submissions"],
        "billed_per_key": per,
        "faults_left": left,
        "state": run["state"],
        "generate": ti(run, "generate"),
        "run": run,
        "store": store_contents(dag_store(dag_id)) if dag_id.startswith("sbs_ours_") else [],
    }


def _scenario(bag: Any, name: str) -> Result:
    _, lost, day = SCENARIOS[name]
    results: Result = {}
    for _row, dag_id, vendor in OPERATORS:
        try:
            results[dag_id] = measure(bag, dag_id, vendor, lost, utc(2026, 8, day, 6))
        except Exception:  # one operator's failure must not hide the others' figures
            results[dag_id] = {"error": traceback.format_exc()}
    return results


@scenario
def no_fault(bag: Any) -> Result:
    return _scenario(bag, "no_fault")


@scenario
def one_lost_answer(bag: Any) -> Result:
    return _scenario(bag, "one_lost_answer")


@scenario
def three_lost_answers(bag: Any) -> Result:
    return _scenario(bag, "three_lost_answers")


def main(argv: list[str]) -> None:
    """Every scenario, then the table (`table`) added to the same JSON."""
    scenario.main(argv)
    out = Path(argv[0])
    results = json.loads(out.read_text(encoding="utf-8"))
    results["table"] = table(results)
    out.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")


# -- reading the results ----------------------------------------------------------------------------
def table(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per operator: per scenario, the batches billed, create calls, the run's state, tries of ``generate``."""
    rows = []
    for row, dag_id, vendor in OPERATORS:
        cells: dict[str, Any] = {}
        for name in SCENARIOS:
            data = results.get(name, {}).get(dag_id, {"error": f"scenario {name} did not run"})
            if "error" in data:
                cells[name] = {"error": str(data["error"]).strip().splitlines()[-1]}
                continue
            cells[name] = {
                "billed": data["billed"],
                "create_calls": data["create_calls"],
                "state": data["state"],
                "tries": data["generate"]["try_number"],
            }
        rows.append({"operator": row, "dag_id": dag_id, "api": vendor, **cells})
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table in Markdown: billed batches, then the run's state and the tries it took."""
    head = ["operator", *(title for title, _, _ in SCENARIOS.values())]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["operator"]]
        for name in SCENARIOS:
            cell = row[name]
            if "error" in cell:
                cells.append(f"error: {cell['error'][:80]}")
                continue
            plural = "" if cell["billed"] == 1 else "es"
            tries = "try" if cell["tries"] == 1 else "tries"
            cells.append(f"**{cell['billed']} batch{plural}**, {cell['state']} ({cell['tries']} {tries})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- the launcher (the test module and the benchmark) ------------------------------------------------
@contextlib.contextmanager
def doubles() -> Iterator[dict[str, str]]:
    """Both APIs' doubles, each in its own OS process: ``{"openai": url, "anthropic": url}``.

    A batch ends on its first status read (``LLMBatchOperator`` sleeps at least 30 s between polls,
    but polls once before), and an Anthropic batch also 0.05 s after its creation (a lost
    batch nobody polls must end for our lookup to tell whose it is: `vendors.anthropic.lookup`).
    """
    openai_args = ("--api-key", OPENAI_KEY, "--polls-to-finish", "1")
    anthropic_args = ("--key", ANTHROPIC_KEY, "--polls-to-finish", "1", "--seconds-to-finish", "0.05")
    with (
        server_process("airflow_idempotent_jobs.testing.openai_api", *openai_args) as openai_api,
        server_process("airflow_idempotent_jobs.testing.anthropic_api", *anthropic_args) as anthropic_api,
    ):
        yield {"openai": openai_api.url, "anthropic": anthropic_api.url}


def connections(urls: Mapping[str, str]) -> dict[str, object]:
    """The runner's connections: each operator's own type, all pointed at the doubles."""
    openai_url, anthropic_url = urls["openai"] + "/v1", urls["anthropic"]
    extra = {"batch_prices": PRICES}
    return {
        OPENAI_CONN: {"conn_type": "openai", "host": openai_url, "password": OPENAI_KEY, "extra": extra},
        ANTHROPIC_CONN: {"conn_type": "anthropic", "host": anthropic_url, "password": ANTHROPIC_KEY, "extra": extra},
        PYDANTICAI_OPENAI_CONN: {"conn_type": "pydanticai", "host": openai_url, "password": OPENAI_KEY},
        PYDANTICAI_ANTHROPIC_CONN: {"conn_type": "pydanticai", "host": anthropic_url, "password": ANTHROPIC_KEY},
    }


def migrated_home(home: Path, sources: Iterable[Path] = (DAGS,)) -> ScenarioHome:
    """A new Airflow home in ``home`` holding only ``sources`` (this suite's DAGs), its database migrated
    (the benchmarks')."""
    dags, work = home / "dags", home / "work"
    dags.mkdir(parents=True)
    work.mkdir()
    copy_dags(dags, sources)
    airflow = shutil.which("airflow", path=str(Path(sys.executable).parent)) or "airflow"
    done = subprocess.run(
        [airflow, "db", "migrate"], env=airflow_env(home, dags), capture_output=True, text=True, timeout=300, cwd=home
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return ScenarioHome(home, dags, work)


def run_side_by_side(where: ScenarioHome, *, timeout: float = 540) -> Result:
    """The runner, once, in its own process, against both doubles: its results (``table`` included)."""
    with doubles() as urls:
        env = where.env(
            connections=connections(urls), IJ_SBS_OPENAI_URL=urls["openai"], IJ_SBS_ANTHROPIC_URL=urls["anthropic"]
        )
        return where.run("tests.airflow.llm_side_by_side_scenarios", env, timeout=timeout)


if __name__ == "__main__":
    main(sys.argv[1:])
