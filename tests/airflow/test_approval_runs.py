"""The approval gate under real ``dag.test()`` runs: `ApproveEpisodeOperator` and
``require_approval`` on the paid step, against the provider server in its own process.

Every scenario runs once in one process (``approval_scenarios.py``) on a copy of the session's
migrated metadata database. Tests check what the tasks observed, the task instances Airflow
recorded, the HITL rows in the home's ``airflow.db`` (read here, from the test process), the
episode records, the provider's counters and the recording secrets backend's log.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.testing.server import server_connection
from tests.airflow.conftest import AirflowHome, scenario
from tests.airflow.scenario_process import REPO, observed, provider_server_process, scenario_home

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

HERE = Path(__file__).resolve().parent
EXAMPLES = [
    REPO / "example_dags" / "weekly_media_pipeline.py",
    REPO / "example_dags" / "weekly_media_pipeline_taskflow.py",
]


@pytest.fixture(scope="session")
def approval_runs(airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    where = scenario_home(airflow_home.home, tmp_path_factory, "approval-home", [HERE / "dags_approval", *EXAMPLES])
    token = "approval-provider-token-" + os.urandom(4).hex()
    with provider_server_process("--token", token) as url:
        conn = server_connection(url, token)
        connections = {"ij_provider": conn, "ija_provider": conn, "media_provider": conn}
        env = where.env(provider=(url, token), spy_secrets=True, connections=connections)
        results = where.run("tests.airflow.approval_scenarios", env, timeout=560)
    results["_db"] = str(where.home / "airflow.db")
    yield results


def hitl_rows(
    results: dict[str, Any], dag_id: str, run: dict[str, Any], task_id: str = "approve"
) -> list[dict[str, Any]]:
    """The HITL detail rows Airflow's metadata database holds for the run's task."""
    with sqlite3.connect(results["_db"]) as db:
        db.row_factory = sqlite3.Row
        rows = db.execute(
            "SELECT h.* FROM hitl_detail h JOIN task_instance t ON t.id = h.ti_id "
            "WHERE t.dag_id = ? AND t.run_id = ? AND t.task_id = ?",
            (dag_id, run["run_id"], task_id),
        ).fetchall()
    return [dict(row) for row in rows]


def xcom(results: dict[str, Any], dag_id: str, run: dict[str, Any], task_id: str = "approve") -> Any:
    """The task's ``return_value`` XCom as Airflow stored it."""
    with sqlite3.connect(results["_db"]) as db:
        (value,) = db.execute(
            "SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = ? AND key = 'return_value'",
            (dag_id, run["run_id"], task_id),
        ).fetchone()
    return json.loads(value)


def states(run: dict[str, Any]) -> dict[str, tuple[str, int]]:
    return {t["task_id"]: (t["state"], t["try_number"]) for t in run["tis"]}


def returned(run: dict[str, Any], task_id: str = "approve") -> Any:
    (value,) = [o["value"] for o in observed(run, "returned", task_id)]
    return value


def paid_jobs(provider: dict[str, Any], episode: dict[str, Any]) -> list[dict[str, Any]]:
    """The provider's jobs for the episode's request."""
    prompt = f"approval scenario ({episode['episode_id']})"
    return [job for job in provider["jobs"].values() if job["request"].get("prompt") == prompt]


def paid_once(provider: dict[str, Any], episode: dict[str, Any]) -> None:
    (job,) = paid_jobs(provider, episode)
    assert provider["submissions_per_token"][job["token"]] == 1


# -- bad ids ---------------------------------------------------------------------------------------
def test_unknown_and_malformed_ids_fail_on_try_1_without_a_question(approval_runs: dict[str, Any]) -> None:
    run = scenario(approval_runs, "bad_ids")["run"]
    assert states(run) == {"unknown": ("failed", 1), "malformed": ("failed", 1)}  # retries=2 unused
    (unknown,) = observed(run, "failed", "unknown")
    assert unknown["error"] == "AirflowFailException"
    assert unknown["message"].startswith("episode 2026-W32-9 not found in ")
    (malformed,) = observed(run, "failed", "malformed")
    assert malformed["message"] == "malformed: invalid episode id '2026-W32-09': expected YYYY-Www-N, e.g. 2026-W32-0"
    for task_id in ("unknown", "malformed"):
        assert hitl_rows(approval_runs, "ija_bad_ids", run, task_id) == []
        assert observed(run, "ended", task_id) == []  # never parked


# -- decided beforehand ----------------------------------------------------------------------------
def test_a_decision_recorded_beforehand_is_returned_without_asking(approval_runs: dict[str, Any]) -> None:
    result = scenario(approval_runs, "decided_beforehand")
    assert result["cli"]["code"] == 0, result["cli"]["stderr"]
    for name, dag_id in (("approved", "ija_gate"), ("approved_other_dag", "ija_gate_again")):
        run = result[name]
        assert states(run) == {"approve": ("success", 1), "generate": ("success", 1), "publish": ("success", 1)}
        assert returned(run) == {
            "episode_id": run["episode"]["episode_id"],
            "decision": "approved",
            "by": "dora",
            "at": run["episode"]["approval"]["at"],
            "comment": "fine by me",
            "asked": False,
        }
        assert hitl_rows(approval_runs, dag_id, run) == []
        assert [e["event"] for e in run["episode"]["approval"]["history"]] == ["approved"]  # nobody was asked
    # Two DAGs gated the same approved episode: the provider got one submission for it.
    paid_once(result["provider"], result["approved"]["episode"])


