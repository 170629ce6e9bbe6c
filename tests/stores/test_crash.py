"""Crash consistency, for every store: a real SIGKILL at each point of one allocation.

Each store's kill points are in crash_plans.py (the file store: before each ``os`` call of the
write; PostgreSQL: around its one call). Each point kills a child allocating one key on a store of
its own that holds some history. Then, in ONE fresh process, ``idempotent-jobs check`` must accept
every store, the key must be held exactly when the allocation had committed, and its retry must get
the episode the commit promised (the committed one back, or the next sequence); the week's next
allocation takes the sequence after it, no key is ever held twice and no sequence is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_idempotent_jobs import EpisodeStore, open_store
from airflow_idempotent_jobs.store_check import check_store
from tests.stores.crash_plans import HISTORY, KEY, Crashes, FileCrashes, PostgresCrashes, after, seed

WEEKS = pytest.mark.parametrize("week", ["2026-W32", "2026-W40"], ids=["week-with-history", "new-week"])


@pytest.fixture(scope="module")
def file_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file store holding the plans' history, copied for each kill."""
    root = tmp_path_factory.mktemp("crash") / "base"
    seed(str(root))
    return root


@pytest.fixture(params=["file", pytest.param("postgres", marks=pytest.mark.postgres)])
def crashes(request: pytest.FixtureRequest, file_base: Path, tmp_path: Path) -> Iterator[Crashes]:
    if request.param == "file":
        yield FileCrashes(file_base, tmp_path)
        return
    plans = PostgresCrashes(request.getfixturevalue("pg_server"))
    try:
        yield plans
    finally:
        plans.close()


def assert_consistent(store: EpisodeStore) -> None:
    """No key held twice; every week's sequences are exactly 0..n-1."""
    episodes = store.list()
    keys = [e.allocation_key for e in episodes]
    assert len(keys) == len(set(keys))
    for week in {e.week_id for e in episodes}:
        assert [e.sequence for e in store.list(week)] == list(range(len(store.list(week))))


@WEEKS
def test_a_sigkill_at_each_point_of_an_allocation_leaves_a_store_whose_retry_completes_it(
    crashes: Crashes, week: str
) -> None:
    plan = crashes.plan(week)
    for crash in plan.crashes:
        crashes.kill(week, crash)
    outcome = after(week, plan.crashes)
    earlier = [key for each_week, key in HISTORY if each_week == week]
    for crash in plan.crashes:
        checked, held, episode_id, reused = outcome[crash.store]
        assert checked == 0, crash.where
        if crash.committed is not None:
            assert held == crash.committed, crash.where
        assert (episode_id, reused) == (plan.expected_id, held), crash.where
        with open_store(crash.store) as store:
            assert [e.episode_id for e in store.list() if e.allocation_key == KEY] == [plan.expected_id], crash.where
            assert_consistent(store)
            assert check_store(store) == [], crash.where
            # The store goes on: the next allocation of the week takes the next sequence.
            following = store.allocate(week, "after-the-crash")
            assert following.sequence == int(plan.expected_id.rsplit("-", 1)[1]) + 1, crash.where
            assert [e.allocation_key for e in store.list(week)] == [*earlier, KEY, "after-the-crash"], crash.where
            assert check_store(store) == [], crash.where
