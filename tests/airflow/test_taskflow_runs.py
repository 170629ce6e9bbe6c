"""``@task.paid_generation`` and ``@task.episode`` under real ``dag.test()`` runs, and both example
DAGs (classic and TaskFlow) retried after the paid step's answer was lost.

One runner process (``taskflow_scenarios.py``) on a copy of the session's migrated database, a DAGs
folder of its own, the provider server in its own process, and the recording secrets backend.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.testing.server import server_connection
from tests.airflow.conftest import AirflowHome, scenario
from tests.airflow.scenario_process import REPO, observed, provider_server_process, scenario_home, ti
from tests.airflow.versions import failure_text

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

HERE = Path(__file__).resolve().parent
DAG_SOURCES = [
    HERE / "dags" / "taskflow_dags.py",
    REPO / "example_dags" / "weekly_media_pipeline.py",
    REPO / "example_dags" / "weekly_media_pipeline_taskflow.py",
]
PAID_XCOM_KEYS = {"return_value", "remote_ref", "state", "cost"}


@pytest.fixture(scope="session")
def taskflow_runs(airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    where = scenario_home(airflow_home.home, tmp_path_factory, "taskflow-home", DAG_SOURCES)
    token = "taskflow-provider-token-" + os.urandom(4).hex()
    with provider_server_process("--token", token) as url:
        connections = {
            "ijt_provider": server_connection(url, token),
            # Lookup declared, tokens not honoured: a retry after a lost answer must find the job.
            "ijt_provider_lookup": server_connection(url, token, tokens_honoured=False),
            "media_provider": server_connection(url, token, tokens_honoured=False),
            # Read by the custom hook of test_custom_provider_hook.py (provider_hook=): no token reuse, lookup.
            "ijt_jobs": {
                "conn_type": "http",
                "host": url,
                "password": token,
                "extra": {"tokens": False, "lookup": True},
            },
        }
        env = where.env(provider=(url, token), spy_secrets=True, connections=connections)
        yield where.run("tests.airflow.taskflow_scenarios", env, timeout=560)


def request_fingerprint(request: dict[str, Any]) -> str:
    """The documented fingerprint: sha256 of the canonical JSON (sorted keys, compact, UTF-8)."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def paid_once(result: dict[str, Any], episode: dict[str, Any]) -> dict[str, Any]:
    """The provider received one submission for the episode's token and holds one job for it (the
    one the record names, when it names one): that job."""
    token = episode["submission"]["token"]
    assert result["provider"]["submissions_per_token"][token] == 1
    assert result["provider"]["accepted_per_token"][token] == 1
    jobs = {ref: job for ref, job in result["provider"]["jobs"].items() if job.get("token") == token}
    assert len(jobs) == 1, jobs
    ((ref, job),) = jobs.items()
    assert episode["submission"]["remote_ref"] in (ref, None)
    return dict(job)


# -- @task.paid_generation ------------------------------------------------------------------------
def test_paid_step_built_from_upstream_xcoms_pays_once_and_pushes_the_operators_xcoms(
    taskflow_runs: dict[str, Any],
) -> None:
    both = scenario(taskflow_runs, "paid_xcoms")
    result, classic = both["taskflow"], both["classic"]
    run = result["run"]
    assert [ti(run, t)["state"] for t in ("topic", "units", "allocate", "generate", "report")] == ["success"] * 5
    (episode,) = result["store"]
    sub = episode["submission"]
    request = {"prompt": "the week in review (2026-W32-0)", "units": 2}
    (call,) = observed(run, "built")
    assert call["request"] == request and not call["resumed"]
    assert result["provider"]["jobs"][sub["remote_ref"]]["request"] == request
    assert sub["request_fingerprint"] == request_fingerprint(request)
    paid_once(result, episode)
    # The same XComs as PaidGenerationOperator, although the function is annotated "-> dict"
    # (which would otherwise unroll the summary into one XCom per key).
    pushed = result["xcoms"]["generate"]
    assert set(pushed) == set(classic["xcoms"]["generate"]) == PAID_XCOM_KEYS
    assert pushed["return_value"] == {
        "episode_id": "2026-W32-0",
        "remote_ref": sub["remote_ref"],
        "state": "succeeded",
        "cost": 2.5,
        "result": {"url": f"https://media.invalid/{sub['remote_ref']}.mp4"},
    }
    assert (pushed["remote_ref"], pushed["state"], pushed["cost"]) == (sub["remote_ref"], "succeeded", 2.5)
    (seen,) = observed(run, "paid_xcoms")
    assert seen["xcoms"] == pushed
    # The classic operator, given the same request as a template, paid for the same request.
    (classic_episode,) = classic["store"]
    assert classic_episode["submission"]["request_fingerprint"] == request_fingerprint(request)
    assert set(classic["xcoms"]["generate"]["return_value"]) == set(pushed["return_value"])


