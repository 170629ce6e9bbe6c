"""``show`` and ``report`` say what the episodes' effects are, through the real command.

On both stores, effects made by the real ledger (`tests.effects_scenario`).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.operations import week_view
from tests.backends import Backend
from tests.clirun import run_cli
from tests.effects_scenario import WEEK, EffectsScenario, build_effects


@pytest.fixture
def scenario(store: EpisodeStore) -> EffectsScenario:
    return build_effects(store, dt.datetime.now(dt.timezone.utc))


def test_show_prints_each_effect(backend: Backend, store: EpisodeStore, scenario: EffectsScenario) -> None:
    done = run_cli("--store", backend.url, "show", scenario.settled)
    assert (done.code, done.stderr) == (0, "")
    shown = json.loads(done.stdout)
    assert shown == store.get(scenario.settled).to_dict()
    publish, notify = shown["effects"]["publish"], shown["effects"]["notify:slack"]
    assert (publish["state"], publish["attempts"], publish["result"]["ref"]) == ("done", 1, "post-1")
    assert (notify["state"], notify["attempts"], notify["result"], notify["error"]) == (
        "failed",
        1,
        None,
        "the target said 400",
    )
    assert publish["token"] != notify["token"]
    plain = json.loads(run_cli("--store", backend.url, "show", scenario.plain).stdout)
    assert plain["effects"] == {}  # the key is always there, empty until an effect begins


def test_text_report_counts_effects_and_names_their_commands(backend: Backend, scenario: EffectsScenario) -> None:
    done = run_cli("--store", backend.url, "report", "--week", WEEK)
    assert (done.code, done.stderr) == (0, "")
    week = done.stdout
    assert "  decision:   none 6\n  effect:     pending 3, done 1, failed 1, unknown 1\n" in week
    assert "  needs attention: 4\n" in week
    assert f"    {scenario.unknown}  effect publish unknown since " in week
    assert f"      idempotent-jobs reconcile {scenario.unknown} --effect publish\n" in week
    assert f"      idempotent-jobs reconcile {scenario.stale} --effect 'publish[3]'\n" in week
    empty = run_cli("--store", backend.url, "report", "--week", "2026-W33").stdout
    assert "  effect:     -\n" in empty and empty.endswith("  needs attention: nothing\n")


def test_json_report_is_the_read_models_week(backend: Backend, store: EpisodeStore, scenario: EffectsScenario) -> None:
    done = run_cli("--store", backend.url, "report", "--week", WEEK, "--json")
    assert done.code == 0, done.stderr
    week = json.loads(done.stdout)
    assert week["counts"]["effect"] == {"pending": 3, "done": 1, "failed": 1, "unknown": 1}
    expected = week_view(store, WEEK, budget=None, now=dt.datetime.now(dt.timezone.utc))
    assert week["counts"] == expected["counts"]
    assert [a["command"] for a in week["attention"]] == [a["command"] for a in expected["attention"]]
