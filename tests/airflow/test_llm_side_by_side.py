"""Airflow's own LLM batch operators against ours, in real ``dag.test()`` runs, on local doubles of both APIs.

The same weekly DAG pays one batch of two prompts through ``OpenAITriggerBatchOperator``,
``LLMBatchOperator`` (its OpenAI and Anthropic adapters), ``AnthropicBatchOperator`` and our
``PaidGenerationOperator`` (OpenAI and Anthropic), with no fault, with the answer to one "create
batch" call lost, and with the answers to the next three lost (``retries=3``, no delay). The
doubles count the batches created. Ours bills exactly one in every case; Airflow's operators bill
what is asserted below, as measured with the versions pinned in constraints.txt: the SDK retries
the lost POST itself (twice by default), so one lost answer is two batches inside one try.

The runner (one process for every run) is ``tests/airflow/llm_side_by_side_scenarios.py``;
``benchmarks/llm_side_by_side.py`` prints the same table in Markdown.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_idempotent_jobs.vendors.anthropic._requests import tag_for
from tests.airflow.llm_side_by_side_scenarios import (
    DAGS,
    OPERATORS,
    SCENARIOS,
    markdown,
    run_side_by_side,
    table,
)
from tests.airflow.scenario_process import scenario_home

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

#: What Airflow's operators billed, per scenario, as measured (runs: success in every cell).
AIRFLOWS: dict[str, dict[str, int]] = {
    "sbs_openai_trigger": {"no_fault": 1, "one_lost_answer": 2, "three_lost_answers": 4},
    # Its retry finds one of try 1's three orphaned batches by their metadata and adopts it.
    "sbs_llm_batch_openai": {"no_fault": 1, "one_lost_answer": 2, "three_lost_answers": 3},
    "sbs_anthropic_batch": {"no_fault": 1, "one_lost_answer": 2, "three_lost_answers": 4},
    # Its Anthropic adapter has no lookup: the retry resubmits (on_orphaned_intent="resubmit").
    "sbs_llm_batch_anthropic": {"no_fault": 1, "one_lost_answer": 2, "three_lost_answers": 4},
}
OURS = ("sbs_ours_openai", "sbs_ours_anthropic")
#: The ISO week each scenario's run falls in (Mondays 3, 10 and 17 August 2026).
WEEKS = {"no_fault": "2026-W32", "one_lost_answer": "2026-W33", "three_lost_answers": "2026-W34"}


@pytest.fixture(scope="module")
def side_by_side(airflow_home: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    where = scenario_home(airflow_home.home, tmp_path_factory, "llm-side-by-side-home", [DAGS])
    yield run_side_by_side(where, timeout=540)


def cell(results: dict[str, Any], scenario: str, dag_id: str) -> dict[str, Any]:
    data: dict[str, Any] = results[scenario][dag_id]
    assert "error" not in data, data["error"]
    return data


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("dag_id", OURS)
def test_ours_bills_exactly_one_batch_in_every_scenario(
    side_by_side: dict[str, Any], dag_id: str, scenario: str
) -> None:
    data = cell(side_by_side, scenario, dag_id)
    assert data["state"] == "success", data["run"]["tis"]
    assert (data["billed"], data["create_calls"]) == (1, 1)
    (episode,) = [e for e in data["store"] if e["episode_id"].startswith(WEEKS[scenario])]
    sub = episode["submission"]
    assert sub["state"] == "succeeded"
    key = sub["token"] if dag_id == "sbs_ours_openai" else tag_for(sub["token"])[:-1]
    assert data["billed_per_key"] == {key: 1}, "the one batch billed is the episode's own"
    notes = [step["note"] for step in sub["history"]]
    lost = SCENARIOS[scenario][1]
    if lost:
        assert data["generate"]["try_number"] >= 2, "try 1 lost the answer"
        assert "found by token lookup" in notes, notes
        # The other lost answers were never drawn: no second create call was made.
        assert data["faults_left"] == lost - 1
    else:
        assert data["generate"]["try_number"] == 1 and "found by token lookup" not in notes


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("dag_id", list(AIRFLOWS))
def test_airflows_own_operators_bill_what_was_measured(
    side_by_side: dict[str, Any], dag_id: str, scenario: str
) -> None:
    data = cell(side_by_side, scenario, dag_id)
    assert data["state"] == "success", data["run"]["tis"]
    lost = SCENARIOS[scenario][1]
    assert data["faults_left"] == 0, "every lost answer was drawn by a create call"
    assert data["billed"] == data["create_calls"] == AIRFLOWS[dag_id][scenario]
    # The SDK's own retries of the POST (2 by default): up to 3 create calls, and batches, in try 1;
    # three lost answers fail try 1 and Airflow's retry pays again unless it adopts an orphan.
    assert data["generate"]["try_number"] == (1 if lost < 3 else 2)


def test_the_runner_writes_the_table_and_it_reads_as_markdown(side_by_side: dict[str, Any]) -> None:
    rows = side_by_side["table"]
    assert rows == table(side_by_side)
    assert [row["dag_id"] for row in rows] == [dag_id for _, dag_id, _ in OPERATORS]
    for row in rows:
        for scenario in SCENARIOS:
            data = cell(side_by_side, scenario, row["dag_id"])
            assert row[scenario]["billed"] == data["billed"] and row[scenario]["state"] == data["state"]
    text = markdown(rows)
    assert text.count("\n") == 1 + len(OPERATORS)
    print("\n" + text)
