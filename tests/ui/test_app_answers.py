"""The page's app, in this process, on both stores seeded as the UI deployment is.

Airflow's auth manager is replaced by fixed `Access` values (what it answers is tested on a real
api-server by e2e/test_ui_api.py); the app, the store view, the read model and the store are real.

- A user who may not see an episode gets the very 404 of a missing one, whatever its state: an
  unreadable record has no owner anyone can read, so only store-wide users may learn it is damaged.
- A week with a damaged record is shown to everyone (200); only store-wide users see it named.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator

import pytest

from airflow_idempotent_jobs.plugins.page_auth import Access
from e2e.ui_seed import ALPHA, BETA, Seeded, seed
from tests.backends import Backend
from tests.ui.page_client import Get, page_client

pytestmark = pytest.mark.airflow

NOW = dt.datetime.now(dt.timezone.utc)
ACCESS = {
    "admin": Access(frozenset({ALPHA, BETA}), frozenset({ALPHA, BETA}), store_wide=True),
    "alice": Access(frozenset({ALPHA}), frozenset(), store_wide=False),
    "bob": Access(frozenset({BETA}), frozenset(), store_wide=False),
}
READABLE: dict[str, set[str | None]] = {"admin": {ALPHA, BETA, None}, "alice": {ALPHA}, "bob": {BETA}}


@pytest.fixture
def seeded(backend: Backend) -> Seeded:
    with backend.open() as store:
        return seed(store, NOW)


@pytest.fixture
def get(backend: Backend, seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> Iterator[Get]:
    with page_client(monkeypatch, backend.url, ACCESS) as call:
        yield call


def _current(seeded: Seeded, dag: str) -> list[str]:
    return [eid for eid in seeded.by_dag[dag] if eid.startswith(seeded.current + "-")]


def test_a_user_who_may_not_see_an_episode_gets_the_404_of_a_missing_one(
    backend: Backend, seeded: Seeded, get: Get
) -> None:
    beta_damaged, beta_intact = _current(seeded, BETA)[:2]
    alpha_damaged = _current(seeded, ALPHA)[0]
    missing = f"{seeded.current}-99"
    backend.corrupt(beta_damaged, "not-json")
    backend.corrupt(alpha_damaged, "unknown-version")
    for user in ("alice", "bob"):
        for eid in (
            beta_damaged,
            alpha_damaged,
            beta_intact if user == "alice" else _current(seeded, ALPHA)[1],
            missing,
        ):
            assert get(user, f"episodes/{eid}") == (404, {"detail": f"episode {eid} not found"}), (user, eid)
    assert get("bob", f"episodes/{beta_intact}")[0] == 200
    # Store-wide users may read every record: they learn which one is damaged, and where.
    for eid in (beta_damaged, alpha_damaged):
        status, body = get("admin", f"episodes/{eid}")
        assert status == 503 and eid in body["detail"] and body["detail"].startswith("episode store cannot be read")
    assert get("admin", f"episodes/{missing}") == (404, {"detail": f"episode {missing} not found"})


def test_a_week_with_a_damaged_record_is_shown_and_only_store_wide_users_learn_which(
    backend: Backend, seeded: Seeded, get: Get
) -> None:
    damaged = sorted([_current(seeded, BETA)[1], _current(seeded, ALPHA)[1]], key=lambda e: int(e.rsplit("-", 1)[1]))
    for eid in damaged:
        backend.corrupt(eid, "truncated")
    week = seeded.current
    for user, readable in READABLE.items():
        status, view = get(user, f"weeks/{week}")
        assert status == 200, view
        expected = [e for e in seeded.visible_to(readable) if e.startswith(week + "-") and e not in damaged]
        assert sorted(row["episode_id"] for row in view["episodes"]) == sorted(expected)
        spend = sum(seeded.costs.get(e, 0.0) for e in expected)
        assert view["spend"] == pytest.approx(spend)
        assert sum(view["counts"]["status"].values()) == len(expected)
        status, weeks = get(user, "weeks")
        assert status == 200, weeks
        listed = {w["week_id"]: w for w in weeks["weeks"]}
        assert listed[week]["episodes"] == len(expected)
        if ACCESS[user].store_wide:
            assert [d["episode_id"] for d in view["damaged"]] == damaged
            assert all(d["problem"] and "\n" not in d["problem"] for d in view["damaged"])
            assert listed[week]["damaged"] == 2
        else:
            text = json.dumps(view) + json.dumps(weeks)
            assert view["damaged"] == [] and listed[week]["damaged"] == 0
            assert not [eid for eid in damaged if eid in text], "a damaged record left a trace"
