"""The read model counts effects and lists those only a person can settle, with their reconcile command.

On both stores; effects are made by the real ledger (`tests.effects_scenario`).
"""

from __future__ import annotations

import datetime as dt
import shlex

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.effect import EffectState
from airflow_idempotent_jobs.effects import EffectLedger, EffectStateUnknown
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.operations import episode_view, week_view, weeks_view
from tests.backends import Backend
from tests.clirun import run_cli
from tests.effects_scenario import ELSEWHERE, WEEK, EffectsScenario, build_effects

NOW = dt.datetime.now(dt.timezone.utc)


@pytest.fixture(autouse=True)
def _now() -> None:
    """Each test's own now: a time taken at import ages past the 900 s claim lease in a long suite."""
    global NOW
    NOW = dt.datetime.now(dt.timezone.utc)


@pytest.fixture
def scenario(store: EpisodeStore) -> EffectsScenario:
    return build_effects(store, NOW)


def test_effects_are_counted_by_state(store: EpisodeStore, scenario: EffectsScenario) -> None:
    counts = week_view(store, WEEK, budget=None, now=NOW)["counts"]
    assert counts["effect"] == {"pending": 3, "done": 1, "failed": 1, "unknown": 1}
    assert list(counts["effect"]) == [state.value for state in EffectState]  # every state, in the enum's order
    assert counts["submission"]["submitting"] == 1  # the effects' episodes are counted as before
    assert sum(counts["status"].values()) == 6
    empty = week_view(store, "2026-W33", budget=None, now=NOW)["counts"]["effect"]
    assert empty == {"pending": 0, "done": 0, "failed": 0, "unknown": 0}


def test_needs_attention_lists_unknown_and_stale_effects(store: EpisodeStore, scenario: EffectsScenario) -> None:
    s = scenario
    view = week_view(store, WEEK, budget=None, now=NOW)
    assert [(a["episode_id"], a["command"]) for a in view["attention"]] == [
        (s.unknown, f"idempotent-jobs reconcile {s.unknown} --effect publish"),
        (s.stale, f"idempotent-jobs reconcile {s.stale}"),  # its submission first, then its effects
        (s.stale, f"idempotent-jobs reconcile {s.stale} --effect 'publish[3]'"),  # quoted: [3] is a shell pattern
        (s.garbled, f"idempotent-jobs check {s.garbled}"),
    ]
    keys = [set(a) for a in view["attention"]]  # a submission's entry adds its token; effects and check none
    assert (
        keys
        == [{"episode_id", "reason", "command"}, {"episode_id", "reason", "command", "token"}]
        + [{"episode_id", "reason", "command"}] * 2
    )
    unknown, _, stale, garbled = (a["reason"] for a in view["attention"])
    assert unknown.startswith("effect publish unknown since ") and "it may have happened" in unknown
    assert "--lookup-url URL" in unknown and "--done REF" in unknown and "--not-done" in unknown
    assert stale.startswith("effect publish[3] pending since ") and ELSEWHERE in stale and "900 s lease" in stale
    assert "'last tuesday'" in garbled and "reconcile refuses it" in garbled
    assert weeks_view(store, current=WeekId.parse(WEEK), count=1, now=NOW)["weeks"][0]["attention"] == 4


def test_a_shorter_lease_lists_the_fresh_intent_too(store: EpisodeStore, scenario: EffectsScenario) -> None:
    listed = week_view(store, WEEK, budget=None, now=NOW, claim_lease=30)["attention"]
    assert (scenario.fresh, f"idempotent-jobs reconcile {scenario.fresh} --effect publish") in [
        (a["episode_id"], a["command"]) for a in listed
    ]


def test_episode_view_carries_effects_and_their_attention(store: EpisodeStore, scenario: EffectsScenario) -> None:
    settled = episode_view(store, scenario.settled, now=NOW)
    effects = settled["episode"]["effects"]
    assert set(effects) == {"publish", "notify:slack"}
    assert effects["publish"]["result"] == {"ref": "post-1", "url": "https://example.invalid/1"}
    assert (effects["notify:slack"]["state"], effects["notify:slack"]["error"]) == ("failed", "the target said 400")
    assert settled["attention"] == []
    stale = episode_view(store, scenario.stale, now=NOW)
    assert [a["command"] for a in stale["attention"]] == [
        f"idempotent-jobs reconcile {scenario.stale}",
        f"idempotent-jobs reconcile {scenario.stale} --effect 'publish[3]'",
    ]


def test_listed_commands_are_what_reconcile_accepts(
    backend: Backend, store: EpisodeStore, scenario: EffectsScenario
) -> None:
    """Each effect command is real: alone it changes nothing and names the ways; with one it settles."""
    env = {"IDEMPOTENT_JOBS_STORE": backend.url}
    listed = [a["command"] for a in week_view(store, WEEK, budget=None, now=NOW)["attention"]]
    effect_commands = [shlex.split(command)[1:] for command in listed if "--effect" in command]
    assert len(effect_commands) == 2
    before = backend.snapshot()
    bare = run_cli(*effect_commands[0], env=env)
    assert bare.code == 2 and "--not-done" in bare.error_line() and "--lookup-url" in bare.error_line()
    fresh = run_cli("reconcile", scenario.fresh, "--effect", "publish", "--not-done", env=env)
    assert fresh.code == 3 and "is still running" in fresh.error_line(), "not listed, and reconcile refuses it"
    garbled = run_cli("reconcile", scenario.garbled, "--effect", "publish", "--not-done", env=env)
    assert garbled.code == 5 and "unreadable effect claim" in garbled.error_line(), "listed with check, not reconcile"
    assert backend.snapshot() == before
    for args in effect_commands:
        settled = run_cli(*args, "--done", "seen-by-oncall", "--by", "oncall", env=env)
        assert settled.code == 0, settled.stderr
    left = week_view(store, WEEK, budget=None, now=NOW)
    assert [a["command"] for a in left["attention"]] == [
        f"idempotent-jobs reconcile {scenario.stale}",
        f"idempotent-jobs check {scenario.garbled}",
    ]
    assert left["counts"]["effect"] == {"pending": 2, "done": 3, "failed": 1, "unknown": 0}


def test_an_episodes_effects_are_listed_by_name(store: EpisodeStore) -> None:
    """Stores keep no order of an episode's effects (the file store sorts keys, jsonb its own way): names do."""
    eid = store.allocate(WEEK, "two").episode_id

    def lost(token: str) -> None:
        raise RuntimeError("lost")

    for name in ("zeta", "alpha"):
        with pytest.raises(EffectStateUnknown):
            EffectLedger(store).run(eid, name, lost)
    listed = week_view(store, WEEK, budget=None, now=NOW)["attention"]
    assert [a["command"].rsplit(" ", 1)[1] for a in listed] == ["alpha", "zeta"]