def test_deferrable_paid_step_resumes_in_execute_complete_and_checks_the_request_again(
    taskflow_runs: dict[str, Any],
) -> None:
    result = scenario(taskflow_runs, "paid_deferred")
    run = result["run"]
    assert ti(run, "generate")["state"] == "success" and ti(run, "generate")["try_number"] == 1
    calls = observed(run, "built")
    assert [c["resumed"] for c in calls] == [False, True], "built in execute, again in execute_complete"
    assert calls[0]["request"] == calls[1]["request"] == {"prompt": "the week in review (2026-W32-0)", "units": 2}
    (episode,) = result["store"]
    assert episode["submission"]["state"] == "succeeded"
    paid_once(result, episode)
    assert set(result["xcoms"]["generate"]) == PAID_XCOM_KEYS
    assert result["xcoms"]["generate"]["return_value"]["state"] == "succeeded"


def test_lost_answer_is_retried_and_paid_once(taskflow_runs: dict[str, Any]) -> None:
    result = scenario(taskflow_runs, "paid_lost_answer")
    run = result["run"]
    assert ti(run, "generate_lost")["state"] == "success" and ti(run, "generate_lost")["try_number"] == 2
    assert [c["try_number"] for c in observed(run, "built")] == [1, 2], "the retry rebuilt the request"
    (episode,) = result["store"]
    assert episode["submission"]["state"] == "succeeded"
    paid_once(result, episode)  # the server ignores tokens: paying again would have made a second job


def test_a_custom_provider_hook_deferred_after_a_lost_answer_pays_once(taskflow_runs: dict[str, Any]) -> None:
    result = scenario(taskflow_runs, "paid_custom_hook")
    run = result["run"]
    assert ti(run, "generate_custom")["state"] == "success" and ti(run, "generate_custom")["try_number"] == 2
    calls = observed(run, "built")
    assert [(c["try_number"], c["resumed"]) for c in calls] == [(1, False), (2, False), (2, True)]
    (episode,) = result["store"]
    assert episode["submission"]["state"] == "succeeded"
    assert paid_once(result, episode)["request"] == {"prompt": "custom teaser for 2026-W32-0", "units": 2}
    assert set(result["xcoms"]["generate_custom"]) == PAID_XCOM_KEYS


def test_a_retry_whose_function_builds_another_request_fails_without_paying(taskflow_runs: dict[str, Any]) -> None:
    result = scenario(taskflow_runs, "paid_request_changed")
    run = result["run"]
    assert ti(run, "generate_changed") == {
        "task_id": "generate_changed",
        "map_index": -1,
        "state": "failed",
        "try_number": 2,
    }
    first, second = {"prompt": "teaser", "variant": 1}, {"prompt": "teaser", "variant": 2}
    assert [c["request"] for c in observed(run, "built")] == [first, second]
    failures = observed(run, "failed", "generate_changed")
    assert [f["try_number"] for f in failures] == [2]
    message = failure_text(failures[0], taskflow_runs["_log"])
    assert request_fingerprint(first) in message and request_fingerprint(second) in message
    (episode,) = result["store"]
    # Try 1's answer was lost: the record stays "unknown" (not "failed") and bound to try 1's request.
    assert episode["submission"]["state"] == "unknown"
    assert episode["submission"]["request_fingerprint"] == request_fingerprint(first)
    assert paid_once(result, episode)["request"] == first


