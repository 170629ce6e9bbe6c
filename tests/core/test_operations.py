"""The operations read model on real stores (file and PostgreSQL), episodes made by the real ledger."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import zoneinfo
from collections.abc import Iterator

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.episode import Decision, Episode
from airflow_idempotent_jobs.errors import EpisodeNotFound, InvalidConfiguration, InvalidIdentifier
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.operations import (
    DECISIONS,
    Owner,
    episode_view,
    owner_of,
    reconcile_command,
    week_view,
    weeks_view,
)
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.backends import Backend
from tests.clirun import run_cli, run_python
from tests.operations_scenario import LAST_WEEK, PRICE, WEEK, Scenario, build

NOW = dt.datetime.now(dt.timezone.utc)


@pytest.fixture(autouse=True)
def _now() -> None:
    """Each test's own now: a time taken at import ages past the 900 s claim lease in a long suite."""
    global NOW
    NOW = dt.datetime.now(dt.timezone.utc)


WEEK_KEYS = {
    "week_id",
    "previous",
    "next",
    "current",
    "budget",
    "spend",
    "spend_unknown",
    "counts",
    "episodes",
    "attention",
    "damaged",
}
ROW_KEYS = {
    "episode_id",
    "status",
    "submission_state",
    "remote_ref",
    "cost",
    "decision",
    "created_at",
    "updated_at",
    "allocation_key",
    "owner",
    "owner_source",
}


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(polls_to_finish=1) as running:
        yield running


@pytest.fixture
def scenario(store: EpisodeStore, server: ProviderServer) -> Scenario:
    return build(store, server, NOW)


def _strict(data: object) -> object:
    """What the API sends: strict JSON (no NaN), read back."""
    return json.loads(json.dumps(data, allow_nan=False))


def test_week_view_rows_totals_and_attention(store: EpisodeStore, scenario: Scenario) -> None:
    view = week_view(store, WEEK, budget=10.0, now=NOW)
    assert _strict(view) == view
    assert set(view) == WEEK_KEYS
    assert (view["week_id"], view["previous"], view["next"]) == ("2026-W32", "2026-W31", "2026-W33")
    assert view["current"] == str(WeekId.from_datetime(NOW))
    assert view["budget"] == 10.0
    # The known costs (one job at the server's price); the NaN cost without estimate is named instead.
    assert view["spend"] == PRICE
    assert view["spend_unknown"] == [scenario.anomaly]
    assert view["counts"] == {
        "status": {"allocated": 3, "running": 4, "succeeded": 2, "failed": 1, "cancelled": 0, "rejected": 1},
        "submission": {"none": 4, "submitting": 2, "accepted": 1, "succeeded": 2, "failed": 1, "unknown": 1},
        "decision": {"approved": 1, "rejected": 1, "asked": 1, "none": 8},
        "effect": {"pending": 0, "done": 0, "failed": 0, "unknown": 0},  # no episode ran one
    }
    rows = {row["episode_id"]: row for row in view["episodes"]}
    assert [row["episode_id"] for row in view["episodes"]] == [f"{WEEK}-{n}" for n in range(11)]
    assert all(set(row) == ROW_KEYS for row in rows.values())
    paid = rows[scenario.succeeded]
    assert (paid["status"], paid["submission_state"], paid["cost"]) == ("succeeded", "succeeded", PRICE)
    assert paid["remote_ref"] == store.get(scenario.succeeded).submission.remote_ref is not None
    assert paid["owner"] == {
        "dag_id": "weekly_media",
        "task_id": "generate",
        "run_id": "scheduled__2026-08-03T10:00:00+00:00",
        "map_index": 3,
    }
    assert rows[scenario.allocated]["owner"]["map_index"] is None
    assert rows[scenario.failed]["owner"] == {
        "dag_id": "weekly_media",
        "task_id": "generate",
        "run_id": None,
        "map_index": None,
    }
    assert rows[scenario.migrated]["owner"] is None
    # The scenario allocates through the library, not the operator: every owner is the key's word.
    assert {row["owner_source"] for eid, row in rows.items() if eid != scenario.migrated} == {"key"}
    assert rows[scenario.migrated]["owner_source"] is None
    assert view["damaged"] == []
    assert [
        rows[e]["decision"] for e in (scenario.rejected, scenario.approved_running, scenario.asked, scenario.allocated)
    ] == [
        "rejected",
        "approved",
        "asked",
        None,
    ]
    # Unknown and the stale claim need a person; the claim a minute old does not (its writer may live).
    assert [(a["episode_id"], a["command"]) for a in view["attention"]] == [
        (scenario.unknown, f"idempotent-jobs reconcile {scenario.unknown}"),
        (scenario.stale, f"idempotent-jobs reconcile {scenario.stale}"),
    ]
    unknown_reason, stale_reason = (a["reason"] for a in view["attention"])
    assert unknown_reason.startswith("submission unknown since ") and "--not-submitted" in unknown_reason
    assert "worker-7.example:4242:abcd1234" in stale_reason and "900 s lease" in stale_reason


