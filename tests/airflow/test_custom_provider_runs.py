"""A custom provider in real Airflow runs: ``provider_hook=`` on a plain ``http`` connection.

The provider (`tests.paid.test_custom_provider.JobClientProvider`, its own client code, no
``astatus``) is built by `JobClientHook` in the worker and re-created by the trigger in the
triggerer. Scenarios ``custom_provider`` and ``custom_bad_hooks`` of scenarios.py, DAGs in
``dags/paid_dags.py``; they run in the one scenario process the other paid runs use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.airflow_compat import hook_class_name
from tests.airflow.conftest import RunningProvider, scenario
from tests.airflow.scenario_process import observed, ti

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(400)]

HOOK = "tests.airflow.test_custom_provider_hook.JobClientHook"


@pytest.mark.parametrize("mode", ["worker", "deferred"])
def test_a_lost_answer_is_retried_into_one_job(scenario_results: dict[str, Any], mode: str) -> None:
    result = scenario(scenario_results, "custom_provider")[mode]
    run = result["run"]
    assert ti(run, "generate")["state"] == "success"
    assert ti(run, "generate")["try_number"] == 2, "try 1 lost the submit answer; try 2 found the job"
    assert ti(run, "report")["state"] == "success"
    (episode,) = result["store"]
    sub = episode["submission"]
    assert (sub["state"], sub["cost"]) == ("succeeded", 2.5)
    assert [h["to"] for h in sub["history"]] == ["submitting", "unknown", "accepted", "succeeded"]
    assert "found by token lookup" in sub["history"][2]["note"]
    # One job on the server for the episode's token, sent once (the retry looked it up).
    assert result["provider"]["submissions_per_token"][sub["token"]] == 1
    assert result["provider"]["accepted_per_token"][sub["token"]] == 1
    job = result["provider"]["jobs"][sub["remote_ref"]]
    assert job["request"] == {"prompt": f"custom teaser for {episode['episode_id']}", "units": 2}
    (xcoms,) = observed(run, "paid_xcoms")
    assert xcoms["xcoms"]["return_value"]["remote_ref"] == sub["remote_ref"]
    assert (xcoms["xcoms"]["state"], xcoms["xcoms"]["cost"]) == ("succeeded", 2.5)
    # The plain http connection was read, and only it.
    assert {(entry["kind"], entry["id"]) for entry in result["lookups"]} == {("connection", "ij_jobs")}


def test_the_deferred_custom_provider_is_completed_by_the_trigger(scenario_results: dict[str, Any]) -> None:
    run = scenario(scenario_results, "custom_provider")["deferred"]["run"]
    (resumed,) = observed(run, "resumed")
    event = resumed["event"]
    assert (event["status"], event["state"], event["cost"]) == ("terminal", "succeeded", 2.5)
    assert observed(scenario(scenario_results, "custom_provider")["worker"]["run"], "resumed") == []


def test_a_provider_hook_that_cannot_work_fails_on_try_1_after_the_episode(scenario_results: dict[str, Any]) -> None:
    result = scenario(scenario_results, "custom_bad_hooks")
    run = result["run"]
    tasks = ("not_importable", "not_a_hook", "get_provider_raises", "untyped_connection", "unknown_episode")
    for task_id in tasks:  # retries=3 each
        assert ti(run, task_id) == {"task_id": task_id, "map_index": -1, "state": "failed", "try_number": 1}
    messages = {o["task_id"]: o["message"] for o in observed(run, "failed")}
    assert "cannot import tests.airflow.no_such_module.Hook" in messages["not_importable"]
    assert "EpisodeStoreHook is not a subclass of" in messages["not_a_hook"]
    broken = "BrokenHook.get_provider() failed: RuntimeError: the vendor SDK refused to start"
    assert broken in messages["get_provider_raises"]
    # apache-airflow-providers-http (installed with the amazon provider here) registers HttpHook for http.
    http_says = "for which no paid-provider hook is registered" if hook_class_name("http") is None else "cannot build"
    assert "type 'http', " in messages["untyped_connection"] and http_says in messages["untyped_connection"]
    assert "provider_hook='package.module.Class'" in messages["untyped_connection"]
    assert "episode 2026-W32-99 not found" in messages["unknown_episode"]
    assert all("\n" not in message for message in messages.values())
    # Only the two tasks whose hook resolution needs the connection read one; the unknown episode
    # failed before its (broken) hook was even imported.
    assert {entry["id"] for entry in result["lookups"]} == {"ij_jobs_broken", "ij_jobs_untyped"}
    (episode,) = result["store"]
    assert episode["submission"]["state"] == "none"
    assert not any(job["request"] == {"prompt": "never sent"} for job in result["provider"]["jobs"].values())


def test_the_custom_hooks_log_no_token(scenario_results: dict[str, Any], provider_server: RunningProvider) -> None:
    log = Path(scenario_results["_log"]).read_text(errors="replace")
    assert "ij_custom_deferred" in log and provider_server.token not in log
