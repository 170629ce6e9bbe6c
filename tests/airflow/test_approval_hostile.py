"""The approval gate against hostile answers and bypasses, under real ``dag.test()`` runs.

Each hole found in review is a test here: an answer Airflow accepted was lost to its approver's
name or its comment (the task failed without retry, the HITL row said "approved", the episode said
nothing); the decision's time was the task's, not the person's; the example DAGs paid for an
undecided episode when ``approve`` was marked success by hand with the gate on; and a mapped gate
(each map index its own episode, answered by map index) is pinned down.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.testing.server import server_connection
from tests.airflow.approval_hostile_scenarios import MEGABYTE
from tests.airflow.conftest import AirflowHome, scenario
from tests.airflow.scenario_process import provider_server_process, scenario_home
from tests.airflow.test_approval_runs import EXAMPLES, HERE, hitl_rows, paid_jobs, states

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def hostile_runs(airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    where = scenario_home(
        airflow_home.home, tmp_path_factory, "approval-hostile-home", [HERE / "dags_approval", *EXAMPLES]
    )
    token = "approval-hostile-token-" + os.urandom(4).hex()
    with provider_server_process("--token", token) as url:
        conn = server_connection(url, token)
        env = where.env(
            provider=(url, token), spy_secrets=True, connections={"ij_provider": conn, "media_provider": conn}
        )
        results = where.run("tests.airflow.approval_hostile_scenarios", env, timeout=560)
    results["_db"] = str(where.home / "airflow.db")
    yield results


def responded_at(results: dict[str, Any], run: dict[str, Any]) -> str:
    """The HITL row's ``responded_at`` (what the person's answer was stamped with), as the record writes times."""
    (row,) = hitl_rows(results, "ija_gate", run)
    at = dt.datetime.fromisoformat(str(row["responded_at"]))
    return at.replace(tzinfo=at.tzinfo or dt.timezone.utc).isoformat(timespec="microseconds")


# -- answers the record's rules refused as they were --------------------------------------------
def test_an_answer_with_control_characters_and_a_megabyte_comment_is_kept_escaped_and_bounded(
    hostile_runs: dict[str, Any],
) -> None:
    run = scenario(hostile_runs, "odd_answers")["control_characters"]
    assert run["responder"] == {"acted": True, "error": None}
    assert states(run) == {"approve": ("success", 1), "generate": ("success", 1), "publish": ("success", 1)}
    approval = run["episode"]["approval"]
    assert (approval["decision"], approval["by"]) == ("approved", "al\\x07ice\\u200cb")
    comment = approval["comment"]
    assert comment.startswith("\\x1b[31mred\\x1b[0m xxx") and len(comment) == 2000
    assert comment.endswith(" characters, sha256 " + comment[-17:-1] + ")")
    assert f"({len(MEGABYTE) + 2 * 3} characters, sha256 " in comment  # two escapes, 4 characters for 1
    assert len(paid_jobs(scenario(hostile_runs, "odd_answers")["provider"], run["episode"])) == 1


def test_a_300_character_name_is_kept_bounded_and_the_comment_keeps_its_newline_and_tab(
    hostile_runs: dict[str, Any],
) -> None:
    run = scenario(hostile_runs, "odd_answers")["long_name"]
    assert states(run) == {"approve": ("success", 1), "generate": ("skipped", 0), "publish": ("skipped", 0)}
    episode = run["episode"]
    assert (episode["status"], episode["approval"]["decision"]) == ("rejected", "rejected")
    by = episode["approval"]["by"]
    assert len(by) == 200 and by.startswith("n" * 150) and "(300 characters, sha256 " in by
    assert episode["approval"]["comment"] == "no\tthanks\nbye"


def test_a_nameless_user_and_a_non_text_comment_keep_the_decision(hostile_runs: dict[str, Any]) -> None:
    result = scenario(hostile_runs, "odd_answers")
    nameless, id_only = result["nameless"]["episode"]["approval"], result["id_only"]["episode"]["approval"]
    assert (nameless["decision"], nameless["by"], nameless["comment"]) == (
        "approved",
        "(an Airflow user without a name or id)",
        None,
    )
    assert (id_only["decision"], id_only["by"], id_only["comment"]) == ("approved", "user-7", '{"n": 1}')
    for name in ("nameless", "id_only"):
        assert states(result[name])["generate"] == ("success", 1)


def test_the_decision_keeps_the_time_the_person_answered(hostile_runs: dict[str, Any]) -> None:
    result = scenario(hostile_runs, "odd_answers")
    for name in ("control_characters", "long_name", "nameless", "id_only"):
        run = result[name]
        approval = run["episode"]["approval"]
        assert approval["at"] == responded_at(hostile_runs, run), name
        asked, decided = approval["history"]
        assert (asked["event"], decided["at"]) == ("asked", approval["at"])
        assert asked["at"] <= decided["at"]


# -- a gate bypassed by hand ---------------------------------------------------------------------
def test_the_gated_examples_refuse_to_pay_when_approve_is_marked_success_by_hand(hostile_runs: dict[str, Any]) -> None:
    result = scenario(hostile_runs, "marked_by_hand")
    for dag_id, eid in (("weekly_media_pipeline", "2026-W34-0"), ("weekly_media_pipeline_taskflow", "2026-W35-0")):
        run = result[dag_id]
        assert run["responder"] == {"acted": True, "error": None}, dag_id
        assert states(run)["approve"][0] == "success"
        assert states(run)["generate"] == ("failed", 1), dag_id  # refused without retry (retries=3)
        episode = result["episodes"][eid]
        assert episode["approval"]["decision"] is None and episode["submission"]["state"] == "none"
        assert all(eid not in job["request"]["prompt"] for job in result["provider"]["jobs"].values())
    # The gate off (the default): unattended, paid once.
    unattended = result["episodes"]["2026-W36-0"]
    assert states(result["unattended"])["generate"] == ("success", 1)
    assert unattended["submission"]["state"] == "succeeded"
    assert (unattended["approval"]["decision"], unattended["approval"]["history"]) == (None, [])  # never asked


# -- a mapped gate --------------------------------------------------------------------------------
def test_a_mapped_gate_asks_and_records_per_map_index_and_a_rejection_skips_only_its_own_payment(
    hostile_runs: dict[str, Any],
) -> None:
    result = scenario(hostile_runs, "mapped")
    run, ids, episodes = result["run"], result["ids"], result["episodes"]
    assert result["run"]["responders"] == [{"acted": True, "error": None}] * 2
    by_index = {(t["task_id"], t["map_index"]): (t["state"], t["try_number"]) for t in run["tis"]}
    assert [by_index[("approve", i)] for i in range(4)] == [("success", 1)] * 4
    assert [by_index[("generate", i)][0] for i in range(4)] == ["success", "skipped", "success", "skipped"]
    decisions = [(episodes[e]["approval"]["decision"], episodes[e]["approval"]["by"]) for e in ids]
    assert decisions == [
        ("approved", "dora"),
        ("rejected", "erin"),
        ("approved", "mapper-Approve"),
        ("rejected", "mapper-Reject"),
    ]
    for index in (2, 3):  # asked by its own map index, answered with its own comment
        approval = episodes[ids[index]]["approval"]
        assert approval["history"][0]["by"] == f"ija_mapped_gate/{run['run_id']}/approve/{index} try 1"
        assert approval["comment"] == ids[index]
    assert len(hitl_rows(hostile_runs, "ija_mapped_gate", run)) == 2  # indexes 0 and 1 were not asked
    assert [[e["event"] for e in episodes[ids[i]]["approval"]["history"]] for i in (0, 1)] == [
        ["approved"],
        ["rejected"],
    ]
    prompts = sorted(
        j["request"]["prompt"] for j in result["provider"]["jobs"].values() if "mapped" in j["request"]["prompt"]
    )
    assert prompts == ["mapped approval #0", "mapped approval #2"]
    assert [episodes[e]["submission"]["state"] for e in ids] == ["succeeded", "none", "succeeded", "none"]


def test_no_scenario_file_failed_to_import(hostile_runs: dict[str, Any]) -> None:
    assert hostile_runs["import_errors"] == {}
    assert Path(hostile_runs["_db"]).exists()