def test_a_shorter_lease_makes_the_fresh_claim_stale_too(store: EpisodeStore, scenario: Scenario) -> None:
    view = week_view(store, WEEK, budget=None, now=NOW, claim_lease=30)
    assert [a["episode_id"] for a in view["attention"]] == [scenario.unknown, scenario.stale, scenario.fresh]
    assert view["budget"] is None


def test_attention_is_exactly_what_reconcile_accepts(backend: Backend, store: EpisodeStore, scenario: Scenario) -> None:
    """The listed command is real: alone it changes nothing and names the ways; with one it settles."""
    env = {"IDEMPOTENT_JOBS_STORE": backend.url}
    listed = {a["episode_id"]: a["command"] for a in week_view(store, WEEK, budget=None, now=NOW)["attention"]}
    before = backend.snapshot()
    bare = run_cli(*listed[scenario.stale].split()[1:], env=env)
    assert bare.code == 2 and "--not-submitted" in bare.error_line()
    assert backend.snapshot() == before
    fresh = run_cli("reconcile", scenario.fresh, "--not-submitted", env=env)
    assert fresh.code == 3 and "still running" in fresh.error_line(), "not listed, and reconcile refuses it"
    for eid, command in listed.items():
        settled = run_cli(*command.split()[1:], "--remote-ref", f"job-by-hand-{eid}", "--by", "oncall", env=env)
        assert settled.code == 0, settled.stderr
    assert week_view(store, WEEK, budget=None, now=NOW)["attention"] == []


def test_weeks_view_newest_first(store: EpisodeStore, scenario: Scenario) -> None:
    view = weeks_view(store, current=WeekId.parse("2026-W33"), count=3, now=NOW)
    assert _strict(view) == view
    assert view == {
        "current": "2026-W33",
        "weeks": [
            {"week_id": "2026-W33", "episodes": 0, "spend": 0.0, "attention": 0, "damaged": 0},
            {"week_id": WEEK, "episodes": 11, "spend": PRICE, "attention": 2, "damaged": 0},
            {"week_id": LAST_WEEK, "episodes": 2, "spend": PRICE, "attention": 1, "damaged": 0},
        ],
    }
    assert [w["week_id"] for w in weeks_view(store, current=WeekId.parse("2026-W02"), count=4)["weeks"]] == [
        "2026-W02",
        "2026-W01",
        "2025-W52",
        "2025-W51",
    ]