def test_two_requests_mapped_on_one_episode_pay_once(taskflow_runs: dict[str, Any]) -> None:
    result = scenario(taskflow_runs, "paid_two_requests")
    run = result["run"]
    mapped = sorted((t for t in run["tis"] if t["task_id"] == "generate_mapped"), key=lambda t: t["map_index"])
    assert sorted(t["state"] for t in mapped) == ["failed", "success"]
    loser = next(t for t in mapped if t["state"] == "failed")
    assert loser["try_number"] == 1, "a request conflict is not retried"
    requests = [{"prompt": "cover art"}, {"prompt": "trailer"}]
    paid, refused = requests[1 - loser["map_index"]], requests[loser["map_index"]]
    (failure,) = observed(run, "failed", "generate_mapped")
    message = failure_text(failure, taskflow_runs["_log"])
    assert request_fingerprint(paid) in message and request_fingerprint(refused) in message
    (episode,) = result["store"]
    assert episode["submission"]["request_fingerprint"] == request_fingerprint(paid)
    paid_once(result, episode)


def test_bad_ids_fail_before_the_function_runs_and_bad_requests_before_anything_is_sent(
    taskflow_runs: dict[str, Any],
) -> None:
    result = scenario(taskflow_runs, "paid_refused")
    run = result["run"]
    for task_id in ("unknown", "malformed", "missing", "not_a_dict", "nan"):  # retries=3 each
        assert ti(run, task_id) == {"task_id": task_id, "map_index": -1, "state": "failed", "try_number": 1}
    messages = {o["task_id"]: failure_text(o, taskflow_runs["_log"]) for o in observed(run, "failed")}
    assert "episode 2026-W32-99 not found" in messages["unknown"]
    assert "invalid episode id '2026-W32-007'" in messages["malformed"]
    assert "episode_id is empty ('None')" in messages["missing"]
    assert "refused() must return the request as a JSON object (a dict), not list" in messages["not_a_dict"]
    assert "request has no canonical JSON form" in messages["nan"]
    # The function ran only for the episode that exists; no connection was looked up; nothing sent.
    assert sorted(o["task_id"] for o in observed(run, "built")) == ["nan", "not_a_dict"]
    assert result["lookups"] == []
    (episode,) = result["store"]
    assert episode["submission"]["state"] == "none"
    assert episode["submission"]["token"] not in result["provider"]["submissions_per_token"]


# -- @task.episode --------------------------------------------------------------------------------
def test_episode_step_gets_the_loaded_episode(taskflow_runs: dict[str, Any]) -> None:
    result = scenario(taskflow_runs, "episode_step")
    run = result["run"]
    assert ti(run, "publish")["state"] == "success" and ti(run, "publish")["try_number"] == 1
    (episode,) = result["store"]
    (call,) = observed(run, "ran", "publish")
    assert call["episode"] == {
        "type": "Episode",
        "episode_id": "2026-W32-0",
        "week_id": "2026-W32",
        "allocation_key": episode["allocation_key"],
        "submission": "none",
    }
    assert call["url"] == "https://media.invalid/cut.mp4"
    expected = {"published": "2026-W32-0", "url": "https://media.invalid/cut.mp4"}
    # Like @task: a function annotated "-> dict" also pushes one XCom per key.
    assert result["xcoms"]["publish"] == {"return_value": expected, **expected}
    (seen,) = observed(run, "published_xcom")
    assert seen["value"] == expected
    # Mapped over two parts: each map index loads the episode and gets it.
    parts = sorted((o["map_index"], o["url"], o["episode"]["episode_id"]) for o in observed(run, "ran", "reassemble"))
    assert parts == [(0, "intro", "2026-W32-0"), (1, "outro", "2026-W32-0")]
    assert [result["xcoms"][f"reassemble[{i}]"]["return_value"] for i in (0, 1)] == [
        "2026-W32-0/intro",
        "2026-W32-0/outro",
    ]


def test_episode_step_fails_without_retry_before_the_function_or_any_connection(
    taskflow_runs: dict[str, Any],
) -> None:
    result = scenario(taskflow_runs, "episode_refused")
    run = result["run"]
    for task_id in ("unknown", "malformed", "missing"):  # retries=3 each
        assert ti(run, task_id) == {"task_id": task_id, "map_index": -1, "state": "failed", "try_number": 1}
    messages = {o["task_id"]: failure_text(o, taskflow_runs["_log"]) for o in observed(run, "failed")}
    assert "episode 2026-W32-99 not found" in messages["unknown"]
    assert "invalid episode id '2026-W32-007'" in messages["malformed"]
    assert "episode_id is empty ('None')" in messages["missing"]
    assert observed(run, "ran") == []
    # malformed and missing name a store Connection: a bad id fails before it is looked up.
    assert result["lookups"] == []


