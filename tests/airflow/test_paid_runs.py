"""PaidGenerationOperator under real Airflow runs, against the provider server in its own process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.airflow.conftest import RunningProvider, scenario
from tests.airflow.test_allocation_runs import observed, ti

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(400)]


def test_bad_episode_ids_fail_on_the_first_try_without_any_lookup(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "paid_bad_ids")
    run = result["run"]
    for task_id in ("unknown", "malformed", "missing", "corrupt"):  # retries=3 each
        assert ti(run, task_id) == {"task_id": task_id, "map_index": -1, "state": "failed", "try_number": 1}
    messages = {o["task_id"]: o["message"] for o in observed(run, "failed")}
    assert "episode 2026-W32-99 not found" in messages["unknown"]
    assert "invalid episode id '2026-W32-007'" in messages["malformed"]
    assert "episode_id is empty ('None')" in messages["missing"]
    assert "submission record: state accepted without a remote reference" in messages["corrupt"]
    # The recording secrets backend saw no connection, variable or config lookup during the run.
    assert result["lookups"] == []
    assert result["provider"]["submissions"] == 0


def test_the_recording_backend_does_see_the_provider_lookup(scenario_results: dict[str, Any]) -> None:
    """Positive control for the test above: a run that reaches the provider shows its lookup."""
    lookups = scenario(scenario_results, "paid_worker")["lookups"]
    assert {(entry["kind"], entry["id"]) for entry in lookups} == {("connection", "ij_provider")}


@pytest.mark.parametrize("name", ["paid_worker", "paid_deferred"])
def test_crash_after_acceptance_is_retried_without_paying_twice(scenario_results: dict[str, Any], name: str) -> None:
    result = scenario(scenario_results, name)
    run = result["run"]
    assert ti(run, "generate")["state"] == "success"
    assert ti(run, "generate")["try_number"] == 2
    (episode,) = result["store"]
    sub = episode["submission"]
    assert (episode["episode_id"], sub["state"], sub["cost"]) == ("2026-W32-0", "succeeded", 2.5)
    # Both tries saw the same remote job; the provider received exactly one submission for the token.
    refs = {o["remote_ref"] for o in observed(run, "submitted")}
    assert [o["try_number"] for o in observed(run, "submitted")] == [1, 2]
    assert refs == {sub["remote_ref"]}
    assert result["provider"]["submissions_per_token"][sub["token"]] == 1
    assert result["provider"]["accepted_per_token"][sub["token"]] == 1
    assert result["provider"]["jobs"][sub["remote_ref"]]["request"]["prompt"] == "weekly teaser for 2026-W32-0"
    (xcoms,) = observed(run, "paid_xcoms")
    assert xcoms["xcoms"] == {
        "return_value": {
            "episode_id": "2026-W32-0",
            "remote_ref": sub["remote_ref"],
            "state": "succeeded",
            "cost": 2.5,
            "result": {"url": f"https://media.invalid/{sub['remote_ref']}.mp4"},
        },
        "remote_ref": sub["remote_ref"],
        "state": "succeeded",
        "cost": 2.5,
    }


def test_deferred_task_is_completed_by_the_trigger(scenario_results: dict[str, Any]) -> None:
    run = scenario(scenario_results, "paid_deferred")["run"]
    (resumed,) = observed(run, "resumed")
    event = resumed["event"]
    assert (event["status"], event["state"], event["episode_id"], event["cost"]) == (
        "terminal",
        "succeeded",
        "2026-W32-0",
        2.5,
    )
    # In the worker-polling DAG nothing is deferred.
    assert observed(scenario(scenario_results, "paid_worker")["run"], "resumed") == []


def test_lost_answer_without_token_support_fails_with_the_reconcile_command(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "paid_lost_answer")
    run = result["run"]
    assert ti(run, "generate") == {"task_id": "generate", "map_index": -1, "state": "failed", "try_number": 1}
    (failure,) = observed(run, "failed")
    assert "idempotent-jobs reconcile 2026-W32-0" in failure["message"]
    (episode,) = result["store"]
    assert episode["submission"]["state"] == "unknown"
    token = episode["submission"]["token"]
    assert result["provider"]["accepted_per_token"][token] == 1  # the job exists; it was not sent again
    assert result["provider"]["submissions_per_token"][token] == 1


def test_bad_provider_config_fails_without_retry_and_sends_nothing(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "paid_bad_config")
    run = result["run"]
    assert ti(run, "generate") == {"task_id": "generate", "map_index": -1, "state": "failed", "try_number": 1}
    (failure,) = observed(run, "failed")
    assert "invalid provider config ['no_such_option']: unknown keys" in failure["message"]
    (episode,) = result["store"]
    assert episode["submission"]["state"] == "none"


def test_provider_token_never_reaches_the_logs(
    scenario_results: dict[str, Any], provider_server: RunningProvider
) -> None:
    log = Path(scenario_results["_log"]).read_text(errors="replace")
    assert "Paid provider from connection 'ij_provider'" in log  # the hook did log, without the secret
    assert provider_server.token not in log
