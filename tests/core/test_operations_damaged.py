"""The read model: one damaged record does not take its whole week down.

The week's other episodes are listed, counted and totalled; the damaged one is named in
``damaged`` (the page shows that list to store-wide users only, `plugins.page_auth.VisibleStore`), and the
totals say they leave it out. Both stores; records damaged around the store (`Backend.corrupt`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from airflow_idempotent_jobs import EpisodeStore
from airflow_idempotent_jobs.identity import WeekId
from airflow_idempotent_jobs.operations import week_view, weeks_view
from airflow_idempotent_jobs.testing.server import ProviderServer
from tests.backends import Backend
from tests.operations_scenario import LAST_WEEK, PRICE, WEEK, Scenario, build


@pytest.fixture
def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(polls_to_finish=1) as running:
        yield running


@pytest.fixture
def scenario(store: EpisodeStore, server: ProviderServer, now: dt.datetime) -> Scenario:
    return build(store, server, now)


@pytest.mark.parametrize("how", ["not-json", "unknown-version", "truncated"])
def test_a_damaged_record_is_named_and_the_rest_of_the_week_is_shown(
    backend: Backend, store: EpisodeStore, scenario: Scenario, now: dt.datetime, how: str
) -> None:
    intact = week_view(store, WEEK, budget=10.0, now=now)
    backend.corrupt(scenario.succeeded, how)
    before = backend.snapshot()
    view = week_view(store, WEEK, budget=10.0, now=now)
    assert [row["episode_id"] for row in view["episodes"]] == [
        row["episode_id"] for row in intact["episodes"] if row["episode_id"] != scenario.succeeded
    ]
    (damaged,) = view["damaged"]
    assert damaged["episode_id"] == scenario.succeeded
    assert scenario.succeeded in damaged["where"] and "\n" not in damaged["problem"]
    # The totals are of the readable episodes only (the damaged one was the week's only paid job).
    assert view["spend"] == intact["spend"] - PRICE == 0.0
    assert sum(view["counts"]["status"].values()) == len(intact["episodes"]) - 1
    assert view["counts"]["status"]["succeeded"] == intact["counts"]["status"]["succeeded"] - 1
    assert view["attention"] == intact["attention"]
    assert intact["damaged"] == []
    weeks = {w["week_id"]: w for w in weeks_view(store, current=WeekId.parse(WEEK), count=2, now=now)["weeks"]}
    assert (weeks[WEEK]["episodes"], weeks[WEEK]["damaged"]) == (len(intact["episodes"]) - 1, 1)
    assert (weeks[LAST_WEEK]["damaged"], weeks[LAST_WEEK]["spend"]) == (0, PRICE)
    assert backend.snapshot() == before, "a read repaired or rewrote something"


def test_two_damaged_records_are_each_named_in_sequence_order(
    backend: Backend, store: EpisodeStore, scenario: Scenario, now: dt.datetime
) -> None:
    backend.corrupt(scenario.unknown, "not-json")
    backend.corrupt(scenario.rejected, "unknown-version")
    view = week_view(store, WEEK, budget=None, now=now)
    assert [d["episode_id"] for d in view["damaged"]] == sorted([scenario.unknown, scenario.rejected])
    assert scenario.unknown not in [a["episode_id"] for a in view["attention"]]
    assert [d["episode_id"] for d in week_view(store, LAST_WEEK, budget=None, now=now)["damaged"]] == []