def test_a_store_password_never_reaches_the_rendered_fields_or_the_log(taskflow_runs: dict[str, Any]) -> None:
    result = scenario(taskflow_runs, "secret_store")
    run, rendered = result["run"], result["rendered"]
    password = "ijt-store-password-5e1f"
    for task_id in ("paid_secret", "step_secret"):
        # Nothing listens on port 9: StoreUnavailable, which a retry may fix (retries=1), so two tries.
        assert ti(run, task_id) == {"task_id": task_id, "map_index": -1, "state": "failed", "try_number": 2}
        store = rendered[task_id]["store"]
        assert store.startswith("postgresql://ijt:") and "***" in store, store
        (failure,) = observed(run, "failed", task_id)  # the callback runs once the task is finally failed
        message = failure_text(failure, taskflow_runs["_log"])
        assert "is unavailable" in message and password not in message
    assert password not in json.dumps(rendered)
    assert observed(run, "built") == observed(run, "ran") == [], "no episode loaded: no function ran"
    assert password not in Path(taskflow_runs["_log"]).read_text(errors="replace")


# -- the example DAGs -----------------------------------------------------------------------------
def test_taskflow_example_as_shipped_allocates_pays_once_and_publishes(taskflow_runs: dict[str, Any]) -> None:
    result = scenario(taskflow_runs, "example_taskflow_as_shipped")
    run = result["run"]
    assert run["state"] == "success"
    assert [ti(run, t)["try_number"] for t in ("allocate", "topic", "generate", "publish")] == [1] * 4
    (episode,) = result["store"]  # 2026-09-21 06:00 Berlin is in 2026-W39
    assert episode["episode_id"] == "2026-W39-0"
    sub = episode["submission"]
    assert (sub["state"], sub["cost"]) == ("succeeded", 2.5)
    assert paid_once(result, episode)["request"] == {"prompt": "the week in review (2026-W39-0)", "units": 2}
    assert set(result["xcoms"]["generate"]) == PAID_XCOM_KEYS
    assert result["xcoms"]["publish"]["return_value"] == {
        "episode": "2026-W39-0",
        "week": "2026-W39",
        "media": f"https://media.invalid/{sub['remote_ref']}.mp4",
        "cost": 2.5,
        "provider_job": sub["remote_ref"],
    }


@pytest.mark.parametrize(
    ("name", "dag_id", "episode_id"),
    [
        ("example_classic_lost_answer", "weekly_media_pipeline", "2026-W37-0"),
        ("example_taskflow_lost_answer", "weekly_media_pipeline_taskflow", "2026-W38-0"),
    ],
)
def test_example_dag_retried_after_a_lost_answer_pays_once(
    taskflow_runs: dict[str, Any], name: str, dag_id: str, episode_id: str
) -> None:
    result = scenario(taskflow_runs, name)
    run = result["run"]
    assert run["state"] == "success"
    assert ti(run, "generate") == {"task_id": "generate", "map_index": -1, "state": "success", "try_number": 2}
    assert ti(run, "publish")["state"] == "success"
    (episode,) = result["store"]
    assert episode["episode_id"] == episode_id
    assert episode["allocation_key"] == f"airflow:{dag_id}:allocate:{run['run_id']}"
    sub = episode["submission"]
    assert (sub["state"], sub["cost"]) == ("succeeded", 2.5)
    request = {"prompt": f"the week in review ({episode_id})", "units": 2}
    assert result["provider"]["jobs"][sub["remote_ref"]]["request"] == request
    paid_once(result, episode)  # the server ignores tokens: a second payment would be a second job
    published = result["xcoms"]["publish"]["return_value"]
    assert (published["cost"], published["provider_job"]) == (2.5, sub["remote_ref"])
    assert published["media"] == f"https://media.invalid/{sub['remote_ref']}.mp4"
    if dag_id.endswith("_taskflow"):
        assert (published["episode"], published["week"]) == (episode_id, episode_id[:8])
