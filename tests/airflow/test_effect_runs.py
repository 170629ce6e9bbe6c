"""Effects after the payment and the episode's one Asset event under real ``dag.test()`` runs.

One runner process (``effects_scenarios.py``) on a copy of the session's migrated database, a DAGs
folder of its own (``dags_effects/`` and the example pair ``weekly_media_effects.py``), the provider
server in its own process. Every effect body appends a line to a real file (``O_APPEND``): each test
asserts how many lines its sink holds, i.e. how many times the effect happened. The DAGs use file
stores; the retry after an effect runs on the PostgreSQL store too (a database of its own).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent_jobs.testing.server import server_connection
from tests.airflow.conftest import AirflowHome, scenario
from tests.airflow.dags_effects.effects_dags import WEBHOOK_SECRET
from tests.airflow.scenario_process import (
    REPO,
    fresh_pg_database,
    observed,
    provider_server_process,
    scenario_home,
    ti,
)
from tests.airflow.test_taskflow_runs import paid_once, request_fingerprint

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

HERE = Path(__file__).resolve().parent
DAG_SOURCES = [HERE / "dags_effects", REPO / "example_dags" / "weekly_media_effects.py"]
CRASH = "simulated worker crash after the effect"


@pytest.fixture(scope="module")
def effect_runs(
    airflow_home: AirflowHome, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[dict[str, Any]]:
    where = scenario_home(airflow_home.home, tmp_path_factory, "effects-home", DAG_SOURCES)
    sinks = where.work / "sinks"
    sinks.mkdir()
    token = "effects-provider-token-" + os.urandom(4).hex()
    with provider_server_process("--token", token) as url, fresh_pg_database(request) as pg_url:
        connections = {"ije_provider": server_connection(url, token), "media_provider": server_connection(url, token)}
        env = where.env(provider=(url, token), connections=connections, IJ_EFFECT_SINKS=str(sinks))
        if pg_url:
            env["IJ_EFFECTS_PG"] = pg_url
        yield where.run("tests.airflow.effects_scenarios", env, timeout=560)


def one_episode(result: dict[str, Any]) -> dict[str, Any]:
    (episode,) = result["store"]
    return dict(episode)


def sink_line(episode_id: str, token: str, try_number: int = 1, map_index: int = -1) -> str:
    return f"{episode_id} {token} try={try_number} map={map_index}"


def assert_done_once(effect: dict[str, Any], result: Any) -> None:
    """Done on the first attempt: intent, then outcome, nothing in between."""
    assert (effect["state"], effect["attempts"], effect["result"]) == ("done", 1, result)
    assert [(h["from"], h["to"]) for h in effect["history"]] == [(None, "pending"), ("pending", "done")]


# -- a retry after the effect ran ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "dag_id"),
    [("retry_after_the_effect", "ije_retry"), pytest.param("retry_after_the_effect_pg", "ije_retry_pg", id="postgres")],
)
def test_a_retry_after_the_effect_ran_returns_the_recorded_result_and_runs_nothing(
    effect_runs: dict[str, Any], name: str, dag_id: str
) -> None:
    result = scenario(effect_runs, name)
    if result.get("skipped"):
        pytest.skip("no PostgreSQL server answers")
    run = result["run"]
    effects = one_episode(result)["effects"]
    expected = {
        "publish": {"effect": f"{dag_id}_publish", "episode_id": "2026-W32-0", "url": "https://media.invalid/cut.mp4"},
        "notify": {"effect": f"{dag_id}_notify", "episode_id": "2026-W32-0", "channel": f"#{dag_id}"},
    }
    for task_id, sink in (("publish", "publish_sink"), ("notify", "notify_sink")):  # decorator, classic operator
        assert ti(run, task_id) == {"task_id": task_id, "map_index": -1, "state": "success", "try_number": 2}
        assert [o["message"] for o in observed(run, "retried", task_id)] == [CRASH], "try 1 failed after the body"
        assert [o["try_number"] for o in observed(run, "ran", task_id)] == [1], "try 2 did not call it"
        assert_done_once(effects[task_id], expected[task_id])
        token = effects[task_id]["token"]
        assert result[sink] == [sink_line("2026-W32-0", token)]
        # Try 2 returned the recorded result: the same XCom as if try 1 had finished.
        assert result["run"]["xcoms"][task_id]["return_value"] == expected[task_id]
    assert effects["publish"]["token"] != effects["notify"]["token"]
    assert effects["publish"]["token"].startswith("aij-2026-W32-0-fx-")


# -- the producer: cleared three times, then the next week; one event per episode ----------------
def test_a_producer_cleared_three_times_publishes_and_emits_once_per_episode(effect_runs: dict[str, Any]) -> None:
    result = scenario(effect_runs, "producer_cleared")
    runs = result["runs"]
    assert [r["state"] for r in runs] == ["success"] * 5
    assert len({r["run_id"] for r in runs[:4]}) == 1, "a clear re-runs the same run"
    assert [len(observed(r, "ran")) for r in runs] == [2, 0, 0, 0, 2], "the clears ran no effect"
    episodes = {e["episode_id"]: e for e in result["store"]}
    assert sorted(episodes) == ["2026-W32-0", "2026-W33-0"]
    for sink in ("publish_sink", "notify_sink"):
        assert [line.split()[0] for line in result[sink]] == ["2026-W32-0", "2026-W33-0"]
    # Airflow's own count: one event per episode, whatever the clears did.
    events = result["events"]
    assert [e["extra"]["episode_id"] for e in events] == ["2026-W32-0", "2026-W33-0"]
    for event, run in zip(events, (runs[0], runs[4]), strict=True):
        episode = episodes[event["extra"]["episode_id"]]
        sub, effects = episode["submission"], episode["effects"]
        assert sub["state"] == "succeeded"
        assert event["extra"] == {
            "episode_id": episode["episode_id"],
            "week_id": episode["episode_id"][:8],
            "cost": sub["cost"],
            "remote_ref": sub["remote_ref"],
            "effects": {"notify:slack": effects["notify:slack"]["result"], "publish": effects["publish"]["result"]},
            "effect_token": effects["asset_event:ije_episodes"]["token"],
            "emitted_by": {
                "dag_id": "ije_producer",
                "run_id": run["run_id"],
                "task_id": "publish_episode",
                "map_index": -1,
            },
        }
        assert (event["source_dag_id"], event["source_task_id"]) == ("ije_producer", "publish_episode")
        assert event["partition_key"] is None  # an alias's events take the run's key (docs: no per-event key)
        assert_done_once(effects["asset_event:ije_episodes"], event["extra"])
        assert effects["publish"]["result"]["url"] == f"https://media.invalid/{sub['remote_ref']}.mp4"
        assert result["publish_sink"].count(sink_line(episode["episode_id"], effects["publish"]["token"])) == 1
    first = episodes["2026-W32-0"]["effects"]["publish"]["result"]
    assert [r["xcoms"]["publish_episode"]["return_value"] for r in runs[:4]] == [first] * 4
    # The downstream DAG, run as the scheduler starts it for these events, reads their episode ids.
    digest = result["digest"]
    assert digest["state"] == "success" and digest["run_id"].startswith("asset_triggered__")
    (seen,) = observed(digest, "digest")
    assert sorted(seen["episode_ids"]) == ["2026-W32-0", "2026-W33-0"]
    assert sorted(digest["xcoms"]["digest"]["return_value"]) == ["2026-W32-0", "2026-W33-0"]


def test_an_emitting_try_that_fails_registers_no_event_and_its_retry_registers_one(
    effect_runs: dict[str, Any],
) -> None:
    """Try 1 records the event effect done, then fails: Airflow registers nothing. Try 2 finds no event
    with the token and adds the recorded one; the clear after finds it and adds none."""
    result = scenario(effect_runs, "emit_retried")
    first, cleared = result["runs"]
    assert ti(first, "publish_and_emit") == {
        "task_id": "publish_and_emit",
        "map_index": -1,
        "state": "success",
        "try_number": 2,
    }
    assert [o["message"] for o in observed(first, "retried")] == [CRASH]
    assert cleared["state"] == "success" and observed(cleared, "ran") == []
    effects = one_episode(result)["effects"]
    emitted = effects["asset_event:ije_retried_episodes"]
    (event,) = result["events"]
    assert event["source_run_id"] == first["run_id"]
    assert event["extra"]["effect_token"] == emitted["token"]
    assert_done_once(emitted, event["extra"])
    assert result["sink"] == [sink_line("2026-W32-0", effects["publish"]["token"])]


# -- mapped --------------------------------------------------------------------------------------
def test_a_mapped_effect_is_one_effect_per_map_index_each_happening_once(effect_runs: dict[str, Any]) -> None:
    result = scenario(effect_runs, "mapped")
    first, cleared = result["runs"]
    parts = ["intro", "middle", "outro"]
    for i in range(3):
        assert ti(first, "upload", i)["state"] == "success" and ti(first, "upload", i)["try_number"] == 2
        assert ti(cleared, "upload", i)["state"] == "success"
    ran = observed(first, "ran", "upload")
    assert sorted((o["map_index"], o["try_number"]) for o in ran) == [(0, 1), (1, 1), (2, 1)]
    for run in (first, cleared):  # retries=2: refused on try 1, the function never called
        assert ti(run, "emit_mapped", 0) == {
            "task_id": "emit_mapped",
            "map_index": 0,
            "state": "failed",
            "try_number": 1,
        }
        (refused,) = observed(run, "failed", "emit_mapped")
        assert "asset_event on a mapped task would emit once per map index" in refused["message"]
    assert observed(first, "ran", "emit_mapped") == []
    assert len(observed(first, "retried", "upload")) == 3 and observed(cleared, "ran") == []
    effects = one_episode(result)["effects"]
    assert sorted(effects) == ["upload[0]", "upload[1]", "upload[2]"]
    for i, part in enumerate(parts):
        recorded = {"effect": "ije_mapped_upload", "episode_id": "2026-W32-0", "part": part}
        assert_done_once(effects[f"upload[{i}]"], recorded)
        assert first["xcoms"][f"upload[{i}]"]["return_value"] == recorded
        assert cleared["xcoms"][f"upload[{i}]"]["return_value"] == recorded
    assert sorted(result["sink"]) == sorted(
        sink_line("2026-W32-0", effects[f"upload[{i}]"]["token"], map_index=i) for i in range(3)
    )


# -- refused -------------------------------------------------------------------------------------
def test_a_retry_with_changed_inputs_is_refused_and_runs_nothing(effect_runs: dict[str, Any]) -> None:
    result = scenario(effect_runs, "changed_input")
    run = result["run"]
    assert ti(run, "publish_take") == {"task_id": "publish_take", "map_index": -1, "state": "failed", "try_number": 2}
    took, retook = ({"args": [f"take {n}"], "kwargs": {}} for n in (1, 2))
    (failure,) = observed(run, "failed", "publish_take")
    assert failure["try_number"] == 2
    assert (
        f"began with inputs {request_fingerprint(took)}, not with these {request_fingerprint(retook)}"
        in (failure["message"])
    )
    assert [o["try_number"] for o in observed(run, "ran", "publish_take")] == [1]
    effects = one_episode(result)["effects"]
    effect = effects["publish"]
    assert effect["input_fingerprint"] == request_fingerprint(took)
    assert_done_once(effect, {"effect": "ije_changed_input_publish", "episode_id": "2026-W32-0", "take": "take 1"})
    assert result["sink"] == [sink_line("2026-W32-0", effect["token"])]


def test_effect_inputs_name_what_is_bound_and_inputs_without_json_are_refused(effect_runs: dict[str, Any]) -> None:
    result = scenario(effect_runs, "changed_input")
    run, effects = result["run"], one_episode(result)["effects"]
    # effect_inputs (rendered) is bound, not the argument that changed: try 2 returns try 1's result.
    upload = effects["upload"]
    took = {"effect": "ije_changed_input_upload", "episode_id": "2026-W32-0", "take": "take 1"}
    assert ti(run, "upload_take")["state"] == "success" and ti(run, "upload_take")["try_number"] == 2
    assert upload["input_fingerprint"] == request_fingerprint({"inputs": {"master": "ije_changed_input/final.mp4"}})
    assert_done_once(upload, took)
    assert run["xcoms"]["upload_take"]["return_value"] == took
    assert result["upload_sink"] == [sink_line("2026-W32-0", upload["token"])]
    # A timedelta has no canonical JSON: no retry (retries=3), nothing recorded or run.
    assert ti(run, "notify_after") == {"task_id": "notify_after", "map_index": -1, "state": "failed", "try_number": 1}
    (refused,) = observed(run, "failed", "notify_after")
    assert "effect notify: its inputs have no canonical JSON form" in refused["message"]
    assert "notify" not in effects and result["notify_sink"] == []


def test_each_capability_settles_a_lost_answer_its_own_way(effect_runs: dict[str, Any]) -> None:
    """Each body happens and then loses its answer on try 1 (retries=2); then the run is cleared."""
    result = scenario(effect_runs, "capabilities")
    first, cleared = result["runs"]
    effects = one_episode(result)["effects"]
    sinks = result["sinks"]
    # "none": may have happened -> no retry, the reconcile command named; the clear refuses again.
    command = "idempotent-jobs reconcile 2026-W32-0 --effect notify --done REF | --not-done"
    for run in (first, cleared):
        assert ti(run, "unknown") == {"task_id": "unknown", "map_index": -1, "state": "failed", "try_number": 1}
        (failure,) = observed(run, "failed", "unknown")
        assert "effect notify may already have happened" in failure["message"] and command in failure["message"]
    assert [o["try_number"] for o in observed(first, "ran", "unknown")] == [1] and observed(cleared, "ran") == []
    assert (effects["notify"]["state"], effects["notify"]["attempts"]) == ("unknown", 1)
    # The body's error, kept in the record and shown in the failure, with the secret Airflow masks.
    assert effects["notify"]["error"] == "ije_capabilities_none: https://hooks.invalid/***'s answer was lost"
    assert effects["notify"]["error"] in failure["message"]
    assert WEBHOOK_SECRET not in Path(effect_runs["_log"]).read_text(errors="replace")
    assert sinks["none"] == [sink_line("2026-W32-0", effects["notify"]["token"])]
    # "lookup": try 2 finds the token at the target: done with what the lookup found, not run again.
    found = {"found": sink_line("2026-W32-0", effects["upload"]["token"])}
    assert ti(first, "looked_up")["state"] == "success" and ti(first, "looked_up")["try_number"] == 2
    assert [o["try_number"] for o in observed(first, "ran", "looked_up")] == [1]
    assert (effects["upload"]["state"], effects["upload"]["attempts"], effects["upload"]["result"]) == (
        "done",
        1,
        found,
    )
    assert [h["note"] for h in effects["upload"]["history"]][-1] == "found by token lookup"
    assert first["xcoms"]["looked_up"]["return_value"] == cleared["xcoms"]["looked_up"]["return_value"] == found
    assert sinks["lookup"] == [found["found"]]
    # "idempotent_key": try 2 runs it again with the same token (the target dedupes on it).
    token = effects["publish"]["token"]
    assert [o["try_number"] for o in observed(first, "ran", "keyed")] == [1, 2]
    assert sinks["key"] == [sink_line("2026-W32-0", token, 1), sink_line("2026-W32-0", token, 2)]
    assert (effects["publish"]["state"], effects["publish"]["attempts"]) == ("done", 2)
    assert observed(cleared, "ran", "keyed") == [] and ti(cleared, "keyed")["state"] == "success"


# -- the example pair ----------------------------------------------------------------------------
def test_the_example_pair_publishes_once_emits_once_and_the_digest_reads_the_episode(
    effect_runs: dict[str, Any],
) -> None:
    result = scenario(effect_runs, "example_effects")
    runs = result["runs"]
    assert [r["state"] for r in runs] == ["success"] * 3
    assert [ti(r, "publish")["try_number"] for r in runs] == [1, 1, 1]
    (episode,) = result["store"]
    assert episode["episode_id"] == "2026-W39-0"
    paid_once(result, episode)
    sub, effects = episode["submission"], episode["effects"]
    published = {
        "page": "https://cms.invalid/episodes/2026-W39-0",
        "media": f"https://media.invalid/{sub['remote_ref']}.mp4",
    }
    assert_done_once(effects["publish"], published)
    assert [r["xcoms"]["publish"]["return_value"] for r in runs] == [published] * 3
    (event,) = result["events"]
    assert (event["extra"]["episode_id"], event["extra"]["cost"]) == ("2026-W39-0", 2.5)
    assert event["extra"]["effects"] == {"publish": published}
    digest = result["digest"]
    assert digest["state"] == "success"
    assert digest["xcoms"]["digest"]["return_value"] == [{"episode_id": "2026-W39-0", "page": published["page"]}]