def test_episode_view_is_the_record_as_stored(store: EpisodeStore, scenario: Scenario, server: ProviderServer) -> None:
    view = episode_view(store, scenario.unknown, now=NOW)
    assert _strict(view) == view
    assert view["episode"] == store.get(scenario.unknown).to_dict()
    # The provider echoed its credential; the ledger redacted it before storing, and it is shown as stored.
    error = view["episode"]["submission"]["error"]
    assert "HTTP 500" in error and "<redacted>" in error
    assert server.auth_token not in json.dumps(view)
    assert view["owner"] == {
        "dag_id": "weekly_media",
        "task_id": "generate",
        "run_id": "scheduled__2026-08-03T10:00:00+00:00",
        "map_index": 4,
    }
    assert [a["command"] for a in view["attention"]] == [f"idempotent-jobs reconcile {scenario.unknown}"]
    # The token a lookup at the provider needs, as the record holds it.
    token = view["episode"]["submission"]["token"]
    assert token and [a["token"] for a in view["attention"]] == [token]
    rejected = episode_view(store, scenario.rejected, now=NOW)
    assert rejected["attention"] == []
    assert rejected["episode"]["approval"]["decision"] == "rejected"
    assert rejected["episode"]["approval"]["comment"] == "too dear"
    assert episode_view(store, scenario.migrated, now=NOW)["owner"] is None


def test_bad_input_is_one_clear_error_and_changes_nothing(backend: Backend, store: EpisodeStore) -> None:
    store.allocate(WEEK, "k")
    before = backend.snapshot()
    for bad in ("2026-W54", "2026-32", "../x", ""):
        with pytest.raises(InvalidIdentifier, match="invalid week id"):
            week_view(store, bad, budget=None, now=NOW)
    with pytest.raises(InvalidIdentifier, match="invalid episode id"):
        episode_view(store, "2026-W32-01", now=NOW)
    with pytest.raises(EpisodeNotFound):
        episode_view(store, "2026-W32-7", now=NOW)
    for count in (0, 105, 1.5, True):
        with pytest.raises(InvalidIdentifier, match="week count"):
            weeks_view(store, current=WeekId.parse(WEEK), count=count)  # type: ignore[arg-type]
    for budget in (float("nan"), float("inf"), -1.0):
        with pytest.raises(InvalidConfiguration, match="weekly_budget"):
            week_view(store, WEEK, budget=budget, now=NOW)
    with pytest.raises(ValueError, match="aware"):
        week_view(store, WEEK, budget=None, now=dt.datetime(2026, 8, 3))
    assert backend.snapshot() == before


def test_current_week_is_seen_in_the_clock_zone(store: EpisodeStore) -> None:
    sunday_night_utc = dt.datetime(2026, 8, 9, 23, 30, tzinfo=dt.timezone.utc)
    assert week_view(store, WEEK, budget=None, now=sunday_night_utc)["current"] == "2026-W32"
    tokyo = sunday_night_utc.astimezone(zoneinfo.ZoneInfo("Asia/Tokyo"))  # Monday morning there
    assert week_view(store, WEEK, budget=None, now=tokyo)["current"] == "2026-W33"


def test_weeks_at_the_calendar_ends(store: EpisodeStore) -> None:
    first = week_view(store, "0001-W01", budget=None, now=NOW)
    assert (first["previous"], first["next"]) == (None, "0001-W02")
    last = week_view(store, "9999-W52", budget=None, now=NOW)
    assert (last["previous"], last["next"]) == ("9999-W51", None)
    assert [w["week_id"] for w in weeks_view(store, current=WeekId.parse("0001-W02"), count=5)["weeks"]] == [
        "0001-W02",
        "0001-W01",
    ]


def test_an_unreadable_claim_time_points_to_check(store: EpisodeStore, scenario: Scenario) -> None:
    def garble(ep: Episode) -> Episode:
        return dataclasses.replace(ep, submission=dataclasses.replace(ep.submission, claimed_at="last tuesday"))

    store.update(scenario.fresh, garble)
    entries = {a["episode_id"]: a for a in week_view(store, WEEK, budget=None, now=NOW)["attention"]}
    assert entries[scenario.fresh]["command"] == f"idempotent-jobs check {scenario.fresh}"
    assert "'last tuesday'" in entries[scenario.fresh]["reason"]