def test_a_rejection_recorded_beforehand_skips_the_paid_step_without_asking(approval_runs: dict[str, Any]) -> None:
    result = scenario(approval_runs, "decided_beforehand")
    run = result["rejected"]
    assert states(run) == {"approve": ("success", 1), "generate": ("skipped", 0), "publish": ("skipped", 0)}
    assert [o["signal"] for o in observed(run, "ended", "approve")] == ["DownstreamTasksSkipped"]
    assert hitl_rows(approval_runs, "ija_gate", run) == []
    episode = run["episode"]
    assert (episode["status"], episode["approval"]["decision"], episode["approval"]["by"]) == (
        "rejected",
        "rejected",
        "erin",
    )
    assert episode["submission"]["state"] == "none"
    assert paid_jobs(result["provider"], episode) == []
    # Skipping ends the task before Airflow pushes a return value: the operator pushed it.
    assert xcom(approval_runs, "ija_gate", run) == {
        "episode_id": episode["episode_id"],
        "decision": "rejected",
        "by": "erin",
        "at": episode["approval"]["at"],
        "comment": "not this week",
        "asked": False,
    }
    strict = result["rejected_strict"]
    assert states(strict)["approve"] == ("failed", 1)
    assert states(strict)["generate"][0] == "upstream_failed"
    (failed,) = observed(strict, "failed", "approve")
    assert failed["message"] == f"approve: episode {episode['episode_id']} was rejected by erin"


# -- a person answers ------------------------------------------------------------------------------
def test_an_approval_is_asked_once_recorded_with_its_answerer_and_paid_once(approval_runs: dict[str, Any]) -> None:
    result = scenario(approval_runs, "answered")
    run = result["approved"]
    assert run["responder"] == {"acted": True, "error": None}
    assert states(run) == {"approve": ("success", 1), "generate": ("success", 1), "publish": ("success", 1)}
    eid = run["episode"]["episode_id"]
    approval = run["episode"]["approval"]
    assert (approval["decision"], approval["by"], approval["comment"], approval["via"]) == (
        "approved",
        "alice",
        "ship it",
        "airflow",
    )
    assert [(e["event"], e["by"]) for e in approval["history"]] == [
        ("asked", f"ija_gate/{run['run_id']}/approve/-1 try 1"),
        ("approved", "alice"),
    ]
    assert returned(run) == {
        "episode_id": eid,
        "decision": "approved",
        "by": "alice",
        "at": approval["at"],
        "comment": "ship it",
        "asked": True,
    }
    (row,) = hitl_rows(approval_runs, "ija_gate", run)
    assert row["subject"] == f"Approve spending for episode {eid}"
    assert json.loads(row["options"]) == ["Approve", "Reject"]
    assert set(json.loads(row["params"])) == {"comment"}
    for fact in (
        f"`{eid}` (week 2026-W32)",
        f'"prompt": "approval scenario ({eid})"',
        "- Estimated cost: 2.5",
        # decided_beforehand ran first and paid 2.5 in the same week
        "- Spent this week so far: 2.5 (1 paid submission(s) among 4 other episode(s))",
        "- Weekly budget: 10",
    ):
        assert fact in row["body"], row["body"]
    paid_once(result["provider"], run["episode"])


def test_a_rejection_answered_is_recorded_and_skips_the_paid_step(approval_runs: dict[str, Any]) -> None:
    result = scenario(approval_runs, "answered")
    run = result["rejected"]
    assert states(run) == {"approve": ("success", 1), "generate": ("skipped", 0), "publish": ("skipped", 0)}
    episode = run["episode"]
    assert episode["status"] == "rejected"
    assert (episode["approval"]["decision"], episode["approval"]["by"], episode["approval"]["comment"]) == (
        "rejected",
        "alice",
        None,  # an empty comment is no comment
    )
    assert len(hitl_rows(approval_runs, "ija_gate", run)) == 1
    assert paid_jobs(result["provider"], episode) == []


def test_a_retry_after_the_answer_was_recorded_does_not_ask_again(approval_runs: dict[str, Any]) -> None:
    result = scenario(approval_runs, "answered")
    run = result["crash_after_answer"]
    assert states(run)["approve"] == ("success", 2)
    crashes = [o["message"] for o in observed(run, "failed", "approve")]
    assert crashes == ["simulated crash after the answer was recorded"]
    assert [(o["try_number"], o["step"]) for o in observed(run, "ended", "approve")] == [(1, "execute")]  # asked once
    assert (returned(run)["asked"], returned(run)["by"]) == (False, "alice")
    assert [e["event"] for e in run["episode"]["approval"]["history"]] == ["asked", "approved"]
    paid_once(result["provider"], run["episode"])


