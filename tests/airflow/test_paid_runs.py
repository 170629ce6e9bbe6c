"""PaidGenerationOperator under real Airflow runs, against the provider server in its own process."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.conftest import RunningProvider, scenario
from tests.airflow.scenario_process import observed, ti

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


# -- one episode, one request ---------------------------------------------------------------------
def request_fingerprint(request: dict[str, Any]) -> str:
    """The documented fingerprint: sha256 of the canonical JSON (sorted keys, compact, UTF-8)."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def test_two_requests_mapped_on_one_episode_pay_once(scenario_results: dict[str, Any]) -> None:
    """Map indexes "cover art" and "trailer" on one episode: one paid job, the other index fails on
    its first try naming both fingerprints (it once succeeded with the first index's job)."""
    result = scenario(scenario_results, "paid_two_requests")
    run = result["run"]
    mapped = sorted((t for t in run["tis"] if t["task_id"] == "generate"), key=lambda t: t["map_index"])
    assert [t["map_index"] for t in mapped] == [0, 1]
    assert sorted(t["state"] for t in mapped) == ["failed", "success"]
    loser = next(t for t in mapped if t["state"] == "failed")
    assert loser["try_number"] == 1, "a request conflict is not retried"
    requests = [{"prompt": "cover art"}, {"prompt": "trailer"}]
    paid, refused = requests[1 - loser["map_index"]], requests[loser["map_index"]]
    (failure,) = [o for o in observed(run, "failed") if o["map_index"] == loser["map_index"]]
    assert request_fingerprint(paid) in failure["message"] and request_fingerprint(refused) in failure["message"]
    (episode,) = result["store"]
    sub = episode["submission"]
    assert sub["state"] == "succeeded" and sub["request_fingerprint"] == request_fingerprint(paid)
    assert result["provider"]["submissions_per_token"][sub["token"]] == 1
    assert result["provider"]["accepted_per_token"][sub["token"]] == 1
    assert result["provider"]["jobs"][sub["remote_ref"]]["request"] == paid


def test_a_retry_whose_request_changed_fails_without_paying(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "paid_request_changed")
    run = result["run"]
    assert ti(run, "generate") == {"task_id": "generate", "map_index": -1, "state": "failed", "try_number": 2}
    first, second = {"prompt": "teaser", "variant": "1"}, {"prompt": "teaser", "variant": "2"}
    (failure,) = observed(run, "failed")
    assert failure["try_number"] == 2
    assert request_fingerprint(first) in failure["message"] and request_fingerprint(second) in failure["message"]
    (episode,) = result["store"]
    sub = episode["submission"]
    assert sub["request_fingerprint"] == request_fingerprint(first)
    assert result["provider"]["submissions_per_token"][sub["token"]] == 1, "try 2 sent nothing"
    assert result["provider"]["jobs"][sub["remote_ref"]]["request"] == first


# -- what a provider reports ----------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["worker", "deferred"])
def test_a_nan_cost_and_a_large_result_never_crash_the_task(scenario_results: dict[str, Any], mode: str) -> None:
    """Before: ``xcom_push(cost=nan)`` raised after the job succeeded, on every retry; deferred, the cost was lost."""
    result = scenario(scenario_results, "paid_odd_answer")[mode]
    run = result["run"]
    assert ti(run, "generate")["state"] == "success" and ti(run, "generate")["try_number"] == 1
    assert ti(run, "report")["state"] == "success"
    (episode,) = result["store"]
    sub = episode["submission"]
    assert (sub["state"], sub["cost"]) == ("succeeded", None)
    assert "provider reported cost nan" in sub["cost_anomaly"]
    assert sub["result"] is None and sub["result_omitted"]["size"] > 100_000
    (xcoms,) = observed(run, "paid_xcoms")
    assert xcoms["xcoms"]["cost"] is None
    summary = xcoms["xcoms"]["return_value"]
    assert (summary["cost"], summary["result"]) == (None, None)
    assert summary["result_omitted"] == sub["result_omitted"]
    (anomaly,) = observed(run, "cost_anomaly")
    assert anomaly["value"] == sub["cost_anomaly"]
    resumed = observed(run, "resumed")
    if mode == "deferred":
        (event,) = [o["event"] for o in resumed]
        assert (event["cost"], event["result"]) == ("nan", None)
        assert event["result_omitted"]["sha256"] == sub["result_omitted"]["sha256"]
        assert len(json.dumps(event)) < 2048, "the trigger event stays small"
    else:
        assert resumed == []


def test_costs_and_budgets_that_are_no_amount_fail_before_any_lookup(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "paid_bad_amounts")
    run = result["run"]
    fields = {
        "nan_estimate": "estimated_cost",
        "negative_estimate": "estimated_cost",
        "infinite_budget": "weekly_budget",
        "negative_budget": "weekly_budget",
        "negative_zero_estimate": "estimated_cost",
        "negative_zero_budget": "weekly_budget",
    }
    messages = {o["task_id"]: o["message"] for o in observed(run, "failed")}
    for task_id, field in fields.items():
        assert ti(run, task_id) == {"task_id": task_id, "map_index": -1, "state": "failed", "try_number": 1}
        assert f"{field}:" in messages[task_id]
    assert result["lookups"] == []
    assert result["provider"]["submissions"] == result["submissions_before"]
    (episode,) = result["store"]
    assert episode["submission"]["state"] == "none"