def test_reconcile_command_only_for_uncertain_submissions(store: EpisodeStore, scenario: Scenario) -> None:
    commands = {e.episode_id: reconcile_command(e) for e in store.list(WEEK)}
    assert {eid for eid, command in commands.items() if command} == {scenario.unknown, scenario.stale, scenario.fresh}


def test_every_decision_has_a_count() -> None:
    assert {d.value for d in Decision} <= set(DECISIONS)


RUN = "scheduled__2026-08-03T10:00:00+00:00"


@pytest.mark.parametrize(
    ("key", "owner"),
    [
        (f"airflow:d:t:{RUN}", Owner("d", "t", RUN, None)),
        (f"airflow:d:t:{RUN}:0", Owner("d", "t", RUN, 0)),
        (f"airflow:d:t:{RUN}:12", Owner("d", "t", RUN, 12)),
        ("airflow:d:t:manual__2026-08-03T10:00:00+05:30", Owner("d", "t", "manual__2026-08-03T10:00:00+05:30", None)),
        (
            "airflow:d:t:manual__2026-08-03T10:00:00.123456+00:00_AbCd1234:7",
            Owner("d", "t", "manual__2026-08-03T10:00:00.123456+00:00_AbCd1234", 7),
        ),
        ("airflow:d:t:manual__2026-08-03T10:00:10", Owner("d", "t", "manual__2026-08-03T10:00:10", None)),
        ("airflow:d:t:manual__2026-08-03T10:00:00Z:2", Owner("d", "t", "manual__2026-08-03T10:00:00Z", 2)),
        ("airflow:d:t:my_run", Owner("d", "t", "my_run", None)),
        ("airflow:d:t:my_run:5", Owner("d", "t", "my_run", 5)),
        ("airflow:d:t:my_run:05", Owner("d", "t", "my_run:05", None)),  # str(map_index) has no leading zero
        ("airflow:d:t:a:b:c", Owner("d", "t", "a:b:c", None)),
        ("airflow:group.d-1:grp.task_2:r", Owner("group.d-1", "grp.task_2", "r", None)),
        (
            "airflow:d:t:__airflow_temporary_run_2026-08-03T10:00:00+00:00__",
            Owner("d", "t", "__airflow_temporary_run_2026-08-03T10:00:00+00:00__", None),
        ),
        ("airflow#d:t:manual__xxxx#" + "a" * 64, Owner("d", "t", None, None)),
        ("airflow#" + "d" * 300 + ":t" + "#" + "b" * 64, None),  # cut inside the task id
        ("airflow#d:t:r#not-a-digest", None),
        ("airflow:d:t:", None),
        ("airflow:d:t", None),
        ("airflow:d d:t:r", None),
        ("airflow::t:r", None),
        ("migrated:2026-W32", None),
        ("my-own-key", None),
        ("Airflow:d:t:r", None),
    ],
)
def test_owner_of(key: str, owner: Owner | None) -> None:
    assert owner_of(key) == owner


def test_owner_of_the_operators_own_keys() -> None:
    from airflow_idempotent_jobs.task_key import default_allocation_key

    assert owner_of(default_allocation_key("dag", "task", RUN, None)) == Owner("dag", "task", RUN, None)
    assert owner_of(default_allocation_key("dag", "task", RUN, 41)) == Owner("dag", "task", RUN, 41)
    assert owner_of(default_allocation_key("dag", "task", RUN, -1)) == Owner("dag", "task", RUN, None)
    long_run = "manual__" + "x" * 600
    assert owner_of(default_allocation_key("d" * 250, "t" * 150, long_run, 3)) == Owner(
        "d" * 250, "t" * 150, None, None
    )
    assert owner_of(default_allocation_key("d" * 250, "t" * 250, long_run, 3)) is None


def test_the_core_model_imports_no_airflow() -> None:
    code = (
        "import sys, airflow_idempotent_jobs.operations; print(any(m.split('.')[0] == 'airflow' for m in sys.modules))"
    )
    done = run_python(code)
    assert (done.code, done.stdout.strip()) == (0, "False"), done.stderr