def test_an_answer_contradicting_a_decision_recorded_meanwhile_fails_without_retry(
    approval_runs: dict[str, Any],
) -> None:
    result = scenario(approval_runs, "conflicting_answer")
    run = result["run"]
    assert states(run)["approve"] == ("failed", 1)
    assert states(run)["generate"][0] == "upstream_failed"
    (failed,) = observed(run, "failed", "approve")
    eid = run["episode"]["episode_id"]
    assert failed["error"] == "AirflowFailException"
    assert failed["message"].startswith(f"episode {eid}: cannot record approved: it is already rejected by frank at ")
    assert "a decision is final" in failed["message"]
    approval = run["episode"]["approval"]
    assert (approval["decision"], approval["by"], approval["via"]) == ("rejected", "frank", "cli")
    assert paid_jobs(result["provider"], run["episode"]) == []


# -- timeouts --------------------------------------------------------------------------------------
def test_a_timeout_with_the_reject_default_skips_this_run_and_records_nothing(approval_runs: dict[str, Any]) -> None:
    run = scenario(approval_runs, "timeouts")["reject"]
    assert run["responder"] == {"acted": True, "error": None}
    assert states(run) == {"approve": ("success", 1), "generate": ("skipped", 0), "publish": ("skipped", 0)}
    approval = run["episode"]["approval"]
    assert approval["decision"] is None
    assert [e["event"] for e in approval["history"]] == ["asked"]
    assert run["episode"]["status"] == "allocated"


def test_a_timeout_without_defaults_fails_and_records_nothing(approval_runs: dict[str, Any]) -> None:
    run = scenario(approval_runs, "timeouts")["fail"]
    assert states(run)["approve"] == ("failed", 1)
    (failed,) = observed(run, "failed", "approve")
    assert failed["error"] == "HITLTimeoutError"
    assert run["episode"]["approval"]["decision"] is None


# -- require_approval on the paid step -------------------------------------------------------------
def test_require_approval_refuses_before_any_connection_lookup(approval_runs: dict[str, Any]) -> None:
    result = scenario(approval_runs, "required")
    for name, reason in (("undecided", "no decision is recorded"), ("rejected", "it was rejected by gina at ")):
        run = result[name]
        assert states(run) == {"generate": ("failed", 1), "generate_taskflow": ("failed", 1)}, name
        (failed,) = observed(run, "failed", "generate")
        eid, eid_tf = result["ids"][name]
        assert failed["error"] == "AirflowFailException"
        assert failed["message"].startswith(f"episode {eid}: approval required before spending, but {reason}")
        assert observed(run, "built", "generate_taskflow") == []  # the function never ran
        for episode_id in (eid, eid_tf):
            assert result["episodes"][episode_id]["submission"]["state"] == "none"
    assert [x for x in result["refused_lookups"] if x["id"] == "ija_provider"] == []
    approved = result["approved"]
    assert states(approved) == {"generate": ("success", 1), "generate_taskflow": ("success", 1)}
    for eid in result["ids"]["approved"]:
        submission = result["episodes"][eid]["submission"]
        assert submission["state"] == "succeeded"
        assert result["provider"]["submissions_per_token"][submission["token"]] == 1


# -- the example DAGs with the gate on -------------------------------------------------------------
def test_the_example_dags_gate_asks_then_pays_once_or_skips(approval_runs: dict[str, Any]) -> None:
    result = scenario(approval_runs, "examples_gated")
    classic, taskflow = result["weekly_media_pipeline"], result["weekly_media_pipeline_taskflow"]
    assert classic["responder"] == taskflow["responder"] == {"acted": True, "error": None}
    assert classic["state"] == "success"
    assert {t: s for t, (s, _) in states(classic).items()} == {
        "allocate": "success",
        "needs_approval": "success",
        "approve": "success",
        "generate": "success",
        "publish": "success",
    }
    approved = result["episodes"]["2026-W34-0"]  # Monday 2026-08-17
    assert (approved["approval"]["decision"], approved["approval"]["by"]) == ("approved", "alice")
    assert approved["approval"]["comment"] == "Approve via example"
    assert approved["submission"]["state"] == "succeeded"
    assert result["provider"]["submissions_per_token"][approved["submission"]["token"]] == 1
    (row,) = hitl_rows(approval_runs, "weekly_media_pipeline", classic)
    assert '"prompt": "the week in review (2026-W34-0)"' in row["body"] and "- Estimated cost: 2.5" in row["body"]
    assert set(json.loads(row["params"])) == {"comment"}  # the DAG's own params are not form fields
    assert states(taskflow)["generate"][0] == states(taskflow)["publish"][0] == "skipped"
    rejected = result["episodes"]["2026-W35-0"]  # Monday 2026-08-24
    assert (rejected["status"], rejected["approval"]["by"]) == ("rejected", "alice")
    assert rejected["submission"]["state"] == "none"
    assert all("2026-W35-0" not in job["request"]["prompt"] for job in result["provider"]["jobs"].values())
